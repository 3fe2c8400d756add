//! Rules across keys (what every declaration must say, what cannot be said
//! twice or together, what `only_when` names), checked into a [`Derive`]:
//! a declaration whose required parts cannot be missing. Each broken rule is
//! one error at the offending token. It also finds the declarations whose
//! figures are all literals that fit, which need no generated check.

use proc_macro2::{Ident, Span};
use syn::{LitStr, Member};

use crate::ast::{Child, Decl, Field, Fields, Input, Shell, Unmarked};
use crate::attr::keys::{Need, Place, KEYS};
use crate::attr::tables::dtype_bytes;
use crate::attr::values::{
    DTypeValue, Gate, Named, PositionsValue, RowsValue, StorageValue, Value,
};
use crate::errors::Errors;
use crate::suggest::unraw;

/// A struct or enum whose every declaration is complete: what `expand` needs.
pub struct Derive<'a> {
    pub shell: &'a Shell<'a>,
    pub transparent: bool,
    /// A struct's fields; an enum's type-level declarations.
    pub body: ValidFields<'a>,
    /// An enum's variants; `None` for a struct.
    pub variants: Option<Vec<ValidVariant<'a>>>,
}

/// The checked contents of a struct or of one variant.
pub struct ValidFields<'a> {
    pub children: &'a [Child<'a>],
    pub unmarked: &'a [Unmarked<'a>],
    pub decls: Vec<ValidDecl<'a>>,
    /// The named fields, bound by name in a variant's declarations.
    pub named: &'a [Field<'a>],
}

/// One variant of an enum, checked.
pub struct ValidVariant<'a> {
    pub ident: &'a Ident,
    /// Its name as written, without `r#`.
    pub name: &'a str,
    pub fields: ValidFields<'a>,
}

impl Derive<'_> {
    /// Every child field: the struct's, or each variant's.
    pub fn all_children(&self) -> impl Iterator<Item = &Child<'_>> {
        self.body.children.iter().chain(
            self.variants
                .iter()
                .flatten()
                .flat_map(|variant| variant.fields.children.iter()),
        )
    }
}

pub struct ValidDecl<'a> {
    /// The `kv` of `#[kv(...)]`.
    pub span: Span,
    /// Explicit, else the field's name without `r#`.
    pub name: String,
    pub cache: &'a LitStr,
    pub kind: Kind<'a>,
    pub scope: Named,
    pub rows: &'a RowsValue,
    pub gate: Option<ValidGate>,
    /// The variant it declares in (`Type::Variant`), on an enum's variant.
    pub variant: Option<String>,
    /// The optional texts given, by key, in the table's order; each
    /// non-blank (blank ones are refused while reading). Each is emitted as
    /// kv-core's setter of its key's name.
    pub texts: Vec<(&'static str, &'a LitStr)>,
    /// Every figure known before load is a literal and their products fit:
    /// no generated check is needed.
    pub literal: bool,
}

/// What one row is made of, each kind with what it needs: attention and an
/// MLA latent have positions, recurrent state has none.
pub enum Kind<'a> {
    Attention(Geometry<'a>, &'a PositionsValue),
    Latent(&'a Value, &'a PositionsValue),
    State(&'a Value),
    /// Tensors kept beside the caches: no positions.
    Tensors(&'a Value),
}

/// An attention geometry, whole or in parts.
pub enum Geometry<'a> {
    Whole(&'a Value),
    Parts {
        layers: &'a Value,
        kv_heads: &'a Value,
        head_dim: &'a Value,
        v_head_dim: Option<&'a Value>,
        /// `None` when `kv_format` gives the storage whole.
        dtype: Option<&'a DTypeValue>,
        kv_format: Option<&'a StorageValue>,
        v_format: Option<&'a StorageValue>,
    },
}

/// `only_when`, resolved: a field or a method, and its text for the report.
pub struct ValidGate {
    pub ident: Ident,
    pub is_field: bool,
    /// A field of the live variant, bound by reference in the match.
    pub is_binding: bool,
    pub text: String,
}

impl Geometry<'_> {
    /// Whether every part is literal or const.
    pub fn is_const(&self) -> bool {
        match self {
            Geometry::Whole(value) => !value.is_after_load(),
            Geometry::Parts {
                layers,
                kv_heads,
                head_dim,
                v_head_dim,
                dtype,
                kv_format,
                v_format,
            } => {
                [layers, kv_heads, head_dim]
                    .iter()
                    .all(|part| !part.is_after_load())
                    && !v_head_dim.is_some_and(Value::is_after_load)
                    && !dtype.is_some_and(DTypeValue::is_after_load)
                    && !kv_format.is_some_and(StorageValue::is_after_load)
                    && !v_format.is_some_and(StorageValue::is_after_load)
            }
        }
    }
}

impl<'a> ValidDecl<'a> {
    /// The positions, for the kinds that have them.
    pub fn positions(&self) -> Option<&'a PositionsValue> {
        match self.kind {
            Kind::Attention(_, positions) | Kind::Latent(_, positions) => Some(positions),
            Kind::State(_) | Kind::Tensors(_) => None,
        }
    }

    /// Whether any value is read after load.
    pub fn is_after_load(&self) -> bool {
        !self.layout_is_const()
            || self.positions().is_some_and(PositionsValue::is_after_load)
            || matches!(self.rows, RowsValue::Fixed(f) if f.count.is_after_load())
    }

    /// Whether the geometry, latent or state is literal or const.
    pub fn layout_is_const(&self) -> bool {
        match &self.kind {
            Kind::Attention(geometry, _) => geometry.is_const(),
            Kind::Latent(value, _) | Kind::State(value) | Kind::Tensors(value) => {
                !value.is_after_load()
            }
        }
    }
}

/// The checked struct or enum, or `None` when any rule is broken (all reported).
pub fn check<'a>(input: &'a Input<'a>, errors: &mut Errors) -> Option<Derive<'a>> {
    let before = errors.len();
    let shell = &input.shell;
    let body = fields(shell, &input.body, None, &[], errors);
    let variants = input.variants.as_ref().map(|variants| {
        let type_level: Vec<&str> = body.decls.iter().map(|d| d.name.as_str()).collect();
        variants
            .iter()
            .map(|variant| ValidVariant {
                ident: variant.ident,
                name: &variant.name,
                fields: fields(
                    shell,
                    &variant.fields,
                    Some(&format!("{}::{}", shell.type_name, variant.name)),
                    &type_level,
                    errors,
                ),
            })
            .collect()
    });
    let transparent = input.options.transparent.key();
    if let Some(transparent) = transparent {
        match (&input.variants, input.body.children.as_slice()) {
            (Some(_), _) => errors.push(
                transparent.span(),
                "`transparent` forwards a struct to its one `#[kv(child)]` field; an enum has \
                 a child per variant: remove `#[kv(transparent)]` (a variant's children are visited \
                 under `Variant.field`)",
            ),
            (None, []) => errors.push(
                transparent.span(),
                "a transparent wrapper needs a `#[kv(child)]` field to forward to",
            ),
            (None, [_]) => {}
            (None, [_, rest @ ..]) => {
                for child in rest {
                    errors.push(
                        child.span,
                        "a transparent wrapper forwards to exactly one `#[kv(child)]` field: \
                         two children at the wrapper's own path would give their declarations \
                         the same full names; remove `#[kv(transparent)]` or this `child`",
                    );
                }
            }
        }
    }
    (errors.len() == before).then_some(Derive {
        shell,
        transparent: transparent.is_some(),
        body,
        variants,
    })
}

/// The declarations of a struct, of an enum's type, or of one variant
/// (`variant`: `Type::Variant`), each name distinct from `taken` and from
/// each other.
fn fields<'a>(
    shell: &Shell<'_>,
    parsed: &'a Fields<'a>,
    variant: Option<&str>,
    taken: &[&str],
    errors: &mut Errors,
) -> ValidFields<'a> {
    let mut decls = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for decl in &parsed.decls {
        let Some(mut valid) = declaration(shell, &parsed.named, variant, decl, errors) else {
            continue;
        };
        valid.literal = literals_fit(&valid);
        if names.contains(&valid.name) || taken.contains(&valid.name.as_str()) {
            let span = decl.attrs.name.get().map_or(decl.span, LitStr::span);
            errors.push(
                span,
                format!(
                    "duplicate declaration name `{}` on this type; give each a distinct `name`",
                    valid.name
                ),
            );
        } else {
            names.push(valid.name.clone());
        }
        decls.push(valid);
    }
    ValidFields {
        children: &parsed.children,
        unmarked: &parsed.unmarked,
        decls,
        named: &parsed.named,
    }
}

fn declaration<'a>(
    shell: &Shell<'_>,
    named: &[Field<'_>],
    variant: Option<&str>,
    decl: &'a Decl,
    errors: &mut Errors,
) -> Option<ValidDecl<'a>> {
    let attrs = &decl.attrs;
    let before = errors.len();
    for key in KEYS.iter().filter(|key| key.place == Place::Declaration) {
        let given = (key.given)(attrs);
        if let Some(given) = given {
            for conflict in key.conflicts {
                if let Some(other) = crate::attr::keys::key(conflict).and_then(|k| (k.given)(attrs))
                {
                    errors.push(
                        other.span(),
                        format!("`{conflict}` conflicts with `{given}`: {}", key.advice),
                    );
                }
            }
            continue;
        }
        if attrs.suggested.contains(&key.name) {
            continue;
        }
        let why = match (key.need, &decl.field) {
            (Need::Required, _) => key.advice,
            (Need::UnlessAny(keys), _)
                if !keys.iter().any(|other| {
                    crate::attr::keys::key(other).is_some_and(|k| (k.given)(attrs).is_some())
                }) =>
            {
                key.advice
            }
            (Need::UnlessNamedField, None) => {
                "a declaration on the struct needs `name = \"...\"` (on a field it defaults to the field's name)"
            }
            (Need::UnlessNamedField, Some(Member::Unnamed(_))) => {
                "a declaration on a tuple field needs `name = \"...\"`"
            }
            _ => continue,
        };
        errors.push(decl.span, format!("missing `{}`: {why}", key.name));
    }
    let gate = match attrs.only_when.get() {
        Some(gate) => Some(resolve_gate(shell, named, variant, gate, errors)?),
        None => None,
    };
    if errors.len() != before {
        return None;
    }
    let name = match (attrs.name.get(), &decl.field) {
        (Some(name), _) => name.value(),
        (None, Some(Member::Named(ident))) => unraw(ident),
        _ => return None,
    };
    let kind = if let Some(latent) = attrs.latent.get() {
        Kind::Latent(latent, attrs.positions.get()?)
    } else if let Some(state) = attrs.state.get() {
        Kind::State(state)
    } else if let Some(tensors) = attrs.tensors.get() {
        Kind::Tensors(tensors)
    } else {
        let geometry = match attrs.geometry.get() {
            Some(whole) => Geometry::Whole(whole),
            None => Geometry::Parts {
                layers: attrs.layers.get()?,
                kv_heads: attrs.kv_heads.get()?,
                head_dim: attrs.head_dim.get()?,
                v_head_dim: attrs.v_head_dim.get(),
                dtype: match attrs.kv_format.get() {
                    Some(_) => attrs.dtype.get(),
                    None => Some(attrs.dtype.get()?),
                },
                kv_format: attrs.kv_format.get(),
                v_format: attrs.v_format.get(),
            },
        };
        Kind::Attention(geometry, attrs.positions.get()?)
    };
    // A key given with an invalid value has been reported; its slot is empty.
    Some(ValidDecl {
        span: decl.span,
        name,
        cache: attrs.cache.get()?,
        kind,
        scope: *attrs.scope.get()?,
        rows: attrs.rows.get()?,
        gate,
        variant: variant.map(str::to_owned),
        texts: KEYS
            .iter()
            .filter(|key| key.place == Place::Declaration && key.need == Need::Optional)
            .filter_map(|key| Some((key.name, (key.text)(attrs)?)))
            .collect(),
        literal: false,
    })
}

/// `"field"` must name a field; `"method()"` is checked by typing.
/// In a variant (`Type::Variant`), `"field"` names one of its fields.
fn resolve_gate(
    shell: &Shell<'_>,
    named: &[Field<'_>],
    variant: Option<&str>,
    gate: &Gate,
    errors: &mut Errors,
) -> Option<ValidGate> {
    match gate {
        Gate::Method(ident) => Some(ValidGate {
            ident: ident.clone(),
            is_field: false,
            is_binding: false,
            text: unraw(ident),
        }),
        Gate::Name(ident, lit) => {
            let wanted = unraw(ident);
            if let Some(field) = named.iter().find(|f| unraw(&f.ident) == wanted) {
                let mut ident = field.ident.clone();
                ident.set_span(lit.span());
                return Some(ValidGate {
                    ident,
                    is_field: true,
                    is_binding: variant.is_some(),
                    text: wanted,
                });
            }
            let mut has = String::new();
            for field in named.iter().filter(|f| f.is_bool()) {
                has.push_str(if has.is_empty() {
                    "its bool fields are: "
                } else {
                    ", "
                });
                has.push_str(&unraw(&field.ident));
            }
            if has.is_empty() {
                has.push_str("it has no bool fields");
            }
            errors.push(
                lit.span(),
                format!(
                    "`only_when = \"{wanted}\"` names no field of `{}`; {has} (for a method write `only_when = \"{wanted}()\"`)",
                    variant.unwrap_or(&shell.type_name)
                ),
            );
            None
        }
    }
}

/// Whether a declaration's figures known before load (its geometry and
/// positions, and fixed rows where they are) are all literals whose products
/// fit in u64: such a declaration needs no generated check. One that
/// overflows is left to kv-core's checks, which hold the texts.
pub fn literals_fit(decl: &ValidDecl<'_>) -> bool {
    let literal = |value: &Value| match value {
        Value::Literal(value, _) => Some(*value),
        _ => None,
    };
    let Kind::Attention(
        Geometry::Parts {
            layers,
            kv_heads,
            head_dim,
            v_head_dim,
            dtype: Some(DTypeValue::Named(dtype)),
            kv_format: None,
            v_format: None,
        },
        PositionsValue::Bounded(bounded),
    ) = &decl.kind
    else {
        return false;
    };
    let Some(dtype_bytes) = dtype_bytes(dtype.variant) else {
        return false;
    };
    let (Some(layers), Some(kv_heads), Some(head_dim), Some(positions)) = (
        literal(layers),
        literal(kv_heads),
        literal(head_dim),
        literal(&bounded.count),
    ) else {
        return false;
    };
    let v_head_dim = match v_head_dim {
        None => head_dim,
        Some(value) => match literal(value) {
            Some(value) => value,
            None => return false,
        },
    };
    let rows = match decl.rows {
        RowsValue::MaxNumSeqs => None,
        RowsValue::Fixed(fixed) => match &fixed.count {
            Value::Literal(count, _) => Some(*count),
            Value::AfterLoad(_) => None,
            Value::Const(_) => return false,
        },
    };
    let per_row = head_dim
        .checked_add(v_head_dim)
        .and_then(|dims| dims.checked_mul(dtype_bytes))
        .and_then(|bytes| bytes.checked_mul(kv_heads))
        .and_then(|bytes| bytes.checked_mul(layers))
        .and_then(|per_position| per_position.checked_mul(positions));
    match (per_row, rows) {
        (None, _) => false,
        (Some(per_row), Some(rows)) => per_row.checked_mul(rows).is_some(),
        (Some(_), None) => true,
    }
}
