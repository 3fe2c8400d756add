//! What vLLM 0.33 will not start, refused by the estimate with vLLM's reason
//! (the layouts, DCP, formats and retired architectures of `refusals.rs`).

use serde_json::{json, Value};

#[allow(dead_code)]
#[path = "../src/estimate/fixtures.rs"]
mod fixtures;

use fixtures::shipped;
use kv_core::{KvError, Parallel};
use kv_engines::estimate::{estimate, Estimate, EstimateSettings};

fn at(tp: u64, pp: u64, dcp: u64) -> EstimateSettings {
    EstimateSettings::new()
        .positions(8192)
        .tensor_parallel(tp)
        .pipeline_stages(pp)
        .decode_context_parallel(dcp)
}

/// The refusal's problem; any other outcome fails the test.
fn refusal(config: &Value, settings: &EstimateSettings) -> String {
    match estimate(config, settings) {
        Err(KvError::Parallel {
            declaration,
            problem,
        }) if declaration.is_empty() => problem,
        other => panic!("expected a refused layout, got {other:?}"),
    }
}

fn rank_totals(e: &Estimate, tp: u64) -> (u64, u64) {
    let ranks = e.ranks(Parallel::new(tp, 1).unwrap(), 1).unwrap();
    assert_eq!(ranks.len() as u64, tp);
    assert!(ranks.iter().all(|r| r.totals == ranks[0].totals));
    (ranks[0].totals.per_position, ranks[0].totals.per_row)
}

#[test]
fn llama_3_8b_at_tp_16_dcp_2_holds_one_head_and_half_the_tokens() {
    // 8 KV heads, 32 query heads: tp 16 > 8, dcp 2 <= 16 / 8 = 2, and
    // 32 / 8 = 4 query heads per KV head divide by 2, so vLLM starts.
    let e = estimate(&shipped("llama-3-8b"), &at(16, 1, 2)).unwrap();
    // Per rank: one KV head, 32 layers x 1 x (128 + 128) x 2 B = 16,384 B
    // per token; cdiv(8192, 2) = 4096 tokens = 256 blocks of 16
    // (vLLM: cdiv(8192, 16 x 2) = 256 blocks).
    assert_eq!(e.specs[0].positions().unwrap().count, 4096);
    assert_eq!(rank_totals(&e, 16), (16_384, 16_384 * 4096));
    assert_eq!(rank_totals(&e, 16).1, 67_108_864);
    // Without DCP the head's 2 copies each hold all 8192 tokens, and
    // neither the cache nor the convention speaks of DCP.
    let plain = estimate(&shipped("llama-3-8b"), &at(16, 1, 1)).unwrap();
    assert_eq!(rank_totals(&plain, 16), (16_384, 16_384 * 8192));
    assert!(
        !plain.specs[0].cache.contains("DCP"),
        "{}",
        plain.specs[0].cache
    );
    assert!(!plain.convention.contains("decode context"));
    // The cluster: 16 ranks x 67,108,864 B per row = 1 GiB.
    let exported = e.export("c", Parallel::new(16, 1).unwrap(), 1).unwrap();
    assert_eq!(exported.cluster.per_row_bytes, 1_073_741_824);
    assert_eq!(exported.decode_context_parallel, 2);
    assert!(
        e.specs[0]
            .cache
            .contains("DCP 2: each rank holds cdiv(8192, 2) = 4096 tokens of a row"),
        "{}",
        e.specs[0].cache
    );
    assert!(e
        .convention
        .contains("decode context parallel 2 (interleave 1)"));
}

#[test]
fn a_dcp_share_rounds_up_to_whole_blocks() {
    // 8200 tokens: cdiv(8200, 2) = 4100 -> 257 blocks of 16 = 4112
    // (vLLM: cdiv(8200, 16 x 2) = 257 blocks).
    let e = estimate(&shipped("llama-3-8b"), &at(16, 1, 2).positions(8200)).unwrap();
    assert_eq!(e.specs[0].positions().unwrap().count, 4112);
    // 8193 tokens at dcp 4 (tp 32): cdiv(8193, 4) = 2049 -> 129 blocks.
    let e = estimate(&shipped("llama-3-8b"), &at(32, 1, 4).positions(8193)).unwrap();
    assert_eq!(e.specs[0].positions().unwrap().count, 129 * 16);
}

#[test]
fn vllms_dcp_rules_on_tp_and_kv_heads() {
    let llama = shipped("llama-3-8b");
    let tp_8 = refusal(&llama, &at(8, 1, 2));
    assert_eq!(
        tp_8,
        "vLLM 0.33 would not start: decode context parallelism for GQA/MQA needs more TP \
         ranks than KV heads: tp 8 is not above the model's 8 KV heads; raise tp or use dcp \
         1 (vLLM: \"Decode context parallelism for GQA/MQA requires \
         `--tensor-parallel-size` (8) to be greater than the model's total number of KV \
         heads (8).\")"
    );
    // tp 16 / 8 KV heads = 2 copies of each head: dcp 4 is too many.
    let dcp_4 = refusal(&llama, &at(16, 1, 4));
    assert!(
        dcp_4.contains(
            "\"`--decode-context-parallel-size` (4) exceeds the maximum supported value (2) \
             for `--tensor-parallel-size` (16) and 8 model KV heads.\""
        ),
        "{dcp_4}"
    );
    // DCP reuses the TP ranks: 16 % 3 != 0.
    let dcp_3 = refusal(&llama, &at(16, 1, 3));
    assert!(
        dcp_3.contains("\"tp_size=16 must be divisible by dcp_size=3.\""),
        "{dcp_3}"
    );
    // Qwen2.5-7B: 28 query heads, 4 KV heads, 7 per KV head. tp 14 divides
    // 28 and is above 4; 14 / 4 = 3 >= dcp 2; but 7 % 2 != 0.
    let qwen = json!({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
        "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
        "num_hidden_layers": 28, "max_position_embeddings": 32768,
        "sliding_window": 131072, "use_sliding_window": false,
        "max_window_layers": 28, "torch_dtype": "bfloat16",
    });
    let per_kv = refusal(&qwen, &at(14, 1, 2));
    assert!(
        per_kv.contains(
            "\"The model's number of query heads per KV head (7) must be divisible by \
             `--decode-context-parallel-size` (2) for GQA/MQA.\""
        ),
        "{per_kv}"
    );
    // dcp 7 at tp 28: 28 / 4 = 7 copies, 7 % 7 = 0: starts, with
    // cdiv(8192, 7) = 1171 -> 74 blocks of 16 = 1184 tokens.
    let e = estimate(&qwen, &at(28, 1, 7)).unwrap();
    assert_eq!(e.specs[0].positions().unwrap().count, 1184);
}

#[test]
fn mla_is_sharded_without_the_kv_head_rules() {
    // DeepSeek-V2-Lite: MLA, 16 query heads; no KV-head rule for MLA.
    let e = estimate(&shipped("deepseek-v2-lite"), &at(2, 1, 2)).unwrap();
    // 27 layers x (512 + 64) x 2 B = 31,104 B per token on every rank
    // (the latent is whole on each), cdiv(8192, 2) = 4096 tokens.
    assert_eq!(rank_totals(&e, 2), (31_104, 31_104 * 4096));
    assert_eq!(rank_totals(&e, 2).1, 127_401_984);
    assert!(e.specs[0].cache.contains("MLAAttentionSpec"));
    assert!(e.specs[0].cache.contains("DCP 2"), "{}", e.specs[0].cache);
    // Still the TP rule: dcp 2 needs tp divisible by 2.
    let tp_1 = refusal(&shipped("deepseek-v2-lite"), &at(1, 1, 2));
    assert!(
        tp_1.contains("\"tp_size=1 must be divisible by dcp_size=2.\""),
        "{tp_1}"
    );
}

#[test]
fn dcp_refuses_sliding_and_chunked_layers() {
    // Mistral-7B slides every layer; its layout passes the head rules
    // (32 query heads, 8 KV heads, tp 16, dcp 2).
    let mistral = refusal(&shipped("mistral-7b-v0.1"), &at(16, 1, 2));
    assert!(
        mistral.ends_with(
            "`sliding_attention` is 32 sliding-window layers (vLLM: \"DCP not support \
             sliding window.\"); use dcp 1"
        ),
        "{mistral}"
    );
    // Gemma-3-27B: 32 query heads, 16 KV heads; tp 32 dcp 2.
    let gemma = refusal(&shipped("gemma-3-27b"), &at(32, 1, 2));
    assert!(gemma.contains("`sliding_attention` is 52"), "{gemma}");
    // Llama-4-Scout: 40 query heads, 8 KV heads (5 per KV head); tp 40
    // dcp 5 passes the head rules; its chunked layers do not.
    let scout = json!({
        "model_type": "llama4",
        "text_config": {
            "model_type": "llama4_text", "num_hidden_layers": 48,
            "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
            "hidden_size": 5120, "attention_chunk_size": 8192,
            "no_rope_layers": [], "max_position_embeddings": 10485760,
            "torch_dtype": "bfloat16",
        },
    });
    let chunked = refusal(&scout, &at(40, 1, 5));
    assert!(
        chunked.contains("(vLLM: \"DCP not support chunked local attn now.\")"),
        "{chunked}"
    );
    // Without DCP each is fine.
    assert!(estimate(&shipped("mistral-7b-v0.1"), &at(16, 1, 1)).is_ok());
}

#[test]
fn the_interleave_must_divide_the_block() {
    let llama = shipped("llama-3-8b");
    let wide = refusal(&llama, &at(16, 1, 2).dcp_interleave(32));
    assert!(
        wide.contains(
            "\"Block_size(16) should be greater than or equal to and divisible by \
             cp_kv_cache_interleave_size (32).\""
        ),
        "{wide}"
    );
    let odd = refusal(&llama, &at(16, 1, 2).dcp_interleave(3));
    assert!(odd.contains("cp_kv_cache_interleave_size (3)"), "{odd}");
    // A whole block per rank moves no figure: 256 blocks of 16 still.
    let block = estimate(&llama, &at(16, 1, 2).dcp_interleave(16)).unwrap();
    assert_eq!(block.specs[0].positions().unwrap().count, 4096);
    assert!(block.convention.contains("(interleave 16)"));
    // Without DCP vLLM checks no interleave.
    assert!(estimate(&llama, &at(1, 1, 1).dcp_interleave(3)).is_ok());
}

#[test]
fn tp_must_divide_the_query_heads() {
    let tp_3 = refusal(&shipped("llama-3-8b"), &at(3, 1, 1));
    assert_eq!(
        tp_3,
        "vLLM 0.33 would not start: tp 3 does not divide the 32 query heads \
         (`num_attention_heads`) (vLLM: \"Total number of attention heads (32) must be \
         divisible by tensor parallel size (3).\")"
    );
    assert!(estimate(&shipped("llama-3-8b"), &at(4, 1, 1)).is_ok());
    // Whisper's heads are `encoder_attention_heads` (20): tp 8 is refused.
    let whisper = refusal(&shipped("whisper-large-v3"), &at(8, 1, 1).positions(448));
    assert!(whisper.contains("the 20 query heads"), "{whisper}");
}

#[test]
fn pipeline_parallelism_on_a_model_without_it_is_refused() {
    let whisper = refusal(&shipped("whisper-large-v3"), &at(1, 2, 1).positions(448));
    assert_eq!(
        whisper,
        "vLLM 0.33 would not start: pp 2: vLLM's WhisperForConditionalGeneration does not \
         implement `SupportsPP` (vLLM: \"Pipeline parallelism is not supported for this \
         model.\"); use pp 1"
    );
    // Mamba-Codestral-7B (Mamba2ForCausalLM).
    let codestral = json!({
        "architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2",
        "hidden_size": 4096, "num_hidden_layers": 64, "state_size": 128,
        "expand": 2, "conv_kernel": 4, "n_groups": 8, "head_dim": 64,
        "num_heads": 128, "chunk_size": 256, "vocab_size": 32768,
        "torch_dtype": "bfloat16",
    });
    let mamba2 = refusal(&codestral, &at(1, 2, 1).positions(4096));
    assert!(mamba2.contains("Mamba2ForCausalLM"), "{mamba2}");
    // Mamba (1) has SupportsPP: mamba-130m-hf at pp 2 starts.
    let mamba = json!({
        "architectures": ["MambaForCausalLM"], "model_type": "mamba",
        "hidden_size": 768, "num_hidden_layers": 24, "state_size": 16,
        "expand": 2, "conv_kernel": 4, "intermediate_size": 1536,
        "time_step_rank": 48, "vocab_size": 50280, "torch_dtype": "float32",
    });
    assert!(estimate(&mamba, &at(1, 2, 1).positions(4096)).is_ok());
    // Zamba2-2.7B and Gemma-3n-E4B: refused before their layers are read.
    let zamba2 = json!({
        "architectures": ["Zamba2ForCausalLM"], "model_type": "zamba2",
        "hidden_size": 2560, "num_hidden_layers": 54, "num_attention_heads": 32,
        "num_key_value_heads": 32, "max_position_embeddings": 4096,
        "torch_dtype": "bfloat16",
    });
    assert!(refusal(&zamba2, &at(1, 2, 1).positions(4096)).contains("Zamba2ForCausalLM"));
    let gemma3n = json!({
        "architectures": ["Gemma3nForConditionalGeneration"], "model_type": "gemma3n",
        "text_config": {
            "model_type": "gemma3n_text", "num_hidden_layers": 35,
            "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
            "hidden_size": 2048, "sliding_window": 512, "num_kv_shared_layers": 15,
            "max_position_embeddings": 32768, "torch_dtype": "bfloat16",
        },
    });
    let g = refusal(&gemma3n, &at(1, 2, 1));
    assert!(g.contains("Gemma3nForConditionalGeneration"), "{g}");
    // At pp 1 each is estimated as before.
    assert!(estimate(&shipped("whisper-large-v3"), &at(1, 1, 1).positions(448)).is_ok());
    // Llama has SupportsPP.
    assert!(estimate(&shipped("llama-3-8b"), &at(1, 2, 1)).is_ok());
}

#[test]
fn an_mla_latent_in_nvfp4_or_fp8_e5m2_is_refused() {
    let lite = shipped("deepseek-v2-lite");
    let with = |name: &str| {
        EstimateSettings::new()
            .positions(8192)
            .kv_format(kv_core::Storage::from_name(name).unwrap())
    };
    for (format, why) in [
        ("nvfp4", "no vLLM MLA backend takes an NVFP4 latent cache"),
        (
            "f8e5m2",
            "no CUDA MLA backend takes fp8_e5m2 (only ROCm's AITER MLA does)",
        ),
    ] {
        match estimate(&lite, &with(format)) {
            Err(KvError::Config {
                what: "kv_format",
                problem,
            }) => assert_eq!(
                problem,
                format!(
                    "vLLM 0.33 would not start: `mla_latent` is an MLA latent stored as \
                     {format}, and {why}; use bf16 or f8e4m3"
                )
            ),
            other => panic!("{format}: {other:?}"),
        }
    }
    // fp8 (e4m3) is taken: 27 layers x 576 x 1 B = 15,552 B per token.
    let e4m3 = estimate(&lite, &with("f8e4m3")).unwrap();
    assert_eq!(e4m3.specs[0].layout.bytes_per_position(), Some(Ok(15_552)));
    // kv's other block formats are kv's own sizing, not refused here.
    assert!(estimate(&lite, &with("q8_0")).is_ok());
}

fn nvfp4() -> EstimateSettings {
    EstimateSettings::new()
        .positions(8192)
        .kv_format(kv_core::Storage::from_name("nvfp4").unwrap())
}

fn format_refusal(config: &Value, settings: &EstimateSettings) -> String {
    match estimate(config, settings) {
        Err(KvError::Config {
            what: "kv_format",
            problem,
        }) => problem,
        other => panic!("expected a refused KV format, got {other:?}"),
    }
}

#[test]
fn attention_in_nvfp4_is_refused_where_flashinfer_takes_no_such_head() {
    // Llama-3-8B, head size 128: FlashInfer takes it on every GPU it
    // runs NVFP4 on. Per token: 32 layers x 8 heads x 2 (K, V) x
    // (128 / 2 + 128 / 16 = 72) B = 36,864 B; no note.
    let llama = estimate(&shipped("llama-3-8b"), &nvfp4()).unwrap();
    assert_eq!(llama.specs[0].layout.bytes_per_position(), Some(Ok(36_864)));
    assert!(!llama.detected.contains("NVFP4"), "{}", llama.detected);
    // Phi-3-mini: 3072 / 32 heads = head size 96, not one of 64, 128,
    // 256, 512.
    let phi3 = json!({
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3",
        "hidden_size": 3072, "num_attention_heads": 32, "num_key_value_heads": 32,
        "num_hidden_layers": 32, "max_position_embeddings": 4096,
        "sliding_window": 2047, "torch_dtype": "bfloat16",
    });
    assert_eq!(
        format_refusal(&phi3, &nvfp4().positions(4096)),
        "vLLM 0.33 would not start: `sliding_attention` is stored as NVFP4 at head size 96, and \
         FlashInfer, vLLM's only backend with an NVFP4 KV cache, takes head sizes 64, \
         128, 256 and 512; use bf16 or f8e4m3"
    );
    // Head size 160 is refused the same way (GLM-4-9B-like: 4096 / 32
    // would be 128, so the head dim is given).
    let wide = json!({
        "model_type": "llama", "hidden_size": 5120, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 160, "num_hidden_layers": 2,
        "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
    });
    assert!(format_refusal(&wide, &nvfp4()).contains("at head size 160"));
    // The same configs in fp8 start.
    let fp8 = EstimateSettings::new()
        .positions(4096)
        .kv_format(kv_core::Storage::from_name("fp8").unwrap());
    assert!(estimate(&phi3, &fp8).is_ok());
}

#[test]
fn nvfp4_at_head_size_64_is_noted_as_a_blackwell_only_start() {
    // Head size 64 (2048 / 32): FlashInfer refuses it on SM 8x/9x/12x
    // only, so kv gives the figure and says where vLLM starts with it.
    // Per token: 2 layers x 4 heads x 2 x (32 + 4 = 36) B = 576 B.
    let small = json!({
        "model_type": "llama", "hidden_size": 2048, "num_attention_heads": 32,
        "num_key_value_heads": 4, "num_hidden_layers": 2,
        "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
    });
    let e = estimate(&small, &nvfp4()).unwrap();
    assert_eq!(e.specs[0].layout.bytes_per_position(), Some(Ok(576)));
    assert!(
        e.detected.contains(
            "`full_attention` in NVFP4 at head size 64: vLLM 0.33 starts with it on SM 10x \
             GPUs only"
        ),
        "{}",
        e.detected
    );
    // In bf16 there is no such note.
    let bf16 = estimate(&small, &EstimateSettings::new().positions(8192)).unwrap();
    assert!(!bf16.detected.contains("SM 10x"), "{}", bf16.detected);
}

#[test]
fn an_architecture_vllm_retired_is_refused_unless_transformers_serves_it() {
    // MPT-7B: vLLM served MPTForCausalLM until 0.28.0; transformers 5.20
    // has no class of that name (its MptForCausalLM is not one the
    // Transformers backend takes), so vLLM 0.33 refuses it.
    let mpt = json!({
        "architectures": ["MPTForCausalLM"], "model_type": "mpt", "d_model": 4096,
        "n_heads": 32, "n_layers": 32, "max_seq_len": 2048, "torch_dtype": "bfloat16",
    });
    let settings = EstimateSettings::new().positions(2048);
    match estimate(&mpt, &settings) {
        Err(KvError::Config {
            what: "architectures",
            problem,
        }) => assert_eq!(
            problem,
            "vLLM 0.33 would not start: it no longer serves MPTForCausalLM, which vLLM \
             0.28.0 was the last to serve (vLLM: \"Model architecture MPTForCausalLM was \
             supported in vLLM until v0.28.0, and is not supported anymore. Please use an \
             older version of vLLM if you want to use this model architecture.\"); kv's \
             figures follow vLLM 0.33's rules, so it gives none"
        ),
        other => panic!("{other:?}"),
    }
    // Read for another engine (SGLang sizes MPT), the geometry is given:
    // 32 layers x 32 heads x 128 x 2 (K, V) x 2 B = 524,288 B a position.
    let other = estimate(&mpt, &settings.clone().for_another_engine()).unwrap();
    let per_position: u64 = other
        .specs
        .iter()
        .map(|s| s.layout.bytes_per_position().unwrap().unwrap())
        .sum();
    assert_eq!(per_position, 524_288);
    let mut mpt_hf = mpt.clone();
    mpt_hf["architectures"] = json!(["MptForCausalLM"]);
    let err = estimate(&mpt_hf, &settings).unwrap_err().to_string();
    assert!(err.contains("MptForCausalLM, which vLLM 0.28.0"), "{err}");
    // IBM's Bamba-9B: retired natively after 0.23.0, but transformers
    // 5.20 has BambaForCausalLM, so vLLM runs it through its
    // Transformers backend: a figure, and a note saying whose.
    let bamba = json!({
        "architectures": ["BambaForCausalLM"], "model_type": "bamba",
        "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_hidden_layers": 32, "attn_layer_indices": [9, 18, 27],
        "mamba_n_heads": 128, "mamba_d_head": 64, "mamba_n_groups": 1,
        "mamba_d_state": 128, "mamba_d_conv": 4, "mamba_expand": 2,
        "max_position_embeddings": 262144, "torch_dtype": "bfloat16",
    });
    let e = estimate(&bamba, &settings).unwrap();
    assert!(
        e.detected.contains(
            "vLLM 0.33 no longer serves BambaForCausalLM natively (vLLM 0.23.0 was the \
             last); with model_impl auto it runs transformers' BambaForCausalLM through \
             its Transformers backend"
        ),
        "{}",
        e.detected
    );
    // The backend is tried for the first architecture only: listed
    // behind MPT's, Bamba's class does not save it.
    let mut behind = mpt.clone();
    behind["architectures"] = json!(["MPTForCausalLM", "BambaForCausalLM"]);
    assert!(estimate(&behind, &settings).is_err());
    // vLLM refuses only when no listed architecture loads: beside one
    // kv does not know to be retired, the figure is given, with no note.
    // Without `architectures` nothing is judged.
    let mut both = mpt.clone();
    both["architectures"] = json!(["MPTForCausalLM", "DbrxForCausalLM"]);
    let e = estimate(&both, &settings).unwrap();
    assert!(!e.detected.contains("natively"), "{}", e.detected);
    let mut bare = mpt;
    bare.as_object_mut().unwrap().remove("architectures");
    assert!(estimate(&bare, &settings).is_ok());
}

#[test]
fn dcp_on_a_model_without_attention_is_refused() {
    // Mamba-2.8B: no attention layer, so vLLM's total KV heads are 0 and
    // its DCP check divides by them (the comparison's tp 2 dcp 2 row).
    let mamba = json!({
        "architectures": ["MambaForCausalLM"], "model_type": "mamba",
        "hidden_size": 2560, "num_hidden_layers": 64, "expand": 2, "state_size": 16,
        "conv_kernel": 4, "intermediate_size": 5120, "torch_dtype": "bfloat16",
    });
    let problem = refusal(&mamba, &at(2, 1, 2).positions(2048));
    assert!(
        problem.contains("ZeroDivisionError: integer division or modulo by zero"),
        "{problem}"
    );
    assert!(estimate(&mamba, &at(2, 1, 1).positions(2048)).is_ok());
}

#[test]
fn zero_layout_sizes_are_errors() {
    for settings in [at(0, 1, 1), at(1, 1, 0), at(1, 1, 1).dcp_interleave(0)] {
        let err = estimate(&shipped("llama-3-8b"), &settings).unwrap_err();
        assert!(
            err.to_string().contains("is 0; it must be positive"),
            "{err}"
        );
    }
}

#[test]
fn a_block_size_given_that_no_attention_backend_runs_is_refused() {
    let block = |size: u64| EstimateSettings::new().positions(8192).block_size(size);
    // Llama-3-8B given --block-size 8: FLASH_ATTN, TRITON_ATTN and
    // FLEX_ATTENTION run multiples of 16, FLASHINFER 16/32/64, so vLLM's
    // selector finds no backend (vLLM 0.33 on Hopper, seen 2026-12-06:
    // "No valid attention backend found for cuda with ...block_size=8...").
    for size in [8, 24, 100] {
        match estimate(&shipped("llama-3-8b"), &block(size)) {
            Err(KvError::Config { what, problem }) => {
                assert_eq!(what, "block_size");
                assert!(
                    problem.contains(&format!(
                        "no attention backend on Hopper runs a block of {size} tokens"
                    )) && problem.contains("No valid attention backend found"),
                    "{problem}"
                );
            }
            other => panic!("--block-size {size}: expected a refusal, got {other:?}"),
        }
    }
    // 48 is a multiple of 16: FLASH_ATTN runs it; cdiv(8192, 48) = 171
    // blocks = 8,208 positions.
    let e = estimate(&shipped("llama-3-8b"), &block(48)).unwrap();
    assert_eq!(e.specs[0].positions().unwrap().count, 8208);
    // Mamba alone picks no attention backend: vLLM starts, and so does kv.
    let mamba = json!({
        "architectures": ["MambaForCausalLM"], "model_type": "mamba",
        "hidden_size": 768, "num_hidden_layers": 24, "state_size": 16,
        "conv_kernel": 4, "expand": 2, "torch_dtype": "float32",
    });
    assert!(estimate(&mamba, &block(8)).is_ok());
    // The default block is never refused.
    assert!(estimate(
        &shipped("llama-3-8b"),
        &EstimateSettings::new().positions(8192)
    )
    .is_ok());
}

#[test]
fn pipeline_parallelism_is_refused_by_architecture_whatever_the_family() {
    // Idefics3ForConditionalGeneration lacks `SupportsPP` in vLLM 0.33
    // (`idefics3.py:522`: SupportsMultiModal, SupportsLoRA, SupportsEncoderCudaGraph), so vLLM refuses
    // pp 2 for it; its text model is a Llama, a family kv lets run at pp 2.
    let idefics3 = json!({
        "architectures": ["Idefics3ForConditionalGeneration"], "model_type": "idefics3",
        "text_config": {
            "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8,
            "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
        },
        "torch_dtype": "bfloat16",
    });
    let problem = refusal(&idefics3, &at(1, 2, 1));
    assert!(
        problem.contains(
            "pp 2: vLLM's Idefics3ForConditionalGeneration does not implement `SupportsPP`"
        ),
        "{problem}"
    );
    assert!(estimate(&idefics3, &at(1, 1, 1)).is_ok());
    // The same text model under an architecture with `SupportsPP` runs at pp 2.
    let mut llava = idefics3.clone();
    llava["architectures"] = json!(["LlavaForConditionalGeneration"]);
    llava["model_type"] = json!("llava");
    assert!(estimate(&llava, &at(1, 2, 1)).is_ok());
}

#[test]
fn dory_is_refused_above_one_rank_as_its_model_class_refuses() {
    // vLLM 0.33 dory.py:295 raises in DoryForCausalLM.__init__ at any TP but 1.
    let dory = json!({
        "architectures": ["DoryForCausalLM"], "model_type": "dory",
        "hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 16,
        "num_key_value_heads": 4, "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
    });
    let problem = refusal(&dory, &at(2, 1, 1));
    assert!(
        problem.contains(
            "vLLM 0.33 would not start: tp 2: vLLM's DoryForCausalLM builds on one rank only \
             (vLLM: \"Dory currently supports tensor_parallel_size=1 only\"); use tp 1"
        ),
        "{problem}"
    );
    assert!(estimate(&dory, &at(1, 1, 1)).is_ok());
    // Another class with the same geometry runs at tp 2.
    let mut llama = dory.clone();
    llama["architectures"] = json!(["LlamaForCausalLM"]);
    llama["model_type"] = json!("llama");
    assert!(estimate(&llama, &at(2, 1, 1)).is_ok());
}

/// BLOOM-560m's layout: ALiBi, and no length key in the config or its class.
fn bloom() -> Value {
    json!({
        "architectures": ["BloomForCausalLM"], "model_type": "bloom",
        "n_layer": 24, "n_head": 16, "hidden_size": 1024, "torch_dtype": "bfloat16",
    })
}

#[test]
fn bloom_is_vllms_2048_positions_and_refuses_an_fp8_cache() {
    // vLLM: "Assuming the model's maximum length is 2048" (BloomConfig has no
    // length key). 24 layers x 16 heads x 64 x (K + V) x 2 B = 98,304 B.
    let e = estimate(&bloom(), &EstimateSettings::new()).unwrap();
    assert_eq!(e.max_model_len, 2048);
    assert!(
        e.detected.contains("max_model_len 2048 (vLLM's assumption"),
        "{}",
        e.detected
    );
    assert_eq!(e.specs[0].layout.bytes_per_position(), Some(Ok(98_304)));
    // ALiBi runs on FlashAttention 2 alone, which keeps no fp8 cache on Hopper.
    let fp8 = EstimateSettings::new().kv_format(kv_core::Storage::from_name("fp8").unwrap());
    let text = estimate(&bloom(), &fp8).unwrap_err().to_string();
    assert!(
        text.contains(
            "vLLM 0.33 would not start: `full_attention` is BLOOM attention with ALiBi, which \
             vLLM runs on FlashAttention 2 alone, and it keeps no fp8 cache on Hopper (vLLM: \
             \"FlashAttention does not support fp8 kv-cache on this device.\")"
        ),
        "{text}"
    );
    // Another family with the same geometry keeps fp8, and needs a length.
    let mut gpt2 = bloom();
    gpt2["model_type"] = json!("gpt2");
    gpt2["architectures"] = json!(["GPT2LMHeadModel"]);
    gpt2["n_positions"] = json!(1024);
    assert!(estimate(&gpt2, &fp8).is_ok());
    gpt2.as_object_mut().unwrap().remove("n_positions");
    let text = estimate(&gpt2, &EstimateSettings::new())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("`thinker_config.text_config`, `language_config`); give the length"),
        "{text}"
    );
}

#[test]
fn bailing_moe_v3_is_never_read_as_mla_in_every_layer() {
    // Its text model keeps KDA state in 4 of every 5 layers, an MLA latent in
    // the fifth (vLLM 0.33 bailing_moe_v3.py `_is_kda_layer`; sized in
    // tests/estimate_kda.rs). Without `no_kda_lora` vLLM's class raises.
    let mut bailing = json!({
        "architectures": ["BailingMoeV3VLForConditionalGeneration"],
        "model_type": "bailing_moe_v3_vl",
        "text_config": {
            "model_type": "bailing_hybrid", "num_hidden_layers": 20, "layer_group_size": 5,
            "kv_lora_rank": 512, "qk_rope_head_dim": 64, "num_attention_heads": 16,
            "head_dim": 128, "max_position_embeddings": 32768, "torch_dtype": "bfloat16",
        },
    });
    let text = estimate(&bailing, &EstimateSettings::new())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("vLLM 0.33 would not start: `no_kda_lora` is not true"),
        "{text}"
    );
    // With it, a KDA key missing is named, not defaulted.
    bailing["text_config"]["no_kda_lora"] = json!(true);
    let text = estimate(&bailing, &EstimateSettings::new())
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("`short_conv_kernel_size` is not set; give it"),
        "{text}"
    );
}

#[test]
fn a_moe_class_refuses_a_pipeline_stage_with_no_moe_layer() {
    // transformers' NemotronHConfig defaults (vLLM's registry run): layers
    // Mamba, MoE, attention, MLP. At pp 2 stage 1 holds layers 2 and 3;
    // vLLM 0.33 fails building it (the registry run, 2026-12-06).
    let puzzle = json!({
        "architectures": ["NemotronHPuzzleForCausalLM"], "model_type": "nemotron_h",
        "layers_block_type": ["linear_attention", "moe", "full_attention", "mlp"],
        "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "head_dim": 128, "max_position_embeddings": 4096, "ssm_state_size": 128,
        "mamba_num_heads": 128, "mamba_head_dim": 64, "n_groups": 8, "conv_kernel": 4,
        "expand": 2, "n_routed_experts": 8, "vocab_size": 131072,
        "mamba_ssm_cache_dtype": "float32", "torch_dtype": "bfloat16",
    });
    assert_eq!(
        refusal(&puzzle, &at(1, 2, 1).positions(4096)),
        "vLLM 0.33 would not start: pp 2: stage 1 holds layers 2 to 3, none of them MoE, and \
         vLLM's NemotronHPuzzleForCausalLM reads its expert counts off one of the stage's MoE \
         layers (vLLM: \"AssertionError: assert example_moe is not None (nemotron_h.py:869)\")"
    );
    assert!(estimate(&puzzle, &at(1, 1, 1).positions(4096)).is_ok());
    // Qwen3-Next-80B-A3B (48 layers) with its first 24 dense: at pp 2 the
    // first stage has none.
    let dense_half = fixtures::with_keys(
        shipped("qwen3-next-80b-a3b"),
        json!({"mlp_only_layers": (0..24).collect::<Vec<u64>>()}),
    );
    let qwen = refusal(&dense_half, &at(1, 2, 1));
    assert!(
        qwen.contains("stage 0 holds layers 0 to 23")
            && qwen.contains("No Qwen3Next layer found in the model.layers."),
        "{qwen}"
    );
    assert!(estimate(&dense_half, &at(1, 1, 1)).is_ok());
    assert!(estimate(&shipped("qwen3-next-80b-a3b"), &at(1, 2, 1)).is_ok());
}

#[test]
fn a_model_class_that_fails_on_its_config_is_refused_in_vllms_words() {
    // Cohere's North vision model: vLLM's CohereCompassForCausalLM asserts
    // `tie_word_embeddings`, which it takes from the top level, where
    // transformers' CohereCompassConfig defaults it to false.
    let text = json!({
        "model_type": "cohere_compass_text", "hidden_size": 8192,
        "num_hidden_layers": 40, "num_attention_heads": 64, "num_key_value_heads": 64,
        "head_dim": 128, "max_position_embeddings": 8192, "tie_word_embeddings": true,
    });
    let untied = json!({
        "architectures": ["CohereCompassForConditionalGeneration"],
        "model_type": "cohere_compass", "torch_dtype": "bfloat16", "text_config": text,
    });
    let settings = EstimateSettings::new().positions(8192);
    match estimate(&untied, &settings) {
        Err(KvError::Config {
            what: "model class",
            problem,
        }) => assert_eq!(
            problem,
            "vLLM 0.33 would not start: `tie_word_embeddings` is not set at the top level \
             (transformers' CohereCompassConfig defaults it to false), and \
             CohereCompassForCausalLM asserts it (AssertionError: assert \
             config.tie_word_embeddings, model_executor/models/cohere_compass.py:2326); kv's \
             figures follow vLLM's rules, so it gives none"
        ),
        other => panic!("{other:?}"),
    }
    // Tied at the top level it starts: 40 layers x 64 KV heads x 128 x 2
    // (K, V) x 2 B = 1,310,720 B a position.
    let mut tied = untied.clone();
    tied["tie_word_embeddings"] = json!(true);
    let e = estimate(&tied, &settings).unwrap();
    let per_position: u64 = e
        .specs
        .iter()
        .map(|s| s.layout.bytes_per_position().unwrap().unwrap())
        .sum();
    assert_eq!(per_position, 1_310_720);
    // Read for SGLang the class is not vLLM's: nothing is judged.
    assert!(estimate(&untied, &settings.for_another_engine()).is_ok());
}

/// A Qwen4-Exp-like text model no script ships: three Gated DeltaNet layers
/// and one `indexed_attention` layer, no QSA, no PLE.
fn small_qwen4_exp() -> Value {
    json!({
        "architectures": ["Qwen4ExpForCausalLM"], "model_type": "qwen4_exp_text",
        "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 128, "max_position_embeddings": 4096,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention",
                        "indexed_attention"],
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 64,
        "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4,
        "output_gate_type": "sigmoid", "torch_dtype": "bfloat16",
    })
}

#[test]
fn qwen4_exps_indexed_attention_is_full_attention_beside_its_deltanet() {
    let settings = EstimateSettings::new().positions(4096);
    let e = estimate(&small_qwen4_exp(), &settings).unwrap();
    let bytes = |name: &str| {
        e.specs
            .iter()
            .find(|s| s.name.contains(name))
            .map(|s| s.bytes_per_row().unwrap())
            .unwrap_or_else(|| panic!("no {name} in {:?}", e.specs))
    };
    // The attention layer: 2 KV heads x 128 x 2 (K, V) x 2 B = 1,024 B a
    // position, 4,096 positions.
    assert_eq!(bytes("full_attention"), 1024 * 4096);
    // Each DeltaNet layer: conv 3 x (2 x 2 x 64 + 4 x 64) = 1,536 and
    // recurrent 4 x 64 x 64 = 16,384 elements, bf16: 35,840 B. The block
    // grows from 16 to 64 tokens so that one attention page (64 x 1,024 =
    // 65,536 B) holds it; a row keeps 3 such pages a layer (prefix caching's
    // align mode: 2, and a prefill checkpoint), 3 layers.
    assert_eq!(e.block_size, 64);
    assert_eq!(bytes("linear_attention"), 3 * 3 * 65_536);
    // Its own spellings are the family's alone.
    let mut other = small_qwen4_exp();
    other["model_type"] = json!("qwen3_next");
    let text = estimate(&other, &settings).unwrap_err().to_string();
    assert!(
        text.contains("`layer_types[3]` is \"indexed_attention\""),
        "{text}"
    );
    // QSA's caches and PLE's state kv does not size: refused by name.
    let mut qsa = small_qwen4_exp();
    qsa["indexer_n_heads"] = json!(32);
    let text = estimate(&qsa, &settings).unwrap_err().to_string();
    assert!(
        text.contains("`indexer_n_heads` 32: Qwen4-Exp's QSA"),
        "{text}"
    );
    let mut ple = small_qwen4_exp();
    ple["ple_layer_ids"] = json!([0, 2]);
    let text = estimate(&ple, &settings).unwrap_err().to_string();
    assert!(text.contains("`ple_layer_ids` lists 2 layer(s)"), "{text}");
    ple["ple_layer_ids"] = json!([]);
    assert!(estimate(&ple, &settings).is_ok());
    // Without a gate vLLM knows, its class fails.
    let mut ungated = small_qwen4_exp();
    ungated.as_object_mut().unwrap().remove("output_gate_type");
    let text = estimate(&ungated, &settings).unwrap_err().to_string();
    assert!(text.contains("qwen_gdn_linear_attn.py:662"), "{text}");
}

#[test]
fn families_whose_caches_kv_does_not_size_are_refused_by_name() {
    let settings = EstimateSettings::new().positions(4096);
    // Step-5: vLLM refuses a config without `sparse_config`; with one, its
    // DSA kernels refuse a head of 128 (tests/estimate_step5.rs sizes one
    // of 192).
    let step5 = json!({
        "architectures": ["Step5ForCausalLM"], "model_type": "step5",
        "num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
        "num_attention_groups": 2, "head_dim": 128, "max_seq_len": 4096,
        "torch_dtype": "bfloat16",
    });
    let text = estimate(&step5, &settings).unwrap_err().to_string();
    assert!(
        text.contains("vLLM 0.33 would not start: the config has no `sparse_config` section"),
        "{text}"
    );
    let mut sparse = step5.clone();
    sparse["sparse_config"] = json!({"enabled": false, "proxy_dim": 256});
    let text = estimate(&sparse, &settings).unwrap_err().to_string();
    assert!(
        text.contains("Step5 DSA kernels require head_size 192, got 128"),
        "{text}"
    );
}

#[test]
fn sglang_only_families_whose_state_kv_does_not_size_are_refused_by_name() {
    let settings = EstimateSettings::new().positions(4096).for_another_engine();
    let gigachat = json!({
        "architectures": ["GigaChat35ForCausalLM"], "model_type": "gigachat3_5",
        "num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
        "kv_lora_rank": 512, "qk_rope_head_dim": 64, "torch_dtype": "bfloat16",
    });
    let text = estimate(&gigachat, &settings).unwrap_err().to_string();
    assert!(
        text.contains("GigaChat3.5 keeps Gated DeltaNet state"),
        "{text}"
    );
    let mut zaya = json!({
        "architectures": ["ZayaForCausalLM"], "model_type": "zaya",
        "num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 128, "torch_dtype": "bfloat16",
    });
    let text = estimate(&zaya, &settings).unwrap_err().to_string();
    assert!(
        text.contains("`cca` is not set (transformers' ZayaConfig"),
        "{text}"
    );
    zaya["cca"] = json!(true);
    let text = estimate(&zaya, &settings).unwrap_err().to_string();
    assert!(text.contains("`cca` is set: Zaya's compressed"), "{text}");
    // Plain attention without CCA is read by its keys.
    zaya["cca"] = json!(false);
    assert!(estimate(&zaya, &settings).is_ok());
}
