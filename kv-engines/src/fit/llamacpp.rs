//! llama.cpp's model buffers for a GGUF file, from its tensor infos alone
//! (`llama_model_base::load_tensors` and `llama_model_loader::create_tensor`
//! at [`LLAMACPP_COMMIT`](crate::estimate::llamacpp::LLAMACPP_COMMIT)): which tensors go to the GPU for `-ngl`, the
//! bytes each buffer takes there, and the `load_tensors:` lines llama.cpp
//! logs for them.
//!
//! The rules, one device (CUDA0) or none:
//! - Each tensor's layer is llama.cpp's own (`LLM_TENSOR_INFOS`, by name:
//!   `tensor_names.rs`): input tensors (the token embedding) never leave the
//!   host, block `il`'s (`blk.N.*`) are offloaded when `il >= n_layer + 1 -
//!   ngl`, the output layer's count as layer `n_layer` (`-ngl -1`,
//!   llama.cpp's default, is every layer). A tensor whose op is none is not
//!   loaded.
//! - A tied output (no `output.weight`) is the token embedding created again
//!   for the output layer (`TENSOR_DUPLICATED`), and a `rope_*` table
//!   again for each layer: a copy in each buffer other than the original's,
//!   none in the same one. kv does not check that the architecture's loader
//!   uses every tensor of the file (llama.cpp refuses one with more: wrong
//!   number of tensors).
//! - CUDA allocates each tensor padded to 128 bytes, and a quantized
//!   tensor whose rows are not a multiple of 512 elements one partial row
//!   more (`ggml_backend_cuda_buffer_type_get_alloc_size`).
//! - On the host, mapped (`--load-mode auto`, the default, `mmap` or
//!   `mmap+mlock`) the buffer is the span of the file its tensors cover
//!   (`CPU_Mapped`); otherwise every tensor is allocated, padded to 32 bytes
//!   (`CPU`, or `CUDA_Host` beside a GPU).
//!   A host weight of a type the CPU backend may repack for its SIMD
//!   (`ggml-cpu/repack.cpp`: q4_0, q4_K, ...) goes to a `CPU_REPACK`
//!   buffer that depends on the host's CPU: the host's buffers are then
//!   not listed, and said so; the GPU's are the same either way.
//!
//! An MTP layer's tensors are not loaded (`TENSOR_SKIP`) in the
//! architectures whose loaders skip them unless asked to load them. Refused
//! by name: MTP layers in another architecture, a lazily read tensor (over 4 GiB, in the
//! architectures that mark one), a tensor of a layer llama.cpp's table does
//! not fix when some layers are offloaded and some not.

use serde::Serialize;

use kv_core::KvError;

use crate::estimate::llamacpp::{buffer_mib, CacheDevice, MAX_LAYERS};
use crate::gguf::{ggml_tensor_type_named, GgufFile};

mod tensor_names;

/// `lazy_read::add`: in llama.cpp's default lazy mode, a marked tensor over
/// this is read lazily.
const LAZY_MIN_BYTES: u64 = 4 << 30;
/// The loaders that mark a tensor `TENSOR_READ_LAZY`.
const LAZY_ARCHITECTURES: &[&str] = &["gemma4", "qwen4exp"];

/// The loaders that skip every tensor of their MTP layers (`TENSOR_SKIP`,
/// unless asked to load them): layers from `block_count -
/// nextn_predict_layers` on. Those `model_buffers_registry.py --mtp`
/// checked; cohere2moe, glm5-next, hy_v3 and step35 load some of an MTP
/// layer's tensors, and the loaders that skip without `load_mtp` cannot be
/// built to check: both refused.
const MTP_SKIPPED: &[&str] = &[
    "deepseek2",
    "deepseek32",
    "glm-dsa",
    "glm4moe",
    "mimo2",
    "qwen35",
    "qwen35moe",
    "qwen3next",
];

/// `common/fit.cpp`'s `fit_params_target`: what `--fit` leaves free on
/// each device (1024 MiB).
pub const FIT_MARGIN_BYTES: u64 = 1 << 30;

/// The types `ggml_repack_get_optimal_repack_type` may repack.
const REPACKABLE: &[&str] = &[
    "q1_0", "q4_0", "q4_K", "q5_K", "q6_K", "q2_K", "iq4_nl", "mxfp4", "q8_0",
];

/// Where llama.cpp runs: its `-ngl`, mmap, and whether it has a GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Offload {
    /// `-ngl`: `None` for every layer (`-1`, the default).
    pub gpu_layers: Option<u32>,
    /// Weights on the host mapped from the file (`--load-mode auto`, the
    /// default, `mmap`, `mmap+mlock`) or allocated (`none`, `mlock`, `dio`).
    pub mmap: bool,
    /// A CUDA build with one GPU; `false` for a CPU-only build.
    pub gpu: bool,
}

impl Offload {
    /// One GPU, every layer on it, mmap on: llama.cpp's defaults.
    pub fn gpu() -> Offload {
        Offload {
            gpu_layers: None,
            mmap: true,
            gpu: true,
        }
    }

    /// A CPU-only build.
    pub fn cpu() -> Offload {
        Offload {
            gpu_layers: None,
            mmap: true,
            gpu: false,
        }
    }

    /// `-ngl n`.
    pub fn gpu_layers(mut self, n: u32) -> Offload {
        self.gpu_layers = Some(n);
        self
    }

    /// Host weights allocated, not mapped (`--load-mode none`).
    pub fn no_mmap(mut self) -> Offload {
        self.mmap = false;
        self
    }
}

/// One backend buffer of weights, as `load_tensors` logs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ModelBuffer {
    /// `ggml_backend_buffer_name`: `CUDA0`, `CPU_Mapped`, `CPU`, `CUDA_Host`.
    pub name: &'static str,
    /// `ggml_backend_buffer_get_size`.
    pub bytes: u64,
}

/// The weights' buffers llama.cpp makes for a GGUF file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LoadedModel {
    /// `general.architecture`.
    pub architecture: String,
    /// `{arch}.block_count`.
    pub layers: u64,
    /// Layers offloaded, the output layer counted (`offloaded N/M`).
    pub offloaded: u64,
    /// The first layer on the GPU (`n_layer + 1 - ngl`): 0 when every
    /// layer is, `layers + 1` when none is. A layer's caches follow it.
    pub gpu_from: u64,
    /// The buffers, in llama.cpp's order (by buffer-type name).
    pub buffers: Vec<ModelBuffer>,
    /// The bytes of the weights left on the host, as stored.
    pub host_weight_bytes: u64,
    /// Why the host's buffers are not in [`buffers`](Self::buffers), if
    /// they are not.
    pub host_buffers_unlisted: Option<String>,
    lines: Vec<String>,
}

impl LoadedModel {
    /// Bytes of the buffer named `name` (0 where there is none).
    pub fn bytes_in(&self, name: &str) -> u64 {
        self.buffers
            .iter()
            .filter(|b| b.name == name)
            .map(|b| b.bytes)
            .sum()
    }

    /// `load_tensors:`'s lines for it, as llama.cpp logs them.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }
}

/// A tensor name's layer in llama.cpp's table (`LLM_TENSOR_INFOS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TensorLayer {
    /// `LLM_TENSOR_LAYER_INPUT`.
    Input,
    /// `LLM_TENSOR_LAYER_OUTPUT`.
    Output,
    /// `LLM_TENSOR_LAYER_REPEATING`.
    Repeating,
    /// Its op is `GGML_OP_NONE`: the loader ignores it.
    Unused,
    /// Two entries of one name in different layers.
    Ambiguous,
}

/// Where llama.cpp creates a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layer {
    /// `LLM_TENSOR_LAYER_INPUT`: on the host.
    Input,
    /// `LLM_TENSOR_LAYER_REPEATING`, block `il`.
    Block(u64),
    /// `LLM_TENSOR_LAYER_OUTPUT`: layer `n_layer` for placement.
    Output,
    /// A layer the name does not fix (a repeating tensor without a block
    /// number, a name of two layers): where every layer is, refused between.
    Unfixed,
}

/// One tensor llama.cpp creates: a file tensor, or a copy of one.
struct Created {
    /// Index in the file's tensors.
    file: usize,
    layer: Layer,
}

/// llama.cpp's model buffers for `file` under `offload`.
pub fn load_tensors(file: &GgufFile, offload: &Offload) -> Result<LoadedModel, KvError> {
    let meta = file.metadata();
    let source = meta.source();
    let err = |problem: String| KvError::ConfigFile {
        path: source.to_owned(),
        problem,
    };
    let arch = meta.architecture()?.to_owned();
    let mtp_key = format!("{arch}.nextn_predict_layers");
    let mtp = meta.get(&mtp_key).and_then(|v| v.as_count()).unwrap_or(0);
    if mtp > 0 && !MTP_SKIPPED.contains(&arch.as_str()) {
        return Err(err(format!(
            "`{mtp_key}` is {mtp}: kv does not know whether llama.cpp's {arch} loader loads its \
             MTP layers"
        )));
    }
    let key = format!("{arch}.block_count");
    let layers = meta
        .get(&key)
        .and_then(|v| v.as_count())
        .ok_or_else(|| err(format!("`{key}` is missing or not a count")))?;
    if layers == 0 || layers > MAX_LAYERS {
        return Err(err(format!(
            "`{key}` is {layers}; llama.cpp aborts on a model with other than 1 to {MAX_LAYERS} \
             layers"
        )));
    }
    if mtp > layers {
        return Err(err(format!(
            "`{mtp_key}` is {mtp}, above the {layers} layers of `{key}`; llama.cpp aborts"
        )));
    }
    // n_layer_all: graniteswitch keeps a router layer after the others
    // (granite-switch.cpp: n_layer_all = block_count + 1).
    let layers = layers + u64::from(arch == "graniteswitch");
    let created = created_tensors(file, layers, layers - mtp, &err)?;
    // llama_model::n_gpu_layers: -1 is every layer and the output one.
    let ngl = offload
        .gpu_layers
        .map_or(layers + 1, u64::from)
        .min(if offload.gpu { u64::MAX } else { 0 });
    let gpu_start = (layers + 1).saturating_sub(ngl);
    let partial = gpu_start > 0 && gpu_start <= layers;
    let on_gpu = |layer: Layer| match layer {
        Layer::Input => false,
        Layer::Block(il) => il >= gpu_start,
        Layer::Output => layers >= gpu_start,
        Layer::Unfixed => gpu_start == 0,
    };
    let tensors = file.tensors();
    let types = tensors
        .iter()
        .map(|t| {
            ggml_tensor_type_named(&t.dtype)
                .ok_or_else(|| err(format!("tensor `{}` has type `{}`", t.name, t.dtype)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let overflow = || err("the weights' bytes overflow u64".to_owned());
    let mut gpu_bytes = 0u64;
    let mut host_allocated = 0u64;
    let mut host_weights = 0u64;
    let mut host_span: Option<(u64, u64)> = None;
    let mut repacked = None;
    let offsets = file.tensor_offsets();
    // create_tensor: a duplicate in the context (here: the device) that
    // holds its original is the original.
    let mut placed = std::collections::HashSet::new();
    for c in &created {
        let tensor = &tensors[c.file];
        let ty = types[c.file];
        let block = (ty.block_elements, ty.block_bytes);
        // ne0 is a whole number of blocks (gguf.cpp checks it).
        let ne0 = tensor.shape.first().copied().unwrap_or(1);
        if !placed.insert((c.file, on_gpu(c.layer))) {
            continue;
        }
        if partial && c.layer == Layer::Unfixed {
            return Err(err(format!(
                "tensor `{}` has no layer of its own in llama.cpp's table, and -ngl {ngl} \
                 offloads some layers and not others: kv places it with every layer on the GPU \
                 or none",
                tensor.name
            )));
        }
        if tensor.bytes > LAZY_MIN_BYTES && LAZY_ARCHITECTURES.contains(&arch.as_str()) {
            return Err(err(format!(
                "tensor `{}` ({} B) is over 4 GiB, which llama.cpp's {arch} loader reads lazily \
                 into a buffer of its own; kv does not place that yet",
                tensor.name, tensor.bytes
            )));
        }
        if on_gpu(c.layer) {
            let size = CacheDevice::Cuda
                .alloc_bytes(block, ne0, tensor.bytes)
                .ok_or_else(overflow)?;
            gpu_bytes = gpu_bytes.checked_add(size).ok_or_else(overflow)?;
            continue;
        }
        if c.layer != Layer::Input && REPACKABLE.contains(&ty.name) && repacked.is_none() {
            repacked = Some(format!(
                "tensor `{}` stays on the host as {}, which llama.cpp's CPU backend may repack \
                 for the host's SIMD into a CPU_REPACK buffer (ggml-cpu/repack.cpp): the host's \
                 buffers depend on its CPU and are not listed",
                tensor.name, ty.name
            ));
        }
        host_weights = host_weights
            .checked_add(tensor.bytes)
            .ok_or_else(overflow)?;
        let start = offsets[c.file];
        let end = start.checked_add(tensor.bytes).ok_or_else(overflow)?;
        host_span = Some(host_span.map_or((start, end), |(s, e)| (s.min(start), e.max(end))));
        // The CPU and CUDA host buffers both align to 32.
        let size = CacheDevice::Cpu
            .alloc_bytes(block, ne0, tensor.bytes)
            .ok_or_else(overflow)?;
        host_allocated = host_allocated.checked_add(size).ok_or_else(overflow)?;
    }
    let mut buffers = Vec::new();
    if let Some((start, end)) = host_span.filter(|_| repacked.is_none()) {
        buffers.push(if offload.mmap {
            ModelBuffer {
                name: "CPU_Mapped",
                bytes: end - start,
            }
        } else if offload.gpu {
            ModelBuffer {
                name: "CUDA_Host",
                bytes: host_allocated,
            }
        } else {
            ModelBuffer {
                name: "CPU",
                bytes: host_allocated,
            }
        });
    }
    if gpu_bytes > 0 {
        // By buffer-type name, as ctx_map orders them: CPU, CUDA0, CUDA_Host.
        let at = buffers
            .iter()
            .position(|b| b.name == "CUDA_Host")
            .unwrap_or(buffers.len());
        buffers.insert(
            at,
            ModelBuffer {
                name: "CUDA0",
                bytes: gpu_bytes,
            },
        );
    }
    let offloaded = ngl.min(layers + 1);
    let mut lines = Vec::new();
    if offload.gpu {
        let mut repeating = ngl.min(layers);
        if repeating > 0 {
            lines.push("load_tensors: offloading output layer to GPU".to_owned());
            repeating -= 1;
        }
        lines.push(format!(
            "load_tensors: offloading {repeating} repeating layers to GPU"
        ));
        lines.push(format!(
            "load_tensors: offloaded {offloaded}/{} layers to GPU",
            layers + 1
        ));
    }
    for b in &buffers {
        lines.push(format!(
            "load_tensors: {:>12} model buffer size = {}",
            b.name,
            buffer_mib(b.bytes)
        ));
    }
    Ok(LoadedModel {
        architecture: arch,
        layers,
        offloaded,
        gpu_from: gpu_start,
        buffers,
        host_weight_bytes: host_weights,
        host_buffers_unlisted: repacked,
        lines,
    })
}

/// Every tensor llama.cpp creates for `file`: each file tensor it uses in
/// its layer, a tied output's duplicate of the token embedding, and a
/// `rope_*` table once per layer.
fn created_tensors(
    file: &GgufFile,
    layers: u64,
    trunk: u64,
    err: &dyn Fn(String) -> KvError,
) -> Result<Vec<Created>, KvError> {
    let mut created = Vec::new();
    let mut embedding = None;
    let mut has_output = false;
    for (i, tensor) in file.tensors().iter().enumerate() {
        let name = tensor.name.as_str();
        let (base, table) = table_layer(name).ok_or_else(|| {
            err(format!(
                "tensor `{name}` is not named as any of llama.cpp's (src/llama-arch.cpp)"
            ))
        })?;
        let layer = match table {
            TensorLayer::Unused => continue,
            TensorLayer::Input => Layer::Input,
            TensorLayer::Output => Layer::Output,
            TensorLayer::Ambiguous => Layer::Unfixed,
            TensorLayer::Repeating if base.starts_with("rope_") => {
                // Created in every layer: once on each device that holds a
                // layer. The first layer is the last offloaded, the last
                // the first.
                created.extend([0, layers - 1].map(|il| Created {
                    file: i,
                    layer: Layer::Block(il),
                }));
                continue;
            }
            TensorLayer::Repeating => match block_of(name) {
                // An MTP layer's tensors: TENSOR_SKIP, not loaded.
                Some(il) if il >= trunk && il < layers => continue,
                Some(il) if il < layers => Layer::Block(il),
                Some(il) => {
                    return Err(err(format!(
                        "tensor `{name}` is in block {il}, past the {layers} blocks of \
                         `block_count`"
                    )))
                }
                None => Layer::Unfixed,
            },
        };
        if name == "token_embd.weight" {
            embedding = Some(i);
        }
        has_output |= name == "output.weight";
        created.push(Created { file: i, layer });
    }
    if !has_output {
        let file = embedding.ok_or_else(|| {
            err("neither `output.weight` nor `token_embd.weight` is in the file".to_owned())
        })?;
        created.push(Created {
            file,
            layer: Layer::Output,
        });
    }
    Ok(created)
}

/// The pattern and layer of llama.cpp's table that `name` is, with or
/// without a suffix (`.weight`, `.bias`, ...).
fn table_layer(name: &str) -> Option<(&'static str, TensorLayer)> {
    let base = name.rsplit_once('.').map(|(base, _)| base);
    [Some(name), base]
        .into_iter()
        .flatten()
        .find_map(|candidate| {
            tensor_names::TENSOR_NAMES
                .iter()
                .find(|(pattern, _)| matches(pattern, candidate))
                .copied()
        })
}

/// Whether `name` is `pattern` with each `%d` segment a number as `%d`
/// prints one.
fn matches(pattern: &str, name: &str) -> bool {
    let mut names = name.split('.');
    for part in pattern.split('.') {
        let Some(got) = names.next() else {
            return false;
        };
        let fits = if part == "%d" {
            number(got).is_some()
        } else {
            part == got
        };
        if !fits {
            return false;
        }
    }
    names.next().is_none()
}

/// The block of `blk.N.*`, `enc.blk.N.*` or `dec.blk.N.*`.
fn block_of(name: &str) -> Option<u64> {
    let rest = ["blk.", "enc.blk.", "dec.blk."]
        .iter()
        .find_map(|prefix| name.strip_prefix(prefix))?;
    number(rest.split('.').next()?)
}

/// A decimal number as `%d` prints it: digits, no leading zero.
fn number(text: &str) -> Option<u64> {
    // u64's parser alone would take `+1`; an empty name fails it.
    if !text.bytes().all(|b| b.is_ascii_digit()) || (text.len() > 1 && text.starts_with('0')) {
        return None;
    }
    text.parse().ok()
}
