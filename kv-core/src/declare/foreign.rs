//! Other crates' containers and locks that engines keep their caches in,
//! each behind a kv-core feature so a default build pays for none of them:
//! `smallvec`'s `SmallVec`, `lock_api`'s locks (feature `parking_lot`:
//! `parking_lot::Mutex`, `RwLock`, `FairMutex`, `ReentrantMutex` and any
//! other lock built on `lock_api` 0.4) and `tokio::sync`'s `Mutex`, `RwLock`
//! and `OnceCell` (feature `tokio`). Locks are tried, never waited for (a
//! tokio lock is never awaited): one held elsewhere is reported to the
//! visitor, as a `std` lock is. Neither `parking_lot` nor `tokio` poisons.

#[cfg(any(feature = "parking_lot", feature = "tokio"))]
use super::ReadWithoutWaiting;
#[allow(unused_imports)]
use super::{ChildVisitor, KvChild, OwnerTypes};

/// A lock's `try_*` that gives the value or nothing: the value, or `held`
/// reported under `name`.
#[cfg(any(feature = "parking_lot", feature = "tokio"))]
fn read_or_held<C: ?Sized, G: std::ops::Deref<Target = C>>(
    name: &'static str,
    guard: Option<G>,
    held: &'static str,
    visitor: &mut dyn ChildVisitor,
    inside: &mut dyn FnMut(&C, &mut dyn ChildVisitor),
) {
    match guard {
        Some(guard) => inside(&guard, visitor),
        None => visitor.unreachable(name, held),
    }
}

/// Locks of children, read without waiting, and pointers of them.
#[cfg(any(feature = "parking_lot", feature = "tokio"))]
macro_rules! foreign_locks {
    ($([$($generics:tt)*] $lock:ty => |$this:ident| $try:expr, $name:literal, $held:literal;)+) => {$(
        impl<$($generics)*> ReadWithoutWaiting for $lock {
            type Target = C;
            const NAME: &'static str = $name;
            fn read_without_waiting(
                &self,
                visitor: &mut dyn ChildVisitor,
                inside: &mut dyn FnMut(&C, &mut dyn ChildVisitor),
            ) {
                let $this = self;
                read_or_held(Self::NAME, $try, $held, visitor, inside);
            }
        }

        impl<V, $($generics)*> KvChild<V> for $lock
        where
            C: KvChild<V>,
        {
            fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
                self.read_without_waiting(visitor, &mut |child, visitor| child.kv_visit(visitor));
            }

            fn kv_owner_types(types: &mut dyn OwnerTypes) {
                C::kv_owner_types(types);
            }
        }

        pointers_to! { [$($generics)*] $lock where [C: KvChild<V>] }
    )+};
}

#[cfg(feature = "parking_lot")]
foreign_locks! {
    [R: lock_api::RawMutex, C: ?Sized] lock_api::Mutex<R, C>
        => |this| this.try_lock(), "parking_lot::Mutex", "is locked elsewhere";
    [R: lock_api::RawRwLock, C: ?Sized] lock_api::RwLock<R, C>
        => |this| this.try_read(), "parking_lot::RwLock", "is write-locked elsewhere";
    [R: lock_api::RawMutex, G: lock_api::GetThreadId, C: ?Sized] lock_api::ReentrantMutex<R, G, C>
        => |this| this.try_lock(), "parking_lot::ReentrantMutex", "is locked by another thread";
}

#[cfg(feature = "tokio")]
foreign_locks! {
    [C: ?Sized] tokio::sync::Mutex<C>
        => |this| this.try_lock().ok(), "tokio::sync::Mutex", "is locked elsewhere";
    [C: ?Sized] tokio::sync::RwLock<C>
        => |this| this.try_read().ok(), "tokio::sync::RwLock", "is write-locked elsewhere";
}

/// A tokio `OnceCell` holds its child once set; unset, it holds nothing.
#[cfg(feature = "tokio")]
impl<V, C: KvChild<V>> KvChild<V> for tokio::sync::OnceCell<C> {
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
        if let Some(child) = self.get() {
            child.kv_visit(visitor);
        }
    }

    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        C::kv_owner_types(types);
    }
}

#[cfg(feature = "tokio")]
pointers_to! { [C: KvChild<V>] tokio::sync::OnceCell<C> }

/// A `SmallVec`'s elements, each under its index, inline or spilled alike.
#[cfg(feature = "smallvec")]
impl<V, A: smallvec::Array> KvChild<V> for smallvec::SmallVec<A>
where
    A::Item: KvChild<V>,
{
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
        super::visit_sequence(self.as_slice(), visitor);
    }

    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        <A::Item as KvChild<V>>::kv_owner_types(types);
    }
}

#[cfg(feature = "smallvec")]
pointers_to! { [A: smallvec::Array] smallvec::SmallVec<A> where [A::Item: KvChild<V>] }
