//! llama.cpp's model buffers (`kv_engines::fit::llamacpp`) for GGUF headers
//! written byte by byte here; every figure worked out by hand from
//! llama.cpp's `load_tensors` (llama-model.cpp), `create_tensor`
//! (llama-model-loader.cpp), ggml-alloc.c and ggml-cuda.cu at 0c1e57098.

use std::io::Cursor;

use kv_engines::fit::llamacpp::{load_tensors, Offload, FIT_MARGIN_BYTES};
use kv_engines::gguf::GgufFile;

const F32: u32 = 0;
const F16: u32 = 1;
const Q4_0: u32 = 2;
const Q8_0: u32 = 8;

/// (elements, bytes) per block of the types used here.
fn block(kind: u32) -> (u64, u64) {
    match kind {
        F32 => (1, 4),
        F16 => (1, 2),
        Q4_0 => (32, 18),
        Q8_0 => (32, 34),
        _ => unreachable!(),
    }
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    out.extend((text.len() as u64).to_le_bytes());
    out.extend(text.as_bytes());
}

/// A GGUF v3 file of architecture `arch` with `{arch}.block_count` =
/// `layers` and the tensors given (name, ggml shape, type), laid out as
/// gguf.cpp lays them: each offset where the one before ends, padded to 32.
/// Returns the header and the size the whole file would have.
fn gguf(arch: &str, keys: &[(&str, u32)], tensors: &[(String, Vec<u64>, u32)]) -> (Vec<u8>, u64) {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((1 + keys.len() as u64).to_le_bytes());
    put_str(&mut out, "general.architecture");
    out.extend(8u32.to_le_bytes());
    put_str(&mut out, arch);
    for (key, value) in keys {
        put_str(&mut out, &format!("{arch}.{key}"));
        out.extend(4u32.to_le_bytes());
        out.extend(value.to_le_bytes());
    }
    let mut offset = 0u64;
    for (name, shape, kind) in tensors {
        put_str(&mut out, name);
        out.extend((shape.len() as u32).to_le_bytes());
        for d in shape {
            out.extend(d.to_le_bytes());
        }
        out.extend(kind.to_le_bytes());
        out.extend(offset.to_le_bytes());
        let (per, bytes) = block(*kind);
        let n: u64 = shape.iter().product();
        offset = (offset + n / per * bytes).next_multiple_of(32);
    }
    while !out.len().is_multiple_of(32) {
        out.push(0);
    }
    let size = out.len() as u64 + offset;
    (out, size)
}

fn read(arch: &str, layers: u32, tensors: &[(String, Vec<u64>, u32)]) -> GgufFile {
    read_with(arch, &[("block_count", layers)], tensors)
}

/// With `{arch}.KEY` u32 entries of its own (none: no block_count).
fn read_with(arch: &str, keys: &[(&str, u32)], tensors: &[(String, Vec<u64>, u32)]) -> GgufFile {
    let (header, size) = gguf(arch, keys, tensors);
    GgufFile::read(Cursor::new(header), size, "model.gguf").unwrap()
}

fn t(name: &str, shape: &[u64], kind: u32) -> (String, Vec<u64>, u32) {
    (name.to_owned(), shape.to_vec(), kind)
}

/// Meta-Llama-3-8B-Instruct as `llama-quantize Q8_0` writes it: every
/// matrix q8_0, every norm f32; `output.weight` unless `tied`.
fn llama3_8b_q8_0(tied: bool) -> Vec<(String, Vec<u64>, u32)> {
    let mut v = vec![t("token_embd.weight", &[4096, 128256], Q8_0)];
    for i in 0..32 {
        let b = |s: &str| format!("blk.{i}.{s}");
        v.push(t(&b("attn_norm.weight"), &[4096], F32));
        v.push(t(&b("attn_q.weight"), &[4096, 4096], Q8_0));
        v.push(t(&b("attn_k.weight"), &[4096, 1024], Q8_0));
        v.push(t(&b("attn_v.weight"), &[4096, 1024], Q8_0));
        v.push(t(&b("attn_output.weight"), &[4096, 4096], Q8_0));
        v.push(t(&b("ffn_norm.weight"), &[4096], F32));
        v.push(t(&b("ffn_gate.weight"), &[4096, 14336], Q8_0));
        v.push(t(&b("ffn_up.weight"), &[4096, 14336], Q8_0));
        v.push(t(&b("ffn_down.weight"), &[14336, 4096], Q8_0));
    }
    v.push(t("output_norm.weight", &[4096], F32));
    if !tied {
        v.push(t("output.weight", &[4096, 128256], Q8_0));
    }
    v
}

// One layer: norms 2 x 16,384; q and o 4096 x 4096 / 32 x 34 = 17,825,792
// each; k and v 4096 x 1024 / 32 x 34 = 4,456,448 each; gate, up, down
// 4096 x 14336 / 32 x 34 = 62,390,272 each: 231,768,064 B, every tensor a
// multiple of 128 and every row a multiple of 512 elements.
const LAYER: u64 = 231_768_064;
// token_embd and output: 4096 x 128256 / 32 x 34.
const EMBEDDING: u64 = 558_170_112;

#[test]
fn llama3_8b_q8_0_every_layer_on_the_gpu() {
    let loaded = load_tensors(&read("llama", 32, &llama3_8b_q8_0(false)), &Offload::gpu()).unwrap();
    // 32 layers + output norm + output.
    let gpu = 32 * LAYER + 16_384 + EMBEDDING;
    assert_eq!(gpu, 7_974_764_544);
    assert_eq!(loaded.bytes_in("CUDA0"), gpu);
    // The token embedding stays on the host, mapped from the file.
    assert_eq!(loaded.bytes_in("CPU_Mapped"), EMBEDDING);
    assert_eq!(loaded.gpu_from, 0);
    assert_eq!(loaded.offloaded, 33);
    assert_eq!(
        loaded.lines(),
        [
            "load_tensors: offloading output layer to GPU",
            // llama.cpp's count: min(ngl, n_layer) less the output layer.
            "load_tensors: offloading 31 repeating layers to GPU",
            "load_tensors: offloaded 33/33 layers to GPU",
            // 558,170,112 / 2^20 = 532.3125; 7,974,764,544 / 2^20 = 7605.3276.
            "load_tensors:   CPU_Mapped model buffer size =   532.31 MiB",
            "load_tensors:        CUDA0 model buffer size =  7605.33 MiB",
        ]
    );
}

#[test]
fn a_tied_output_is_a_second_copy_of_the_embedding_on_the_gpu() {
    let file = read("llama", 32, &llama3_8b_q8_0(true));
    let loaded = load_tensors(&file, &Offload::gpu()).unwrap();
    assert_eq!(loaded.bytes_in("CUDA0"), 32 * LAYER + 16_384 + EMBEDDING);
    assert_eq!(loaded.bytes_in("CPU_Mapped"), EMBEDDING);
    // Without mmap the host copy is allocated in pinned memory instead.
    let loaded = load_tensors(&file, &Offload::gpu().no_mmap()).unwrap();
    assert_eq!(loaded.bytes_in("CPU_Mapped"), 0);
    assert_eq!(loaded.bytes_in("CUDA_Host"), EMBEDDING);
    // By buffer-type name: CUDA0 before CUDA_Host.
    assert_eq!(
        loaded.lines()[3..],
        [
            "load_tensors:        CUDA0 model buffer size =  7605.33 MiB",
            "load_tensors:    CUDA_Host model buffer size =   532.31 MiB",
        ]
    );
}

#[test]
fn ngl_counts_the_output_layer_first_then_the_last_layers() {
    // The same model in f16, which llama.cpp's CPU backend keeps as it is:
    // one layer 2 x 16,384 + 2 x 33,554,432 + 2 x 8,388,608 + 3 x
    // 117,440,512 = 436,240,384 B; the embedding 4096 x 128256 x 2 =
    // 1,050,673,152 B.
    const LAYER16: u64 = 436_240_384;
    const EMBEDDING16: u64 = 1_050_673_152;
    let tensors: Vec<_> = llama3_8b_q8_0(false)
        .into_iter()
        .map(|(name, shape, kind)| (name, shape, if kind == Q8_0 { F16 } else { kind }))
        .collect();
    let file = read("llama", 32, &tensors);
    // -ngl 1: the output layer only.
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(1)).unwrap();
    assert_eq!(loaded.bytes_in("CUDA0"), 16_384 + EMBEDDING16);
    assert!(loaded.gpu_from > 0);
    assert_eq!(
        loaded.lines()[..3],
        [
            "load_tensors: offloading output layer to GPU",
            "load_tensors: offloading 0 repeating layers to GPU",
            "load_tensors: offloaded 1/33 layers to GPU",
        ]
    );
    // -ngl 11: the output layer and layers 22 to 31. The host keeps the
    // embedding and layers 0 to 21, one span of the file.
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(11)).unwrap();
    assert_eq!(
        loaded.bytes_in("CUDA0"),
        10 * LAYER16 + 16_384 + EMBEDDING16
    );
    assert_eq!(loaded.bytes_in("CPU_Mapped"), EMBEDDING16 + 22 * LAYER16);
    assert_eq!(loaded.offloaded, 11);
    // -ngl 32: every decoder layer but layer 0.
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(32)).unwrap();
    assert_eq!(
        loaded.bytes_in("CUDA0"),
        31 * LAYER16 + 16_384 + EMBEDDING16
    );
    assert!(loaded.gpu_from > 0);
    // Past n_layer + 1 it is every layer.
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(999)).unwrap();
    assert_eq!(loaded.gpu_from, 0);
    assert_eq!(loaded.offloaded, 33);
    assert_eq!(
        loaded.lines()[1],
        "load_tensors: offloading 31 repeating layers to GPU"
    );
    // -ngl 0: the whole file mapped: 2 x 1,050,673,152 + 32 x 436,240,384
    // + 16,384 = 16,061,054,976 B = 15317.0166 MiB.
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(0)).unwrap();
    assert_eq!(loaded.bytes_in("CUDA0"), 0);
    assert_eq!(
        loaded.lines(),
        [
            "load_tensors: offloading 0 repeating layers to GPU",
            "load_tensors: offloaded 0/33 layers to GPU",
            "load_tensors:   CPU_Mapped model buffer size = 15317.02 MiB",
        ]
    );
}

#[test]
fn cuda_pads_a_quantized_row_to_512_elements_and_each_tensor_to_128_bytes() {
    // A q8_0 matrix of rows of 2,080 elements (65 blocks, 2,210 B), 3 rows:
    // 6,630 B; 2,080 % 512 = 32, so CUDA adds ggml_row_size(q8_0, 480) =
    // 15 blocks = 510 B: 7,140 B, padded to 128: 7,168 B. An f16 matrix of
    // the same shape takes 2,080 x 3 x 2 = 12,480 B, padded: 12,544 B. A
    // 3-element f32 norm: 12 B, padded: 128 B.
    let tensors = [
        t("token_embd.weight", &[2080, 3], F16),
        t("blk.0.attn_q.weight", &[2080, 3], Q8_0),
        t("blk.0.attn_k.weight", &[2080, 3], F16),
        t("blk.0.attn_norm.weight", &[3], F32),
        t("output_norm.weight", &[2080], F32),
    ];
    let loaded = load_tensors(&read("qwen2", 1, &tensors), &Offload::gpu()).unwrap();
    // output_norm 8,320 B (a multiple of 128); the tied output is the f16
    // embedding again: 12,544 B.
    assert_eq!(
        loaded.bytes_in("CUDA0"),
        7_168 + 12_544 + 128 + 8_320 + 12_544
    );
    assert_eq!(loaded.bytes_in("CPU_Mapped"), 12_480);
}

#[test]
fn on_the_host_alone_mmap_maps_the_span_and_no_mmap_allocates_each_tensor() {
    // 2 layers, a tied output, rope_freqs last in the file: a CPU build,
    // every tensor on the host. In the file (offsets padded to 32):
    // token_embd 64 x 10 f16 = 1,280 B at 0; blk.0's norm 64 f32 = 256 B at
    // 1,280 and q 64 x 64 f16 = 8,192 B at 1,536; blk.1's at 9,728 and
    // 9,984; output_norm 256 B at 18,176; rope_freqs 3 f32 = 12 B at 18,432,
    // ending at 18,444.
    let tensors = [
        t("token_embd.weight", &[64, 10], F16),
        t("blk.0.attn_norm.weight", &[64], F32),
        t("blk.0.attn_q.weight", &[64, 64], F16),
        t("blk.1.attn_norm.weight", &[64], F32),
        t("blk.1.attn_q.weight", &[64, 64], F16),
        t("output_norm.weight", &[64], F32),
        t("rope_freqs.weight", &[3], F32),
    ];
    let file = read("llama", 2, &tensors);
    let loaded = load_tensors(&file, &Offload::cpu()).unwrap();
    assert_eq!(loaded.buffers.len(), 1);
    assert_eq!(loaded.bytes_in("CPU_Mapped"), 18_444);
    // A CPU build logs no offloading lines.
    assert_eq!(
        loaded.lines(),
        ["load_tensors:   CPU_Mapped model buffer size =     0.02 MiB"]
    );
    // Allocated: each tensor padded to 32; the tied output and the second
    // layer's rope_freqs are the originals, in the same buffer: 1,280 + 2 x
    // (256 + 8,192) + 256 + 32.
    let loaded = load_tensors(&file, &Offload::cpu().no_mmap()).unwrap();
    assert_eq!(loaded.bytes_in("CPU"), 18_464);
}

#[test]
fn a_duplicate_is_a_copy_only_on_another_device() {
    let tensors = [
        t("token_embd.weight", &[64, 10], F16),
        t("rope_freqs.weight", &[3], F32),
        t("blk.0.attn_q.weight", &[64, 64], F16),
        t("blk.1.attn_q.weight", &[64, 64], F16),
        t("blk.2.attn_q.weight", &[64, 64], F16),
        t("output_norm.weight", &[64], F32),
    ];
    let file = read("llama", 3, &tensors);
    // Every layer on the GPU: rope_freqs once there (12 B padded to 128),
    // 3 x 8,192, the norm 256, the tied output's copy of the embedding
    // 1,280; the host keeps the embedding and nothing else.
    let loaded = load_tensors(&file, &Offload::gpu().no_mmap()).unwrap();
    assert_eq!(loaded.bytes_in("CUDA0"), 128 + 3 * 8_192 + 256 + 1_280);
    assert_eq!(loaded.bytes_in("CUDA_Host"), 1_280);
    // -ngl 2: layer 2 and the output layer on the GPU, with a rope_freqs
    // copy; layers 0 and 1 share the host's, which is allocated once:
    // 1,280 + 32 + 2 x 8,192.
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(2).no_mmap()).unwrap();
    assert_eq!(loaded.bytes_in("CUDA0"), 128 + 8_192 + 256 + 1_280);
    assert_eq!(loaded.bytes_in("CUDA_Host"), 1_280 + 32 + 2 * 8_192);
    // -ngl 1: the output layer alone; no layer, so no rope_freqs, on the GPU.
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(1).no_mmap()).unwrap();
    assert_eq!(loaded.bytes_in("CUDA0"), 256 + 1_280);
}

#[test]
fn names_take_llama_cpps_layers_and_unused_tensors_are_not_loaded() {
    // gemma3's tied output, a per-layer norm, an unused tensor (op none in
    // LLM_TENSOR_INFOS: the loader ignores it), cls.output (the output
    // layer), token_types (the input layer), a suffix-less name.
    let tensors = [
        t("token_embd.weight", &[64, 10], F16),
        t("token_types.weight", &[64, 2], F32),
        t("masked_embd_centroids", &[64], F32),
        t("blk.0.attn_q.weight", &[64, 64], F16),
        t("blk.0.ssm_a", &[64], F32),
        t("output_norm.weight", &[64], F32),
        t("cls.output.weight", &[64, 3], F32),
    ];
    let loaded = load_tensors(&read("gemma3", 1, &tensors), &Offload::gpu().no_mmap()).unwrap();
    // On the GPU: q 8,192, ssm_a 256, output_norm 256, cls.output 768, the
    // embedding's copy 1,280. On the host: the embedding 1,280 and
    // token_types 512; not the unused tensor.
    assert_eq!(loaded.bytes_in("CUDA0"), 8_192 + 256 + 256 + 768 + 1_280);
    assert_eq!(loaded.bytes_in("CUDA_Host"), 1_280 + 512);
    // Mapped, the host's span still runs over the unused tensor between
    // them: token_embd at 0, token_types at 1,280 to 1,792.
    let loaded = load_tensors(&read("gemma3", 1, &tensors), &Offload::gpu()).unwrap();
    assert_eq!(loaded.bytes_in("CPU_Mapped"), 1_792);
}

#[test]
fn what_kv_cannot_place_is_refused_by_name() {
    let base = [
        t("token_embd.weight", &[64, 10], F16),
        t("blk.0.attn_q.weight", &[64, 64], Q4_0),
        t("output_norm.weight", &[64], F32),
    ];
    let file = read("llama", 1, &base);
    // On the GPU a q4_0 weight is plain: 64 x 64 / 32 x 18 = 2,304 B, and
    // rows of 64 elements take a row of 448 more (14 blocks, 252 B): 2,556
    // B, padded to 2,560.
    let loaded = load_tensors(&file, &Offload::gpu()).unwrap();
    assert_eq!(loaded.host_buffers_unlisted, None);
    assert_eq!(loaded.bytes_in("CUDA0"), 2_560 + 256 + 1_280);
    // On the host the CPU backend may repack it: the host's buffers are not
    // listed, its weights are counted (1,280 + 2,304 + 256), and the GPU
    // holds nothing.
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(0)).unwrap();
    let why = loaded.host_buffers_unlisted.clone().unwrap();
    assert!(
        why.contains("tensor `blk.0.attn_q.weight` stays on the host as q4_0"),
        "{why}"
    );
    assert!(why.contains("CPU_REPACK"), "{why}");
    assert!(loaded.buffers.is_empty());
    assert_eq!(loaded.host_weight_bytes, 3_840);
    assert!(loaded.lines().iter().all(|l| !l.contains("buffer size")));
    // The token embedding is read by row, never repacked.
    let file = read(
        "llama",
        1,
        &[t("token_embd.weight", &[64, 10], Q4_0), base[2].clone()],
    );
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(0)).unwrap();
    assert_eq!(loaded.host_buffers_unlisted, None);
    // Names llama.cpp does not give.
    for name in [
        "mm.0.weight",
        "blk.x.attn_q.weight",
        "blk.01.attn_q.weight",
        "blk.0",
    ] {
        let mut tensors = base.to_vec();
        tensors.push(t(name, &[64], F32));
        let e = load_tensors(&read("llama", 1, &tensors), &Offload::gpu())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("tensor `{name}` is not named as any")),
            "{e}"
        );
    }
    // A block past block_count.
    let mut tensors = base.to_vec();
    tensors.push(t("blk.1.attn_q.weight", &[64, 64], F16));
    let e = load_tensors(&read("llama", 1, &tensors), &Offload::gpu())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`blk.1.attn_q.weight` is in block 1, past the 1 blocks"),
        "{e}"
    );
    // A repeating tensor of no block, with the layers split.
    let mut tensors = base.to_vec();
    tensors[1] = t("blk.0.attn_q.weight", &[64, 64], F16);
    tensors.push(t("blk.1.attn_q.weight", &[64, 64], F16));
    tensors.push(t("conv1d.weight", &[64], F32));
    let file = read("llama", 2, &tensors);
    assert!(load_tensors(&file, &Offload::gpu()).is_ok());
    assert!(load_tensors(&file, &Offload::gpu().gpu_layers(0)).is_ok());
    let e = load_tensors(&file, &Offload::gpu().gpu_layers(2))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tensor `conv1d.weight` has no layer of its own"),
        "{e}"
    );
    // No embedding to tie the output to.
    let e = load_tensors(&read("llama", 1, &base[1..]), &Offload::gpu())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("neither `output.weight` nor `token_embd.weight`"),
        "{e}"
    );
    // No block count, none, too many (LLAMA_MAX_LAYERS is 512).
    let e = load_tensors(&read_with("llama", &[], &base), &Offload::gpu())
        .unwrap_err()
        .to_string();
    assert!(e.contains("`llama.block_count` is missing"), "{e}");
    for layers in [0, 513, u32::MAX] {
        let e = load_tensors(&read("llama", layers, &base), &Offload::gpu())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "`llama.block_count` is {layers}; llama.cpp aborts"
            )),
            "{e}"
        );
    }
    assert!(load_tensors(&read("llama", 512, &base), &Offload::gpu()).is_ok());
    // MTP layers in a loader kv has not checked for them.
    let mtp = |arch: &str, n| {
        read_with(
            arch,
            &[("block_count", 2), ("nextn_predict_layers", n)],
            &base,
        )
    };
    let e = load_tensors(&mtp("cohere2moe", 1), &Offload::gpu())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`cohere2moe.nextn_predict_layers` is 1: kv does not know whether"),
        "{e}"
    );
    assert!(load_tensors(&mtp("cohere2moe", 0), &Offload::gpu()).is_ok());
    let e = load_tensors(&mtp("glm4moe", 3), &Offload::gpu())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`glm4moe.nextn_predict_layers` is 3, above the 2 layers"),
        "{e}"
    );
    // As many as the layers: every block skipped (the cache's rules refuse
    // such a model; its weights are still placed).
    let loaded = load_tensors(&mtp("glm4moe", 2), &Offload::gpu()).unwrap();
    assert_eq!(loaded.bytes_in("CUDA0"), 256 + 1_280);
}

#[test]
fn an_mtp_layers_tensors_are_not_loaded() {
    // glm4moe, block_count 3 with 1 MTP layer: block 2's tensors are
    // skipped (TENSOR_SKIP), wherever they are. Every layer on the GPU:
    // blocks 0 and 1 (8,192 each), the norm 256, the tied output 1,280.
    let tensors = [
        t("token_embd.weight", &[64, 10], F16),
        t("blk.0.attn_q.weight", &[64, 64], F16),
        t("blk.1.attn_q.weight", &[64, 64], F16),
        t("blk.2.attn_q.weight", &[64, 64], F16),
        t("blk.2.nextn.eh_proj.weight", &[64, 64], F16),
        t("output_norm.weight", &[64], F32),
    ];
    let file = read_with(
        "glm4moe",
        &[("block_count", 3), ("nextn_predict_layers", 1)],
        &tensors,
    );
    let loaded = load_tensors(&file, &Offload::gpu()).unwrap();
    assert_eq!(loaded.bytes_in("CUDA0"), 2 * 8_192 + 256 + 1_280);
    // The MTP layer still counts among llama.cpp's layers (n_layer_all).
    assert_eq!(
        loaded.lines()[2],
        "load_tensors: offloaded 4/4 layers to GPU"
    );
    // On the host, mapped: the span runs over them to output_norm, 1,280 +
    // 4 x 8,192 + 256; allocated: the embedding, 2 blocks and the norm.
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(0)).unwrap();
    assert_eq!(loaded.bytes_in("CPU_Mapped"), 1_280 + 4 * 8_192 + 256);
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(0).no_mmap()).unwrap();
    assert_eq!(loaded.bytes_in("CUDA_Host"), 1_280 + 2 * 8_192 + 256);
}

#[test]
fn a_tensor_read_lazily_is_refused_where_llama_cpp_reads_it_so() {
    // lazy_read::add: over 4 GiB (4,294,967,296 B), in gemma4 and qwen4exp.
    let table = |elements: u64| {
        vec![
            t("token_embd.weight", &[64, 10], F16),
            t("per_layer_token_embd.weight", &[elements], F32),
            t("blk.0.attn_q.weight", &[64, 64], F16),
            t("output_norm.weight", &[64], F32),
        ]
    };
    let over = table((1 << 30) + 8);
    let e = load_tensors(&read("gemma4", 1, &over), &Offload::gpu())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`per_layer_token_embd.weight` (4294967328 B) is over 4 GiB"),
        "{e}"
    );
    // Exactly 4 GiB is read whole; another architecture reads every
    // tensor whole. Either way the input tensor stays on the host.
    for (arch, tensors) in [("gemma4", table(1 << 30)), ("llama", over)] {
        let loaded = load_tensors(&read(arch, 1, &tensors), &Offload::gpu()).unwrap();
        assert_eq!(loaded.bytes_in("CUDA0"), 8_192 + 256 + 1_280, "{arch}");
    }
}

#[test]
fn a_repeating_tensor_of_no_block_goes_where_every_layer_goes() {
    // conv1d: LLM_TENSOR_LAYER_REPEATING, no block number in its name.
    // The file puts the GPU's tensors first: the host's span starts at
    // token_embd's offset, 8,192 + 256.
    let tensors = [
        t("blk.0.attn_q.weight", &[64, 64], F16),
        t("conv1d.weight", &[64], F32),
        t("token_embd.weight", &[64, 10], F16),
        t("output_norm.weight", &[64], F32),
    ];
    let file = read("llama", 1, &tensors);
    let loaded = load_tensors(&file, &Offload::gpu()).unwrap();
    assert_eq!(loaded.bytes_in("CUDA0"), 8_192 + 256 + 256 + 1_280);
    assert_eq!(loaded.bytes_in("CPU_Mapped"), 1_280);
    // None on the GPU: the host maps the whole file, 8,192 + 256 + 1,280 +
    // 256.
    let loaded = load_tensors(&file, &Offload::gpu().gpu_layers(0)).unwrap();
    assert_eq!(loaded.bytes_in("CUDA0"), 0);
    assert_eq!(loaded.bytes_in("CPU_Mapped"), 9_984);
}

#[test]
fn graniteswitchs_router_layer_counts_among_the_layers() {
    // block_count 2 and the router layer (n_layer_all 3), whose tensors are
    // block 2's: -ngl -1 is 4 layers, the output layer's and 3 others.
    let tensors = [
        t("token_embd.weight", &[64, 10], F16),
        t("blk.0.attn_q.weight", &[64, 64], F16),
        t("blk.2.attn_q.weight", &[64, 64], F16),
        t("output_norm.weight", &[64], F32),
    ];
    let loaded = load_tensors(&read("graniteswitch", 2, &tensors), &Offload::gpu()).unwrap();
    assert_eq!(
        loaded.lines()[..3],
        [
            "load_tensors: offloading output layer to GPU",
            "load_tensors: offloading 2 repeating layers to GPU",
            "load_tensors: offloaded 4/4 layers to GPU",
        ]
    );
    // -ngl 2: the output layer and the router layer.
    let loaded = load_tensors(
        &read("graniteswitch", 2, &tensors),
        &Offload::gpu().gpu_layers(2),
    )
    .unwrap();
    assert_eq!(loaded.gpu_from, 2);
    assert_eq!(loaded.bytes_in("CUDA0"), 8_192 + 256 + 1_280);
    // Another architecture has no block 2 here.
    assert!(load_tensors(&read("granite", 2, &tensors), &Offload::gpu()).is_err());
}

#[test]
fn fits_margin_is_llama_cpps_1024_mib() {
    // common.h: fit_params_target = 1024 * 1024*1024 per device.
    assert_eq!(FIT_MARGIN_BYTES, 1_073_741_824);
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    /// Names llama.cpp gives and names it does not.
    const NAMES: &[&str] = &[
        "token_embd.weight",
        "output.weight",
        "output_norm.weight",
        "rope_freqs.weight",
        "conv1d.weight",
        "token_embd_norm.weight",
        "masked_embd_centroids",
        "cls.output.weight",
        "blk.0.attn_q.weight",
        "blk.1.ffn_down.weight",
        "blk.2.ssm_a",
        "blk.7.attn_k.weight",
        "enc.blk.1.attn_q.weight",
        "blk.4294967296.attn_q.weight",
        "blk.18446744073709551616.attn_q.weight",
        "blk.-1.attn_q.weight",
        "blk.",
        ".",
        "",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the tensors, the block count and -ngl: an answer or an
        /// error, never a panic; and the GPU never holds more with fewer
        /// layers offloaded, nor anything with none.
        #[test]
        fn any_tensor_list_is_placed_or_refused(
            picks in prop::collection::vec(
                (0..NAMES.len(), 1u64..5000, 1u64..3, prop::sample::select(vec![F32, F16, Q4_0, Q8_0])),
                0..12,
            ),
            layers in prop::sample::select(vec![1u32, 3, 8, 512]),
            ngl in 0u32..12,
            mmap in any::<bool>(),
            hostile_names in prop::bool::weighted(0.2),
        ) {
            let mut tensors = Vec::new();
            for (i, (name, ne0, ne1, kind)) in picks.into_iter().enumerate() {
                // ne0 a whole number of blocks; names kept unique.
                let ne0 = if block(kind).0 > 1 { ne0 * 32 } else { ne0 };
                let name = if tensors.iter().any(|(n, _, _): &(String, Vec<u64>, u32)| n == NAMES[name]) {
                    format!("blk.{i}.attn_v.weight")
                } else {
                    NAMES[name].to_owned()
                };
                tensors.push((name, vec![ne0, ne1], kind));
            }
            // Mostly files llama.cpp would load: an embedding first.
            if !hostile_names {
                tensors.retain(|(n, _, _)| !n.starts_with("blk.4") && !n.starts_with("blk.1844")
                    && !n.starts_with("blk.-") && !n.starts_with('.') && !n.is_empty()
                    && n != "blk." && n != "token_embd.weight");
                tensors.insert(0, t("token_embd.weight", &[64, 10], F16));
            }
            let file = read("llama", layers, &tensors);
            let offload = |ngl: Option<u32>| {
                let o = ngl.map_or(Offload::gpu(), |n| Offload::gpu().gpu_layers(n));
                if mmap { o } else { o.no_mmap() }
            };
            let all = load_tensors(&file, &offload(None));
            let some = load_tensors(&file, &offload(Some(ngl)));
            let none = load_tensors(&file, &offload(Some(0)));
            if let (Ok(all), Ok(some)) = (&all, &some) {
                prop_assert!(all.bytes_in("CUDA0") >= some.bytes_in("CUDA0"));
            }
            // A clean list is answered unless a block is past block_count.
            if !hostile_names && tensors.iter().all(|(n, _, _)| !n.starts_with("blk.")
                || n[4..].split('.').next().and_then(|b| b.parse::<u32>().ok()).is_some_and(|b| b < layers))
                && !tensors.iter().any(|(n, _, _)| n.starts_with("enc.blk."))
            {
                prop_assert!(all.is_ok(), "{:?}", all);
            }
            if let Ok(none) = none {
                prop_assert_eq!(none.bytes_in("CUDA0"), 0);
            }
        }
    }
}
