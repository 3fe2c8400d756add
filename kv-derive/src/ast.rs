//! The derive's input as a small AST: the struct or enum, its options, its
//! fields (an enum's per variant), children and declarations, read from
//! `#[kv(...)]` attributes.

use proc_macro2::{Ident, Span};
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Generics, Member, Path, Type};

use crate::attr::keys::{Attrs, Place};
use crate::attr::read::{self, place_of};
use crate::attr::syntax::{entries_of, kv_attributes, Entry};
use crate::errors::Errors;
use crate::suggest::unraw;

/// What every expansion needs, struct or not: the fallback impls use it.
pub struct Shell<'a> {
    pub ident: &'a Ident,
    /// The type's name as written, without `r#`.
    pub type_name: String,
    pub generics: &'a Generics,
    pub krate: Path,
}

pub enum Parsed<'a> {
    /// A struct or an enum.
    Struct(Box<Input<'a>>),
    /// A union: reported, and only fallback impls are emitted.
    NotAStruct(Shell<'a>),
}

impl<'a> Parsed<'a> {
    pub fn shell(&self) -> &Shell<'a> {
        match self {
            Parsed::Struct(input) => &input.shell,
            Parsed::NotAStruct(shell) => shell,
        }
    }
}

pub struct Input<'a> {
    pub shell: Shell<'a>,
    /// The type's options (`crate`, `transparent`), all attributes together.
    pub options: Attrs,
    /// A struct's fields; an enum's type-level declarations, with no fields.
    pub body: Fields<'a>,
    /// An enum's variants; `None` for a struct.
    pub variants: Option<Vec<Variant<'a>>>,
}

/// What a struct, or one variant of an enum, holds and declares.
#[derive(Default)]
pub struct Fields<'a> {
    /// The named fields, for `only_when`.
    pub named: Vec<Field<'a>>,
    pub children: Vec<Child<'a>>,
    /// Fields marked neither `child` nor `skip`: their types must declare no KV.
    pub unmarked: Vec<Unmarked<'a>>,
    pub decls: Vec<Decl>,
}

/// One variant of an enum: declared while it is the live one.
pub struct Variant<'a> {
    pub ident: &'a Ident,
    /// Its name as written, without `r#`.
    pub name: String,
    pub fields: Fields<'a>,
}

/// A field marked neither `#[kv(child)]` nor `#[kv(skip, because = "...")]`.
pub struct Unmarked<'a> {
    /// The field's name (without `r#`) or index.
    pub segment: String,
    /// Where the field starts: its name, or its type on a tuple field.
    pub span: Span,
    pub ty: &'a Type,
}

/// A named field, for `only_when`.
pub struct Field<'a> {
    pub ident: Ident,
    pub ty: &'a Type,
}

impl Field<'_> {
    /// Whether its type is written exactly `bool` (asked only to explain an
    /// error: printing a type is not free).
    pub fn is_bool(&self) -> bool {
        self.ty.to_token_stream().to_string() == "bool"
    }
}

pub struct Child<'a> {
    pub member: Member,
    /// The path segment: the field's name (without `r#`) or index.
    pub segment: String,
    /// The `child` token.
    pub span: Span,
    /// The field's type, for the `KvChild` bound a generic type needs.
    pub ty: &'a Type,
    /// `child(with = path)`: the user's function that returns the owners
    /// the field holds, for a container kv does not walk.
    pub with: Option<Path>,
}

/// One declaration, as written.
pub struct Decl {
    /// The `kv` of `#[kv(...)]`, where missing-key errors point.
    pub span: Span,
    /// The field a field-level declaration sits on.
    pub field: Option<Member>,
    pub attrs: Attrs,
}

pub fn parse<'a>(input: &'a DeriveInput, errors: &mut Errors) -> Parsed<'a> {
    let mut options = Attrs::default();
    let mut body = Fields::default();
    for attribute in kv_attributes(&input.attrs) {
        let Some(entries) = entries_of(attribute, errors) else {
            continue;
        };
        // An attribute of options only configures the derive; any other key
        // makes it a declaration, where an option key is reported as misplaced.
        // Field markers alone (`child`, `skip`) are misplaced options, not a
        // declaration missing every key.
        if entries
            .iter()
            .all(|e| matches!(place_of(e), Some(Place::Option | Place::Field)))
        {
            read::read(entries, Place::Option, &mut options, errors);
        } else {
            body.decls
                .push(declaration(attribute, entries, None, errors));
        }
    }
    let shell = Shell {
        ident: &input.ident,
        type_name: unraw(&input.ident),
        generics: &input.generics,
        krate: options.krate.take().unwrap_or_else(default_crate),
    };
    let variants = match &input.data {
        Data::Struct(data) => {
            parse_fields(&data.fields, &mut body, errors);
            None
        }
        Data::Enum(data) => Some(
            data.variants
                .iter()
                .map(|variant| parse_variant(variant, errors))
                .collect(),
        ),
        Data::Union(data) => return not_a_struct(shell, data.union_token.span, errors),
    };
    Parsed::Struct(Box::new(Input {
        shell,
        options,
        body,
        variants,
    }))
}

fn declaration(
    attribute: &syn::Attribute,
    entries: Vec<Entry>,
    field: Option<Member>,
    errors: &mut Errors,
) -> Decl {
    let mut attrs = Attrs::default();
    read::read(entries, Place::Declaration, &mut attrs, errors);
    Decl {
        span: attribute.path().span(),
        field,
        attrs,
    }
}

/// A variant's own `#[kv(...)]` declare while it is live; its fields are
/// read as a struct's.
fn parse_variant<'a>(variant: &'a syn::Variant, errors: &mut Errors) -> Variant<'a> {
    let bindings = variant
        .fields
        .iter()
        .filter_map(|field| field.ident.as_ref().map(ToString::to_string))
        .collect();
    crate::attr::values::with_bindings(bindings, || {
        let mut fields = Fields::default();
        for attribute in kv_attributes(&variant.attrs) {
            let Some(entries) = entries_of(attribute, errors) else {
                continue;
            };
            fields
                .decls
                .push(declaration(attribute, entries, None, errors));
        }
        parse_fields(&variant.fields, &mut fields, errors);
        Variant {
            ident: &variant.ident,
            name: unraw(&variant.ident),
            fields,
        }
    })
}

fn parse_fields<'a>(fields: &'a syn::Fields, parsed: &mut Fields<'a>, errors: &mut Errors) {
    for (index, field) in fields.iter().enumerate() {
        if let Some(ident) = &field.ident {
            parsed.named.push(Field {
                ident: ident.clone(),
                ty: &field.ty,
            });
        }
        // syn's Clone impls sit behind a feature; build the member afresh instead.
        let member = || match &field.ident {
            Some(ident) => Member::Named(ident.clone()),
            None => Member::Unnamed(syn::Index::from(index)),
        };
        // All `#[kv(child)]` of a field share one slot: a second is a duplicate.
        let mut flags = Attrs::default();
        for attribute in kv_attributes(&field.attrs) {
            let Some(entries) = entries_of(attribute, errors) else {
                continue;
            };
            if entries.iter().any(|e| place_of(e) == Some(Place::Field)) {
                read::read(entries, Place::Field, &mut flags, errors);
                continue;
            }
            parsed
                .decls
                .push(declaration(attribute, entries, Some(member()), errors));
        }
        let segment = match &field.ident {
            Some(ident) => unraw(ident),
            None => index.to_string(),
        };
        check_markers(&flags, errors);
        if let Some(child) = flags.child.key() {
            parsed.children.push(Child {
                member: member(),
                segment,
                span: child.span(),
                ty: &field.ty,
                with: flags.child.take().and_then(|mark| mark.with),
            });
        } else if flags.skip.key().is_none() && flags.because.key().is_none() {
            parsed.unmarked.push(Unmarked {
                segment,
                span: field
                    .ident
                    .as_ref()
                    .map_or_else(|| field.ty.span(), Ident::span),
                ty: &field.ty,
            });
        }
    }
}

/// `skip` needs its reason, `because` its `skip`, and a field is a child or
/// skipped, not both.
fn check_markers(flags: &Attrs, errors: &mut Errors) {
    match (flags.skip.key(), flags.because.key()) {
        (Some(skip), None) => errors.push(
            skip.span(),
            "`skip` needs `because = \"...\"`: say why this field's model-local KV is not counted",
        ),
        (None, Some(because)) => errors.push(
            because.span(),
            "`because` explains a `skip`: write `#[kv(skip, because = \"...\")]`, or remove it",
        ),
        _ => {}
    }
    if let (Some(_), Some(skip)) = (flags.child.key(), flags.skip.key()) {
        errors.push(
            skip.span(),
            "a field is either a `child` (its KV is counted) or skipped (it is not): remove one",
        );
    }
}

fn not_a_struct<'a>(shell: Shell<'a>, span: Span, errors: &mut Errors) -> Parsed<'a> {
    errors.push(
        span,
        "#[derive(ModelLocalKv)] supports structs and enums, not unions; declare on the struct that holds the cache",
    );
    Parsed::NotAStruct(shell)
}

/// `::kv_core`, built rather than parsed on every derive.
fn default_crate() -> Path {
    let mut path = Path::from(Ident::new("kv_core", Span::call_site()));
    path.leading_colon = Some(syn::Token![::](Span::call_site()));
    path
}
