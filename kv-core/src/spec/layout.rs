//! What one row of a cache is made of: attention K/V per position, an MLA
//! latent per position, or recurrent state with no positions at all. All byte
//! math is checked `const fn`.

use std::borrow::Cow;

use super::dtype::DType;
use super::positions::Positions;
use super::storage::Storage;
use super::tensors::{TensorShape, Tensors};
use crate::error::Overflow;

/// The shape of one position of an attention K/V cache across its layers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Geometry {
    /// Attention layers that hold a cache.
    pub layers: u64,
    /// Key/value heads per layer (after grouped-query sharing).
    pub kv_heads: u64,
    /// Dimension of one key head.
    pub head_dim: u64,
    /// Dimension of one value head, where it differs from `head_dim`; 0 for
    /// a cache of keys alone (vLLM's `head_size_v` 0: Inkling's conv state
    /// packs every stream into its keys).
    pub v_head_dim: Option<u64>,
    /// How keys are stored.
    pub storage: Storage,
    /// How values are stored, where it differs from keys.
    pub v_storage: Option<Storage>,
    /// The most recent positions kept unquantized, and how: transformers'
    /// `QuantizedCache` keeps `residual_length` (128) positions in the
    /// original dtype beside the quantized rest.
    pub residual: Option<Residual>,
}

/// Positions a quantized cache keeps in another storage (its original dtype).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Residual {
    /// The most recent positions kept this way.
    pub positions: u64,
    /// How they are stored, keys and values alike.
    pub storage: Storage,
}

impl Geometry {
    /// Keys and values of `head_dim` elements of `dtype`.
    pub const fn new(layers: u64, kv_heads: u64, head_dim: u64, dtype: DType) -> Geometry {
        Geometry {
            layers,
            kv_heads,
            head_dim,
            v_head_dim: None,
            storage: Storage::Dense(dtype),
            v_storage: None,
            residual: None,
        }
    }

    /// The same geometry with its most recent `positions` positions stored as
    /// `storage` (keys and values), the rest as the geometry's storage.
    pub const fn with_residual(mut self, positions: u64, storage: Storage) -> Geometry {
        self.residual = Some(Residual { positions, storage });
        self
    }

    /// The same geometry with a separate value head dimension.
    pub const fn with_v_head_dim(mut self, v_head_dim: u64) -> Geometry {
        self.v_head_dim = Some(v_head_dim);
        self
    }

    /// The same geometry with keys and values stored as `storage`.
    pub const fn with_storage(mut self, storage: Storage) -> Geometry {
        self.storage = storage;
        self.v_storage = None;
        self
    }

    /// The same geometry with values stored apart from keys.
    pub const fn with_v_storage(mut self, storage: Storage) -> Geometry {
        self.v_storage = Some(storage);
        self
    }

    /// The same geometry over `layers` layers (one group of a hybrid model).
    pub const fn with_layers(mut self, layers: u64) -> Geometry {
        self.layers = layers;
        self
    }

    /// The value head dimension: `v_head_dim` where given, else `head_dim`.
    pub const fn value_head_dim(&self) -> u64 {
        match self.v_head_dim {
            Some(dim) => dim,
            None => self.head_dim,
        }
    }

    /// How values are stored: `v_storage` where given, else `storage`.
    pub const fn value_storage(&self) -> Storage {
        match self.v_storage {
            Some(storage) => storage,
            None => self.storage,
        }
    }

    /// Bytes of one key head and one value head at one position.
    pub const fn bytes_per_head(&self) -> Result<u64, Overflow> {
        let key = match self.storage.bytes_for(self.head_dim) {
            Ok(bytes) => bytes,
            Err(overflow) => return Err(overflow),
        };
        let value = match self.value_storage().bytes_for(self.value_head_dim()) {
            Ok(bytes) => bytes,
            Err(overflow) => return Err(overflow),
        };
        match key.checked_add(value) {
            Some(bytes) => Ok(bytes),
            None => Err(PER_POSITION),
        }
    }

    /// Bytes one position takes, keys and values, across all layers:
    /// `layers x kv_heads x (K bytes + V bytes per head)`.
    pub const fn bytes_per_position(&self) -> Result<u64, Overflow> {
        let per_head = match self.bytes_per_head() {
            Ok(bytes) => bytes,
            Err(_) => return Err(PER_POSITION),
        };
        let Some(per_layer) = per_head.checked_mul(self.kv_heads) else {
            return Err(PER_POSITION);
        };
        match per_layer.checked_mul(self.layers) {
            Some(bytes) => Ok(bytes),
            None => Err(PER_POSITION),
        }
    }

    /// Bytes one row of `positions` positions takes; with a residual window,
    /// `min(residual, positions)` of them at the residual's storage.
    pub const fn bytes_per_row(&self, positions: u64) -> Result<u64, Overflow> {
        let Some(residual) = self.residual else {
            return per_row(self.bytes_per_position(), positions);
        };
        let kept = if residual.positions < positions {
            residual.positions
        } else {
            positions
        };
        // Bytes per position read storage only, never the residual.
        let unquantized = Geometry {
            storage: residual.storage,
            v_storage: None,
            ..*self
        };
        match (
            per_row(unquantized.bytes_per_position(), kept),
            per_row(self.bytes_per_position(), positions - kept),
        ) {
            (Ok(a), Ok(b)) => match a.checked_add(b) {
                Some(bytes) => Ok(bytes),
                None => Err(Overflow {
                    step: "bytes per row (residual + quantized positions)",
                }),
            },
            (Err(overflow), _) | (_, Err(overflow)) => Err(overflow),
        }
    }
}

const PER_POSITION: Overflow = Overflow::PER_POSITION;

const fn per_row(per_position: Result<u64, Overflow>, positions: u64) -> Result<u64, Overflow> {
    match per_position {
        Ok(bytes) => match bytes.checked_mul(positions) {
            Some(bytes) => Ok(bytes),
            None => Err(Overflow::PER_ROW),
        },
        Err(overflow) => Err(overflow),
    }
}

/// An MLA latent (DeepSeek-V2/V3, Kimi): one vector per position per layer,
/// `kv_lora_rank + qk_rope_head_dim` wide, shared by all heads, with no K/V
/// doubling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Latent {
    /// Layers that hold a latent.
    pub layers: u64,
    /// The compressed KV width (`kv_lora_rank`, 512 in DeepSeek-V2/V3).
    pub kv_lora_rank: u64,
    /// The decoupled RoPE key width (`qk_rope_head_dim`, 64).
    pub rope_dim: u64,
    /// How the compressed part is stored.
    pub storage: Storage,
    /// How the RoPE part is stored, where it differs (vLLM's `fp8_ds_mla`
    /// keeps it in bf16 beside fp8 latents).
    pub rope_storage: Option<Storage>,
}

impl Latent {
    /// A latent of `kv_lora_rank + rope_dim` elements of `dtype`.
    pub const fn new(layers: u64, kv_lora_rank: u64, rope_dim: u64, dtype: DType) -> Latent {
        Latent {
            layers,
            kv_lora_rank,
            rope_dim,
            storage: Storage::Dense(dtype),
            rope_storage: None,
        }
    }

    /// The same latent stored as `storage`, RoPE part included.
    pub const fn with_storage(mut self, storage: Storage) -> Latent {
        self.storage = storage;
        self.rope_storage = None;
        self
    }

    /// The same latent with its RoPE part stored apart.
    pub const fn with_rope_storage(mut self, storage: Storage) -> Latent {
        self.rope_storage = Some(storage);
        self
    }

    /// Bytes one position takes across all layers.
    pub const fn bytes_per_position(&self) -> Result<u64, Overflow> {
        const STEP: Overflow = Overflow {
            step: "bytes per position (layers x (kv_lora_rank + rope_dim) x dtype)",
        };
        let rope_storage = match self.rope_storage {
            Some(storage) => storage,
            None => self.storage,
        };
        let per_layer = match (self.storage, self.rope_storage) {
            // One vector when stored alike: a block may straddle the two parts.
            (storage, None) => match self.kv_lora_rank.checked_add(self.rope_dim) {
                Some(width) => storage.bytes_for(width),
                None => Err(STEP),
            },
            (storage, Some(_)) => match (
                storage.bytes_for(self.kv_lora_rank),
                rope_storage.bytes_for(self.rope_dim),
            ) {
                (Ok(latent), Ok(rope)) => match latent.checked_add(rope) {
                    Some(bytes) => Ok(bytes),
                    None => Err(STEP),
                },
                _ => Err(STEP),
            },
        };
        match per_layer {
            Ok(bytes) => match bytes.checked_mul(self.layers) {
                Some(bytes) => Ok(bytes),
                None => Err(STEP),
            },
            Err(_) => Err(STEP),
        }
    }

    /// Bytes one row of `positions` positions takes.
    pub const fn bytes_per_row(&self, positions: u64) -> Result<u64, Overflow> {
        per_row(self.bytes_per_position(), positions)
    }
}

/// One named tensor of a recurrent state, per layer per sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct StatePart {
    /// `"conv"`, `"ssm"`, ...
    pub name: &'static str,
    /// The tensor's shape; unused trailing dimensions are 1.
    pub shape: [u64; 3],
    /// How its elements are stored.
    pub storage: Storage,
    /// The dimension tensor parallelism splits (heads or channels); `None`
    /// when every rank holds the whole part.
    pub split: Option<usize>,
}

const SHAPE: Overflow = Overflow {
    step: "a recurrent state part's shape",
};

/// A Mamba2 conv state of `positions x (d_inner + 2 x n_groups x d_state)`,
/// split across tensor-parallel ranks by channel.
const fn mamba2_conv(
    d_inner: u64,
    n_groups: u64,
    d_state: u64,
    positions: u64,
    dtype: DType,
) -> Result<StatePart, Overflow> {
    let channels = match n_groups.checked_mul(d_state) {
        Some(groups) => match groups.checked_mul(2) {
            Some(both) => d_inner.checked_add(both),
            None => None,
        },
        None => None,
    };
    match channels {
        Some(channels) => Ok(StatePart::new("conv", [positions, channels, 1], dtype).split_on(1)),
        None => Err(SHAPE),
    }
}

impl StatePart {
    /// A part of `shape` elements of `dtype`.
    pub const fn new(name: &'static str, shape: [u64; 3], dtype: DType) -> StatePart {
        StatePart {
            name,
            shape,
            storage: Storage::Dense(dtype),
            split: None,
        }
    }

    /// The same part with dimension `dim` split across tensor-parallel ranks.
    pub const fn split_on(mut self, dim: usize) -> StatePart {
        self.split = Some(dim);
        self
    }

    /// Mamba1 conv state as transformers' `MambaCache` (and candle's Mamba1
    /// `State`) keep it: `d_inner x d_conv`, the whole kernel. vLLM and
    /// llama.cpp keep one position less: [`StatePart::mamba_conv_vllm`].
    pub const fn mamba_conv_transformers(d_inner: u64, d_conv: u64, dtype: DType) -> StatePart {
        StatePart::conv(d_inner, d_conv, dtype)
    }

    /// Mamba1 conv state as vLLM's `MambaSpec` (and llama.cpp's `r` tensor)
    /// keep it: `d_inner x (d_conv - 1)`, the kernel less the newest input.
    /// transformers keeps the whole kernel: [`StatePart::mamba_conv_transformers`].
    pub const fn mamba_conv_vllm(d_inner: u64, d_conv: u64, dtype: DType) -> StatePart {
        StatePart::conv(d_inner, d_conv.saturating_sub(1), dtype)
    }

    /// Mamba1 SSM state, `d_inner x d_state` (every engine alike).
    pub const fn mamba_ssm(d_inner: u64, d_state: u64, dtype: DType) -> StatePart {
        StatePart::new("ssm", [d_inner, d_state, 1], dtype).split_on(0)
    }

    /// Mamba2 conv state as vLLM's `MambaSpec` (and llama.cpp's `r` tensor)
    /// keep it: `(d_conv - 1) x (d_inner + 2 x n_groups x d_state)`.
    /// transformers and candle keep the whole kernel:
    /// [`StatePart::mamba2_conv_transformers`].
    pub const fn mamba2_conv_vllm(
        d_inner: u64,
        n_groups: u64,
        d_state: u64,
        d_conv: u64,
        dtype: DType,
    ) -> Result<StatePart, Overflow> {
        mamba2_conv(d_inner, n_groups, d_state, d_conv.saturating_sub(1), dtype)
    }

    /// Mamba2 conv state as transformers' `Mamba2Cache` (and candle's Mamba2
    /// `State`) keep it: `d_conv x (d_inner + 2 x n_groups x d_state)`, the
    /// whole kernel. vLLM keeps one position less: [`StatePart::mamba2_conv_vllm`].
    pub const fn mamba2_conv_transformers(
        d_inner: u64,
        n_groups: u64,
        d_state: u64,
        d_conv: u64,
        dtype: DType,
    ) -> Result<StatePart, Overflow> {
        mamba2_conv(d_inner, n_groups, d_state, d_conv, dtype)
    }

    /// Mamba2 SSM state, `heads x head_dim x d_state`.
    pub const fn mamba2_ssm(heads: u64, head_dim: u64, d_state: u64, dtype: DType) -> StatePart {
        StatePart::new("ssm", [heads, head_dim, d_state], dtype).split_on(0)
    }

    /// Gated DeltaNet conv state over `2 x k_heads x k_dim + v_heads x v_dim`
    /// channels and `kernel_positions` positions (`conv_kernel - 1` in vLLM,
    /// `conv_kernel` in transformers).
    pub const fn gated_delta_conv(
        k_heads: u64,
        k_dim: u64,
        v_heads: u64,
        v_dim: u64,
        kernel_positions: u64,
        dtype: DType,
    ) -> Result<StatePart, Overflow> {
        let keys = match k_heads.checked_mul(k_dim) {
            Some(keys) => keys.checked_mul(2),
            None => None,
        };
        let channels = match (keys, v_heads.checked_mul(v_dim)) {
            (Some(keys), Some(values)) => keys.checked_add(values),
            _ => None,
        };
        match channels {
            Some(channels) => {
                Ok(StatePart::new("conv", [channels, kernel_positions, 1], dtype).split_on(0))
            }
            None => Err(SHAPE),
        }
    }

    /// Gated DeltaNet SSM state, `v_heads x v_dim x k_dim`, in f32 as
    /// mistral.rs and transformers keep it; use [`StatePart::with_storage`]
    /// for an engine that keeps it in the model dtype.
    pub const fn gated_delta_ssm(v_heads: u64, v_dim: u64, k_dim: u64) -> StatePart {
        StatePart::new("ssm", [v_heads, v_dim, k_dim], DType::F32).split_on(0)
    }

    /// A convolution state of `channels x positions`, split across
    /// tensor-parallel ranks by channel (the Mamba constructors name their
    /// engine's convention: vLLM keeps `d_conv - 1` positions, transformers
    /// `d_conv`).
    pub const fn conv(channels: u64, positions: u64, dtype: DType) -> StatePart {
        StatePart::new("conv", [channels, positions, 1], dtype).split_on(0)
    }

    /// The same part stored as `storage`.
    pub const fn with_storage(mut self, storage: Storage) -> StatePart {
        self.storage = storage;
        self
    }

    /// Elements in the part.
    pub const fn elements(&self) -> Result<u64, Overflow> {
        match self.shape[0].checked_mul(self.shape[1]) {
            Some(two) => match two.checked_mul(self.shape[2]) {
                Some(all) => Ok(all),
                None => Err(SHAPE),
            },
            None => Err(SHAPE),
        }
    }

    /// Bytes of the part in one layer.
    pub const fn bytes(&self) -> Result<u64, Overflow> {
        match self.elements() {
            Ok(elements) => self.storage.bytes_for(elements),
            Err(overflow) => Err(overflow),
        }
    }
}

/// Recurrent state (Mamba, Mamba2, Gated DeltaNet, RWKV): a fixed set of
/// tensors per layer per sequence, with no positions. `slots` states are
/// kept per sequence: 1, or more where speculative decoding keeps extra
/// states, which must be declared (vLLM keeps `1 + num_speculative_tokens`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RecurrentState {
    /// Layers that hold the state.
    pub layers: u64,
    /// The tensors of one layer.
    pub parts: Cow<'static, [StatePart]>,
    /// States kept per sequence.
    pub slots: u64,
}

impl RecurrentState {
    /// One state of `parts` per layer per sequence.
    pub const fn new(layers: u64, parts: &'static [StatePart]) -> RecurrentState {
        RecurrentState {
            layers,
            parts: Cow::Borrowed(parts),
            slots: 1,
        }
    }

    /// Parts built at run time (from a config).
    pub fn from_parts(layers: u64, parts: Vec<StatePart>) -> RecurrentState {
        RecurrentState {
            layers,
            parts: Cow::Owned(parts),
            slots: 1,
        }
    }

    /// The same state kept `slots` times per sequence.
    pub const fn with_slots(mut self, slots: u64) -> RecurrentState {
        self.slots = slots;
        self
    }

    /// Bytes of one layer's parts.
    pub const fn bytes_per_layer(&self) -> Result<u64, Overflow> {
        let parts: &[StatePart] = match &self.parts {
            Cow::Borrowed(parts) => parts,
            Cow::Owned(parts) => parts.as_slice(),
        };
        let mut total: u64 = 0;
        let mut i = 0;
        while i < parts.len() {
            match parts[i].bytes() {
                Ok(bytes) => match total.checked_add(bytes) {
                    Some(sum) => total = sum,
                    None => return Err(STATE),
                },
                Err(overflow) => return Err(overflow),
            }
            i += 1;
        }
        Ok(total)
    }

    /// Bytes one row (one sequence) takes: `layers x slots x bytes per layer`.
    pub const fn bytes_per_row(&self) -> Result<u64, Overflow> {
        let per_layer = match self.bytes_per_layer() {
            Ok(bytes) => bytes,
            Err(overflow) => return Err(overflow),
        };
        match per_layer.checked_mul(self.layers) {
            Some(bytes) => match bytes.checked_mul(self.slots) {
                Some(bytes) => Ok(bytes),
                None => Err(STATE),
            },
            None => Err(STATE),
        }
    }
}

const STATE: Overflow = Overflow {
    step: "bytes per row (layers x slots x state bytes per layer)",
};

/// What one row of a cache is made of.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// Attention keys and values per position.
    Attention {
        /// Their shape.
        geometry: Geometry,
        /// Positions held and why.
        positions: Positions,
    },
    /// An MLA latent per position.
    Latent {
        /// Its shape.
        latent: Latent,
        /// Positions held and why.
        positions: Positions,
    },
    /// Recurrent state: no positions.
    Recurrent(RecurrentState),
    /// Tensors kept beside the caches (rotary tables, a memo of masks): no
    /// positions, held whole on every rank.
    Tensors(Tensors),
}

/// The key of a storage format's first zero (a block format of no elements or
/// no bytes), named `key`.
const fn storage_zero(storage: Storage, key: &'static str) -> Option<&'static str> {
    match storage {
        Storage::Blocks(format) if format.block_elems() == 0 || format.block_bytes() == 0 => {
            Some(key)
        }
        _ => None,
    }
}

/// The first of `counts` that is zero, by its key.
const fn first_zero_of(counts: &[(&'static str, u64)]) -> Option<&'static str> {
    let mut i = 0;
    while i < counts.len() {
        if counts[i].1 == 0 {
            return Some(counts[i].0);
        }
        i += 1;
    }
    None
}

impl Geometry {
    /// The key of the first zero dimension (`layers`, `kv_heads`,
    /// `head_dim`), if any: a `v_head_dim` of 0 is a cache of keys alone.
    pub(crate) const fn first_zero(&self) -> Option<&'static str> {
        first_zero_of(&[
            ("layers", self.layers),
            ("kv_heads", self.kv_heads),
            ("head_dim", self.head_dim),
        ])
    }
}

impl Layout {
    /// The key of the first count that is zero (a dimension, the positions, a
    /// block format's elements or bytes, a state's parts), if any: the one
    /// walk behind both the derive's compile-time checks and
    /// [`KvSpec::validate`](crate::KvSpec::validate).
    pub(crate) const fn first_zero(&self) -> Option<&'static str> {
        match self {
            Layout::Attention {
                geometry,
                positions,
            } => {
                if let Some(key) = geometry.first_zero() {
                    return Some(key);
                }
                if positions.count == 0 {
                    return Some("positions");
                }
                if let Some(key) = storage_zero(geometry.storage, "kv_format") {
                    return Some(key);
                }
                storage_zero(geometry.value_storage(), "v_format")
            }
            Layout::Latent { latent, positions } => {
                let counts = [
                    ("layers", latent.layers),
                    ("kv_lora_rank", latent.kv_lora_rank),
                    ("rope_dim", latent.rope_dim),
                    ("positions", positions.count),
                ];
                if let Some(key) = first_zero_of(&counts) {
                    return Some(key);
                }
                if let Some(key) = storage_zero(latent.storage, "kv_format") {
                    return Some(key);
                }
                match latent.rope_storage {
                    Some(storage) => storage_zero(storage, "kv_format"),
                    None => None,
                }
            }
            Layout::Recurrent(state) => {
                if let Some(key) =
                    first_zero_of(&[("layers", state.layers), ("slots", state.slots)])
                {
                    return Some(key);
                }
                let parts: &[StatePart] = match &state.parts {
                    Cow::Borrowed(parts) => parts,
                    Cow::Owned(parts) => parts.as_slice(),
                };
                if parts.is_empty() {
                    return Some("state");
                }
                let mut i = 0;
                while i < parts.len() {
                    let shape = parts[i].shape;
                    if shape[0] == 0 || shape[1] == 0 || shape[2] == 0 {
                        return Some("state");
                    }
                    if let Some(key) = storage_zero(parts[i].storage, "state") {
                        return Some(key);
                    }
                    i += 1;
                }
                None
            }
            // Zeros and the rest of what makes tensors invalid: one walk,
            // whose words `KvSpec::validate` reports.
            Layout::Tensors(tensors) => match tensors.first_invalid() {
                Some(_) => Some("tensors"),
                None => None,
            },
        }
    }

    /// `attention`, `mla latent`, `recurrent` or `tensors`.
    pub const fn kind(&self) -> &'static str {
        match self {
            Layout::Attention { .. } => "attention",
            Layout::Latent { .. } => "mla latent",
            Layout::Recurrent(_) => "recurrent",
            Layout::Tensors(_) => "tensors",
        }
    }

    /// Layers that hold this cache; 1 for tensors, which are not per layer.
    pub const fn layers(&self) -> u64 {
        match self {
            Layout::Attention { geometry, .. } => geometry.layers,
            Layout::Latent { latent, .. } => latent.layers,
            Layout::Recurrent(state) => state.layers,
            Layout::Tensors(_) => 1,
        }
    }

    /// The positions, for the kinds that have them.
    pub const fn positions(&self) -> Option<&Positions> {
        match self {
            Layout::Attention { positions, .. } | Layout::Latent { positions, .. } => {
                Some(positions)
            }
            Layout::Recurrent(_) | Layout::Tensors(_) => None,
        }
    }

    /// Bytes one position takes; `None` for recurrent state and tensors.
    pub const fn bytes_per_position(&self) -> Option<Result<u64, Overflow>> {
        match self {
            Layout::Attention { geometry, .. } => Some(geometry.bytes_per_position()),
            Layout::Latent { latent, .. } => Some(latent.bytes_per_position()),
            Layout::Recurrent(_) | Layout::Tensors(_) => None,
        }
    }

    /// Bytes one row takes.
    pub const fn bytes_per_row(&self) -> Result<u64, Overflow> {
        match self {
            Layout::Attention {
                geometry,
                positions,
            } => geometry.bytes_per_row(positions.count),
            Layout::Latent { latent, positions } => latent.bytes_per_row(positions.count),
            Layout::Recurrent(state) => state.bytes_per_row(),
            Layout::Tensors(tensors) => tensors.bytes(),
        }
    }

    /// Every way a vector of this layout rounds up to whole bytes or blocks,
    /// in words; empty when every vector is exact.
    pub fn roundings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut note = |storage: Storage, elements: u64, what: &str| {
            if let Some(text) = storage.rounding(elements) {
                out.push(format!("{what}: {text}"));
            }
        };
        match self {
            Layout::Attention { geometry: g, .. } => {
                note(g.storage, g.head_dim, "keys");
                note(g.value_storage(), g.value_head_dim(), "values");
                if let Some(residual) = g.residual {
                    note(residual.storage, g.head_dim, "residual keys");
                    note(residual.storage, g.value_head_dim(), "residual values");
                }
            }
            Layout::Latent { latent: l, .. } => match l.rope_storage {
                None => note(
                    l.storage,
                    l.kv_lora_rank.saturating_add(l.rope_dim),
                    "latent",
                ),
                Some(rope) => {
                    note(l.storage, l.kv_lora_rank, "latent");
                    note(rope, l.rope_dim, "rope");
                }
            },
            Layout::Recurrent(state) => {
                for part in state.parts.iter() {
                    if let Ok(elements) = part.elements() {
                        note(part.storage, elements, part.name);
                    }
                }
            }
            Layout::Tensors(tensors) => {
                for part in tensors.parts() {
                    if let TensorShape::Fixed { dims, storage } = part.shape {
                        let elements = dims[0].saturating_mul(dims[1]).saturating_mul(dims[2]);
                        note(storage, elements, part.name);
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::storage::BlockFormat;

    #[test]
    fn attention_counts_keys_and_values() {
        // Llama-3-8B: 32 x 8 x (128 + 128) x 2 B = 131,072 B per token.
        let llama = Geometry::new(32, 8, 128, DType::BF16);
        assert_eq!(llama.bytes_per_position(), Ok(131_072));
        let split = Geometry::new(2, 3, 192, DType::BF16).with_v_head_dim(128);
        assert_eq!(split.bytes_per_position(), Ok(2 * 3 * (192 + 128) * 2));
    }

    #[test]
    fn keys_and_values_can_be_stored_apart() {
        // q8_0 keys, f16 values: 128/32 x 34 + 128 x 2 = 136 + 256 per head.
        let g = Geometry::new(1, 1, 128, DType::F16)
            .with_storage(Storage::Blocks(BlockFormat::Q8_0))
            .with_v_storage(Storage::Dense(DType::F16));
        assert_eq!(g.bytes_per_head(), Ok(136 + 256));
        assert_eq!(g.value_storage(), Storage::Dense(DType::F16));
        // with_storage resets a separate value storage.
        let both = g.with_storage(Storage::Dense(DType::U8));
        assert_eq!(both.bytes_per_head(), Ok(256));
    }

    #[test]
    fn a_residual_window_keeps_recent_positions_unquantized() {
        // transformers' QuantizedCache, 4-bit with one bf16 scale and zero per
        // 64 elements (64 x 4 bits + 2 + 2 = 36 B per 64), residual 128 in bf16:
        // at 1000 positions, 128 x (128 + 128) x 2 B + 872 x (2 x 2 x 36) B per head.
        let quanto = Storage::Blocks(BlockFormat::new("quanto int4 g64", 64, 36));
        let g = Geometry::new(1, 1, 128, DType::BF16)
            .with_storage(quanto)
            .with_residual(128, Storage::Dense(DType::BF16));
        assert_eq!(g.bytes_per_row(1000), Ok(128 * 256 * 2 + 872 * 2 * 2 * 36));
        // Fewer positions than the residual: all unquantized.
        assert_eq!(g.bytes_per_row(100), Ok(100 * 256 * 2));
        assert!(Geometry::new(1, 1, 1, DType::U8)
            .with_residual(5, Storage::Dense(DType::F64))
            .bytes_per_row(u64::MAX)
            .is_err());
        // Values stored apart are quantized apart; the residual holds both in bf16.
        let split = Geometry::new(1, 1, 64, DType::BF16)
            .with_storage(Storage::Dense(DType::I4))
            .with_v_storage(Storage::Dense(DType::U8))
            .with_residual(10, Storage::Dense(DType::BF16));
        assert_eq!(split.bytes_per_row(30), Ok(10 * 2 * 128 + 20 * (32 + 64)));
    }

    #[test]
    fn mla_latent_has_no_kv_doubling() {
        // DeepSeek-V2-Lite: 27 layers x 576 x 2 B = 31,104 B per token.
        let lite = Latent::new(27, 512, 64, DType::BF16);
        assert_eq!(lite.bytes_per_position(), Ok(31_104));
        // vLLM fp8_ds_mla: 512 fp8 + 4 f32 scales per 128, + 64 bf16 rope = 656 B.
        let ds = Latent::new(1, 512, 64, DType::BF16)
            .with_storage(Storage::Blocks(BlockFormat::new("fp8_ds_mla", 128, 132)))
            .with_rope_storage(Storage::Dense(DType::BF16));
        assert_eq!(ds.bytes_per_position(), Ok(656));
    }

    #[test]
    fn recurrent_state_is_per_row() {
        // Jamba-v0.1 Mamba layer: d_inner 8192, d_conv 4, d_state 16, f16 conv/ssm:
        // conv 8192 x 4 x 2 + ssm 8192 x 16 x 2 = 65,536 + 262,144 B per layer.
        static JAMBA: [StatePart; 2] = [
            StatePart::mamba_conv_transformers(8192, 4, DType::F16),
            StatePart::mamba_ssm(8192, 16, DType::F16),
        ];
        let state = RecurrentState::new(28, &JAMBA);
        assert_eq!(state.bytes_per_layer(), Ok(65_536 + 262_144));
        assert_eq!(state.bytes_per_row(), Ok(28 * (65_536 + 262_144)));
        let speculative = state.clone().with_slots(3);
        assert_eq!(speculative.bytes_per_row(), Ok(3 * 28 * 327_680));
    }

    #[test]
    fn each_conv_constructor_names_its_engines_convention() {
        // transformers (and candle) keep the whole kernel; vLLM and llama.cpp one less.
        let transformers = StatePart::mamba_conv_transformers(8192, 4, DType::F16);
        let vllm = StatePart::mamba_conv_vllm(8192, 4, DType::F16);
        assert_eq!(transformers.shape, [8192, 4, 1]);
        assert_eq!(vllm.shape, [8192, 3, 1]);
        assert_eq!((transformers.split, vllm.split), (Some(0), Some(0)));
        assert_eq!(
            StatePart::mamba_conv_vllm(8, 0, DType::F16).shape,
            [8, 0, 1]
        );
        let channels = 4096 + 2 * 8 * 128;
        let vllm2 = StatePart::mamba2_conv_vllm(4096, 8, 128, 4, DType::BF16).unwrap();
        let transformers2 =
            StatePart::mamba2_conv_transformers(4096, 8, 128, 4, DType::BF16).unwrap();
        assert_eq!(vllm2.shape, [3, channels, 1]);
        assert_eq!(transformers2.shape, [4, channels, 1]);
        assert_eq!((vllm2.split, transformers2.split), (Some(1), Some(1)));
        assert_eq!(vllm2.name, "conv");
        assert!(StatePart::mamba2_conv_transformers(1, 2, u64::MAX, 4, DType::F32).is_err());
    }

    #[test]
    fn mamba2_and_gated_delta_shapes() {
        // Mamba2: (d_conv - 1) x (d_inner + 2 x n_groups x d_state).
        let conv = StatePart::mamba2_conv_vllm(4096, 8, 128, 4, DType::BF16).unwrap();
        assert_eq!(conv.shape, [3, 4096 + 2 * 8 * 128, 1]);
        let ssm = StatePart::mamba2_ssm(64, 64, 128, DType::F32);
        assert_eq!(ssm.bytes(), Ok(64 * 64 * 128 * 4));
        // Qwen3-Next: ssm 32 x 128 x 128 f32; conv over 2 x 16 x 128 + 32 x 128 channels.
        let gdn = StatePart::gated_delta_ssm(32, 128, 128);
        assert_eq!(gdn.bytes(), Ok(32 * 128 * 128 * 4));
        let gdn_conv = StatePart::gated_delta_conv(16, 128, 32, 128, 3, DType::BF16).unwrap();
        assert_eq!(gdn_conv.elements(), Ok((4096 + 4096) * 3));
        assert!(StatePart::mamba2_conv_vllm(1, u64::MAX, 2, 4, DType::F32).is_err());
        assert!(StatePart::gated_delta_conv(u64::MAX, 2, 1, 1, 1, DType::F32).is_err());
    }

    #[test]
    fn layouts_report_their_kind_layers_and_rows() {
        let attention = Layout::Attention {
            geometry: Geometry::new(8, 16, 64, DType::F32),
            positions: Positions::bounded(71, "sliding_window(72) - 1"),
        };
        assert_eq!(attention.kind(), "attention");
        assert_eq!(attention.layers(), 8);
        assert_eq!(attention.bytes_per_row(), Ok(4_653_056));
        assert_eq!(attention.positions().map(|p| p.count), Some(71));
        let state = Layout::Recurrent(RecurrentState::from_parts(
            2,
            vec![StatePart::new("s", [3, 1, 1], DType::I4)],
        ));
        assert_eq!(state.positions(), None);
        assert_eq!(state.bytes_per_position(), None);
        assert_eq!(state.bytes_per_row(), Ok(4));
        assert_eq!(
            state.roundings(),
            ["s: 3 i4 elements (4 bits each) round up to whole bytes"]
        );
    }

    #[test]
    fn overflow_is_an_error_at_every_step() {
        assert!(Geometry::new(u64::MAX, 2, 2, DType::F32)
            .bytes_per_position()
            .is_err());
        assert!(Geometry::new(1, 1, 1, DType::U8)
            .bytes_per_row(u64::MAX)
            .is_err());
        assert!(Latent::new(u64::MAX, 1, 1, DType::U8)
            .bytes_per_position()
            .is_err());
        let wide =
            RecurrentState::from_parts(u64::MAX, vec![StatePart::new("s", [2, 1, 1], DType::U8)]);
        assert!(wide.bytes_per_row().is_err());
        let shape = StatePart::new("s", [u64::MAX, 2, 1], DType::U8);
        assert!(shape.bytes().is_err());
    }
}
