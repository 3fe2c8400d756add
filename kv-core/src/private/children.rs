//! How generated code walks a type's children: a field, a transparent
//! wrapper's one child, a tuple's elements that declare.

use crate::declare::{ChildVisitor, KvChild, OwnerTypes, Segment};

/// Visits a child field under its name. A field that is no child is an error
/// at the field (the derive spans the call there), in `KvChild`'s words.
pub fn visit_field<C: KvChild + ?Sized>(
    child: &C,
    field: &'static str,
    visitor: &mut dyn ChildVisitor,
) {
    visitor.enter(Segment::Field(field));
    child.kv_visit(visitor);
    visitor.leave();
}

/// Visits a child field under its name, reaching its owners `Via` the
/// derive's own way (a field with a tuple of owners and non-owners).
pub fn visit_field_via<Via, C: KvChild<Via> + ?Sized>(
    child: &C,
    field: &'static str,
    visitor: &mut dyn ChildVisitor,
) {
    visitor.enter(Segment::Field(field));
    child.kv_visit(visitor);
    visitor.leave();
}

/// Visits a child of a transparent wrapper at the wrapper's own path,
/// `Via` the derive's own way.
pub fn visit_transparent_via<Via, C: KvChild<Via> + ?Sized>(
    child: &C,
    visitor: &mut dyn ChildVisitor,
) {
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
pub fn visit_transparent<C: KvChild + ?Sized>(child: &C, visitor: &mut dyn ChildVisitor) {
    child.kv_visit(visitor);
}

/// Visits what a `#[kv(child(with = path))]` function returns for its
/// field: each owner (or container of owners) under its index, below the
/// field's segment (none for a transparent wrapper's child).
pub fn visit_with<'a, I, C>(owners: I, field: Option<&'static str>, visitor: &mut dyn ChildVisitor)
where
    I: IntoIterator<Item = &'a C>,
    C: KvChild + ?Sized + 'a,
{
    if let Some(field) = field {
        visitor.enter(Segment::Field(field));
    }
    for (index, owner) in owners.into_iter().enumerate() {
        visitor.enter(Segment::Index(index));
        owner.kv_visit(visitor);
        visitor.leave();
    }
    if field.is_some() {
        visitor.leave();
    }
}

/// The item type of a `#[kv(child(with = path))]` function, for the field's
/// type `T` (its lifetimes `'static`), handed to `types` as a probe: the
/// registry names the owner types its items may hold, whatever the field
/// holds now. The items need not be children here: that error is the visit's.
pub fn with_item<T: ?Sized + 'static, F, I, C>(_with: F, types: impl FnOnce(Probe<C>))
where
    F: Fn(&'static T) -> I,
    I: IntoIterator<Item = &'static C>,
    C: ?Sized + 'static,
{
    types(Probe(core::marker::PhantomData));
}

/// A type, asked whether it is a [`KvChild`] (autoref-style, as
/// [`Element`] asks): `(&probe).owner_types(types)` names its owner types
/// where it is one, and nothing where it is not.
pub struct Probe<C: ?Sized>(core::marker::PhantomData<fn(&C)>);

/// The case of [`Probe`] where the type is a child.
pub trait ProbeChild {
    /// Names the owner types the probed type may hold.
    fn owner_types(&self, types: &mut dyn OwnerTypes);
}

impl<C: KvChild + ?Sized> ProbeChild for Probe<C> {
    fn owner_types(&self, types: &mut dyn OwnerTypes) {
        C::kv_owner_types(types);
    }
}

/// The fallback of [`ProbeChild`]: a type that is no child names nothing.
pub trait ProbeNothing {
    /// Names nothing.
    fn owner_types(&self, types: &mut dyn OwnerTypes) {
        let _ = types;
    }
}

impl<C: ?Sized> ProbeNothing for &Probe<C> {}

/// Visits a child field through what the compiler found for its type
/// ([`Element::VISIT`]), below its segment (none for a transparent
/// wrapper's child): a field holding a trait object, whose trait the
/// derive's checks ask about, so that one without `ModelLocalKv` as a
/// supertrait is reported in kv's words.
pub fn visit_element_field<T: ?Sized>(
    value: &T,
    field: Option<&'static str>,
    visit: VisitElement<T>,
    visitor: &mut dyn ChildVisitor,
) {
    let Some(visit) = visit else {
        return;
    };
    if let Some(field) = field {
        visitor.enter(Segment::Field(field));
    }
    visit(value, visitor);
    if field.is_some() {
        visitor.leave();
    }
}
