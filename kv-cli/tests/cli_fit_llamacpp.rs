//! `kv fit --engine llama.cpp MODEL.gguf --gpu NAME`: llama.cpp's model
//! buffers and KV cache on one CUDA GPU for a GGUF file whose data is
//! sparse, and what `--fit`'s 1024 MiB margin leaves for the compute
//! buffer. Figures worked out by hand from llama.cpp 0c1e57098's
//! llama-model.cpp, llama-model-loader.cpp, llama-kv-cache.cpp,
//! ggml-cuda.cu and common/fit.cpp.

use std::fs;
use std::path::Path;

use serde_json::Value;

mod support;
use support::*;

fn put_str(out: &mut Vec<u8>, text: &str) {
    out.extend((text.len() as u64).to_le_bytes());
    out.extend(text.as_bytes());
}

/// Meta-Llama-3-8B-Instruct quantized to `kind` (8: q8_0, 1: f16) as
/// llama-quantize writes it (norms f32), with its cache geometry (32 layers,
/// 8 KV heads of 128, 8,192 positions), written to `path` with its data
/// sparse.
fn write_llama3_8b(path: &Path, kind: u32) {
    write_llama3_8b_with(path, kind, 8);
}

/// The same with `kv_heads` KV heads in the header (the weights kept).
fn write_llama3_8b_with(path: &Path, kind: u32, kv_heads: u32) {
    let (per, bytes) = if kind == 8 { (32, 34) } else { (1, 2) };
    let mut tensors = vec![("token_embd.weight".to_owned(), vec![4096u64, 128256], kind)];
    for i in 0..32 {
        for (name, shape, k) in [
            ("attn_norm.weight", vec![4096], 0),
            ("attn_q.weight", vec![4096, 4096], kind),
            ("attn_k.weight", vec![4096, 1024], kind),
            ("attn_v.weight", vec![4096, 1024], kind),
            ("attn_output.weight", vec![4096, 4096], kind),
            ("ffn_norm.weight", vec![4096], 0),
            ("ffn_gate.weight", vec![4096, 14336], kind),
            ("ffn_up.weight", vec![4096, 14336], kind),
            ("ffn_down.weight", vec![14336, 4096], kind),
        ] {
            tensors.push((format!("blk.{i}.{name}"), shape, k));
        }
    }
    tensors.push(("output_norm.weight".to_owned(), vec![4096], 0));
    tensors.push(("output.weight".to_owned(), vec![4096, 128256], kind));
    let key = "llama.attention.head_count_kv";
    let header = llama_gguf(&[key], &[(key, 4, kv_heads.to_le_bytes().to_vec())]);
    write_gguf(path, header, &tensors, (per, bytes));
}

/// `header` (a metadata-only GGUF) with `tensors` (name, shape, 0 for f32
/// or the weights' type of `(elements, bytes)` blocks), its data sparse.
fn write_gguf(
    path: &Path,
    mut out: Vec<u8>,
    tensors: &[(String, Vec<u64>, u32)],
    block: (u64, u64),
) {
    let (per, bytes) = block;
    out[8..16].copy_from_slice(&(tensors.len() as u64).to_le_bytes());
    let mut offset = 0u64;
    for (name, shape, k) in tensors {
        put_str(&mut out, name);
        out.extend((shape.len() as u32).to_le_bytes());
        for d in shape {
            out.extend(d.to_le_bytes());
        }
        out.extend(k.to_le_bytes());
        out.extend(offset.to_le_bytes());
        let n: u64 = shape.iter().product();
        let size = if *k == 0 { n * 4 } else { n / per * bytes };
        offset = (offset + size).next_multiple_of(32);
    }
    while !out.len().is_multiple_of(32) {
        out.push(0);
    }
    fs::write(path, &out).unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(out.len() as u64 + offset)
        .unwrap();
}

/// `kv fit --engine llama.cpp` with `args`.
fn llama_fit(args: &[&str]) -> std::process::Output {
    let mut all = vec!["fit", "--engine", "llama.cpp"];
    all.extend(args);
    kv(&all)
}

fn q8_0_model(test: &str) -> String {
    let path = scratch(test).join("Meta-Llama-3-8B-Instruct.Q8_0.gguf");
    write_llama3_8b(&path, 8);
    path.display().to_string()
}

// On the GPU, every layer: 32 x 231,768,064 (one q8_0 layer) + output_norm
// 16,384 + output 558,170,112 = 7,974,764,544 B. The KV cache at 8,192
// cells: 32 layers x 8,192 x 1,024 x 2 B x 2 (K and V) = 1,073,741,824 B.
const MODEL_GPU: u64 = 7_974_764_544;
const KV: u64 = 1_073_741_824;
const MIB: u64 = 1 << 20;

#[test]
fn every_layer_on_an_h100_with_llama_cpps_lines() {
    let model = q8_0_model("fit_llamacpp_h100");
    let out = llama_fit(&[&model, "--gpu", "H100"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "load_tensors: offloading output layer to GPU",
        "load_tensors: offloading 31 repeating layers to GPU",
        "load_tensors: offloaded 33/33 layers to GPU",
        "load_tensors:   CPU_Mapped model buffer size =   532.31 MiB",
        "load_tensors:        CUDA0 model buffer size =  7605.33 MiB",
        "llama_kv_cache:      CUDA0 KV buffer size =  1024.00 MiB",
        "llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  1/1 seqs), K (f16):  \
         512.00 MiB, V (f16):  512.00 MiB",
        // 81,559 MiB = 85,520,809,984 B, nvidia-smi's, said to be an upper
        // bound.
        "GPU: 85,520,809,984 B (nvidia-smi's total: an upper bound",
        "on the GPU: model buffer 7,974,764,544 B + KV cache 1,073,741,824 B = 9,048,506,368 \
         B; --fit keeps 1,073,741,824 B free",
        // 85,520,809,984 - 1,073,741,824 - 9,048,506,368.
        "left for llama.cpp's CUDA0 compute buffer: 75,398,561,792 B (71905.67 MiB)",
        "the compute buffer depends on llama.cpp's graph and is not predicted",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    // The KV buffer line comes right before its cache's size line.
    let buffer = text.find("CUDA0 KV buffer size").unwrap();
    let size = text.find("llama_kv_cache: size").unwrap();
    assert!(buffer < size);
}

#[test]
fn the_compute_buffer_given_decides() {
    let model = q8_0_model("fit_llamacpp_compute");
    let fit = |compute: &str| {
        let out = llama_fit(&[
            &model,
            "--gpu",
            "L4",
            "--free-mib",
            "22000",
            "--compute-buffer-mib",
            compute,
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        v[0]["fit"].clone()
    };
    // 22,000 MiB free: 23,068,672,000 B, less 1 GiB and 9,048,506,368 B
    // leaves 12,946,423,808 B = 12,346.66 MiB.
    let left = 22_000 * MIB - MIB * 1024 - MODEL_GPU - KV;
    assert_eq!(left, 12_946_423_808);
    let fits = fit("12346");
    assert_eq!(fits["free_bytes"], 22_000 * MIB);
    assert_eq!(fits["free_given"], true);
    assert_eq!(fits["held_bytes"], MODEL_GPU + KV);
    assert_eq!(fits["left_for_compute_bytes"], left);
    assert_eq!(fits["compute_bytes"], 12_346 * MIB);
    assert_eq!(fits["fits"], true);
    // 12,347 MiB is 12,946,767,872 B: 344,064 B more than is left.
    let short = fit("12347");
    assert_eq!(short["fits"], false);
    // A fraction of a MiB as llama.cpp prints it rounds up to a byte.
    assert_eq!(fit("0.5")["compute_bytes"], 524_288);
    assert_eq!(fit("0.0000001")["compute_bytes"], 1);
    let out = llama_fit(&[
        &model,
        "--gpu",
        "L4",
        "--free-mib",
        "22000",
        "--compute-buffer-mib",
        "12347",
    ]);
    assert!(stdout(&out)
        .contains("does not fit: the compute buffer given (12,946,767,872 B) is 344,064 B more"));
}

#[test]
fn short_before_any_compute_buffer() {
    let model = q8_0_model("fit_llamacpp_short");
    let out = llama_fit(&[&model, "--gpu-memory-mib", "8000"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // 8,000 MiB = 8,388,608,000 B; 1 GiB + 9,048,506,368 B is 1,733,640,192
    // B more.
    assert!(
        stdout(&out).contains("does not fit before any compute buffer: short by 1,733,640,192 B")
    );
    let out = llama_fit(&[&model, "--gpu-memory-mib", "8000", "--format", "json"]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v[0]["fit"]["left_for_compute_bytes"], -1_733_640_192i64);
    assert_eq!(v[0]["fit"]["fits"], Value::Null);
}

#[test]
fn on_the_host_alone_and_what_kv_does_not_place() {
    let dir = scratch("fit_llamacpp_host");
    let f16 = dir.join("llama3-f16.gguf");
    write_llama3_8b(&f16, 1);
    let f16 = f16.display().to_string();
    // -ngl 0, allocated: every f16 tensor in pinned host memory, the KV
    // cache on the host; nothing on the GPU. 2 x 1,050,673,152 + 32 x
    // 436,240,384 + 16,384 = 16,061,054,976 B = 15317.02 MiB.
    let out = llama_fit(&[
        &f16,
        "--gpu",
        "H100",
        "--n-gpu-layers",
        "0",
        "--load-mode",
        "none",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("load_tensors:    CUDA_Host model buffer size = 15317.02 MiB"));
    assert!(text.contains("llama_kv_cache:        CPU KV buffer size =  1024.00 MiB"));
    assert!(text.contains("on the GPU: model buffer 0 B + KV cache 0 B = 0 B"));
    // -ngl 5: the output layer and layers 28 to 31 on the GPU, with their
    // caches. Model: 4 x 436,240,384 + 16,384 + 1,050,673,152 =
    // 2,795,651,072 B. KV: 33,554,432 B a layer, 4 on the GPU (128 MiB),
    // 28 on the host (896 MiB). The host maps the embedding and layers 0 to
    // 27: 13,265,403,904 B = 12650.875 MiB.
    let out = llama_fit(&[&f16, "--gpu", "H100", "--n-gpu-layers", "5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for line in [
        "load_tensors: offloading output layer to GPU",
        "load_tensors: offloading 4 repeating layers to GPU",
        "load_tensors: offloaded 5/33 layers to GPU",
        "load_tensors:   CPU_Mapped model buffer size = 12650.88 MiB",
        "load_tensors:        CUDA0 model buffer size =  2666.14 MiB",
        "llama_kv_cache:        CPU KV buffer size =   896.00 MiB",
        "llama_kv_cache:      CUDA0 KV buffer size =   128.00 MiB",
        "on the GPU: model buffer 2,795,651,072 B + KV cache 134,217,728 B",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    // q8_0 weights on the host: the CPU backend may repack them, so the
    // host's buffers depend on its CPU; the GPU holds nothing. All the
    // weights: 2 x 558,170,112 + 32 x 231,768,064 + 16,384.
    let q8 = q8_0_model("fit_llamacpp_host_q8");
    let out = llama_fit(&[&q8, "--gpu", "H100", "--n-gpu-layers", "0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "host: 8,532,934,656 B of weights; tensor `blk.0.attn_q.weight` stays \
                           on the host as q8_0"
        ),
        "{text}"
    );
    assert!(text.contains("CPU_REPACK"), "{text}");
    assert!(!text.contains("model buffer size"), "{text}");
    assert!(
        text.contains("on the GPU: model buffer 0 B + KV cache 0 B = 0 B"),
        "{text}"
    );
}

#[test]
fn flags_of_other_engines_and_impossible_values_are_refused() {
    let model = q8_0_model("fit_llamacpp_flags");
    for (flags, says) in [
        (
            &["--avail-mem-gb", "78"][..],
            "--avail-mem-gb does not apply to kv fit --engine llama.cpp",
        ),
        (
            &["--non-torch-bytes", "1"][..],
            "--non-torch-bytes does not apply to kv fit --engine llama.cpp",
        ),
        (
            &["--weights-from-config"][..],
            "--weights-from-config does not apply to kv fit --engine llama.cpp",
        ),
        (
            &["--free-mib", "90000"][..],
            "--free-mib 90000 is more than the GPU's 81559 MiB",
        ),
        (
            &["--load-mode", "fast"][..],
            "`fast` is not a load mode llama.cpp takes",
        ),
        (
            &["--compute-buffer-mib=-1"][..],
            "`-1` is not a number of MiB",
        ),
        (
            &["--compute-buffer-mib", "NaN"][..],
            "`NaN` is not a number of MiB",
        ),
    ] {
        let mut args = vec![
            "fit",
            "--engine",
            "llama.cpp",
            model.as_str(),
            "--gpu",
            "H100",
        ];
        args.extend(flags);
        let out = kv(&args);
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        assert!(stderr(&out).contains(says), "{flags:?}: {}", stderr(&out));
    }
    // And llama.cpp's own flags on the other engines.
    let config = shipped("llama-3-8b");
    for flag in [&["--n-gpu-layers", "3"][..], &["--load-mode", "none"][..]] {
        for engine in ["vllm", "sglang"] {
            let mut args = vec!["fit", "--engine", engine, config.as_str(), "--gpu", "H100"];
            args.extend(flag);
            let out = kv(&args);
            assert_eq!(out.status.code(), Some(2), "{engine} {flag:?}");
            assert!(stderr(&out).contains(&format!(
                "{} does not apply to kv fit --engine {engine}",
                flag[0]
            )));
        }
    }
}

#[test]
fn a_quantized_cache_on_cuda_pads_each_row_to_512_elements() {
    let dir = scratch("fit_llamacpp_q8_cache");
    let q8 = |kv_heads: u32| {
        let path = dir.join(format!("kv{kv_heads}.gguf"));
        write_llama3_8b_with(&path, 8, kv_heads);
        let out = llama_fit(&[
            path.to_str().unwrap(),
            "--gpu",
            "H100",
            "--cache-type-k",
            "q8_0",
            "--cache-type-v",
            "q8_0",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    // 8 KV heads of 128: rows of 1,024 elements, a multiple of 512. Each K
    // and V tensor is 1,024 / 32 x 34 x 8,192 cells = 8,912,896 B; 64 of
    // them: 570,425,344 B = 544.00 MiB, as the size line says.
    let text = q8(8);
    assert!(
        text.contains("llama_kv_cache:      CUDA0 KV buffer size =   544.00 MiB"),
        "{text}"
    );
    assert!(text.contains("KV cache 570,425,344 B"), "{text}");
    // 1 KV head: rows of 128 elements. Each tensor is 128 / 32 x 34 x 8,192
    // = 1,114,112 B, and CUDA adds a row of 384 elements (12 blocks, 408
    // B): 1,114,520 B, padded to 1,114,624. 64 tensors: 71,335,936 B =
    // 68.03 MiB, where the size line counts 71,303,168 B = 68.00 MiB.
    let text = q8(1);
    assert!(
        text.contains("llama_kv_cache:      CUDA0 KV buffer size =    68.03 MiB"),
        "{text}"
    );
    assert!(
        text.contains("llama_kv_cache: size =   68.00 MiB"),
        "{text}"
    );
    assert!(text.contains("KV cache 71,335,936 B"), "{text}");
}

#[test]
fn nothing_left_for_the_compute_buffer_is_not_short() {
    // One layer, 256 cells, f32 tensors of whole MiB: on the GPU blk.0's
    // 256 x 1,024 x 4 = 1 MiB, the output's 1 MiB, the KV cache 1,024 x 2
    // x 256 x 2 = 1 MiB. With 1,027 MiB free, --fit's 1,024 MiB leaves 0.
    let dir = scratch("fit_llamacpp_zero_left");
    let path = dir.join("tiny.gguf");
    let key = "llama.block_count";
    let header = llama_gguf(&[key], &[(key, 4, 1u32.to_le_bytes().to_vec())]);
    let tensors = [
        ("token_embd.weight".to_owned(), vec![256, 1024], 0),
        ("blk.0.attn_q.weight".to_owned(), vec![256, 1024], 0),
        ("output.weight".to_owned(), vec![256, 1024], 0),
    ];
    write_gguf(&path, header, &tensors, (1, 4));
    let fit = |free: &str| {
        let out = llama_fit(&[
            path.to_str().unwrap(),
            "--gpu",
            "H100",
            "--ctx-size",
            "256",
            "--free-mib",
            free,
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let text = fit("1027");
    assert!(
        text.contains("model buffer 2,097,152 B + KV cache 1,048,576 B = 3,145,728 B"),
        "{text}"
    );
    assert!(
        text.contains("left for llama.cpp's CUDA0 compute buffer: 0 B (0.00 MiB)"),
        "{text}"
    );
    assert!(fit("1026").contains("does not fit before any compute buffer: short by 1,048,576 B"));
    // The GPU's whole memory may be given as free.
    assert!(fit("81559").contains("left for llama.cpp's CUDA0 compute buffer"));
}

#[test]
fn load_modes_map_or_allocate_as_llama_cpp_names_them() {
    let model = q8_0_model("fit_llamacpp_load_modes");
    for (mode, buffer) in [
        ("auto", "CPU_Mapped"),
        ("mmap", "CPU_Mapped"),
        ("mmap+mlock", "CPU_Mapped"),
        ("none", "CUDA_Host"),
        ("mlock", "CUDA_Host"),
        ("dio", "CUDA_Host"),
    ] {
        let out = llama_fit(&[&model, "--gpu", "H100", "--load-mode", mode]);
        assert!(out.status.success(), "{mode}: {}", stderr(&out));
        assert!(
            stdout(&out).contains(&format!("{buffer:>12} model buffer size =   532.31 MiB")),
            "{mode}: {}",
            stdout(&out)
        );
    }
}

#[test]
fn a_gguf_cut_after_its_header_is_read_with_headers_only() {
    let model = q8_0_model("fit_llamacpp_headers_only");
    let whole = stdout(&llama_fit(&[&model, "--gpu", "H100"]));
    // The first 100,000 bytes: metadata and 291 tensor infos (about 15
    // KB), then the start of the data.
    fs::OpenOptions::new()
        .write(true)
        .open(&model)
        .unwrap()
        .set_len(100_000)
        .unwrap();
    let out = llama_fit(&[&model, "--gpu", "H100"]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(
        e.contains("runs past the end of the 100000-byte file; llama.cpp refuses")
            && e.contains("the file holds its tensor infos whole: give --headers-only"),
        "{e}"
    );
    let out = llama_fit(&[&model, "--gpu", "H100", "--headers-only"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "  --headers-only: the file holds less data than its tensor infos give; the buffers \
             are its tensor infos'\n"
        ),
        "{text}"
    );
    // Every other line as the whole file's.
    let cut: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains("--headers-only"))
        .collect();
    assert_eq!(cut, whole.lines().collect::<Vec<_>>());
    let out = llama_fit(&[
        &model,
        "--gpu",
        "H100",
        "--headers-only",
        "--format",
        "json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json[0]["fit"]["data_whole"], false, "{json}");
    assert_eq!(json[0]["fit"]["held_bytes"], MODEL_GPU + KV, "{json}");
    // Cut inside its tensor infos: refused either way, and not hinted.
    fs::OpenOptions::new()
        .write(true)
        .open(&model)
        .unwrap()
        .set_len(1_000)
        .unwrap();
    for flags in [&[][..], &["--headers-only"]] {
        let mut args = vec![model.as_str(), "--gpu", "H100"];
        args.extend_from_slice(flags);
        let out = llama_fit(&args);
        assert!(!out.status.success());
        let e = stderr(&out);
        assert!(
            e.contains("truncated GGUF header") && !e.contains("give --headers-only"),
            "{e}"
        );
    }
}
