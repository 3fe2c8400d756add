//! The one table of `#[kv(...)]` keys and the slots they fill. Each key is
//! written once, in [`keys!`]: its name, its slot in [`Attrs`] and its
//! constant in [`name`] (conflict lists are built from those constants, so a
//! misspelt one does not compile), its place, value form, need, conflicts
//! and texts. Its reader is handed the key's own entry, so a message names
//! the key as the table does. Adding a key: its entry there, its reader in
//! `values.rs` (unless an existing one fits: `text`, `count`), its row in the
//! derive's docs (kv-core/src/lib.rs; a test fails without it) and a ui
//! case. An optional text of a declaration needs nothing more in this crate:
//! it is emitted as kv-core's setter of its name (`__private_v0_1::Decl`,
//! which states its default). Another key gets its expansion in
//! `expand/declarations.rs` (and, if required, a field in
//! `valid::ValidDecl`). Everything else (the walk, duplicate, missing and
//! conflicting keys, suggestions, the fuzzer's grammar and mutations) reads
//! this table.
use proc_macro2::{Ident, TokenStream};
use syn::{LitStr, Path};

use super::values::{
    self, ChildMark, DTypeValue, Gate, Named, PositionsValue, RowsValue, StorageValue, Value,
    BECAUSE_ADVICE,
};
use crate::errors::Errors;

/// Where a key may be written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Place {
    /// In a declaration, on the struct or a field.
    Declaration,
    /// Alone in a `#[kv(...)]` on the struct: configures the derive.
    Option,
    /// Alone in a `#[kv(...)]` on a field: marks it a child, or skipped.
    Field,
}

/// Whether a declaration must give a key.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Need {
    Optional,
    Required,
    /// Required on the struct and on tuple fields; a named field names it.
    UnlessNamedField,
    /// Required unless one of these keys is given (`geometry` whole, an MLA
    /// `latent`, a recurrent `state`).
    UnlessAny(&'static [&'static str]),
}

/// What a key's value is, for the fuzzer's grammar (which writes a valid
/// value of each form) and for readers of the table.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Form {
    /// `#[kv(key)]`, no value.
    Flag,
    /// `#[kv(child)]`, or `#[kv(child(with = path))]`: a marker whose
    /// arguments are read by its reader.
    Marker,
    /// A non-blank string literal.
    Text,
    /// A count: a literal, a const expression or an expression on `self`.
    Count,
    /// A dtype name or an expression of type `DType`.
    DType,
    /// A dtype or block format name, or an expression of type `Storage`.
    Storage,
    /// An expression of the key's type (`Geometry`, `Latent`, `RecurrentState`).
    Expression,
    /// `bounded(..)` or a position policy.
    Positions,
    /// A scope name.
    Scope,
    /// `max_num_seqs` or `fixed(..)`.
    Rows,
    /// A bool field's name or a method as `"name()"`.
    Gate,
    /// A path as a string literal.
    Path,
}

/// One key: everything the derive knows about it, in one place.
pub struct Key {
    pub name: &'static str,
    pub place: Place,
    pub form: Form,
    pub need: Need,
    /// Keys that cannot be given together with this one (named by [`name`]'s
    /// constants, so a misspelt one does not compile).
    pub conflicts: &'static [&'static str],
    /// A valid value, shown when the value is absent.
    pub example: &'static str,
    /// What to write, shown when the key is blank or missing.
    pub advice: &'static str,
    /// Reads the value (empty for flags) into the key's slot. The reader is
    /// handed its own entry, so it names the key as the table does.
    pub read: fn(&'static Key, &mut Attrs, &Ident, TokenStream, &mut Errors),
    /// The key's token, when given.
    pub given: fn(&Attrs) -> Option<&Ident>,
    /// The value of a [`Form::Text`] key, when given; `None` for other forms.
    pub text: fn(&Attrs) -> Option<&LitStr>,
}

/// A [`Form::Text`] key's slot holds a `LitStr`: its value; other forms
/// have none.
macro_rules! text_value {
    (Text, $attrs:ident.$field:ident) => {
        $attrs.$field.get()
    };
    ($form:ident, $attrs:ident.$field:ident) => {{
        let _ = $attrs;
        None
    }};
}

/// Each key written once: its slot in [`Attrs`], its constant in [`name`],
/// its entry in [`KEYS`]. `read: |value, key, errors| ...` reads the value
/// with `key` bound to the entry itself.
macro_rules! keys {
    ($(
        $field:ident: $ty:ty = $name:literal {
            place: $place:ident,
            form: $form:ident,
            need: $need:expr,
            conflicts: $conflicts:expr,
            example: $example:expr,
            advice: $advice:expr,
            read: |$value:pat_param, $key:pat_param, $errors:ident| $read:expr,
        }
    )*) => {
        /// Every key's name, as a constant named like its slot.
        #[allow(non_upper_case_globals)]
        pub mod name {
            $(pub const $field: &str = $name;)*
        }

        /// Every key of `#[kv(...)]`.
        pub const KEYS: &[Key] = &[$(
            Key {
                name: name::$field,
                place: Place::$place,
                form: Form::$form,
                need: $need,
                conflicts: $conflicts,
                example: $example,
                advice: $advice,
                read: |key, attrs, token, $value, errors| {
                    let $key = key;
                    set(&mut attrs.$field, token, errors, |$errors| $read)
                },
                given: |attrs| attrs.$field.key(),
                text: |attrs| text_value!($form, attrs.$field),
            },
        )*];

        /// The slots of one `#[kv(...)]` (a declaration), or of all option or
        /// field-marker attributes of one struct or field.
        #[derive(Default)]
        pub struct Attrs {
            $(pub $field: Attr<$ty>,)*
            /// Required keys an unknown key was taken for ("did you mean
            /// `rows`?"): not reported missing as well.
            pub suggested: Vec<&'static str>,
        }
    };
}

const GEOMETRY_PARTS: &str =
    "give `layers`, `kv_heads`, `head_dim` and `dtype`, or `geometry = ...` whole \
     (or `latent = ...` for an MLA latent, `state = ...` for recurrent state, \
     `tensors = ...` for tables kept beside the caches)";
/// The keys that replace the attention geometry's parts.
const WHOLE_LAYOUTS: &[&str] = &[name::geometry, name::latent, name::state, name::tensors];
/// The attention geometry's parts and formats.
const ATTENTION_PARTS: &[&str] = &[
    name::layers,
    name::kv_heads,
    name::head_dim,
    name::v_head_dim,
    name::dtype,
    name::kv_format,
    name::v_format,
];
/// What an MLA latent replaces: the attention geometry, whole or in parts.
const NOT_WITH_LATENT: &[&str] = &[
    name::layers,
    name::kv_heads,
    name::head_dim,
    name::v_head_dim,
    name::dtype,
    name::kv_format,
    name::v_format,
    name::geometry,
];
/// What tensors beside the caches replace: any other layout, and positions.
const NOT_WITH_TENSORS: &[&str] = &[
    name::layers,
    name::kv_heads,
    name::head_dim,
    name::v_head_dim,
    name::dtype,
    name::kv_format,
    name::v_format,
    name::geometry,
    name::latent,
    name::state,
    name::positions,
];
/// What recurrent state replaces: any other layout, and positions.
const NOT_WITH_STATE: &[&str] = &[
    name::layers,
    name::kv_heads,
    name::head_dim,
    name::v_head_dim,
    name::dtype,
    name::kv_format,
    name::v_format,
    name::geometry,
    name::latent,
    name::positions,
];
const COUNT: &str = "a positive integer, a const expression, or an expression on `self`";

keys! {
    name: LitStr = "name" {
        place: Declaration,
        form: Text,
        need: Need::UnlessNamedField,
        conflicts: &[],
        example: "a string literal, like `name = \"retained\"`",
        advice: "name the declaration",
        read: |v, key, e| values::text(v, key.name, key.advice, e),
    }
    cache: LitStr = "cache" {
        place: Declaration,
        form: Text,
        need: Need::Required,
        conflicts: &[],
        example: "a string literal, like `cache = \"StaticCache\"`",
        advice: "say what kind of cache holds this, e.g. `cache = \"StaticCache\"`",
        read: |v, key, e| values::text(v, key.name, key.advice, e),
    }
    layers: Value = "layers" {
        place: Declaration,
        form: Count,
        need: Need::UnlessAny(WHOLE_LAYOUTS),
        conflicts: &[],
        example: COUNT,
        advice: GEOMETRY_PARTS,
        read: |v, key, e| values::count(v, key.name, e),
    }
    kv_heads: Value = "kv_heads" {
        place: Declaration,
        form: Count,
        need: Need::UnlessAny(WHOLE_LAYOUTS),
        conflicts: &[],
        example: COUNT,
        advice: GEOMETRY_PARTS,
        read: |v, key, e| values::count(v, key.name, e),
    }
    head_dim: Value = "head_dim" {
        place: Declaration,
        form: Count,
        need: Need::UnlessAny(WHOLE_LAYOUTS),
        conflicts: &[],
        example: COUNT,
        advice: GEOMETRY_PARTS,
        read: |v, key, e| values::count(v, key.name, e),
    }
    v_head_dim: Value = "v_head_dim" {
        place: Declaration,
        form: Count,
        need: Need::Optional,
        conflicts: &[],
        example: COUNT,
        advice: GEOMETRY_PARTS,
        read: |v, key, e| values::count(v, key.name, e),
    }
    dtype: DTypeValue = "dtype" {
        place: Declaration,
        form: DType,
        need: Need::UnlessAny(&[
            name::geometry,
            name::latent,
            name::state,
            name::tensors,
            name::kv_format,
        ]),
        conflicts: &[],
        example: "a dtype like `bf16`, or an expression of type `kv_core::DType`",
        advice: GEOMETRY_PARTS,
        read: |v, _, e| values::dtype(v, e),
    }
    geometry: Value = "geometry" {
        place: Declaration,
        form: Expression,
        need: Need::Optional,
        conflicts: ATTENTION_PARTS,
        example: "an expression of type `Geometry` or `Result<Geometry, E>` whose error displays itself",
        advice: "give the geometry whole, or its parts",
        read: |v, _, _e| Some(values::expression(v)),
    }
    kv_format: StorageValue = "kv_format" {
        place: Declaration,
        form: Storage,
        need: Need::Optional,
        conflicts: &[],
        example: "a format like `q8_0`, `i4` or `bf16`, or an expression of type `kv_core::Storage`",
        advice: "name how keys and values are stored, e.g. `kv_format = q8_0`",
        read: |v, key, e| values::storage(v, key.name, e),
    }
    v_format: StorageValue = "v_format" {
        place: Declaration,
        form: Storage,
        need: Need::Optional,
        conflicts: &[],
        example: "a format like `q8_0`, `i4` or `bf16`, or an expression of type `kv_core::Storage`",
        advice: "name how values are stored, where it differs from keys",
        read: |v, key, e| values::storage(v, key.name, e),
    }
    latent: Value = "latent" {
        place: Declaration,
        form: Expression,
        need: Need::Optional,
        conflicts: NOT_WITH_LATENT,
        example: "an expression of type `kv_core::Latent`, like `Latent::new(27, 512, 64, DType::BF16)`",
        advice: "an MLA latent has no KV heads or head dims of its own: give `latent = ...` \
                 (layers, kv_lora_rank, rope dim, storage) with `positions`, and no attention parts",
        read: |v, _, _e| Some(values::expression(v)),
    }
    state: Value = "state" {
        place: Declaration,
        form: Expression,
        need: Need::Optional,
        conflicts: NOT_WITH_STATE,
        example: "an expression of type `kv_core::RecurrentState`",
        advice: "recurrent state is per sequence and has no positions or attention geometry: \
                 give `state = ...` (layers and named parts) without them",
        read: |v, _, _e| Some(values::expression(v)),
    }
    tensors: Value = "tensors" {
        place: Declaration,
        form: Expression,
        need: Need::Optional,
        conflicts: NOT_WITH_TENSORS,
        example: "an expression of type `kv_core::Tensors`, like `Tensors::new(&ROPE)`",
        advice: "tensors kept beside the caches (rotary tables, a memo of masks) have their \
                 own shapes and no positions: give `tensors = ...` (named parts) without them",
        read: |v, _, _e| Some(values::expression(v)),
    }
    positions: PositionsValue = "positions" {
        place: Declaration,
        form: Positions,
        need: Need::UnlessAny(&[name::state, name::tensors]),
        conflicts: &[],
        example: "`positions = bounded(N, because = \"...\")` or a policy like `window_minus_one(72)`",
        advice: "say how many positions the cache holds and why, e.g. `positions = bounded(2048, because = \"max_cache_len\")`",
        read: |v, _, e| values::positions(v, e),
    }
    scope: Named = "scope" {
        place: Declaration,
        form: Scope,
        need: Need::Required,
        conflicts: &[],
        example: "one of `invocation`, `request`, `session`, `model`",
        advice: "one of `invocation`, `request`, `session`, `model`",
        read: |v, _, e| values::scope(v, e),
    }
    rows: RowsValue = "rows" {
        place: Declaration,
        form: Rows,
        need: Need::Required,
        conflicts: &[],
        example: "`rows = max_num_seqs` or `rows = fixed(N, because = \"...\")`",
        advice: "`rows = max_num_seqs` or `rows = fixed(N, because = \"...\")`; rows never default to 1, which would silently understate",
        read: |v, _, e| values::rows(v, e),
    }
    only_when: Gate = "only_when" {
        place: Declaration,
        form: Gate,
        need: Need::Optional,
        conflicts: &[],
        example: "`only_when = \"bool_field\"` or `only_when = \"method()\"`",
        advice: "name a bool field, or a `fn(&self) -> bool` as `\"method()\"`, or leave it out",
        read: |v, key, e| values::gate(v, key.name, key.advice, e),
    }
    assumes: LitStr = "assumes" {
        place: Declaration,
        form: Text,
        need: Need::Optional,
        conflicts: &[],
        example: "a string literal, like `assumes = \"one session at a time\"`",
        advice: "say something or leave it out",
        read: |v, key, e| values::text(v, key.name, key.advice, e),
    }
    note: LitStr = "note" {
        place: Declaration,
        form: Text,
        need: Need::Optional,
        conflicts: &[],
        example: "a string literal, like `note = \"one tensor per layer\"`",
        advice: "say something or leave it out",
        read: |v, key, e| values::text(v, key.name, key.advice, e),
    }
    on_host: LitStr = "on_host" {
        place: Declaration,
        form: Text,
        need: Need::Optional,
        conflicts: &[],
        example: "a string literal, like `on_host = \"offloaded to CPU between steps\"`",
        advice: "say why it lives in host memory, or leave it out (device is the default)",
        read: |v, key, e| values::text(v, key.name, key.advice, e),
    }
    whole_on_every_rank: LitStr = "whole_on_every_rank" {
        place: Declaration,
        form: Text,
        need: Need::Optional,
        conflicts: &[],
        example: "a string literal, like `whole_on_every_rank = \"the encoder is not sharded\"`",
        advice: "say why tensor and pipeline parallelism do not divide it, or leave it out",
        read: |v, key, e| values::text(v, key.name, key.advice, e),
    }
    krate: Path = "crate" {
        place: Option,
        form: Path,
        need: Need::Optional,
        conflicts: &[],
        example: "`crate = \"path::to::kv_core\"`",
        advice: "name the path kv-core is reachable at",
        read: |v, key, e| values::krate(v, key.name, key.advice, e),
    }
    transparent: () = "transparent" {
        place: Option,
        form: Flag,
        need: Need::Optional,
        conflicts: &[],
        example: "`#[kv(transparent)]`",
        advice: "",
        read: |_, _, _e| Some(()),
    }
    child: ChildMark = "child" {
        place: Field,
        form: Marker,
        need: Need::Optional,
        conflicts: &[],
        example: "`#[kv(child)]`, or `#[kv(child(with = path))]` for a container kv does not walk",
        advice: "",
        read: |v, _, e| values::child(v, e),
    }
    skip: () = "skip" {
        place: Field,
        form: Flag,
        need: Need::Optional,
        conflicts: &[],
        example: "`#[kv(skip, because = \"...\")]`",
        advice: "",
        read: |_, _, _e| Some(()),
    }
    because: LitStr = "because" {
        place: Field,
        form: Text,
        need: Need::Optional,
        conflicts: &[],
        example: "a string literal, like `because = \"the draft model is reported by its own engine\"`",
        advice: BECAUSE_ADVICE,
        read: |v, key, e| values::text(v, key.name, key.advice, e),
    }
}

impl Key {
    /// `false` for flags and markers like `child`, written without `= value`.
    pub fn takes_value(&self) -> bool {
        !matches!(self.form, Form::Flag | Form::Marker)
    }
}

/// The key named `name`.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|key| key.name == name)
}

/// The names of the keys written in `place`.
pub fn names(place: Place) -> Vec<&'static str> {
    KEYS.iter()
        .filter(|key| key.place == place)
        .map(|key| key.name)
        .collect()
}

/// A key's slot: the key's token once given (so a second one is reported at
/// its own token, as serde_derive's `Attr<T>` does) and its value once read.
/// A key given with an invalid value keeps its token and no value, so it is
/// not also reported missing.
pub struct Attr<T> {
    key: Option<Ident>,
    value: Option<T>,
}

impl<T> Default for Attr<T> {
    fn default() -> Self {
        Attr {
            key: None,
            value: None,
        }
    }
}

impl<T> Attr<T> {
    pub fn key(&self) -> Option<&Ident> {
        self.key.as_ref()
    }

    pub fn get(&self) -> Option<&T> {
        self.value.as_ref()
    }

    /// The value, leaving the key's token.
    pub fn take(&mut self) -> Option<T> {
        self.value.take()
    }
}

/// Fills `slot`, or reports `key` as a duplicate (without reading its value).
fn set<T>(
    slot: &mut Attr<T>,
    key: &Ident,
    errors: &mut Errors,
    read: impl FnOnce(&mut Errors) -> Option<T>,
) {
    if slot.key.is_some() {
        errors.push(key.span(), format!("duplicate key `{key}`"));
        return;
    }
    slot.key = Some(key.clone());
    slot.value = read(errors);
}
