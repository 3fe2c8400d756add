//! llama.cpp's model buffers for a GGUF file, from its tensor infos alone
//! (`llama_model_base::load_tensors` and `llama_model_loader::create_tensor`
//! at [`LLAMACPP_COMMIT`](crate::estimate::llamacpp::LLAMACPP_COMMIT)): which tensors go to the GPU for `-ngl`, the
//! bytes each buffer takes there, and the `load_tensors:` lines llama.cpp
//! logs for them.
//!
//! The rules, one device (CUDA0) or none:
//! - Layer `il` is offloaded when `il >= n_layer + 1 - ngl`; the output layer
//!   (`output`, `output_norm`) counts as layer `n_layer`, the token embedding
//!   never leaves the host (`-ngl -1`, llama.cpp's default, is every layer).
//! - A tied output (no `output.weight`) is the token embedding created again
//!   for the output layer (`TENSOR_DUPLICATED`), and llama's `rope_freqs`
//!   again for each layer: a copy in each buffer other than the
//!   original's, none in the same one.
//! - CUDA allocates each tensor padded to 128 bytes, and a quantized
//!   tensor whose rows are not a multiple of 512 elements one partial row
//!   more (`ggml_backend_cuda_buffer_type_get_alloc_size`).
//! - On the host, mapped (`--load-mode auto`, the default, `mmap` or
//!   `mmap+mlock`) the buffer is the span of the file its tensors cover
//!   (`CPU_Mapped`); otherwise every tensor is allocated, padded to 32 bytes
//!   (`CPU`, or `CUDA_Host` beside a GPU).
//!   A host weight of a type the CPU backend may repack for its SIMD
//!   (`ggml-cpu/repack.cpp`: q4_0, q4_K, ...) would go to a `CPU_REPACK`
//!   buffer that depends on the host's CPU: refused by name.
//!
//! Checked architectures only ([`CHECKED_ARCHITECTURES`]): each creates
//! exactly the file's tensors, plus the copies above.

use serde::Serialize;

use kv_core::KvError;

use crate::gguf::{ggml_tensor_type_named, GgmlTensorType, GgufFile};

/// The architectures whose tensors kv places as llama.cpp does.
pub const CHECKED_ARCHITECTURES: &[&str] = &["llama", "qwen2", "qwen3"];

/// `common/fit.cpp`'s `fit_params_target`: what `--fit` leaves free on
/// each device (1024 MiB).
pub const FIT_MARGIN_BYTES: u64 = 1 << 30;

/// ggml-cuda's `MATRIX_ROW_PADDING`, in elements.
const CUDA_ROW_PADDING: u64 = 512;
/// `ggml_backend_cuda_buffer_type_get_alignment`.
const CUDA_ALIGNMENT: u64 = 128;
/// ggml's `TENSOR_ALIGNMENT`: the CPU and CUDA host buffers'.
const HOST_ALIGNMENT: u64 = 32;

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
    /// Every decoder layer and the output layer on the GPU (the KV cache
    /// follows its layers there).
    pub all_on_gpu: bool,
    /// The buffers, in llama.cpp's order (by buffer-type name).
    pub buffers: Vec<ModelBuffer>,
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

/// Which of llama.cpp's layers a tensor belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layer {
    /// `LLM_TENSOR_LAYER_INPUT`: on the host.
    Input,
    /// `LLM_TENSOR_LAYER_REPEATING`, block `il`.
    Block(u64),
    /// `LLM_TENSOR_LAYER_OUTPUT`: layer `n_layer` for placement.
    Output,
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
    if !CHECKED_ARCHITECTURES.contains(&arch.as_str()) {
        return Err(err(format!(
            "kv places llama.cpp's weights for the {} architectures only, not `{arch}`: others \
             create tensors of their own beside the file's",
            CHECKED_ARCHITECTURES.join(", ")
        )));
    }
    let key = format!("{arch}.block_count");
    let layers = meta
        .get(&key)
        .and_then(|v| v.as_count())
        .filter(|&n| n > 0 && n < u64::from(u32::MAX))
        .ok_or_else(|| err(format!("`{key}` is missing or not a positive count")))?;
    let created = created_tensors(file, &arch, layers, &err)?;
    // llama_model::n_gpu_layers: -1 is every layer and the output one.
    let ngl = offload
        .gpu_layers
        .map_or(layers + 1, u64::from)
        .min(if offload.gpu { u64::MAX } else { 0 });
    let gpu_start = (layers + 1).saturating_sub(ngl);
    let on_gpu = |layer: Layer| match layer {
        Layer::Input => false,
        Layer::Block(il) => il >= gpu_start,
        Layer::Output => layers >= gpu_start,
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
    let mut host_span: Option<(u64, u64)> = None;
    let offsets = file.tensor_offsets();
    // create_tensor: a duplicate in the context (here: the device) that
    // holds its original is the original.
    let mut placed = std::collections::HashSet::new();
    for c in &created {
        let tensor = &tensors[c.file];
        let ty = types[c.file];
        if !placed.insert((c.file, on_gpu(c.layer))) {
            continue;
        }
        if on_gpu(c.layer) {
            let size = cuda_alloc_size(ty, &tensor.shape, tensor.bytes)
                .and_then(|size| pad(size, CUDA_ALIGNMENT))
                .ok_or_else(overflow)?;
            gpu_bytes = gpu_bytes.checked_add(size).ok_or_else(overflow)?;
            continue;
        }
        if c.layer != Layer::Input && REPACKABLE.contains(&ty.name) {
            return Err(err(format!(
                "tensor `{}` stays on the host as {}, which llama.cpp's CPU backend may repack \
                 for the host's SIMD into a CPU_REPACK buffer (ggml-cpu/repack.cpp); kv does \
                 not size that buffer: offload every layer (-ngl -1) or use a type it does not \
                 repack",
                tensor.name, ty.name
            )));
        }
        let start = offsets[c.file];
        let end = start.checked_add(tensor.bytes).ok_or_else(overflow)?;
        host_span = Some(host_span.map_or((start, end), |(s, e)| (s.min(start), e.max(end))));
        let size = pad(tensor.bytes, HOST_ALIGNMENT).ok_or_else(overflow)?;
        host_allocated = host_allocated.checked_add(size).ok_or_else(overflow)?;
    }
    let mut buffers = Vec::new();
    if let Some((start, end)) = host_span {
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
        all_on_gpu: offload.gpu && gpu_start == 0,
        buffers,
        lines,
    })
}

/// Every tensor llama.cpp creates for `file`: each file tensor in its
/// layer, a tied output's duplicate of the token embedding, and llama's
/// `rope_freqs` once per layer.
fn created_tensors(
    file: &GgufFile,
    arch: &str,
    layers: u64,
    err: &dyn Fn(String) -> KvError,
) -> Result<Vec<Created>, KvError> {
    let mut created = Vec::new();
    let mut embedding = None;
    let mut has_output = false;
    for (i, tensor) in file.tensors().iter().enumerate() {
        let name = tensor.name.as_str();
        if name == "rope_freqs.weight" {
            if arch != "llama" {
                return Err(err(format!(
                    "tensor `{name}`: llama.cpp's {arch} loader does not create it, and refuses \
                     a file with a tensor it does not use (wrong number of tensors)"
                )));
            }
            created.extend((0..layers).map(|il| Created {
                file: i,
                layer: Layer::Block(il),
            }));
            continue;
        }
        let layer = layer_of(name, layers).ok_or_else(|| {
            err(format!(
                "tensor `{name}` is not one kv knows the layer of (token_embd, output, \
                 output_norm, rope_freqs, blk.N.* with N below {layers})"
            ))
        })?;
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

/// The layer of a tensor named `name`, by llama.cpp's tensor names.
fn layer_of(name: &str, layers: u64) -> Option<Layer> {
    let base = name.rsplit_once('.').map_or(name, |(base, _)| base);
    match base {
        "token_embd" => return Some(Layer::Input),
        "output" | "output_norm" => return Some(Layer::Output),
        _ => {}
    }
    let rest = name.strip_prefix("blk.")?;
    let (index, _) = rest.split_once('.')?;
    if index.len() > 1 && index.starts_with('0') {
        return None;
    }
    let il = index.parse::<u64>().ok()?;
    (il < layers).then_some(Layer::Block(il))
}

/// `ggml_backend_cuda_buffer_type_get_alloc_size` for a weight.
fn cuda_alloc_size(ty: GgmlTensorType, shape: &[u64], bytes: u64) -> Option<u64> {
    let ne0 = shape.first().copied().unwrap_or(1);
    let rem = ne0 % CUDA_ROW_PADDING;
    if ty.block_elements > 1 && rem != 0 {
        // ne0 is a whole number of blocks (gguf.cpp checks it), and every
        // block size divides 512: ggml_row_size(type, 512 - rem).
        let extra = (CUDA_ROW_PADDING - rem) / ty.block_elements * ty.block_bytes;
        return bytes.checked_add(extra);
    }
    Some(bytes)
}

fn pad(bytes: u64, alignment: u64) -> Option<u64> {
    bytes.checked_next_multiple_of(alignment)
}

/// `%8.2f MiB` of `bytes / 1024.0 / 1024.0`, as llama.cpp prints a buffer.
pub fn buffer_mib(bytes: u64) -> String {
    format!("{:>8.2} MiB", bytes as f64 / 1024.0 / 1024.0)
}
