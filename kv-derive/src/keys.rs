//! The one table of `#[kv(...)]` keys, the slots they fill, and the tables of
//! dtype and scope names. Adding a key: one entry in [`KEYS`] with its slot in
//! [`Attrs`], its reader in `read.rs` (unless an existing one fits: `text`,
//! `count`), its expansion in `expand.rs` (an optional key is read there from
//! its slot; a required one also gets a field in `valid::ValidDecl`), its row
//! in the derive's docs (kv-core/src/lib.rs) and a ui case. Everything else
//! (the walk, duplicate, missing and conflicting keys, suggestions, the fuzz
//! mutations' key list) reads this table.

use proc_macro2::{Ident, TokenStream};
use syn::{LitStr, Path};

use crate::read::{self, DTypeValue, Gate, Named, PositionsValue, RowsValue, StorageValue, Value};
use crate::Errors;

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

/// One key: everything the derive knows about it, in one place.
pub struct Key {
    pub name: &'static str,
    pub place: Place,
    /// `false` for flags like `child`, written without `= value`.
    pub takes_value: bool,
    pub need: Need,
    /// Keys that cannot be given together with this one.
    pub conflicts: &'static [&'static str],
    /// A valid value, shown when the value is absent.
    pub example: &'static str,
    /// What to write, shown when the key is blank or missing.
    pub advice: &'static str,
    /// Reads the value (empty for flags) into the key's slot.
    pub read: fn(&mut Attrs, &Ident, TokenStream, &mut Errors),
    /// The key's token, when given.
    pub given: fn(&Attrs) -> Option<&Ident>,
}

const GEOMETRY_PARTS: &str =
    "give `layers`, `kv_heads`, `head_dim` and `dtype`, or `geometry = ...` whole \
     (or `latent = ...` for an MLA latent, `state = ...` for recurrent state)";
/// The keys that replace the attention geometry's parts.
const WHOLE_LAYOUTS: &[&str] = &["geometry", "latent", "state"];
/// The attention geometry's parts and formats.
const ATTENTION_PARTS: &[&str] = &[
    "layers",
    "kv_heads",
    "head_dim",
    "v_head_dim",
    "dtype",
    "kv_format",
    "v_format",
];
/// What a blank `because` needs, in `skip` and in `bounded(..)` / `fixed(..)`.
pub const BECAUSE_ADVICE: &str = "say why, or the value cannot be reviewed";
const COUNT: &str = "a positive integer, a const expression, or an expression on `self`";

/// Every key of `#[kv(...)]`.
pub const KEYS: &[Key] = &[
    Key {
        name: "name",
        place: Place::Declaration,
        takes_value: true,
        need: Need::UnlessNamedField,
        conflicts: &[],
        example: "a string literal, like `name = \"retained\"`",
        advice: "name the declaration",
        read: |a, k, v, e| set(&mut a.name, k, e, |e| read::text(v, "name", e)),
        given: |a| a.name.key(),
    },
    Key {
        name: "cache",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Required,
        conflicts: &[],
        example: "a string literal, like `cache = \"StaticCache\"`",
        advice: "say what kind of cache holds this, e.g. `cache = \"StaticCache\"`",
        read: |a, k, v, e| set(&mut a.cache, k, e, |e| read::text(v, "cache", e)),
        given: |a| a.cache.key(),
    },
    Key {
        name: "layers",
        place: Place::Declaration,
        takes_value: true,
        need: Need::UnlessAny(WHOLE_LAYOUTS),
        conflicts: &[],
        example: COUNT,
        advice: GEOMETRY_PARTS,
        read: |a, k, v, e| set(&mut a.layers, k, e, |e| read::count(v, "layers", e)),
        given: |a| a.layers.key(),
    },
    Key {
        name: "kv_heads",
        place: Place::Declaration,
        takes_value: true,
        need: Need::UnlessAny(WHOLE_LAYOUTS),
        conflicts: &[],
        example: COUNT,
        advice: GEOMETRY_PARTS,
        read: |a, k, v, e| set(&mut a.kv_heads, k, e, |e| read::count(v, "kv_heads", e)),
        given: |a| a.kv_heads.key(),
    },
    Key {
        name: "head_dim",
        place: Place::Declaration,
        takes_value: true,
        need: Need::UnlessAny(WHOLE_LAYOUTS),
        conflicts: &[],
        example: COUNT,
        advice: GEOMETRY_PARTS,
        read: |a, k, v, e| set(&mut a.head_dim, k, e, |e| read::count(v, "head_dim", e)),
        given: |a| a.head_dim.key(),
    },
    Key {
        name: "v_head_dim",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Optional,
        conflicts: &[],
        example: COUNT,
        advice: GEOMETRY_PARTS,
        read: |a, k, v, e| set(&mut a.v_head_dim, k, e, |e| read::count(v, "v_head_dim", e)),
        given: |a| a.v_head_dim.key(),
    },
    Key {
        name: "dtype",
        place: Place::Declaration,
        takes_value: true,
        need: Need::UnlessAny(&["geometry", "latent", "state", "kv_format"]),
        conflicts: &[],
        example: "a dtype like `bf16`, or an expression of type `kv_core::DType`",
        advice: GEOMETRY_PARTS,
        read: |a, k, v, e| set(&mut a.dtype, k, e, |e| read::dtype(v, e)),
        given: |a| a.dtype.key(),
    },
    Key {
        name: "geometry",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Optional,
        conflicts: ATTENTION_PARTS,
        example: "an expression of type `Geometry` or `Result<Geometry, KvError>`",
        advice: "give the geometry whole, or its parts",
        read: |a, k, v, e| set(&mut a.geometry, k, e, |_| Some(read::expression(v))),
        given: |a| a.geometry.key(),
    },
    Key {
        name: "kv_format",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Optional,
        conflicts: &[],
        example: "a format like `q8_0`, `i4` or `bf16`, or an expression of type `kv_core::Storage`",
        advice: "name how keys and values are stored, e.g. `kv_format = q8_0`",
        read: |a, k, v, e| set(&mut a.kv_format, k, e, |e| read::storage(v, "kv_format", e)),
        given: |a| a.kv_format.key(),
    },
    Key {
        name: "v_format",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Optional,
        conflicts: &[],
        example: "a format like `q8_0`, `i4` or `bf16`, or an expression of type `kv_core::Storage`",
        advice: "name how values are stored, where it differs from keys",
        read: |a, k, v, e| set(&mut a.v_format, k, e, |e| read::storage(v, "v_format", e)),
        given: |a| a.v_format.key(),
    },
    Key {
        name: "latent",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Optional,
        conflicts: ATTENTION_PARTS,
        example: "an expression of type `kv_core::Latent`, like `Latent::new(27, 512, 64, DType::BF16)`",
        advice: "an MLA latent has no KV heads or head dims of its own: give `latent = ...` \
                 (layers, kv_lora_rank, rope dim, storage) with `positions`, and no attention parts",
        read: |a, k, v, e| set(&mut a.latent, k, e, |_| Some(read::expression(v))),
        given: |a| a.latent.key(),
    },
    Key {
        name: "state",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Optional,
        conflicts: &[
            "layers",
            "kv_heads",
            "head_dim",
            "v_head_dim",
            "dtype",
            "kv_format",
            "v_format",
            "latent",
            "positions",
        ],
        example: "an expression of type `kv_core::RecurrentState`",
        advice: "recurrent state is per sequence and has no positions or attention geometry: \
                 give `state = ...` (layers and named parts) without them",
        read: |a, k, v, e| set(&mut a.state, k, e, |_| Some(read::expression(v))),
        given: |a| a.state.key(),
    },
    Key {
        name: "positions",
        place: Place::Declaration,
        takes_value: true,
        need: Need::UnlessAny(&["state"]),
        conflicts: &[],
        example: "`positions = bounded(N, because = \"...\")` or a policy like `window_minus_one(72)`",
        advice: "say how many positions the cache holds and why, e.g. `positions = bounded(2048, because = \"max_cache_len\")`",
        read: |a, k, v, e| set(&mut a.positions, k, e, |e| read::positions(v, e)),
        given: |a| a.positions.key(),
    },
    Key {
        name: "scope",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Required,
        conflicts: &[],
        example: "one of `invocation`, `request`, `session`, `model`",
        advice: "one of `invocation`, `request`, `session`, `model`",
        read: |a, k, v, e| set(&mut a.scope, k, e, |e| read::scope(v, e)),
        given: |a| a.scope.key(),
    },
    Key {
        name: "rows",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Required,
        conflicts: &[],
        example: "`rows = max_num_seqs` or `rows = fixed(N, because = \"...\")`",
        advice: "`rows = max_num_seqs` or `rows = fixed(N, because = \"...\")`; rows never default to 1, which would silently understate",
        read: |a, k, v, e| set(&mut a.rows, k, e, |e| read::rows(v, e)),
        given: |a| a.rows.key(),
    },
    Key {
        name: "only_when",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Optional,
        conflicts: &[],
        example: "`only_when = \"bool_field\"` or `only_when = \"method()\"`",
        advice: "name a bool field, or a `fn(&self) -> bool` as `\"method()\"`, or leave it out",
        read: |a, k, v, e| set(&mut a.only_when, k, e, |e| read::gate(v, e)),
        given: |a| a.only_when.key(),
    },
    Key {
        name: "assumes",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Optional,
        conflicts: &[],
        example: "a string literal, like `assumes = \"one session at a time\"`",
        advice: "say something or leave it out",
        read: |a, k, v, e| set(&mut a.assumes, k, e, |e| read::text(v, "assumes", e)),
        given: |a| a.assumes.key(),
    },
    Key {
        name: "note",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Optional,
        conflicts: &[],
        example: "a string literal, like `note = \"one tensor per layer\"`",
        advice: "say something or leave it out",
        read: |a, k, v, e| set(&mut a.note, k, e, |e| read::text(v, "note", e)),
        given: |a| a.note.key(),
    },
    Key {
        name: "on_host",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Optional,
        conflicts: &[],
        example: "a string literal, like `on_host = \"offloaded to CPU between steps\"`",
        advice: "say why it lives in host memory, or leave it out (device is the default)",
        read: |a, k, v, e| set(&mut a.on_host, k, e, |e| read::text(v, "on_host", e)),
        given: |a| a.on_host.key(),
    },
    Key {
        name: "whole_on_every_rank",
        place: Place::Declaration,
        takes_value: true,
        need: Need::Optional,
        conflicts: &[],
        example: "a string literal, like `whole_on_every_rank = \"the encoder is not sharded\"`",
        advice: "say why tensor and pipeline parallelism do not divide it, or leave it out",
        read: |a, k, v, e| {
            set(&mut a.whole_on_every_rank, k, e, |e| {
                read::text(v, "whole_on_every_rank", e)
            })
        },
        given: |a| a.whole_on_every_rank.key(),
    },
    Key {
        name: "crate",
        place: Place::Option,
        takes_value: true,
        need: Need::Optional,
        conflicts: &[],
        example: "`crate = \"path::to::kv_core\"`",
        advice: "name the path kv-core is reachable at",
        read: |a, k, v, e| set(&mut a.krate, k, e, |e| read::krate(v, e)),
        given: |a| a.krate.key(),
    },
    Key {
        name: "transparent",
        place: Place::Option,
        takes_value: false,
        need: Need::Optional,
        conflicts: &[],
        example: "`#[kv(transparent)]`",
        advice: "",
        read: |a, k, _, e| set(&mut a.transparent, k, e, |_| Some(())),
        given: |a| a.transparent.key(),
    },
    Key {
        name: "child",
        place: Place::Field,
        takes_value: false,
        need: Need::Optional,
        conflicts: &[],
        example: "`#[kv(child)]`",
        advice: "",
        read: |a, k, _, e| set(&mut a.child, k, e, |_| Some(())),
        given: |a| a.child.key(),
    },
    Key {
        name: "skip",
        place: Place::Field,
        takes_value: false,
        need: Need::Optional,
        conflicts: &[],
        example: "`#[kv(skip, because = \"...\")]`",
        advice: "",
        read: |a, k, _, e| set(&mut a.skip, k, e, |_| Some(())),
        given: |a| a.skip.key(),
    },
    Key {
        name: "because",
        place: Place::Field,
        takes_value: true,
        need: Need::Optional,
        conflicts: &[],
        example: "a string literal, like `because = \"the draft model is reported by its own engine\"`",
        advice: BECAUSE_ADVICE,
        read: |a, k, v, e| set(&mut a.because, k, e, |e| read::text(v, "because", e)),
        given: |a| a.because.key(),
    },
];

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

/// Element types by name, with their `DType` variant.
pub const DTYPES: &[(&str, &str)] = &[
    ("f64", "F64"),
    ("f32", "F32"),
    ("f16", "F16"),
    ("bf16", "BF16"),
    ("f8e4m3", "F8E4M3"),
    ("f8e5m2", "F8E5M2"),
    ("i8", "I8"),
    ("u8", "U8"),
    ("i4", "I4"),
    ("i2", "I2"),
    ("f4e2m1", "F4E2M1"),
];

/// llama.cpp-style block formats by name, with their `BlockFormat` constant.
pub const BLOCK_FORMATS: &[(&str, &str)] = &[
    ("q8_0", "Q8_0"),
    ("q4_0", "Q4_0"),
    ("q4_1", "Q4_1"),
    ("q5_0", "Q5_0"),
    ("q5_1", "Q5_1"),
    ("nvfp4", "NVFP4"),
];

/// A position policy: its name in `positions = NAME(..)`, its
/// `PositionPolicy` variant, the field its first (positional) input fills,
/// and the fields of its named inputs.
pub struct Policy {
    pub name: &'static str,
    pub variant: &'static str,
    pub first: &'static str,
    pub named: &'static [&'static str],
}

const VLLM_INPUTS: &[&str] = &["max_num_batched_tokens", "max_model_len", "block_size"];

/// The position policies `positions = ...` takes besides `bounded(..)`.
pub const POLICIES: &[Policy] = &[
    Policy {
        name: "window",
        variant: "Window",
        first: "window",
        named: &[],
    },
    Policy {
        name: "window_minus_one",
        variant: "WindowMinusOne",
        first: "window",
        named: &[],
    },
    Policy {
        name: "window_capped",
        variant: "WindowCapped",
        first: "window",
        named: &["max_cache_len"],
    },
    Policy {
        name: "window_plus_chunk",
        variant: "WindowPlusChunk",
        first: "window",
        named: &["chunk"],
    },
    Policy {
        name: "vllm_sliding_window",
        variant: "VllmSlidingWindow",
        first: "window",
        named: VLLM_INPUTS,
    },
    Policy {
        name: "vllm_chunked_local",
        variant: "VllmChunkedLocal",
        first: "chunk",
        named: VLLM_INPUTS,
    },
    Policy {
        name: "padded",
        variant: "PaddedTo",
        first: "count",
        named: &["multiple"],
    },
    Policy {
        name: "grows_by",
        variant: "GrowsBy",
        first: "count",
        named: &["step"],
    },
];

/// Bytes per element of a whole-byte `DType` variant, for checking literal
/// declarations while expanding; `None` for packed types below 8 bits, which
/// are checked by kv-core's own byte math at compile time instead.
pub const fn dtype_bytes(variant: &str) -> Option<u64> {
    match variant.as_bytes() {
        b"F64" => Some(8),
        b"F32" => Some(4),
        b"F16" | b"BF16" => Some(2),
        b"F8E4M3" | b"F8E5M2" | b"I8" | b"U8" => Some(1),
        _ => None,
    }
}

/// Scopes by name, with their `Scope` variant.
pub const SCOPES: &[(&str, &str)] = &[
    ("invocation", "Invocation"),
    ("request", "Request"),
    ("session", "Session"),
    ("model", "Model"),
];

/// The row drivers `rows = ...` takes.
pub const ROW_DRIVERS: &[&str] = &["max_num_seqs", "fixed"];

/// The first column of a name table.
pub fn column(table: &[(&'static str, &'static str)]) -> Vec<&'static str> {
    table.iter().map(|(name, _)| *name).collect()
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

/// The slots of one `#[kv(...)]` (a declaration), or of all option or child
/// attributes of one struct or field.
#[derive(Default)]
pub struct Attrs {
    pub name: Attr<LitStr>,
    pub cache: Attr<LitStr>,
    pub layers: Attr<Value>,
    pub kv_heads: Attr<Value>,
    pub head_dim: Attr<Value>,
    pub v_head_dim: Attr<Value>,
    pub dtype: Attr<DTypeValue>,
    pub geometry: Attr<Value>,
    pub positions: Attr<PositionsValue>,
    pub kv_format: Attr<StorageValue>,
    pub v_format: Attr<StorageValue>,
    pub latent: Attr<Value>,
    pub state: Attr<Value>,
    pub on_host: Attr<LitStr>,
    pub whole_on_every_rank: Attr<LitStr>,
    pub scope: Attr<Named>,
    pub rows: Attr<RowsValue>,
    pub only_when: Attr<Gate>,
    pub assumes: Attr<LitStr>,
    pub note: Attr<LitStr>,
    pub krate: Attr<Path>,
    pub transparent: Attr<()>,
    pub child: Attr<()>,
    pub skip: Attr<()>,
    pub because: Attr<LitStr>,
    /// Required keys an unknown key was taken for ("did you mean `rows`?"):
    /// not reported missing as well.
    pub suggested: Vec<&'static str>,
}
