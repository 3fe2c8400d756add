//! Rules across keys (what every declaration must say, what cannot be said
//! twice or together, what `only_when` names), checked into a [`Derive`]:
//! a declaration whose required parts cannot be missing. Each broken rule is
//! one error at the offending token.

use proc_macro2::{Ident, Span};
use syn::{LitStr, Member};

use crate::ast::{Child, Decl, Input, Shell, Unmarked};
use crate::checks;
use crate::keys::{Need, Place, KEYS};
use crate::read::{DTypeValue, Gate, Named, PositionsValue, RowsValue, StorageValue, Value};
use crate::suggest::unraw;
use crate::Errors;

/// A struct whose every declaration is complete: what `expand` needs.
pub struct Derive<'a> {
    pub shell: &'a Shell<'a>,
    pub transparent: bool,
    pub children: &'a [Child<'a>],
    pub unmarked: &'a [Unmarked<'a>],
    pub decls: Vec<ValidDecl<'a>>,
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
    pub texts: Texts<'a>,
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

/// The optional texts, each non-blank where given (blank ones are refused
/// while reading).
pub struct Texts<'a> {
    pub assumes: Option<&'a LitStr>,
    pub note: Option<&'a LitStr>,
    pub on_host: Option<&'a LitStr>,
    pub whole_on_every_rank: Option<&'a LitStr>,
}

/// `only_when`, resolved: a field or a method, and its text for the report.
pub struct ValidGate {
    pub ident: Ident,
    pub is_field: bool,
    pub text: String,
}

impl Geometry<'_> {
    /// Whether it gives a storage format (`kv_format`, `v_format`).
    pub fn has_formats(&self) -> bool {
        matches!(
            self,
            Geometry::Parts {
                kv_format: Some(_),
                ..
            } | Geometry::Parts {
                v_format: Some(_),
                ..
            }
        )
    }

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
            Kind::State(_) => None,
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
            Kind::Latent(value, _) | Kind::State(value) => !value.is_after_load(),
        }
    }
}

/// The checked struct, or `None` when any rule is broken (all reported).
pub fn check<'a>(input: &'a Input<'a>, errors: &mut Errors) -> Option<Derive<'a>> {
    let before = errors.len();
    let mut decls = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for decl in &input.decls {
        let Some(mut valid) = declaration(input, decl, errors) else {
            continue;
        };
        valid.literal = checks::literals_fit(&valid);
        if names.contains(&valid.name) {
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
    let transparent = input.options.transparent.key();
    if let Some(transparent) = transparent {
        match input.children.as_slice() {
            [] => errors.push(
                transparent.span(),
                "a transparent wrapper needs a `#[kv(child)]` field to forward to",
            ),
            [_] => {}
            [_, rest @ ..] => {
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
        shell: &input.shell,
        transparent: transparent.is_some(),
        children: &input.children,
        unmarked: &input.unmarked,
        decls,
    })
}

fn declaration<'a>(
    input: &Input<'_>,
    decl: &'a Decl,
    errors: &mut Errors,
) -> Option<ValidDecl<'a>> {
    let attrs = &decl.attrs;
    let before = errors.len();
    for key in KEYS.iter().filter(|key| key.place == Place::Declaration) {
        let given = (key.given)(attrs);
        if let Some(given) = given {
            for conflict in key.conflicts {
                if let Some(other) = crate::keys::key(conflict).and_then(|k| (k.given)(attrs)) {
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
                    crate::keys::key(other).is_some_and(|k| (k.given)(attrs).is_some())
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
        Some(gate) => Some(resolve_gate(input, gate, errors)?),
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
        texts: Texts {
            assumes: attrs.assumes.get(),
            note: attrs.note.get(),
            on_host: attrs.on_host.get(),
            whole_on_every_rank: attrs.whole_on_every_rank.get(),
        },
        literal: false,
    })
}

/// `"field"` must name a field; `"method()"` is checked by typing.
fn resolve_gate(input: &Input<'_>, gate: &Gate, errors: &mut Errors) -> Option<ValidGate> {
    match gate {
        Gate::Method(ident) => Some(ValidGate {
            ident: ident.clone(),
            is_field: false,
            text: unraw(ident),
        }),
        Gate::Name(ident, lit) => {
            let wanted = unraw(ident);
            if let Some(field) = input.fields.iter().find(|f| unraw(&f.ident) == wanted) {
                let mut ident = field.ident.clone();
                ident.set_span(lit.span());
                return Some(ValidGate {
                    ident,
                    is_field: true,
                    text: wanted,
                });
            }
            let mut has = String::new();
            for field in input.fields.iter().filter(|f| f.is_bool()) {
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
                    input.shell.type_name
                ),
            );
            None
        }
    }
}
