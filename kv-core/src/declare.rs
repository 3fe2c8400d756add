//! The traits a model implements (usually through `#[derive(ModelLocalKv)]`):
//! what a value declares now, which children it has, and what its type
//! declares without an instance; the tree's plumbing the collector walks
//! ([`KvChild`], [`ChildVisitor`], [`OwnerId`], [`Segment`]); and, in
//! [`after_load`], the types a value read after load may have.
//!
//! [`ModelLocalKv`] is also at the crate's root: a model author implements
//! or derives it, and rarely names anything else here.

pub mod after_load;
pub(crate) mod type_decls;

pub use type_decls::{AfterLoadDecl, AfterLoadRows, DeclaredKv, KvTypeDecls};

use std::borrow::Cow;
use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, HashMap, LinkedList, VecDeque};
use std::fmt;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock, RwLock, TryLockError};

use crate::error::KvError;
use crate::spec::KvSpec;

/// A value that may hold model-local KV and may own children that do.
///
/// Derive it with `#[derive(ModelLocalKv)]`; implement it by hand only for
/// owners whose declarations the attributes cannot express.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not declare model-local KV: it does not implement `ModelLocalKv`",
    label = "not a `ModelLocalKv` owner",
    note = "if `{Self}` is your own type, add `#[derive(ModelLocalKv)]` to it (with no `#[kv(...)]` it declares nothing), or implement `ModelLocalKv` by hand",
    note = "if it is a trait object, add `ModelLocalKv` as a supertrait of its trait: `trait Model: kv_core::ModelLocalKv {{ ... }}`",
    note = "if it is another crate's container or lock, it cannot implement `ModelLocalKv` in your crate: enable kv-core's feature for it (`smallvec`, `parking_lot`, `tokio`), or visit the field with `#[kv(child(with = path::to::owners))]`"
)]
pub trait ModelLocalKv {
    /// Appends the declarations this value holds now (gates already
    /// evaluated). Declaring nothing is valid. An error makes the collector log
    /// and skip this owner; it never breaks model load.
    fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError>;

    /// Visits the children that may declare, each under its path segment.
    /// The default has none.
    fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
        let _ = visitor;
    }

    /// Identifies the owner so that one reached twice (a shared `Arc`, a wrapper
    /// that forwards) is counted once. Smart pointers forward to their target.
    fn kv_identity(&self) -> OwnerId {
        OwnerId::of(self)
    }

    /// Whether every spec `kv_declare` appends is already validated (the
    /// derive validates its own), so the collector need not check it again.
    #[doc(hidden)]
    fn __kv_validated(&self) -> bool {
        false
    }

    /// Names the owner types this value's type may hold through its
    /// children, whatever they hold now (an empty `Option`'s type, an
    /// enum's other variants'): how `registry::unreached` walks from a
    /// value whose type is generic, or reached through a trait object. The
    /// derive implements it; a hand-written owner names none, and only what
    /// it holds now is walked.
    #[doc(hidden)]
    fn __kv_owner_types(&self, types: &mut dyn OwnerTypes) {
        let _ = types;
    }

    /// [`__kv_owner_types`](ModelLocalKv::__kv_owner_types) without a
    /// value: what the type's children may hold, for a type named but
    /// absent now.
    #[doc(hidden)]
    fn __kv_child_types(types: &mut dyn OwnerTypes)
    where
        Self: Sized,
    {
        let _ = types;
    }
}

/// Where an owner lives and what it is, so one reached twice is counted once.
/// Opaque: made by [`OwnerId::of`].
///
/// A struct and its first field share an address, so the type is part of the
/// identity. A zero-sized owner has no address of its own and is never merged
/// with another, except where it is shared through an `Rc` or `Arc`, whose
/// allocation gives it one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerId {
    address: usize,
    type_name: &'static str,
    zero_sized: bool,
}

impl OwnerId {
    /// The identity of the value `owner` points at.
    pub fn of<T: ?Sized>(owner: &T) -> OwnerId {
        OwnerId {
            address: owner as *const T as *const () as usize,
            type_name: std::any::type_name::<T>(),
            zero_sized: std::mem::size_of_val(owner) == 0,
        }
    }

    /// `std::any::type_name` of the owner.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// Whether the owner can be told apart from others by its address: false
    /// for a zero-sized owner not held in an `Rc` or `Arc`.
    pub fn is_addressable(&self) -> bool {
        !self.zero_sized
    }

    /// The same identity at `address`, a shared allocation the owner lives in.
    fn in_allocation(self, address: usize) -> OwnerId {
        OwnerId {
            address,
            zero_sized: false,
            ..self
        }
    }
}

/// Hashes the address alone (cheap; equal ids have equal addresses), while
/// equality still compares the type too.
impl std::hash::Hash for OwnerId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.address.hash(state);
    }
}

/// One step of a path in the model tree.
#[derive(Clone, Copy)]
pub enum Segment<'a> {
    /// A struct field, e.g. `talker`.
    Field(&'static str),
    /// A position in a `Vec`, array or slice.
    Index(usize),
    /// A map key, as its `Debug` text (a string key without its quotes:
    /// `layers.attn`, `by_len.128`).
    Key(&'a dyn fmt::Display),
}

impl fmt::Display for Segment<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Segment::Field(name) => f.write_str(name),
            Segment::Index(index) => write!(f, "{index}"),
            Segment::Key(key) => key.fmt(f),
        }
    }
}

impl fmt::Debug for Segment<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Segment({self})")
    }
}

/// Receives the model tree as [`ModelLocalKv::kv_visit_children`] walks it.
///
/// A hand-written `kv_visit_children` calls the helpers on `dyn ChildVisitor`
/// ([`field`](#method.field), [`index`](#method.index), [`key`](#method.key),
/// [`transparent`](#method.transparent)), which enter and leave for it; only
/// a visitor (such as the collector) implements the three methods below.
///
/// ```
/// use kv_core::{KvError, KvSpec, ModelLocalKv};
/// use kv_core::declare::ChildVisitor;
///
/// struct Layer;
/// impl ModelLocalKv for Layer {
///     fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> { Ok(()) }
/// }
/// struct Model { layers: Vec<Layer>, draft: Option<Layer> }
/// impl ModelLocalKv for Model {
///     fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> { Ok(()) }
///     fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
///         visitor.field("layers", &self.layers);
///         visitor.field("draft", &self.draft);
///     }
/// }
/// # let _ = kv_core::collect(&Model { layers: vec![Layer], draft: None });
/// ```
pub trait ChildVisitor {
    /// Descends one path segment.
    fn enter(&mut self, segment: Segment<'_>);
    /// Returns from the last segment entered.
    fn leave(&mut self);
    /// An owner at the current path.
    fn owner(&mut self, owner: &dyn ModelLocalKv);

    /// The child at the current path could not be read without waiting or
    /// panicking (a `Mutex` locked elsewhere, a `RefCell` borrowed mutably):
    /// `container` names it, `why` says what held it. The default ignores it;
    /// the collector records it in [`Collection::skipped`](crate::Collection::skipped).
    fn unreachable(&mut self, container: &'static str, why: &'static str) {
        let _ = (container, why);
    }

    /// The child at the current path is behind a poisoned lock (a thread
    /// panicked while holding it). It is read all the same; the default
    /// ignores this, the collector records it in
    /// [`Collection::poisoned`](crate::Collection::poisoned).
    fn poisoned(&mut self, container: &'static str) {
        let _ = container;
    }
}

impl dyn ChildVisitor + '_ {
    /// Visits `child` under the field segment `name`.
    pub fn field<C: KvChild + ?Sized>(&mut self, name: &'static str, child: &C) {
        self.under(Segment::Field(name), child);
    }

    /// Visits `child` under the index segment `index`.
    pub fn index<C: KvChild + ?Sized>(&mut self, index: usize, child: &C) {
        self.under(Segment::Index(index), child);
    }

    /// Visits `child`, a container of trait objects (`Arc<Mutex<dyn
    /// Pipeline>>`), under the field segment `name`: [`field`](#method.field)
    /// takes sized owners only.
    pub fn dyn_field<C: KvChild<TraitObjects> + ?Sized>(&mut self, name: &'static str, child: &C) {
        self.enter(Segment::Field(name));
        child.kv_visit(self);
        self.leave();
    }

    /// Visits `child` under the map-key segment `key`.
    pub fn key<C: KvChild + ?Sized>(&mut self, key: &dyn fmt::Display, child: &C) {
        self.under(Segment::Key(key), child);
    }

    /// Visits `child` at the current path, as a wrapper that forwards to it.
    pub fn transparent<C: KvChild + ?Sized>(&mut self, child: &C) {
        child.kv_visit(self);
    }

    fn under<C: KvChild + ?Sized>(&mut self, segment: Segment<'_>, child: &C) {
        self.enter(segment);
        child.kv_visit(self);
        self.leave();
    }
}

/// The default way a [`KvChild`] reaches its owners: every owner inside it
/// implements [`ModelLocalKv`]. The derive gives a field whose type has a
/// tuple of owners and other things (`Option<(Attention, LayerNorm)>`) a
/// way of its own, so that only the tuple's elements that declare are visited.
#[derive(Clone, Copy, Debug)]
pub struct Owners;

/// A field that may hold declaring owners: an owner itself (a trait object
/// whose trait has `ModelLocalKv` as a supertrait included), or `Option`,
/// `Vec`, `VecDeque`, `LinkedList`, arrays, slices, map values (`HashMap`,
/// `BTreeMap`; keys need `Debug`, their text is the path segment), `Cow`,
/// `Box`/`Rc`/`Arc` of them, tuples of them, and owners behind `Mutex`,
/// `RwLock`, `RefCell`, `OnceLock`, `OnceCell` (alone or in a `Box`, `Rc`
/// or `Arc`); with kv-core's features, `smallvec`'s `SmallVec`,
/// `parking_lot`'s (any `lock_api`) `Mutex`, `RwLock` and `ReentrantMutex`,
/// and `tokio::sync`'s `Mutex`, `RwLock` and `OnceCell`.
///
/// `Via` is how the owners are reached: [`Owners`] (the default) for every
/// impl here; a `#[kv(child)]` field with a tuple of owners and non-owners
/// gets a private one from the derive.
///
/// A lock or cell is read without waiting: one held elsewhere is reported to
/// the visitor ([`ChildVisitor::unreachable`]), never waited for (a tokio
/// lock is tried, never awaited); a poisoned lock is read, and reported
/// ([`ChildVisitor::poisoned`]). An empty `OnceLock` holds nothing.
///
/// Any other container of owners (another crate's) can be visited by a
/// function of yours: `#[kv(child(with = path))]`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a `#[kv(child)]`: kv does not know how to reach the owners inside it",
    label = "not a `ModelLocalKv` owner, nor a container kv walks",
    note = "kv walks owners in `Option`, `Vec`, `VecDeque`, `LinkedList`, arrays, slices, map values (keys must be `Debug`), tuples, `Cow`, `Box`, `Rc`, `Arc`, `Mutex`, `RwLock`, `RefCell`, `OnceLock` and `OnceCell`; with kv-core's features `smallvec`, `parking_lot` and `tokio`, theirs too",
    note = "for another container, write a function that returns the owners it holds and name it: `#[kv(child(with = path::to::owners))]`, with `fn owners(field: &FieldType) -> impl IntoIterator<Item = &Owner>`; a tuple whose type names a type parameter must hold owners only; if the field holds no KV, remove `#[kv(child)]`"
)]
pub trait KvChild<Via = Owners> {
    /// Hands every owner inside to `visitor`, entering index or key segments.
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor);

    /// Names every owner type this type may hold, whatever it holds now (an
    /// `Option` that is `None` still names its owner's type): how
    /// `registry::unreached` tells a type that no path reaches from one
    /// merely absent at start-up. A trait object names its trait object
    /// type only: what it holds is known from the instance. The default
    /// names none.
    #[doc(hidden)]
    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        let _ = types;
    }
}

/// How a field whose type holds a trait object behind a lock or cell
/// (`Arc<tokio::sync::Mutex<dyn Pipeline + Send + Sync>>`, as mistral.rs
/// keeps its pipeline) reaches its owners: through owners that need not be
/// sized. The derive picks it for a field whose type names `dyn` (or a
/// parameter declared `?Sized`); a hand-written visit of such a field calls
/// [`dyn_field`](#method.dyn_field) on the visitor.
#[derive(Clone, Copy, Debug)]
pub struct TraitObjects;

/// Names the owner types a type's children may hold
/// ([`ModelLocalKv::__kv_child_types`]).
#[doc(hidden)]
pub type ChildTypes = fn(&mut dyn OwnerTypes);

/// Receives the owner types a [`KvChild`] type may hold
/// ([`KvChild::kv_owner_types`]).
#[doc(hidden)]
pub trait OwnerTypes {
    /// An owner type, by `std::any::type_name`, and how to name the owner
    /// types its own children may hold, where its type is known (not
    /// behind a trait object).
    fn owner(&mut self, type_name: &'static str, children: Option<ChildTypes>);
}

/// Every owner is a child of its own.
impl<T: ModelLocalKv> KvChild for T {
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
        visitor.owner(self);
    }

    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        types.owner(std::any::type_name::<T>(), Some(T::__kv_child_types));
    }
}

/// Every owner, sized or a trait object (`dyn Pipeline`, where `trait
/// Pipeline: ModelLocalKv`), reached [`TraitObjects`]' way.
impl<T: ModelLocalKv + ?Sized> KvChild<TraitObjects> for T {
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
        // `&T` is a sized owner (it forwards), where `T` may be a trait object.
        visitor.owner(&self);
    }

    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        // What a trait object holds is known from its value only.
        types.owner(std::any::type_name::<T>(), None);
    }
}

impl<V, C: KvChild<V>> KvChild<V> for Option<C> {
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
        if let Some(child) = self {
            child.kv_visit(visitor);
        }
    }

    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        C::kv_owner_types(types);
    }
}

impl<V, C: KvChild<V>> KvChild<V> for [C] {
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
        visit_sequence(self, visitor);
    }

    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        C::kv_owner_types(types);
    }
}

impl<V, C: KvChild<V>, const N: usize> KvChild<V> for [C; N] {
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
        self.as_slice().kv_visit(visitor);
    }

    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        C::kv_owner_types(types);
    }
}

impl<V, C: KvChild<V>> KvChild<V> for Vec<C> {
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
        self.as_slice().kv_visit(visitor);
    }

    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        C::kv_owner_types(types);
    }
}

/// A sequence's elements, each under its index in iteration order.
pub(crate) fn visit_sequence<'a, V, C: KvChild<V> + 'a>(
    elements: impl IntoIterator<Item = &'a C>,
    visitor: &mut dyn ChildVisitor,
) {
    for (index, child) in elements.into_iter().enumerate() {
        visitor.enter(Segment::Index(index));
        child.kv_visit(visitor);
        visitor.leave();
    }
}

/// Sequences other than `Vec` (a scheduler's queue of preempted sequences),
/// each element under its index from the front.
macro_rules! sequences_of_children {
    ($($sequence:ident),+) => {$(
        impl<V, C: KvChild<V>> KvChild<V> for $sequence<C> {
            fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
                visit_sequence(self, visitor);
            }

            fn kv_owner_types(types: &mut dyn OwnerTypes) {
                C::kv_owner_types(types);
            }
        }
    )+};
}

sequences_of_children!(VecDeque, LinkedList);

/// A `Cow` is visited through what it points at, borrowed or owned.
impl<V, B: KvChild<V> + ToOwned + ?Sized> KvChild<V> for Cow<'_, B> {
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
        (**self).kv_visit(visitor);
    }

    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        B::kv_owner_types(types);
    }
}

/// A map key's text as a path segment: its `Debug` text, a string's
/// without its quotes (`"attn"` is `attn`), so that keys need no `Display`.
pub(crate) fn key_text<K: fmt::Debug + ?Sized>(key: &K) -> String {
    let text = format!("{key:?}");
    match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(unquoted) => unquoted.to_owned(),
        None => text,
    }
}

impl<V, K: fmt::Debug, C: KvChild<V>, S> KvChild<V> for HashMap<K, C, S> {
    /// Visits in key order (by their text), so paths and reports are stable.
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
        let mut entries: Vec<(String, &C)> = self.iter().map(|(k, c)| (key_text(k), c)).collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, child) in entries {
            visitor.enter(Segment::Key(&key));
            child.kv_visit(visitor);
            visitor.leave();
        }
    }

    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        C::kv_owner_types(types);
    }
}

impl<V, K: fmt::Debug, C: KvChild<V>> KvChild<V> for BTreeMap<K, C> {
    /// Visits in the map's order.
    fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
        for (key, child) in self {
            visitor.enter(Segment::Key(&key_text(key)));
            child.kv_visit(visitor);
            visitor.leave();
        }
    }

    fn kv_owner_types(types: &mut dyn OwnerTypes) {
        C::kv_owner_types(types);
    }
}

/// Tuples of owners (or containers of them), each element under its index:
/// `cross_attn.0`. A tuple that also holds things that declare nothing
/// (`(Attention, LayerNorm)`) is visited through the derive's own `Via`.
macro_rules! tuple_of_children {
    ($(($($name:ident $index:tt),+))+) => {$(
        impl<$($name: KvChild),+> KvChild for ($($name,)+) {
            fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
                $(
                    visitor.enter(Segment::Index($index));
                    self.$index.kv_visit(visitor);
                    visitor.leave();
                )+
            }

            fn kv_owner_types(types: &mut dyn OwnerTypes) {
                $($name::kv_owner_types(types);)+
            }
        }
    )+};
}

tuple_of_children! {
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
    (A 0, B 1, C 2, D 3, E 4)
    (A 0, B 1, C 2, D 3, E 4, F 5)
}

/// Reads a lock or cell without waiting: `Ok` the value, `Err(Some(why))`
/// held elsewhere, `Err(None)` empty (an unset `OnceLock`).
trait ReadWithoutWaiting {
    type Target: ?Sized;
    const NAME: &'static str;
    fn read_without_waiting(
        &self,
        visitor: &mut dyn ChildVisitor,
        inside: &mut dyn FnMut(&Self::Target, &mut dyn ChildVisitor),
    );
}

impl<C: ?Sized> ReadWithoutWaiting for Mutex<C> {
    type Target = C;
    const NAME: &'static str = "Mutex";
    fn read_without_waiting(
        &self,
        visitor: &mut dyn ChildVisitor,
        inside: &mut dyn FnMut(&C, &mut dyn ChildVisitor),
    ) {
        read_lock(
            Self::NAME,
            self.try_lock(),
            "is locked elsewhere",
            visitor,
            inside,
        );
    }
}

/// A lock's `try_*` result read: the value, the value of a poisoned lock
/// (said), or `held` when another holds it.
fn read_lock<C: ?Sized, G: std::ops::Deref<Target = C>>(
    name: &'static str,
    result: std::sync::TryLockResult<G>,
    held: &'static str,
    visitor: &mut dyn ChildVisitor,
    inside: &mut dyn FnMut(&C, &mut dyn ChildVisitor),
) {
    match result {
        Ok(guard) => inside(&guard, visitor),
        Err(TryLockError::Poisoned(poisoned)) => {
            visitor.poisoned(name);
            inside(&poisoned.into_inner(), visitor);
        }
        Err(TryLockError::WouldBlock) => visitor.unreachable(name, held),
    }
}

impl<C: ?Sized> ReadWithoutWaiting for RwLock<C> {
    type Target = C;
    const NAME: &'static str = "RwLock";
    fn read_without_waiting(
        &self,
        visitor: &mut dyn ChildVisitor,
        inside: &mut dyn FnMut(&C, &mut dyn ChildVisitor),
    ) {
        read_lock(
            Self::NAME,
            self.try_read(),
            "is write-locked elsewhere",
            visitor,
            inside,
        );
    }
}

impl<C: ?Sized> ReadWithoutWaiting for RefCell<C> {
    type Target = C;
    const NAME: &'static str = "RefCell";
    fn read_without_waiting(
        &self,
        visitor: &mut dyn ChildVisitor,
        inside: &mut dyn FnMut(&C, &mut dyn ChildVisitor),
    ) {
        match self.try_borrow() {
            Ok(borrowed) => inside(&borrowed, visitor),
            Err(_) => visitor.unreachable(Self::NAME, "is borrowed mutably elsewhere"),
        }
    }
}

impl<C> ReadWithoutWaiting for OnceLock<C> {
    type Target = C;
    const NAME: &'static str = "OnceLock";
    fn read_without_waiting(
        &self,
        visitor: &mut dyn ChildVisitor,
        inside: &mut dyn FnMut(&C, &mut dyn ChildVisitor),
    ) {
        if let Some(value) = self.get() {
            inside(value, visitor);
        }
    }
}

impl<C> ReadWithoutWaiting for OnceCell<C> {
    type Target = C;
    const NAME: &'static str = "OnceCell";
    fn read_without_waiting(
        &self,
        visitor: &mut dyn ChildVisitor,
        inside: &mut dyn FnMut(&C, &mut dyn ChildVisitor),
    ) {
        if let Some(value) = self.get() {
            inside(value, visitor);
        }
    }
}

/// Locks and cells of children (`Mutex<Cache>`, `Mutex<dyn Pipeline>`),
/// read without waiting.
macro_rules! locked_children {
    ($($cell:ident $([$unsized:tt])?),+) => {$(
        impl<V, C: KvChild<V> $(+ ?$unsized)?> KvChild<V> for $cell<C> {
            fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
                self.read_without_waiting(visitor, &mut |child, visitor| child.kv_visit(visitor));
            }

            fn kv_owner_types(types: &mut dyn OwnerTypes) {
                C::kv_owner_types(types);
            }
        }
    )+};
}

locked_children!(
    Mutex[Sized],
    RwLock[Sized],
    RefCell[Sized],
    OnceLock,
    OnceCell
);

/// `Box`, `Rc`, `Arc` and references of the containers, locks and cells
/// above (`Arc<Mutex<Cache>>`, as mistral.rs holds its caches;
/// `Box<[Layer]>`; `&'a Option<Cache>`), visited through the pointer. A
/// pointer to an owner is an owner itself (it forwards), so pointers of
/// owners need none of these; each pointer-of-container pair is its own impl.
macro_rules! pointers_to {
    ($([$($generics:tt)*] $inner:ty $(where [$($bounds:tt)*])?),+ $(,)?) => {$(
        pointers_to!(@each [$($generics)*] [$($($bounds)*)?] $inner;
            Box<$inner>, std::rc::Rc<$inner>, std::sync::Arc<$inner>, &$inner);
    )+};
    (@each $generics:tt $bounds:tt $inner:ty; $($pointer:ty),+) => {$(
        pointers_to!(@impl $generics $bounds $inner; $pointer);
    )+};
    (@impl [$($generics:tt)*] [$($bounds:tt)*] $inner:ty; $pointer:ty) => {
        impl<V, $($generics)*> KvChild<V> for $pointer where $inner: KvChild<V>, $($bounds)* {
            fn kv_visit(&self, visitor: &mut dyn ChildVisitor) {
                (**self).kv_visit(visitor);
            }

            fn kv_owner_types(types: &mut dyn OwnerTypes) {
                <$inner as KvChild<V>>::kv_owner_types(types);
            }
        }
    };
}

pointers_to! {
    [C: KvChild<V>] Option<C>,
    [C: KvChild<V>] Vec<C>,
    [C: KvChild<V>] VecDeque<C>,
    [C: KvChild<V>] LinkedList<C>,
    [C: KvChild<V>] [C],
    [C: KvChild<V>, const N: usize] [C; N],
    [K: fmt::Debug, C: KvChild<V>, S] HashMap<K, C, S>,
    [K: fmt::Debug, C: KvChild<V>] BTreeMap<K, C>,
    [C: KvChild<V> + ?Sized] Mutex<C>,
    [C: KvChild<V> + ?Sized] RwLock<C>,
    [C: KvChild<V> + ?Sized] RefCell<C>,
    [C: KvChild<V>] OnceLock<C>,
    [C: KvChild<V>] OnceCell<C>,
}

// Other crates' containers and locks (kv-core's features `smallvec`,
// `parking_lot`, `tokio`): after the macros above, which they use.
mod foreign;

macro_rules! forward_to_target {
    ($pointer:ty, $identity:expr) => {
        /// Forwards to the target, identity included: two pointers to one owner
        /// are one owner.
        impl<T: ModelLocalKv + ?Sized> ModelLocalKv for $pointer {
            fn kv_declare(&self, out: &mut Vec<KvSpec>) -> Result<(), KvError> {
                (**self).kv_declare(out)
            }
            fn kv_visit_children(&self, visitor: &mut dyn ChildVisitor) {
                (**self).kv_visit_children(visitor)
            }
            fn kv_identity(&self) -> OwnerId {
                let identity: fn(&Self) -> OwnerId = $identity;
                identity(self)
            }
            fn __kv_validated(&self) -> bool {
                (**self).__kv_validated()
            }
            fn __kv_owner_types(&self, types: &mut dyn OwnerTypes) {
                (**self).__kv_owner_types(types)
            }
        }
    };
}

forward_to_target!(&T, |this| (**this).kv_identity());
forward_to_target!(Box<T>, |this| (**this).kv_identity());
// A zero-sized target shared through `Rc`/`Arc` takes the allocation's
// address, which no other owner has; otherwise it could not be told apart.
forward_to_target!(Rc<T>, |this| shared(
    (**this).kv_identity(),
    Rc::as_ptr(this) as *const () as usize
));
forward_to_target!(Arc<T>, |this| shared(
    (**this).kv_identity(),
    Arc::as_ptr(this) as *const () as usize
));

fn shared(target: OwnerId, allocation: usize) -> OwnerId {
    if target.zero_sized {
        target.in_allocation(allocation)
    } else {
        target
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Leaf;
    impl ModelLocalKv for Leaf {
        fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
            Ok(())
        }
    }

    #[derive(Default)]
    struct Trace(Vec<String>);
    impl ChildVisitor for Trace {
        fn enter(&mut self, segment: Segment<'_>) {
            self.0.push(format!("enter {segment}"));
        }
        fn leave(&mut self) {
            self.0.push("leave".into());
        }
        fn owner(&mut self, owner: &dyn ModelLocalKv) {
            self.0
                .push(format!("owner {}", owner.kv_identity().type_name()));
        }
    }

    #[test]
    fn segments_display_and_debug_as_written() {
        let key = "layer.0";
        assert_eq!(Segment::Field("talker").to_string(), "talker");
        assert_eq!(Segment::Index(3).to_string(), "3");
        assert_eq!(Segment::Key(&key).to_string(), "layer.0");
        assert_eq!(format!("{:?}", Segment::Field("talker")), "Segment(talker)");
    }

    #[test]
    fn containers_enter_index_and_key_segments() {
        let mut trace = Trace::default();
        let layers = vec![Some(Leaf), None, Some(Leaf)];
        KvChild::<Owners>::kv_visit(&layers, &mut trace);
        let leaf = std::any::type_name::<Leaf>();
        assert_eq!(
            trace.0,
            [
                "enter 0".to_string(),
                format!("owner {leaf}"),
                "leave".into(),
                "enter 1".into(),
                "leave".into(),
                "enter 2".into(),
                format!("owner {leaf}"),
                "leave".into(),
            ]
        );
        let mut trace = Trace::default();
        let map: HashMap<&str, Leaf> = [("b", Leaf), ("a", Leaf)].into_iter().collect();
        KvChild::<Owners>::kv_visit(&map, &mut trace);
        assert_eq!(trace.0[0], "enter a");
        assert_eq!(trace.0[3], "enter b");
    }

    #[test]
    fn pointers_share_their_targets_identity() {
        let shared = Arc::new(Trace::default());
        struct Owner(u8);
        impl ModelLocalKv for Owner {
            fn kv_declare(&self, _: &mut Vec<KvSpec>) -> Result<(), KvError> {
                Ok(())
            }
        }
        let _ = shared;
        let target = Arc::new(Owner(1));
        let again = Arc::clone(&target);
        assert_eq!(target.kv_identity(), again.kv_identity());
        assert_eq!(target.kv_identity(), (*target).kv_identity());
        let boxed: Box<dyn ModelLocalKv> = Box::new(Owner(2));
        assert_eq!(
            boxed.kv_identity().type_name(),
            std::any::type_name::<Owner>()
        );
        assert!(boxed.kv_identity().is_addressable());
        assert_eq!(target.0 + 1, 2);
        assert!(!Leaf.kv_identity().is_addressable());
        // A zero-sized owner in an `Arc` takes the allocation's address.
        let leaf = Arc::new(Leaf);
        let leaf_again = Arc::clone(&leaf);
        assert!(leaf.kv_identity().is_addressable());
        assert_eq!(leaf.kv_identity(), leaf_again.kv_identity());
        assert_ne!(leaf.kv_identity(), Arc::new(Leaf).kv_identity());
        let rc = Rc::new(Leaf);
        assert_eq!(rc.kv_identity(), Rc::clone(&rc).kv_identity());
        assert!(rc.kv_identity().is_addressable());
        // A box of a zero-sized owner has a dangling address, the same for
        // every box: inside an `Arc`, the allocation's address tells them apart.
        let boxed_a = Arc::new(Box::new(Leaf));
        let boxed_b = Arc::new(Box::new(Leaf));
        assert_ne!(boxed_a.kv_identity(), boxed_b.kv_identity());
        assert_eq!(boxed_a.kv_identity(), Arc::clone(&boxed_a).kv_identity());
        // Through a reference and a box, identity is the target's.
        let by_ref: &Arc<Leaf> = &leaf;
        assert_eq!(by_ref.kv_identity(), leaf.kv_identity());
    }
}
