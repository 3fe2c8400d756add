//! What a llama.cpp context holds, and the lines llama.cpp logs for it
//! (`llama_kv_cache`, `llama_kv_cache_iswa` and `llama_memory_recurrent`
//! constructors), at its own resolution: bytes summed in `size_t`, turned
//! into a `float` of MiB, printed with `%7.2f`.

use serde::Serialize;

use super::ggml_type::GgmlType;

/// One `llama_kv_cache`: K and V tensors of `cells x streams` rows per layer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct KvCache {
    /// `kv_size`: cells per stream.
    pub cells: u64,
    /// Layers with a K/V pair in this cache.
    pub layers: u64,
    /// `n_seq_max`.
    pub seqs: u64,
    /// `n_stream`: 1 when unified, else one per sequence.
    pub streams: u64,
    /// The K type.
    pub type_k: GgmlType,
    /// The V type.
    pub type_v: GgmlType,
    /// Bytes of every layer's K.
    pub k_bytes: u64,
    /// Bytes of every layer's V.
    pub v_bytes: u64,
    /// Without flash attention V is stored transposed, every layer as wide
    /// as the widest (`n_embd_v_gqa_max`); set when that pads some layer.
    pub v_padded_to: Option<u64>,
    /// `n_embd_head_k_all`: the one key length of its layers, 0 without
    /// layers.
    pub head_k_all: i64,
    /// `n_embd_head_v_all`, likewise.
    pub head_v_all: i64,
    /// Whether keys are Hadamard-rotated before quantizing (`attn_rot_k`).
    pub attn_rot_k: bool,
    /// `attn_rot_v`.
    pub attn_rot_v: bool,
    /// Each K and V tensor, for the buffer a device allocates.
    #[serde(skip)]
    pub(crate) tensors: Vec<CacheTensor>,
}

/// One tensor of a cache: its layer and what a backend's `get_alloc_size`
/// reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheTensor {
    /// The layer it belongs to, which decides its device.
    pub(crate) layer: u64,
    pub(crate) ty: GgmlType,
    /// `ne[0]`: a row's elements.
    pub(crate) ne0: u64,
    /// `ggml_nbytes`.
    pub(crate) bytes: u64,
}

/// The device a buffer is on (a cache's, or the weights' in
/// `kv_engines::fit::llamacpp`), as llama.cpp's lines name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheDevice {
    /// The host (`CPU`): 32-byte alignment (ggml's `TENSOR_ALIGNMENT`).
    Cpu,
    /// `CUDA0`: 128-byte alignment, a quantized row not a multiple of 512
    /// elements padded with one partial row (`MATRIX_ROW_PADDING`).
    Cuda,
}

impl CacheDevice {
    /// `ggml_backend_buffer_name`.
    pub fn name(self) -> &'static str {
        match self {
            CacheDevice::Cpu => "CPU",
            CacheDevice::Cuda => "CUDA0",
        }
    }

    /// What the device's buffer type allocates for one tensor of `bytes`
    /// whose rows are `ne0` elements, in blocks of `(elements, bytes)`:
    /// `get_alloc_size`, padded to its alignment. `None` where that
    /// overflows, or a partial row is not whole blocks.
    pub(crate) fn alloc_bytes(self, block: (u64, u64), ne0: u64, bytes: u64) -> Option<u64> {
        let (alignment, row_padding) = match self {
            CacheDevice::Cpu => (32, None),
            CacheDevice::Cuda => (128, Some(512)),
        };
        let (block_elements, block_bytes) = block;
        let mut size = bytes;
        // ggml_is_quantized: blocks of more than one element.
        if let Some(padding) = row_padding.filter(|_| block_elements > 1) {
            let rem = ne0 % padding;
            if rem != 0 {
                // ggml_row_size(type, padding - rem).
                let missing = padding - rem;
                if !missing.is_multiple_of(block_elements) {
                    return None;
                }
                size = size.checked_add((missing / block_elements).checked_mul(block_bytes)?)?;
            }
        }
        size.checked_next_multiple_of(alignment)
    }

    /// `ggml_backend_alloc_ctx_tensors_from_buft`'s size for `tensors`.
    fn buffer_bytes(self, tensors: &[CacheTensor]) -> Option<u64> {
        tensors.iter().try_fold(0u64, |sum, t| {
            let block = (t.ty.block_size(), t.ty.block_bytes());
            sum.checked_add(self.alloc_bytes(block, t.ne0, t.bytes)?)
        })
    }
}

/// `%8.2f MiB` of `bytes / 1024.0 / 1024.0`, as llama.cpp prints a buffer's
/// size.
pub fn buffer_mib(bytes: u64) -> String {
    format!("{:>8.2} MiB", bytes as f64 / 1024.0 / 1024.0)
}

/// Which device each layer's caches are on: llama.cpp puts a layer's
/// caches on the layer's device (`offload_kqv`, the default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CachePlacement {
    /// A CPU-only build: every layer on the host.
    Cpu,
    /// One CUDA GPU holding layer `gpu_from` and every later one
    /// (`n_layer + 1 - ngl`, 0 for every layer); the earlier ones on the
    /// host.
    Cuda {
        /// The first layer on the GPU.
        gpu_from: u64,
    },
}

impl CachePlacement {
    fn device(self, layer: u64) -> CacheDevice {
        match self {
            CachePlacement::Cuda { gpu_from } if layer >= gpu_from => CacheDevice::Cuda,
            _ => CacheDevice::Cpu,
        }
    }

    /// The tensors of `tensors` this placement puts on `device`.
    fn on(self, device: CacheDevice, tensors: &[CacheTensor]) -> Vec<CacheTensor> {
        tensors
            .iter()
            .filter(|t| self.device(t.layer) == device)
            .copied()
            .collect()
    }
}

/// Where `lines` puts each constructor's buffer lines.
#[derive(Clone, Copy)]
pub(super) struct Buffers {
    pub(super) placement: CachePlacement,
}

impl Buffers {
    /// One line for each device that holds some of `tensors`, the host's
    /// first (llama.cpp's contexts are ordered by buffer-type name).
    fn lines(self, out: &mut Vec<String>, constructor: &str, what: &str, tensors: &[CacheTensor]) {
        for device in [CacheDevice::Cpu, CacheDevice::Cuda] {
            let held = self.placement.on(device, tensors);
            // A device with none of its layers makes no buffer.
            if held.is_empty() {
                continue;
            }
            let size = device
                .buffer_bytes(&held)
                .map_or("overflow".to_owned(), |b| {
                    format!("{:>8.2} MiB", b as f64 / 1024.0 / 1024.0)
                });
            out.push(format!(
                "{constructor}: {:>10} {what} buffer size = {size}",
                device.name()
            ));
        }
    }
}

impl KvCache {
    /// K and V bytes together.
    pub fn bytes(&self) -> u64 {
        // Each is at most u64::MAX / 2: checked when they were summed.
        self.k_bytes.saturating_add(self.v_bytes)
    }

    /// The bytes of its buffer on `device` under `placement`; `None` where
    /// they overflow.
    pub fn buffer_bytes(&self, placement: CachePlacement, device: CacheDevice) -> Option<u64> {
        device.buffer_bytes(&placement.on(device, &self.tensors))
    }

    fn lines(&self, out: &mut Vec<String>, buffers: Option<Buffers>) {
        if let Some(width) = self.v_padded_to {
            out.push(format!(
                "llama_kv_cache: the V embeddings have different sizes across layers and FA is \
                 not enabled - padding V cache to {width}"
            ));
        }
        if let Some(buffers) = buffers {
            buffers.lines(out, "llama_kv_cache", "KV", &self.tensors);
        }
        out.push(format!(
            "llama_kv_cache: size = {} MiB ({:>6} cells, {:>3} layers, {:>2}/{} seqs), K ({}): {} \
             MiB, V ({}): {} MiB",
            mib(self.bytes()),
            self.cells,
            self.layers,
            self.seqs,
            self.streams,
            self.type_k,
            mib(self.k_bytes),
            self.type_v,
            mib(self.v_bytes),
        ));
        // llama.cpp's V line names n_embd_head_k_all but prints the V one.
        out.push(format!(
            "llama_kv_cache: attn_rot_k = {}, n_embd_head_k_all = {}",
            u8::from(self.attn_rot_k),
            self.head_k_all
        ));
        out.push(format!(
            "llama_kv_cache: attn_rot_v = {}, n_embd_head_k_all = {}",
            u8::from(self.attn_rot_v),
            self.head_v_all
        ));
    }
}

/// One `llama_memory_recurrent`: R (conv) and S (SSM) state per cell.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RecurrentState {
    /// `mem_size`: one cell per sequence.
    pub cells: u64,
    /// `n_layer()`, as the line prints it: every layer before the MTP ones,
    /// with a state or not.
    pub layers: u64,
    /// Layers with a state (a hybrid's recurrent layers; all of them for
    /// Mamba).
    pub state_layers: u64,
    /// `n_seq_max`.
    pub seqs: u64,
    /// The state type (llama.cpp holds both in f32).
    pub state_type: GgmlType,
    /// Bytes of every layer's R.
    pub r_bytes: u64,
    /// Bytes of every layer's S.
    pub s_bytes: u64,
    /// Bytes of the PLE conv history rows (P: qwen4exp's one PLE layer).
    pub p_bytes: u64,
    /// Each R, S and P tensor, for the buffer a device allocates.
    #[serde(skip)]
    pub(crate) tensors: Vec<CacheTensor>,
}

impl RecurrentState {
    /// R, S and P bytes together.
    pub fn bytes(&self) -> u64 {
        self.r_bytes
            .saturating_add(self.s_bytes)
            .saturating_add(self.p_bytes)
    }

    /// The bytes of its buffer on `device` under `placement`; `None` where
    /// they overflow.
    pub fn buffer_bytes(&self, placement: CachePlacement, device: CacheDevice) -> Option<u64> {
        device.buffer_bytes(&placement.on(device, &self.tensors))
    }

    fn lines(&self, out: &mut Vec<String>, buffers: Option<Buffers>) {
        if let Some(buffers) = buffers {
            buffers.lines(out, "llama_memory_recurrent", "RS", &self.tensors);
        }
        out.push(self.line());
    }

    fn line(&self) -> String {
        // No rollback snapshots (n_rs_seq 0: the default).
        let t = self.state_type;
        format!(
            "llama_memory_recurrent: size = {} MiB ({:>6} cells, {:>3} layers, {:>2} seqs {:>2} \
             rs_seq), R ({t}): {} MiB, S ({t}): {} MiB, P ({t}): {} MiB",
            mib(self.bytes()),
            self.cells,
            self.layers,
            self.seqs,
            0,
            mib(self.r_bytes),
            mib(self.s_bytes),
            mib(self.p_bytes),
        )
    }
}

/// One of deepseek4's compressor states (`llama_dsv4_comp_state`): an f32
/// kv and an f32 score tensor a layer, `n_embd_state x state_size` per
/// stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CompState {
    /// `csa`, `hca` or `lid`, as its lines name it.
    pub name: &'static str,
    /// Tokens compressed into one row.
    pub ratio: u64,
    /// Rows a stream keeps.
    pub state_size: u64,
    /// A row's f32 elements.
    pub n_embd_state: u64,
    /// `n_stream`: one per sequence.
    pub streams: u64,
    /// Layers with a state.
    pub layers: u64,
    /// Bytes of every tensor.
    pub bytes: u64,
    /// Each tensor, for the buffer a device allocates.
    #[serde(skip)]
    pub(crate) tensors: Vec<CacheTensor>,
}

impl CompState {
    /// The bytes of its buffer on `device` under `placement`; `None` where
    /// they overflow.
    pub fn buffer_bytes(&self, placement: CachePlacement, device: CacheDevice) -> Option<u64> {
        device.buffer_bytes(&placement.on(device, &self.tensors))
    }

    fn lines(&self, out: &mut Vec<String>, buffers: Option<Buffers>) {
        let what = format!("DSV4 {} state", self.name);
        if let Some(buffers) = buffers {
            buffers.lines(out, "llama_dsv4_comp_state", &what, &self.tensors);
        }
        // total_size(): its buffers' sizes, on the host without a placement.
        let placement = buffers.map_or(CachePlacement::Cpu, |b| b.placement);
        let size = [CacheDevice::Cpu, CacheDevice::Cuda]
            .into_iter()
            .try_fold(0u64, |sum, device| {
                sum.checked_add(self.buffer_bytes(placement, device)?)
            })
            .map_or("overflow".to_owned(), |b| {
                format!("{:>7.2}", b as f64 / 1024.0 / 1024.0)
            });
        out.push(format!(
            "llama_dsv4_comp_state: {} ratio = {}, state = {} x {}, streams = {}, rs_seq = 0, \
             layers = {}, size = {size} MiB",
            self.name, self.ratio, self.state_size, self.n_embd_state, self.streams, self.layers
        ));
    }
}

/// The memory module llama.cpp builds for the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Memory {
    /// `llama_kv_cache`: one cache, every layer full length.
    KvCache {
        /// The cache.
        cache: KvCache,
    },
    /// `llama_kv_cache_iswa`: full layers in one cache, sliding ones in a
    /// smaller one.
    Iswa {
        /// The non-SWA cache.
        base: KvCache,
        /// The SWA cache.
        swa: KvCache,
        /// `swa_full`: the SWA cache was made as large as the base one.
        swa_full: bool,
    },
    /// `llama_memory_recurrent`.
    Recurrent {
        /// The state.
        state: RecurrentState,
    },
    /// `llama_kv_cache_dsa` (or `_msa`, as `constructor` says): the main
    /// cache and an indexer key cache.
    Dsa {
        /// `llama_kv_cache_dsa` or `llama_kv_cache_msa`, as llama.cpp logs it.
        constructor: &'static str,
        /// The main (MLA) cache.
        main: KvCache,
        /// The indexer's key cache.
        indexer: KvCache,
    },
    /// `llama_kv_cache_dsa_iswa`: a DSA cache (main and indexer) over the
    /// full layers, a window-sized cache over the sliding ones.
    DsaIswa {
        /// The DSA main cache (full layers).
        main: KvCache,
        /// The DSA indexer cache.
        indexer: KvCache,
        /// The SWA cache.
        swa: KvCache,
        /// `swa_full`.
        swa_full: bool,
    },
    /// `llama_memory_hybrid_idx`: a hybrid with an indexer key cache.
    HybridIdx {
        /// The attention cache.
        attention: KvCache,
        /// The state.
        state: RecurrentState,
        /// The indexer cache (logged by a lambda: `operator()`).
        indexer: KvCache,
    },
    /// `llama_kv_cache_dsv4`: a raw sliding cache of K alone
    /// ([`Memory::Iswa`], one stream a sequence), the CSA and HCA layers'
    /// compressed K, the lightning indexer's keys, and three compressor
    /// states.
    Dsv4 {
        /// The raw cache.
        raw: Box<Memory>,
        /// The CSA compressed cache, and the cells its line logs (before
        /// padding to 256).
        csa: (u64, KvCache),
        /// The HCA compressed cache, likewise.
        hca: (u64, KvCache),
        /// The lightning indexer's key cache, likewise.
        lid: (u64, KvCache),
        /// The CSA, HCA and indexer compressor states.
        states: Vec<CompState>,
    },
    /// `llama_memory_hybrid` (`llama_memory_hybrid_iswa` with a window):
    /// a KV cache for the attention layers, recurrent state for the others.
    Hybrid {
        /// The attention cache: [`Memory::KvCache`] or [`Memory::Iswa`].
        attention: Box<Memory>,
        /// The state.
        state: RecurrentState,
    },
}

impl Memory {
    /// Every byte the memory module holds.
    pub fn bytes(&self) -> u64 {
        match self {
            Memory::KvCache { cache } => cache.bytes(),
            Memory::Iswa { base, swa, .. } => base.bytes().saturating_add(swa.bytes()),
            Memory::Recurrent { state } => state.bytes(),
            Memory::Dsa { main, indexer, .. } => main.bytes().saturating_add(indexer.bytes()),
            Memory::HybridIdx {
                attention,
                state,
                indexer,
            } => attention
                .bytes()
                .saturating_add(state.bytes())
                .saturating_add(indexer.bytes()),
            Memory::DsaIswa {
                main, indexer, swa, ..
            } => main
                .bytes()
                .saturating_add(indexer.bytes())
                .saturating_add(swa.bytes()),
            Memory::Hybrid { attention, state } => attention.bytes().saturating_add(state.bytes()),
            Memory::Dsv4 {
                raw,
                csa,
                hca,
                lid,
                states,
            } => states.iter().fold(
                raw.bytes()
                    .saturating_add(csa.1.bytes())
                    .saturating_add(hca.1.bytes())
                    .saturating_add(lid.1.bytes()),
                |sum, state| sum.saturating_add(state.bytes),
            ),
        }
    }

    /// Every byte, or `None` where the sum overflows a `u64`.
    pub(super) fn checked_bytes(&self) -> Option<u64> {
        match self {
            Memory::KvCache { cache } => cache.k_bytes.checked_add(cache.v_bytes),
            Memory::Iswa { base, swa, .. } => base
                .k_bytes
                .checked_add(base.v_bytes)?
                .checked_add(swa.k_bytes)?
                .checked_add(swa.v_bytes),
            Memory::Recurrent { state } => state
                .r_bytes
                .checked_add(state.s_bytes)?
                .checked_add(state.p_bytes),
            Memory::DsaIswa {
                main, indexer, swa, ..
            } => [main, indexer, swa].iter().try_fold(0u64, |sum, c| {
                sum.checked_add(c.k_bytes)?.checked_add(c.v_bytes)
            }),
            Memory::HybridIdx {
                attention,
                state,
                indexer,
            } => attention
                .k_bytes
                .checked_add(attention.v_bytes)?
                .checked_add(state.r_bytes)?
                .checked_add(state.s_bytes)?
                .checked_add(state.p_bytes)?
                .checked_add(indexer.k_bytes)?
                .checked_add(indexer.v_bytes),
            Memory::Dsa { main, indexer, .. } => main
                .k_bytes
                .checked_add(main.v_bytes)?
                .checked_add(indexer.k_bytes)?
                .checked_add(indexer.v_bytes),
            Memory::Hybrid { attention, state } => attention
                .checked_bytes()?
                .checked_add(state.r_bytes)?
                .checked_add(state.s_bytes)?
                .checked_add(state.p_bytes),
            Memory::Dsv4 {
                raw,
                csa,
                hca,
                lid,
                states,
            } => {
                let caches = [csa, hca, lid]
                    .iter()
                    .try_fold(raw.checked_bytes()?, |sum, c| {
                        sum.checked_add(c.1.k_bytes)?.checked_add(c.1.v_bytes)
                    })?;
                states
                    .iter()
                    .try_fold(caches, |sum, state| sum.checked_add(state.bytes))
            }
        }
    }

    /// The bytes of every cache and state in it on `device`.
    pub(super) fn buffer_bytes(
        &self,
        placement: CachePlacement,
        device: CacheDevice,
    ) -> Option<u64> {
        let parts: Vec<Option<u64>> = match self {
            Memory::KvCache { cache } => vec![cache.buffer_bytes(placement, device)],
            Memory::Iswa { base, swa, .. } => {
                vec![
                    base.buffer_bytes(placement, device),
                    swa.buffer_bytes(placement, device),
                ]
            }
            Memory::Recurrent { state } => vec![state.buffer_bytes(placement, device)],
            Memory::Dsa { main, indexer, .. } => {
                vec![
                    main.buffer_bytes(placement, device),
                    indexer.buffer_bytes(placement, device),
                ]
            }
            Memory::DsaIswa {
                main, indexer, swa, ..
            } => vec![
                main.buffer_bytes(placement, device),
                indexer.buffer_bytes(placement, device),
                swa.buffer_bytes(placement, device),
            ],
            Memory::HybridIdx {
                attention,
                state,
                indexer,
            } => vec![
                attention.buffer_bytes(placement, device),
                state.buffer_bytes(placement, device),
                indexer.buffer_bytes(placement, device),
            ],
            Memory::Hybrid { attention, state } => {
                vec![
                    attention.buffer_bytes(placement, device),
                    state.buffer_bytes(placement, device),
                ]
            }
            Memory::Dsv4 {
                raw,
                csa,
                hca,
                lid,
                states,
            } => [raw.buffer_bytes(placement, device)]
                .into_iter()
                .chain([csa, hca, lid].map(|c| c.1.buffer_bytes(placement, device)))
                .chain(states.iter().map(|s| s.buffer_bytes(placement, device)))
                .collect(),
        };
        parts
            .into_iter()
            .try_fold(0u64, |sum, part| sum.checked_add(part?))
    }

    /// llama.cpp's lines for it, in its order; each constructor's buffer
    /// line before its size line where `buffers` is given.
    pub(super) fn lines(&self, out: &mut Vec<String>, buffers: Option<Buffers>) {
        match self {
            Memory::KvCache { cache } => cache.lines(out, buffers),
            Memory::Iswa {
                base,
                swa,
                swa_full,
            } => {
                if *swa_full {
                    out.push(
                        "llama_kv_cache_iswa: using full-size SWA cache (ref: \
                         https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)"
                            .to_owned(),
                    );
                }
                out.push(format!(
                    "llama_kv_cache_iswa: creating non-SWA KV cache, size = {} cells",
                    base.cells
                ));
                base.lines(out, buffers);
                out.push(format!(
                    "llama_kv_cache_iswa: creating     SWA KV cache, size = {} cells",
                    swa.cells
                ));
                swa.lines(out, buffers);
            }
            Memory::Recurrent { state } => state.lines(out, buffers),
            Memory::HybridIdx {
                attention,
                state,
                indexer,
            } => {
                attention.lines(out, buffers);
                state.lines(out, buffers);
                // Logged from a lambda, so __func__ is "operator()".
                out.push(format!(
                    "operator(): creating indexer KV cache, size = {} cells",
                    indexer.cells
                ));
                indexer.lines(out, buffers);
            }
            Memory::DsaIswa {
                main,
                indexer,
                swa,
                swa_full,
            } => {
                let tag = "llama_kv_cache_dsa_iswa";
                if *swa_full {
                    out.push(format!(
                        "{tag}: using full-size SWA cache (ref: \
                         https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055)"
                    ));
                }
                out.push(format!(
                    "{tag}: creating DSA KV cache, size = {} cells",
                    main.cells
                ));
                Memory::Dsa {
                    constructor: "llama_kv_cache_dsa",
                    main: main.clone(),
                    indexer: indexer.clone(),
                }
                .lines(out, buffers);
                out.push(format!(
                    "{tag}: creating SWA KV cache, size = {} cells",
                    swa.cells
                ));
                swa.lines(out, buffers);
            }
            Memory::Dsa {
                constructor,
                main,
                indexer,
            } => {
                out.push(format!(
                    "{constructor}: creating main KV cache, size = {} cells",
                    main.cells
                ));
                main.lines(out, buffers);
                out.push(format!(
                    "{constructor}: creating indexer KV cache, size = {} cells",
                    indexer.cells
                ));
                indexer.lines(out, buffers);
            }
            Memory::Hybrid { attention, state } => {
                attention.lines(out, buffers);
                state.lines(out, buffers);
            }
            Memory::Dsv4 {
                raw,
                csa,
                hca,
                lid,
                states,
            } => {
                let tag = "llama_kv_cache_dsv4";
                out.push(format!("{tag}: creating DSV4 raw KV cache"));
                raw.lines(out, buffers);
                for ((logged, cache), what) in [
                    (csa, "CSA compressed"),
                    (hca, "HCA compressed"),
                    (lid, "lightning-indexer"),
                ] {
                    out.push(format!(
                        "{tag}: creating DSV4 {what} KV cache, size = {logged} cells"
                    ));
                    cache.lines(out, buffers);
                }
                for (state, what) in states.iter().zip(["CSA", "HCA", "lightning-indexer"]) {
                    out.push(format!("{tag}: creating DSV4 {what} compressor state"));
                    state.lines(out, buffers);
                }
            }
        }
    }
}

/// `%7.2f` of `(float) bytes / (1024.0f * 1024.0f)`: the count rounded to
/// the nearest `float` first (24 bits of mantissa), then printed exactly to
/// two decimals with ties to even, as glibc prints.
pub fn mib(bytes: u64) -> String {
    // `as f32` rounds to nearest, ties to even, as C's conversion does; the
    // float is a whole number, held exactly in a u128 (2^64 included).
    let rounded = bytes as f32 as u128;
    let hundredths = rounded * 100;
    let (mut whole, rest) = (hundredths >> 20, hundredths & 0xF_FFFF);
    let half = 1 << 19;
    if rest > half || (rest == half && whole % 2 == 1) {
        whole += 1;
    }
    format!("{:>7}", format!("{}.{:02}", whole / 100, whole % 100))
}
