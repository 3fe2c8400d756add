//! How generated code walks a type's children: a field, a transparent
//! wrapper's one child, a tuple's elements that declare.

use crate::declare::{ChildVisitor, KvChild, OwnerTypes, Segment};

/// Visits a child field under its name. Takes `&dyn KvChild` so that a field
/// that is no child is reported as such, not as a bound of this function.
pub fn visit_field(child: &dyn KvChild, field: &'static str, visitor: &mut dyn ChildVisitor) {
    visitor.enter(Segment::Field(field));
    child.kv_visit(visitor);
    visitor.leave();
}

/// Visits a child field under its name, reaching its owners `Via` the
/// derive's own way (a field with a tuple of owners and non-owners).
pub fn visit_field_via<Via>(
    child: &dyn KvChild<Via>,
    field: &'static str,
    visitor: &mut dyn ChildVisitor,
) {
    visitor.enter(Segment::Field(field));
    child.kv_visit(visitor);
    visitor.leave();
}

/// Visits a child of a transparent wrapper at the wrapper's own path,
/// `Via` the derive's own way.
pub fn visit_transparent_via<Via>(child: &dyn KvChild<Via>, visitor: &mut dyn ChildVisitor) {
    child.kv_visit(visitor);
}

/// How a tuple's element is visited, asked for a concrete element type: the
/// inherent `VISIT` exists only where the element is a [`KvChild`] reached
/// `Via`, and a path prefers it to [`NoElement`]'s `None` (as [`Unmarked`](super::Unmarked)
/// does). So `(Attention, LayerNorm)` visits its attention and passes over
/// its norm, which the model's crate could not make a `KvChild`.
pub struct Element<T: ?Sized, Via>(core::marker::PhantomData<ElementOf<T, Via>>);

/// What [`Element`] is about: an element type, reached `Via` a marker.
type ElementOf<T, Via> = (fn(&T), Via);

/// A visit of one element of a tuple.
pub type VisitElement<T> = Option<fn(&T, &mut dyn ChildVisitor)>;

impl<T: KvChild<Via> + ?Sized, Via> Element<T, Via> {
    /// The element declares model-local KV: visit it.
    pub const VISIT: VisitElement<T> = Some(<T as KvChild<Via>>::kv_visit);
}

/// The fallback of [`Element`]: an element that is no `KvChild` declares nothing.
pub trait NoElement<T: ?Sized> {
    /// The element declares nothing: pass over it.
    const VISIT: VisitElement<T> = None;
}

impl<T: ?Sized, Via> NoElement<T> for Element<T, Via> {}

/// The owner types an element may hold, or `None` where it is no `KvChild`.
pub type ElementTypes = Option<fn(&mut dyn OwnerTypes)>;

impl<T: KvChild<Via>, Via> Element<T, Via> {
    /// The element's owner types.
    pub const TYPES: ElementTypes = Some(<T as KvChild<Via>>::kv_owner_types);
}

/// The fallback of [`Element::TYPES`].
pub trait NoElementTypes {
    /// The element names no owner type.
    const TYPES: ElementTypes = None;
}

impl<T, Via> NoElementTypes for Element<T, Via> {}

/// Names the owner types of an element, if it is a `KvChild`.
pub fn element_types(types: ElementTypes, out: &mut dyn OwnerTypes) {
    if let Some(types) = types {
        types(out);
    }
}

/// Visits element `index` of a tuple with `visit`, if it declares.
pub fn element<T: ?Sized>(
    value: &T,
    index: usize,
    visit: VisitElement<T>,
    visitor: &mut dyn ChildVisitor,
) {
    if let Some(visit) = visit {
        visitor.enter(Segment::Index(index));
        visit(value, visitor);
        visitor.leave();
    }
}

/// Visits a child of a transparent wrapper at the wrapper's own path.
pub fn visit_transparent(child: &dyn KvChild, visitor: &mut dyn ChildVisitor) {
    child.kv_visit(visitor);
}
