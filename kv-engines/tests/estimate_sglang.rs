//! SGLang 0.5.23's pools (`kv_engines::estimate::sglang::sglang_pools`): figures worked
//! out by hand from SGLang's rules, each in a comment. The same cases were
//! run through SGLang's own KVCacheConfigurator (scripts/sglang/compare.py).

use kv_core::KvError;
use kv_engines::estimate::sglang::{sglang_pools, SglangKvDtype, SglangPools, SglangSettings};
use kv_engines::estimate::{estimate, EstimateSettings};
use serde_json::{json, Value};

const GIB_40: u64 = 40 << 30;

fn qwen3_8b() -> Value {
    json!({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "head_dim": 128, "hidden_size": 4096, "num_attention_heads": 32,
        "num_hidden_layers": 36, "num_key_value_heads": 8,
        "max_position_embeddings": 40960, "torch_dtype": "bfloat16",
    })
}

fn pools(config: &Value, settings: &SglangSettings, bytes: u64) -> Result<SglangPools, KvError> {
    let attn_tp = settings.attn_tp()?;
    let estimate = estimate(config, &EstimateSettings::new().tensor_parallel(attn_tp))?;
    sglang_pools(config, &estimate, settings, bytes)
}

/// SGLang's default pools at 40 GiB.
fn sized(config: &Value) -> SglangPools {
    pools(config, &SglangSettings::default(), GIB_40).unwrap()
}

/// Why kv refuses SGLang's default pools at 40 GiB.
fn refused(config: &Value) -> String {
    pools(config, &SglangSettings::default(), GIB_40)
        .unwrap_err()
        .to_string()
}

fn settings(tp: u64, dp: u64, dtype: SglangKvDtype) -> SglangSettings {
    let mut settings = SglangSettings::default();
    settings.tp = tp;
    settings.dp = dp;
    settings.kv_cache_dtype = dtype;
    settings
}

#[test]
fn dense_gqa_counts_tokens_with_page_size_one() {
    let pools = pools(&qwen3_8b(), &SglangSettings::default(), GIB_40).unwrap();
    // Cell: 36 layers x 8 heads x (128 + 128) x 2 B = 147,456 B per token;
    // 42,949,672,960 // 147,456 = 291,271 (291,271.1).
    // K: (291,271 + 1 padding page) x 36 x 8 x 128 x 2 = 21,474,902,016 B = 20.0001 GiB.
    // Requests: int(291,271 / 40,960 x 512) = 3,640, within [2048, 4096], below 291,271 // 2.
    assert_eq!(pools.full.tokens, 291_271);
    assert_eq!(pools.full.k_bytes, 21_474_902_016);
    assert_eq!(pools.max_running_requests, 3_640);
    assert_eq!(
        pools.lines(),
        ["KV Cache is allocated. dtype: torch.bfloat16, #tokens: 291271, K size: 20.00 GB, V size: 20.00 GB"]
    );
    assert_eq!(pools.engine, "sglang 0.5.23");
}

#[test]
fn a_model_sglang_serves_on_trtllm_mha_takes_its_page_of_64() {
    // Beam runs on TRT-LLM MHA on Hopper, which takes pages of 16, 32, 64
    // or 128 and changes another (SGLang's default 1) to 64. Qwen3-8B's
    // geometry: 291,271 tokens of 147,456 B fit 40 GiB; in whole pages of
    // 64, 291,264. K: (291,264 + 64) x 36 x 8 x 128 x 2 = 21,479,030,784 B.
    let mut beam = qwen3_8b();
    beam["architectures"] = json!(["BeamForCausalLM"]);
    let pools_at = |page: u64| {
        let mut settings = SglangSettings::default();
        settings.page_size = page;
        pools(&beam, &settings, GIB_40).unwrap()
    };
    let default = pools_at(1);
    assert_eq!(default.page_size, 64);
    assert_eq!(default.full.tokens, 291_264);
    assert_eq!(default.full.k_bytes, 21_479_030_784);
    assert_eq!(pools_at(8).page_size, 64);
    // A page it runs is kept: 128, 291,200 tokens.
    let kept = pools_at(128);
    assert_eq!((kept.page_size, kept.full.tokens), (128, 291_200));
    // Another architecture keeps the page asked.
    let qwen = pools(&qwen3_8b(), &SglangSettings::default(), GIB_40).unwrap();
    assert_eq!((qwen.page_size, qwen.full.tokens), (1, 291_271));
}

#[test]
fn tp_divides_kv_heads_with_a_floor_of_one_and_fp8_halves() {
    // TP 16: 8 // 16 = 0 heads, floored to 1: 36 x 1 x 256 x 2 = 18,432 B;
    // 42,949,672,960 // 18,432 = 2,330,168 (2,330,168.9).
    let tp16 = pools(&qwen3_8b(), &settings(16, 1, SglangKvDtype::Auto), GIB_40).unwrap();
    assert_eq!(tp16.full.tokens, 2_330_168);
    // TP 8 with DP attention 4: attention on 2 ranks, 4 heads each:
    // 36 x 4 x 256 x 2 = 73,728 B; 42,949,672,960 // 73,728 = 582,542 (582,542.2),
    // a full pool per worker.
    let dp = pools(&qwen3_8b(), &settings(8, 4, SglangKvDtype::Auto), GIB_40).unwrap();
    assert_eq!((dp.attn_tp, dp.attn_dp, dp.full.tokens), (2, 4, 582_542));
    // fp8: 1 B an element, 36 x 8 x 256 x 1 = 73,728 B: the same 582,542 tokens.
    let fp8 = pools(&qwen3_8b(), &settings(1, 1, SglangKvDtype::Fp8E4m3), GIB_40).unwrap();
    assert_eq!(fp8.full.tokens, 582_542);
    assert!(fp8.lines()[0].contains("dtype: torch.float8_e4m3fn, #tokens: 582542"));
    let e5m2 = pools(&qwen3_8b(), &settings(1, 1, SglangKvDtype::Fp8E5m2), GIB_40).unwrap();
    assert!(e5m2.lines()[0].contains("dtype: torch.float8_e5m2, #tokens: 582542"));
}

#[test]
fn mla_latent_is_one_kv_never_divided_by_tp() {
    let deepseek = json!({
        "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
        "num_hidden_layers": 27, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "v_head_dim": 128, "num_attention_heads": 16,
        "num_key_value_heads": 16, "hidden_size": 2048,
        "max_position_embeddings": 163840, "torch_dtype": "bfloat16",
    });
    // (512 + 64) x 27 layers x 2 B = 31,104 B per token on every rank;
    // 42,949,672,960 // 31,104 = 1,380,840; KV: 1,380,841 x 31,104 =
    // 42,949,678,464 B = 40.000005 GiB.
    for tp in [1, 8] {
        let pools = pools(&deepseek, &settings(tp, 1, SglangKvDtype::Auto), GIB_40).unwrap();
        assert_eq!(
            pools.lines(),
            ["KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1380840, KV size: 40.00 GB"],
            "tp {tp}"
        );
    }
}

fn gpt_oss_20b() -> Value {
    let layer_types: Vec<&str> = (0..24)
        .map(|i| {
            if i % 2 == 0 {
                "sliding_attention"
            } else {
                "full_attention"
            }
        })
        .collect();
    json!({
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
        "head_dim": 64, "hidden_size": 2880, "num_attention_heads": 64,
        "num_hidden_layers": 24, "num_key_value_heads": 8, "layer_types": layer_types,
        "sliding_window": 128, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
    })
}

#[test]
fn allow_listed_sliding_window_gets_its_own_pool_at_the_ratio() {
    let pools = pools(&gpt_oss_20b(), &SglangSettings::default(), GIB_40).unwrap();
    // Full and SWA cells alike: 12 layers x 8 x (64 + 64) x 2 = 24,576 B;
    // cell 24,576 + 0.8 x 24,576 = 44,236.8; 42,949,672,960 // 44,236.8 = 970,903;
    // SWA int(970,903 x 0.8) = 776,722.
    // Full K: 970,904 x 12 x 8 x 64 x 2 = 11,930,468,352 B = 11.111 GiB;
    // SWA K: 776,723 x 12,288 = 9,544,372,224 B = 8.889 GiB;
    // all four: 42,949,681,152 B = 40.000008 GiB.
    assert_eq!(
        pools.lines(),
        [
            "Use sliding window memory pool. full_layer_tokens=970903, swa_layer_tokens=776722",
            "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 970903, K size: 11.11 GB, V size: 11.11 GB",
            "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 776722, K size: 8.89 GB, V size: 8.89 GB",
            "SWAKVPool mem usage: 40.00 GB, swa size: 776722, full size: 970903",
        ]
    );
    // Requests from the full pool's tokens, SGLang's `max_total_num_tokens`:
    // 970,903 / 131,072 x 512 = 3,792.6.
    assert_eq!(pools.max_running_requests, 3792);
}

#[test]
fn the_ratio_applies_to_the_sliding_layers_only() {
    // Three sliding layers to one full: full 6 x 8 x 128 x 2 = 12,288 B, SWA
    // 18 x 2,048 = 36,864 B; cell 12,288 + 0.8 x 36,864 = 41,779.2;
    // 42,949,672,960 // 41,779.2 = 1,028,015 (x 41,779.2 = 42,949,644,288 B, one more
    // is over); SWA int(1,028,015 x 0.8) = 822,412.
    let mut three_to_one = gpt_oss_20b();
    three_to_one["layer_types"] = json!((0..24)
        .map(|i| if i % 4 == 3 {
            "full_attention"
        } else {
            "sliding_attention"
        })
        .collect::<Vec<_>>());
    let pools = sized(&three_to_one);
    assert_eq!(pools.full.tokens, 1_028_015);
    assert_eq!(pools.swa.map(|p| p.tokens), Some(822_412));
}

#[test]
fn an_allow_listed_architecture_without_sliding_layers_is_refused_or_plain() {
    // GptOss (on the list, configs/model_config.py:2661) whose every layer is
    // full: SGLang's SWA configurator asserts a sliding layer
    // (model_executor/pool_configurator.py:668).
    let mut all_full = gpt_oss_20b();
    all_full["layer_types"] = json!(vec!["full_attention"; 24]);
    let error = refused(&all_full);
    assert!(
        error.contains("AssertionError: Hybrid SWA model must have at least one SWA layer"),
        "{error}"
    );
    // Laguna without a sliding_window is not hybrid SWA (:2685-2690): one
    // pool, as a plain model. Its 24 layers x 8 x (64 + 64) x 2 B = 49,152 B;
    // 42,949,672,960 // 49,152 = 873,813 (873,813.3).
    let mut laguna = all_full.clone();
    laguna["architectures"] = json!(["LagunaForCausalLM"]);
    laguna["sliding_window"] = Value::Null;
    let pools = sized(&laguna);
    assert_eq!((pools.swa.is_none(), pools.full.tokens), (true, 873_813));
}

#[test]
fn sliding_layers_off_the_allow_list_are_stored_at_full_length() {
    // Gemma 3 (not allow-listed): all 6 layers, 5 sliding and 1 global, in one
    // pool: 6 x 2 heads x (256 + 256) x 2 B = 12,288 B; 2^30 // 12,288 = 87,381.
    let gemma = json!({
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
        "head_dim": 256, "hidden_size": 1152, "num_attention_heads": 4,
        "num_hidden_layers": 6, "num_key_value_heads": 2, "sliding_window": 512,
        "sliding_window_pattern": 6, "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    });
    let pools = pools(&gemma, &SglangSettings::default(), 1 << 30).unwrap();
    assert_eq!(pools.swa, None);
    assert_eq!(pools.full.tokens, 87_381);
    // SGLang's dtype is the config's; only an unset or float32 one is
    // replaced (Gemma by bfloat16, others by float16).
    for (written, served) in [
        (json!("float16"), "torch.float16"),
        (json!("float32"), "torch.bfloat16"),
        (Value::Null, "torch.bfloat16"),
    ] {
        let mut config = gemma.clone();
        config["torch_dtype"] = written;
        let pools = self::pools(&config, &SglangSettings::default(), 1 << 30).unwrap();
        assert_eq!(pools.dtype, served);
    }
    let mut qwen = qwen3_8b();
    qwen["torch_dtype"] = json!("float32");
    let pools = self::pools(&qwen, &SglangSettings::default(), 1 << 30).unwrap();
    assert_eq!(pools.dtype, "torch.float16");
}

#[test]
fn max_total_tokens_solves_the_swa_pools_again_and_both_are_logged() {
    let mut capped = SglangSettings::default();
    capped.max_total_tokens = Some(100_000);
    let swa = pools(&gpt_oss_20b(), &capped, GIB_40).unwrap();
    // 100,000 < 970,903: full 100,000, SWA int(100,000 x 0.8) = 80,000.
    let lines = swa.lines();
    assert_eq!(
        lines[..2],
        [
            "Use sliding window memory pool. full_layer_tokens=970903, swa_layer_tokens=776722",
            "Use sliding window memory pool. full_layer_tokens=100000, swa_layer_tokens=80000",
        ]
    );
    // Dense: min(291,271, 50,000); requests: int(50,000 / 40,960 x 512) = 625,
    // raised to 2,048, below 25,000; asked 100 over DP 1: 100.
    let mut dense = SglangSettings::default();
    dense.max_total_tokens = Some(50_000);
    dense.max_running_requests = Some(100);
    let pools = pools(&qwen3_8b(), &dense, GIB_40).unwrap();
    assert_eq!(
        (pools.full.tokens, pools.max_running_requests),
        (50_000, 100)
    );
}

#[test]
fn minicpm3_is_an_mla_latent_in_sglang() {
    // SGLang serves MiniCPM3 with MLA: (256 + 32) x 62 layers x 2 B = 35,712 B
    // a token; 42,949,672,960 // 35,712 = 1,202,667.
    let minicpm3 = json!({
        "architectures": ["MiniCPM3ForCausalLM"], "model_type": "minicpm3",
        "num_hidden_layers": 62, "hidden_size": 2560, "num_attention_heads": 40,
        "num_key_value_heads": 40, "kv_lora_rank": 256, "qk_rope_head_dim": 32,
        "qk_nope_head_dim": 64, "v_head_dim": 64, "q_lora_rank": 768,
        "max_position_embeddings": 32768, "torch_dtype": "bfloat16",
    });
    let pools = sized(&minicpm3);
    assert!(pools.mla);
    assert_eq!(pools.full.tokens, 1_202_667);
}

#[test]
fn every_layer_sliding_is_sglangs_all_swa_pool_without_the_ratio() {
    // 24 sliding layers x 8 x (64 + 64) x 2 B = 49,152 B a token, the ratio
    // not applied: 42,949,672,960 // 49,152 = 873,813 tokens.
    let mut all_sliding = gpt_oss_20b();
    all_sliding["layer_types"] = json!(vec!["sliding_attention"; 24]);
    let p = sized(&all_sliding);
    assert_eq!(p.full.tokens, 0);
    assert_eq!(p.swa.as_ref().unwrap().tokens, 873_813);
    // SGLang's `max_total_num_tokens` is the SWA pool's: requests
    // 873,813 / 131,072 x 512 = 3,413, within 2,048..4,096.
    assert_eq!(p.max_running_requests, 3413);
    assert_eq!(
        p.lines()[0],
        "Use sliding window memory pool (all SWA). swa_layer_tokens=873813"
    );
}

#[test]
fn a_too_small_swa_pool_is_refused_as_sglang_refuses_it() {
    // 24,576 x 1.8 = 44,236.8 B a full token: 5,000,000 B hold 113 full and
    // int(113 x 0.8) = 90 SWA tokens, under the window 128 + page 1.
    let error = pools(&gpt_oss_20b(), &SglangSettings::default(), 5_000_000).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("SWA pool (90 tokens) cannot hold even one request"),
        "{error}"
    );
}

fn qwen3_next() -> Value {
    json!({
        "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next",
        "num_hidden_layers": 48, "full_attention_interval": 4, "hidden_size": 2048,
        "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
        "linear_num_key_heads": 16, "linear_key_head_dim": 128,
        "linear_num_value_heads": 32, "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4, "max_position_embeddings": 262144,
        "torch_dtype": "bfloat16",
    })
}

#[test]
fn gated_deltanet_state_takes_whole_slots_first() {
    let qwen3_next = qwen3_next();
    let pools = sized(&qwen3_next);
    // 36 GDN layers: conv (32 x 128 + 2 x 16 x 128) x 3 x bf16 = 49,152 B,
    // SSM 32 x 128 x 128 x f32 = 2,097,152 B: 77,266,944 B a slot.
    // Budget 40 x 0.9 / 1.9 GiB = 20,344,055,087.2 B; (budget - slot) // slot = 262.
    // KV gets 42,949,672,960 - 263 x 77,266,944 = 22,628,466,688 B; its cell is
    // the 12 full layers': 12 x 2 x 512 x 2 = 24,576 B: 920,754 tokens.
    // conv: 36 x 263 x 49,152 = 465,371,136 B = 0.433 GiB; SSM 36 x 263 x
    // 2,097,152 = 19,855,835,136 B = 18.49 GiB. Requests: 262 // 5 = 52.
    let mamba = pools.mamba.clone().unwrap();
    assert_eq!((mamba.slots, mamba.bytes_per_slot), (262, 77_266_944));
    assert_eq!(pools.full.tokens, 920_754);
    assert_eq!(pools.max_running_requests, 52);
    let lines = pools.lines();
    assert!(lines[0].starts_with("max_running_requests is capped to 52 by the mamba state cache"));
    assert_eq!(
        lines[1],
        "Mamba Cache is allocated. max_mamba_cache_size: 262, conv_state size: 0.43GB, ssm_state size: 18.49GB "
    );
    assert!(lines[2].starts_with("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 920754,"));
}

#[test]
fn mamba2_state_splits_over_tp_and_the_ssm_is_f32() {
    let nemotron_h = json!({
        "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
        "hybrid_override_pattern": "M-M-M-M-*-M-M-M-M-M-*-M-M-M-M-M-*-M-M-M-M-M-*-M-M-M-",
        "num_hidden_layers": 52, "hidden_size": 4096, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "mamba_num_heads": 128,
        "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
        "expand": 2, "max_position_embeddings": 8192, "torch_dtype": "bfloat16",
    });
    // 22 Mamba2 layers: conv (128 x 64 + 2 x 8 x 128 = 10,240) x 3 x bf16 = 61,440 B,
    // SSM 128 x 64 x 128 x f32 = 4,194,304 B: 93,626,368 B a slot.
    // 40 x 0.9 / 1.9 GiB = 217.3 slots' worth; less the padding slot: 216.
    // KV: 42,949,672,960 - 217 x 93,626,368 = 22,632,751,104 B over the 4
    // attention layers' 4 x 8 x 256 x 2 = 16,384 B: 1,381,393 tokens.
    // Requests: 216 // 5 = 43.
    let tp1 = sized(&nemotron_h);
    assert_eq!(
        tp1.mamba.as_ref().map(|m| m.bytes_per_slot),
        Some(93_626_368)
    );
    assert_eq!(
        (
            tp1.mamba.as_ref().map(|m| m.slots),
            tp1.full.tokens,
            tp1.max_running_requests
        ),
        (Some(216), 1_381_393, 43)
    );
    // TP 2 halves the slot (46,813,184 B) and the KV cell (8,192 B):
    // 40 x 0.9 / 1.9 GiB over 46,813,184 B is 434.6, less the padding slot: 433;
    // KV: 42,949,672,960 - 434 x 46,813,184 = 22,632,751,104 B: 2,762,787 tokens.
    let tp2 = pools(&nemotron_h, &settings(2, 1, SglangKvDtype::Auto), GIB_40).unwrap();
    assert_eq!(
        (
            tp2.mamba.as_ref().map(|m| m.slots),
            tp2.full.tokens,
            tp2.max_running_requests
        ),
        (Some(433), 2_762_787, 86)
    );
}

#[test]
fn jamba_is_refused_as_sglang_refuses_it_at_load() {
    let jamba = json!({
        "architectures": ["JambaForCausalLM"], "model_type": "jamba",
        "num_hidden_layers": 32, "attn_layer_period": 8, "attn_layer_offset": 4,
        "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
        "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
        "max_position_embeddings": 262144, "torch_dtype": "bfloat16",
    });
    let error = pools(&jamba, &SglangSettings::default(), GIB_40).unwrap_err();
    assert_eq!(
        error.to_string(),
        "kv: cannot read SGLang 0.5.23's pools from the config: SGLang would not start: \
         JambaForCausalLM has no SGlang implementation and the Transformers implementation is \
         not compatible with SGLang."
    );
}

#[test]
fn bad_layouts_and_overflow_are_errors_not_panics() {
    // TP 3 is no multiple of DP 2.
    let mut odd = SglangSettings::default();
    odd.tp = 3;
    odd.dp = 2;
    assert!(odd.attn_tp().is_err());
    // Zero ranks either way.
    for (tp, dp) in [(0, 1), (1, 0), (0, 0)] {
        odd.tp = tp;
        odd.dp = dp;
        assert!(odd.attn_tp().is_err(), "tp {tp} dp {dp}");
    }
    odd.tp = 8;
    odd.dp = 2;
    assert_eq!(odd.attn_tp().unwrap(), 4);
    // An estimate made for another TP size than SGLang's attention TP.
    let estimate = estimate(&qwen3_8b(), &EstimateSettings::new()).unwrap();
    let error = sglang_pools(
        &qwen3_8b(),
        &estimate,
        &settings(2, 1, SglangKvDtype::Auto),
        GIB_40,
    )
    .unwrap_err();
    assert!(error.to_string().contains("tensor parallel 1"), "{error}");
    // u64::MAX bytes: 18,446,744,073,709,551,615 // 147,456 = 125,099,989,649,180
    // tokens; K (125,099,989,649,181 x 73,728 = 9,223,372,036,854,816,768 B) fits.
    let most = pools(&qwen3_8b(), &SglangSettings::default(), u64::MAX).unwrap();
    assert_eq!(most.full.tokens, 125_099_989_649_180);
    assert_eq!(most.full.k_bytes, 9_223_372_036_854_816_768);
    assert!(most.lines()[0].contains("K size: 8589934592.00 GB"));
    // Ratios must be finite and positive, and the page size positive.
    for ratio in [0.0, -0.5, f64::NAN, f64::INFINITY] {
        let mut swa = SglangSettings::default();
        swa.swa_full_tokens_ratio = ratio;
        assert!(
            pools(&gpt_oss_20b(), &swa, GIB_40).is_err(),
            "swa ratio {ratio}"
        );
        let mut mamba = SglangSettings::default();
        mamba.mamba_full_memory_ratio = ratio;
        assert!(
            pools(&qwen3_8b(), &mamba, GIB_40).is_err(),
            "mamba ratio {ratio}"
        );
    }
    let mut no_page = SglangSettings::default();
    no_page.page_size = 0;
    assert!(pools(&qwen3_8b(), &no_page, GIB_40).is_err());
    // Too little for one token.
    assert!(pools(&qwen3_8b(), &SglangSettings::default(), 1000).is_err());
}

#[test]
fn json_names_the_engine() {
    let pools = pools(&qwen3_8b(), &SglangSettings::default(), GIB_40).unwrap();
    let value = serde_json::to_value(&pools).unwrap();
    assert_eq!(value["engine"], "sglang 0.5.23");
    assert_eq!(value["full"]["tokens"], 291_271);
}

#[test]
fn pages_align_the_pool_down() {
    // Page 64: 291,271 // 64 x 64 = 291,264 tokens; K (291,264 + 64) x 73,728 B.
    let mut paged = SglangSettings::default();
    paged.page_size = 64;
    let pools = pools(&qwen3_8b(), &paged, GIB_40).unwrap();
    assert_eq!(pools.full.tokens, 291_264);
    assert_eq!(pools.full.k_bytes, 291_328 * 73_728);
    // The SWA pools too: 970,903 // 64 x 64 = 970,880; int(970,880 x 0.8) =
    // 776,704, already a multiple of 64.
    let swa = pools_of(&gpt_oss_20b(), &paged);
    assert_eq!(
        (swa.full.tokens, swa.swa.map(|p| p.tokens)),
        (970_880, Some(776_704))
    );
}

fn pools_of(config: &Value, settings: &SglangSettings) -> SglangPools {
    pools(config, settings, GIB_40).unwrap()
}

#[test]
fn max_total_tokens_at_or_above_the_pool_changes_nothing() {
    for cap in [970_903, 5_000_000] {
        let mut capped = SglangSettings::default();
        capped.max_total_tokens = Some(cap);
        let swa = pools_of(&gpt_oss_20b(), &capped);
        assert_eq!(swa.full.tokens, 970_903, "cap {cap}");
        assert_eq!(swa.lines().len(), 4, "cap {cap}: one solution logged");
    }
}

#[test]
fn running_requests_per_worker_and_at_most_half_the_tokens() {
    // Asked 64 over DP 4: 16 a worker.
    let mut asked = settings(8, 4, SglangKvDtype::Auto);
    asked.max_running_requests = Some(64);
    assert_eq!(pools_of(&qwen3_8b(), &asked).max_running_requests, 16);
    // 1,000 tokens (147,456,000 B): min(2,048, 1,000 // 2) = 500.
    let small = pools(&qwen3_8b(), &SglangSettings::default(), 147_456_000).unwrap();
    assert_eq!(
        (small.full.tokens, small.max_running_requests),
        (1_000, 500)
    );
    // Asked 10,000 of those 1,000 tokens: at most 1,000 // 2 = 500 too.
    let mut many = SglangSettings::default();
    many.max_running_requests = Some(10_000);
    let capped = pools(&qwen3_8b(), &many, 147_456_000).unwrap();
    assert_eq!(capped.max_running_requests, 500);
}

#[test]
fn the_mamba_cap_applies_only_below_the_requests() {
    // 262 slots cap at 52; asking 16 or exactly 52 leaves no cap and no warning.
    for asked in [16, 52] {
        let mut settings = SglangSettings::default();
        settings.max_running_requests = Some(asked);
        let pools = pools_of(&qwen3_next(), &settings);
        assert_eq!(pools.max_running_requests, asked);
        assert!(
            pools.lines()[0].starts_with("Mamba Cache is allocated."),
            "{asked}"
        );
    }
}

#[test]
fn a_model_with_no_attention_is_outside_the_profile() {
    // Mamba2 alone: SGLang keeps a token pool of no bytes; kv says it does not size it.
    let mamba2 = json!({
        "architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2",
        "num_hidden_layers": 64, "hidden_size": 2560, "state_size": 128, "expand": 2,
        "head_dim": 64, "num_heads": 80, "n_groups": 1, "conv_kernel": 4,
        "max_position_embeddings": 2048, "torch_dtype": "bfloat16",
    });
    let error = pools(&mamba2, &SglangSettings::default(), GIB_40).unwrap_err();
    assert!(error.to_string().contains("no attention KV"), "{error}");
}

#[test]
fn a_state_pool_too_small_is_refused_in_sglangs_words() {
    // Qwen3-Next's slot is 77,266,944 B. 200,000,000 B: the state's share
    // 200,000,000 x 0.9 / 1.9 = 94,736,842 B holds (94,736,842 - 77,266,944)
    // // 77,266,944 = 0 slots: SGLang's "Not enough GPU memory".
    let none = pools(&qwen3_next(), &SglangSettings::default(), 200_000_000).unwrap_err();
    assert!(none.to_string().contains("Not enough GPU memory"), "{none}");
    // 400,000,000 B: 189,473,684 B hold 1 slot, and 1 // 5 = 0 requests:
    // "too small to serve any requests".
    let one = pools(&qwen3_next(), &SglangSettings::default(), 400_000_000).unwrap_err();
    assert!(one.to_string().contains("max_mamba_cache_size=1"), "{one}");
}

#[test]
fn mamba_ssm_dtype_in_the_config_halves_the_ssm_state() {
    // `mamba_ssm_dtype` bfloat16: SSM 32 x 128 x 128 x 2 = 1,048,576 B, with the
    // conv 49,152 B, 36 layers: 39,518,208 B a slot. 40 x 0.9 / 1.9 GiB over it
    // is 514.8, less the padding slot: 513; 513 // 5 = 102 requests; KV gets
    // 42,949,672,960 - 514 x 39,518,208 = 22,637,314,048 B: 921,114 tokens.
    let mut config = qwen3_next();
    config["mamba_ssm_dtype"] = json!("bfloat16");
    let pools = sized(&config);
    let mamba = pools.mamba.clone().unwrap();
    assert_eq!((mamba.bytes_per_slot, mamba.slots), (39_518_208, 513));
    assert_eq!(
        (pools.full.tokens, pools.max_running_requests),
        (921_114, 102)
    );
}

#[test]
fn a_multimodal_model_reserves_100_mib_before_its_pools_are_sized() {
    // SGLang 0.5.23, mem_cache/kv_cache_configurator.py:202-219 and :3034-3038:
    // a multimodal model's KV budget loses SGLANG_VLM_CACHE_SIZE_MB = 100 MiB
    // (environ.py:1598; the feature-transport pool only for cuda_ipc/cuda_vmm),
    // logged as "Reserving %.2f GB" of 100 / 1024 = 0.09765625 -> "0.10".
    // Qwen3VLForConditionalGeneration is on configs/model_config.py:2391's list.
    let mut vl = qwen3_8b();
    vl["architectures"] = json!(["Qwen3VLForConditionalGeneration"]);
    let pools = sized(&vl);
    // Left: 42,949,672,960 - 104,857,600 = 42,844,815,360 B; cell 36 x 8 x 256 x 2
    // = 147,456 B; 147,456 x 290,560 = 42,762,240,000 + 82,575,360 = 42,844,815,360:
    // exactly 290,560 tokens. K: 290,561 x 36 x 8 x 128 x 2 = 290,561 x 73,728
    // = 21,422,481,408 B = 19.951 GiB. Requests: 290,560 / 40,960 x 512 = 3,632.
    assert_eq!(pools.mm_reservation_bytes, 104_857_600);
    assert_eq!(pools.full.tokens, 290_560);
    assert_eq!(pools.full.k_bytes, 21_422_481_408);
    assert_eq!(pools.max_running_requests, 3_632);
    assert_eq!(
        pools.lines(),
        [
            "Reserving 0.10 GB of the KV budget for post-sizing multimodal allocations \
             (feature-transport pools + embedding cache).",
            "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 290560, K size: 19.95 GB, \
             V size: 19.95 GB",
        ]
    );
}

#[test]
fn a_text_sub_config_is_multimodal_unless_sglang_turns_it_off() {
    // configs/model_config.py:820: multimodal also where the text model is a
    // sub-config (get_hf_text_config, utils/hf_transformers/common.py:547),
    // whatever the architecture; not where the first architecture is on
    // mm_disabled_models (:692, Gemma 3's) or the config says
    // language_model_only (:674).
    let text = qwen3_8b();
    let with_sub = json!({
        "architectures": ["MyVisionForConditionalGeneration"], "model_type": "qwen3",
        "torch_dtype": "bfloat16", "text_config": text, "vision_config": {"depth": 2},
    });
    // Reserved: 290,560 tokens, as above.
    let reserved = sized(&with_sub);
    assert_eq!(reserved.full.tokens, 290_560);
    let mut gemma3 = with_sub.clone();
    gemma3["architectures"] = json!(["Gemma3ForConditionalGeneration"]);
    let mut lm_only = with_sub.clone();
    lm_only["language_model_only"] = json!(true);
    for config in [gemma3, lm_only] {
        // Not reserved: 42,949,672,960 // 147,456 = 291,271, as a text model.
        let pools = sized(&config);
        assert_eq!(
            (pools.mm_reservation_bytes, pools.full.tokens),
            (0, 291_271)
        );
        assert!(pools.lines()[0].starts_with("KV Cache is allocated."));
    }
}

#[test]
fn a_budget_within_the_multimodal_reservation_is_refused() {
    // kv_cache_configurator.py:3038-3043: rest_memory <= 0 raises ValueError
    // ("Loaded weights leave no GPU memory for the KV cache").
    let mut vl = qwen3_8b();
    vl["architectures"] = json!(["Qwen3VLForConditionalGeneration"]);
    for budget in [0, 104_857_600] {
        let error = pools(&vl, &SglangSettings::default(), budget)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("ValueError: Loaded weights leave no GPU memory for the KV cache"),
            "{error}"
        );
    }
    // One byte more leaves 1 B: no whole token of 147,456 B.
    let error = pools(&vl, &SglangSettings::default(), 104_857_601)
        .unwrap_err()
        .to_string();
    assert!(error.contains("leave no whole token"), "{error}");
}

#[test]
fn gemma_3n_kv_shared_layers_keep_a_slot_in_sglangs_pool() {
    // Gemma-3n-E4B's text model: 35 layers, the last 15 KV-shared. They read
    // earlier layers' caches (models/gemma3n_causal.py:374), but SGLang's pool
    // has a slot for each of num_hidden_layers
    // (model_executor/model_runner_components/layer_setup.py:154).
    let layer_types: Vec<&str> = (0..35)
        .map(|i| {
            if i % 5 == 4 {
                "full_attention"
            } else {
                "sliding_attention"
            }
        })
        .collect();
    let gemma3n = json!({
        "architectures": ["Gemma3nForCausalLM"], "model_type": "gemma3n_text",
        "num_hidden_layers": 35, "num_kv_shared_layers": 15, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 256, "hidden_size": 2048,
        "sliding_window": 512, "layer_types": layer_types,
        "max_position_embeddings": 32768, "torch_dtype": "bfloat16",
    });
    let pools = sized(&gemma3n);
    // Cell: 35 layers x 2 heads x (256 + 256) x 2 B = 71,680 B (not the 20
    // owning layers' 40,960 B). 71,680 x 599,186 = 42,949,652,480, 20,480 B
    // short of 42,949,672,960: 599,186 tokens. K: 599,187 x 35 x 2 x 256 x 2
    // = 599,187 x 35,840 = 21,474,862,080 B = 19.99996 GiB -> "20.00".
    // Requests: 599,186 / 32,768 x 512 = 9,362.3, clamped to 4,096.
    assert_eq!(pools.full.tokens, 599_186);
    assert_eq!(pools.full.k_bytes, 21_474_862_080);
    assert_eq!(pools.max_running_requests, 4_096);
    assert_eq!(
        pools.lines(),
        ["KV Cache is allocated. dtype: torch.bfloat16, #tokens: 599186, K size: 20.00 GB, V size: 20.00 GB"]
    );
}

#[test]
fn llama_4s_chunked_layers_are_the_swa_pool_where_allow_listed() {
    // configs/model_config.py:2705 (`get_hybrid_layer_ids`): for
    // Llama4ForConditionalGeneration (on the hybrid-SWA list) the layers with
    // (i + 1) % 4 != 0, its chunked ones, make the SWA pool. 8 layers: 2 full,
    // 6 chunked; it is on mm_disabled_models (:692), so nothing is reserved.
    let llama4 = json!({
        "architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
        "torch_dtype": "bfloat16", "vision_config": {"model_type": "llama4_vision_model"},
        "text_config": {
            "model_type": "llama4_text", "num_hidden_layers": 8, "num_attention_heads": 40,
            "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 5120,
            "attention_chunk_size": 8192, "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0],
            "max_position_embeddings": 131072,
        },
    });
    let pools = pools(&llama4, &SglangSettings::default(), 1 << 30).unwrap();
    // A layer: 8 heads x (128 + 128) x 2 B = 4,096 B a token. Full 2 x 4,096 =
    // 8,192 B, SWA 6 x 4,096 = 24,576 B; cell 8,192 + 0.8 x 24,576 = 27,852.8 B.
    // 1,073,741,824 // 27,852.8 = 38,550 (38,550.6); SWA int(38,550 x 0.8) = 30,840.
    // Full K: 38,551 x 2 x 8 x 128 x 2 = 157,904,896 B = 0.147 GiB; SWA K:
    // 30,841 x 6 x 8 x 128 x 2 = 378,974,208 B = 0.353 GiB; all four
    // 1,073,758,208 B = 1.00002 GiB. Requests: 38,550 / 131,072 x 512 = 150,
    // raised to 2,048.
    assert_eq!(pools.full.tokens, 38_550);
    assert_eq!(pools.swa.as_ref().map(|s| s.tokens), Some(30_840));
    assert_eq!(pools.max_running_requests, 2_048);
    assert_eq!(
        pools.lines(),
        [
            "Use sliding window memory pool. full_layer_tokens=38550, swa_layer_tokens=30840",
            "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 38550, K size: 0.15 GB, \
             V size: 0.15 GB",
            "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 30840, K size: 0.35 GB, \
             V size: 0.35 GB",
            "SWAKVPool mem usage: 1.00 GB, swa size: 30840, full size: 38550",
        ]
    );
    // Llama4ForCausalLM is not on the list: every layer at full length,
    // 8 x 4,096 = 32,768 B; 1,073,741,824 // 32,768 = 32,768 tokens.
    let mut text = llama4["text_config"].clone();
    text["architectures"] = json!(["Llama4ForCausalLM"]);
    text["torch_dtype"] = json!("bfloat16");
    let pools = self::pools(&text, &SglangSettings::default(), 1 << 30).unwrap();
    assert_eq!((pools.full.tokens, pools.swa), (32_768, None));
}

#[test]
fn longcat_flash_keeps_two_latents_a_layer() {
    // configs/model_config.py:1583: LongCat-Flash's `num_attention_layers`
    // is twice its layers (two MLA attentions in each). 28 layers x 2 x (512
    // + 64) x 2 B = 64,512 B a token; 42,949,672,960 // 64,512 = 665,762
    // (SGLang's own count on transformers' LongcatFlashConfig defaults).
    let longcat = json!({
        "architectures": ["LongcatFlashForCausalLM"], "model_type": "longcat_flash",
        "num_layers": 28, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "v_head_dim": 128, "num_attention_heads": 64,
        "num_key_value_heads": 64, "hidden_size": 6144,
        "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
    });
    let one = settings(1, 1, SglangKvDtype::Auto);
    assert_eq!(pools(&longcat, &one, GIB_40).unwrap().full.tokens, 665_762);
    // The same layers under another architecture and model type keep one
    // latent each (a `longcat_flash` model type alone would make it
    // LongcatFlashForCausalLM again: SGLang's config parser).
    let mut v3 = longcat.clone();
    v3["architectures"] = json!(["DeepseekV3ForCausalLM"]);
    assert_eq!(pools(&v3, &one, GIB_40).unwrap().full.tokens, 665_762);
    v3["model_type"] = json!("deepseek_v3");
    assert_eq!(pools(&v3, &one, GIB_40).unwrap().full.tokens, 1_331_525);
}

#[test]
fn nanbeiges_published_loops_and_iquests_loop_coder_repeat_alike() {
    // NanbeigeConfig's defaults (SGLang's registry run agrees, 2026-12-07):
    // 22 layers x 2 loops x 2 again = 88 cached layers x 48 heads x (64 +
    // 64) x 2 B = 1,081,344 B a token; 42,949,672,960 // 1,081,344 = 39,718.
    let nanbeige = json!({
        "architectures": ["NanbeigeForCausalLM"], "model_type": "nanbeige",
        "num_hidden_layers": 22, "num_attention_heads": 48, "num_key_value_heads": 48,
        "hidden_size": 3072, "num_loops": 2, "max_position_embeddings": 4096,
        "torch_dtype": "float16",
    });
    let p = pools(&nanbeige, &settings(1, 1, SglangKvDtype::Auto), GIB_40).unwrap();
    assert_eq!(p.full.tokens, 39_718);
    // IQuest's loop coder spells it `loop_num`, read by both counts alike.
    let mut coder = nanbeige;
    coder["architectures"] = json!(["IQuestLoopCoderForCausalLM"]);
    let config = coder.as_object_mut().unwrap();
    config.remove("num_loops");
    config.insert("loop_num".to_owned(), json!(2));
    let p = pools(&coder, &settings(1, 1, SglangKvDtype::Auto), GIB_40).unwrap();
    assert_eq!(p.full.tokens, 39_718);
}

#[test]
fn two_attentions_a_layer_beside_sliding_layers_are_refused() {
    // Not a layout LongCat-Flash ships (its name beside one on SGLang's
    // hybrid-SWA list, under a model type SGLang's parser leaves as listed);
    // kv does not guess how SGLang would repeat a sliding pool.
    let config = json!({
        "architectures": ["LongcatFlashForCausalLM", "GptOssForCausalLM"],
        "model_type": "gpt_oss",
        "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 64, "sliding_window": 128, "max_position_embeddings": 4096,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention",
                        "full_attention"],
        "torch_dtype": "bfloat16",
    });
    let text = pools(&config, &settings(1, 1, SglangKvDtype::Auto), GIB_40)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("repeated attention layers beside sliding layers or a Mamba state"),
        "{text}"
    );
}

#[test]
fn longcat_flash_without_a_dtype_is_bfloat16_as_sglangs_own_config_class_says() {
    // SGLang reads LongCat-Flash with its own LongcatFlashConfig, whose
    // torch_dtype defaults to bfloat16. Two latents a layer: 28 x 2 x (512 +
    // 64) x 2 B = 64,512 B a token; 40 GiB // 64,512 = 665,762 tokens.
    let mut longcat = json!({
        "architectures": ["LongcatFlashForCausalLM"], "model_type": "longcat_flash",
        "num_layers": 28, "num_attention_heads": 64, "num_key_value_heads": 64,
        "hidden_size": 6144, "kv_lora_rank": 512, "q_lora_rank": 1536,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "max_position_embeddings": 131072,
    });
    let bf16 = sized(&longcat);
    assert_eq!((bf16.dtype, bf16.full.tokens), ("torch.bfloat16", 665_762));
    // A dtype the file writes wins.
    longcat["torch_dtype"] = json!("float16");
    assert_eq!(sized(&longcat).dtype, "torch.float16");
}

#[test]
fn chatglm_takes_its_group_count_without_the_multi_query_flag() {
    // ChatGLMConfig's defaults: 28 layers, 32 heads of kv_channels 128,
    // `multi_query_attention` false, `multi_query_group_num` 1. vLLM (and
    // kv's detection) cache 32 KV heads then; SGLang's
    // `get_total_num_kv_heads` reads the group count, 1: 28 x 1 x (128 +
    // 128) x 2 B = 14,336 B per token; 42,949,672,960 // 14,336 =
    // 2,995,931. K: (2,995,931 + 1) x 28 x 128 x 2 = 21,474,840,576 B.
    // (SGLang's own configurator, the registry run: 2,995,931 tokens.)
    let mut chatglm = json!({
        "architectures": ["ChatGLMModel"], "model_type": "chatglm",
        "num_layers": 28, "hidden_size": 4096, "num_attention_heads": 32,
        "kv_channels": 128, "multi_query_attention": false,
        "multi_query_group_num": 1, "seq_length": 2048, "padded_vocab_size": 65024,
        "torch_dtype": "float16",
    });
    let default = sized(&chatglm);
    assert_eq!(default.full.tokens, 2_995_931);
    assert_eq!(default.full.k_bytes, 21_474_840_576);
    // With the flag both engines read 2 groups: 28,672 B per token,
    // 1,497,965 tokens (42,949,672,960 / 28,672 = 1,497,965.7).
    chatglm["multi_query_attention"] = json!(true);
    chatglm["multi_query_group_num"] = json!(2);
    assert_eq!(sized(&chatglm).full.tokens, 1_497_965);
    // A key SGLang reads first: 4 heads, 57,344 B per token, 748,982
    // tokens; `multi_query` makes it 1 whatever the keys.
    chatglm["multi_query_attention"] = json!(false);
    chatglm["num_key_value_heads"] = json!(4);
    assert_eq!(sized(&chatglm).full.tokens, 748_982);
    chatglm["multi_query"] = json!(true);
    assert_eq!(sized(&chatglm).full.tokens, 2_995_931);
    // Another model type keeps kv's reading (4 heads, as both engines').
    chatglm["multi_query"] = json!(false);
    chatglm["multi_query_group_num"] = json!(8);
    chatglm["model_type"] = json!("glm");
    assert_eq!(sized(&chatglm).full.tokens, 748_982);
}

#[test]
fn whisper_pools_its_encoder_and_cross_attention_layers_too() {
    // configs/model_config.py:1591: encoder_layers + 2 x decoder_layers.
    // 2 encoder and 3 decoder layers of 4 heads of 16 in f16: 8 layers x 4 x
    // (16 + 16) x 2 B = 2,048 B a token; 40 GiB less 100 MiB (multimodal)
    // = 42,844,815,360 B: 20,920,320 tokens exactly.
    let mut whisper = json!({
        "architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper",
        "d_model": 64, "encoder_layers": 2, "decoder_layers": 3,
        "encoder_attention_heads": 4, "decoder_attention_heads": 4,
        "max_source_positions": 1500, "max_target_positions": 448, "torch_dtype": "float16",
    });
    let tokens = |config: &Value| {
        pools(config, &SglangSettings::default(), GIB_40)
            .unwrap()
            .full
            .tokens
    };
    assert_eq!(tokens(&whisper), 20_920_320);
    // Without `decoder_layers`, num_hidden_layers (3): the same.
    whisper.as_object_mut().unwrap().remove("decoder_layers");
    whisper["num_hidden_layers"] = json!(3);
    assert_eq!(tokens(&whisper), 20_920_320);
    // No encoder: 6 layers, 1,536 B: 27,893,759 tokens (27,893,760 less
    // a fraction: 42,844,815,360 / 1,536 = 27,893,760 exactly).
    whisper["encoder_layers"] = json!(0);
    assert_eq!(tokens(&whisper), 27_893_760);
}

#[test]
fn sglangs_parser_makes_every_longcat_flash_config_its_main_class() {
    // utils/hf_transformers/config.py:315: a `longcat_flash` model is
    // LongcatFlashForCausalLM whatever it lists, and that class's attention
    // layers count twice (configs/model_config.py:1583). LongcatFlashConfig's
    // defaults: 28 layers of an MLA latent 512 + 128 in bf16: 56 x 640 x 2 =
    // 71,680 B a token; 42,949,672,960 // 71,680 = 599,186; requests
    // int(599,186 / 131,072 x 512) = 2,340. SGLang's own configurator on the
    // NextN config: 599,186 tokens and 2,340 requests.
    let longcat = |arch: &str| {
        json!({
            "architectures": [arch], "model_type": "longcat_flash",
            "num_hidden_layers": 28, "hidden_size": 6144, "num_attention_heads": 64,
            "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 128,
            "qk_nope_head_dim": 128, "v_head_dim": 128, "max_position_embeddings": 131072,
            "vocab_size": 131072, "torch_dtype": "bfloat16",
        })
    };
    for arch in ["LongcatFlashForCausalLM", "LongcatFlashForCausalLMNextN"] {
        let pools = pools(&longcat(arch), &SglangSettings::default(), GIB_40).unwrap();
        assert_eq!(pools.full.tokens, 599_186, "{arch}");
        assert_eq!(pools.max_running_requests, 2_340, "{arch}");
    }
    // The names SGLang's parser maps to LongCat-Flash whatever the model
    // type says.
    let mut ngram = longcat("LongcatFlashNgramForCausalLM");
    ngram["model_type"] = json!("deepseek_v3");
    assert_eq!(sized(&ngram).full.tokens, 599_186);
    // Another model type listing the NextN class is read as listed: 28
    // layers, 35,840 B a token, 1,198,372 tokens.
    let mut other = longcat("LongcatFlashForCausalLMNextN");
    other["model_type"] = json!("deepseek_v3");
    let pools = sized(&other);
    assert_eq!(pools.full.tokens, 1_198_372);
}

#[test]
fn a_multi_modality_model_is_sglangs_multimodal_class() {
    // utils/hf_transformers/config.py:309: `multi_modality` is
    // MultiModalityCausalLM, on SGLang's multimodal list: the 100 MiB
    // reservation (Qwen3-8B's geometry under that model type).
    let mut janus = qwen3_8b();
    janus["model_type"] = json!("multi_modality");
    let pools = sized(&janus);
    assert_eq!(pools.mm_reservation_bytes, 104_857_600);
    assert_eq!(pools.full.tokens, 290_560);
}

#[test]
fn sglangs_context_len_reads_its_own_keys() {
    use kv_engines::estimate::sglang::context_len;
    // Whisper with one of get_context_length's keys: SGLang reads it, as kv.
    let mut whisper = json!({"model_type": "whisper", "max_target_positions": 448});
    assert_eq!(context_len(&whisper, 448).map(|c| c.0), Some(2048));
    whisper["max_position_embeddings"] = json!(null);
    assert_eq!(context_len(&whisper, 448).map(|c| c.0), Some(2048));
    whisper["max_position_embeddings"] = json!(448);
    assert_eq!(context_len(&whisper, 448), None);
    // EmbeddingGemma2Model: min(derived, 8192), said only where it cuts.
    let embedding = json!({"architectures": ["EmbeddingGemma2Model"]});
    assert_eq!(context_len(&embedding, 8192), None);
    assert_eq!(context_len(&embedding, 8193).map(|c| c.0), Some(8192));
}

/// Mamba-1 as `scripts/vllm/configs/mamba-2.8b.json` writes it: 32 layers,
/// `intermediate_size` 1,536, `state_size` 16, `conv_kernel` 4.
fn mamba1(architecture: &str) -> Value {
    json!({
        "architectures": [architecture], "model_type": "mamba",
        "hidden_size": 768, "intermediate_size": 1536, "num_hidden_layers": 32,
        "state_size": 16, "conv_kernel": 4, "expand": 2, "vocab_size": 50280,
        "torch_dtype": "bfloat16",
    })
}

#[test]
fn mamba_1_alone_takes_the_state_pool_and_an_empty_token_pool() {
    // configs/mamba.py: Mamba-1's state a layer is conv (1,536, 3) in bf16
    // and SSM (1,536, 1, 16) in float32 whatever the config writes: 9,216 +
    // 98,304 B, 3,440,640 B a slot over 32 layers. The state pool takes
    // 0.9 / 1.9 of the budget (`mamba_full_memory_ratio` 0.9): 40 GiB x
    // 0.9 / 1.9 = 20,344,951,665.3 B, 5,913.02 slots, less the padding one:
    // 5,912. Its tensors hold 5,913 slots: conv 5,913 x 32 x 9,216 =
    // 1,743,814,656 B (1.62 GB), SSM 18,600,689,664 B (17.32 GB). The token
    // pool has no layer, so it is the context length (SGLang's 2,048: the
    // config sets none of get_context_length's keys) at 0 bytes. Requests:
    // int(2,048 / 2,048 x 512) raised to 2,048, halved by the pool: 1,024;
    // the state's cap 5,912 // 3 = 1,970 does not bind. At 7,777,777,777 B:
    // 1,070.79 slots, 1,069, capped to 1,069 // 3 = 356.
    // (SGLang's own configurator: 5,912, 1,024; 1,069, 356; the same for
    // Falcon-Mamba.)
    let settings = SglangSettings::default();
    let at = |config: &Value, bytes: u64| {
        let estimate = estimate(config, &EstimateSettings::new().positions(2048)).unwrap();
        sglang_pools(config, &estimate, &settings, bytes).unwrap()
    };
    for architecture in ["MambaForCausalLM", "FalconMambaForCausalLM"] {
        let mut config = mamba1(architecture);
        let pools = at(&config, GIB_40);
        let state = pools.mamba.clone().unwrap();
        assert_eq!((state.slots, state.bytes_per_slot), (5_912, 3_440_640));
        assert_eq!(
            (state.conv_bytes, state.ssm_bytes),
            (1_743_814_656, 18_600_689_664)
        );
        assert_eq!((pools.full.tokens, pools.full.k_bytes), (2_048, 0));
        assert_eq!(pools.max_running_requests, 1_024);
        assert_eq!(
            pools.lines(),
            [
                "Mamba Cache is allocated. max_mamba_cache_size: 5912, conv_state size: \
                 1.62GB, ssm_state size: 17.32GB ",
                "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2048, K size: 0.00 GB, \
                 V size: 0.00 GB",
            ]
        );
        let pools = at(&config, 7_777_777_777);
        assert_eq!(pools.max_running_requests, 356);
        assert!(pools.lines()[0].contains("(max_mamba_cache_size=1069, 3 state slots per request)"));
        // A bf16 SSM written in the config is not Mamba-1's: the same.
        config["mamba_ssm_dtype"] = json!("bfloat16");
        assert_eq!(at(&config, GIB_40).mamba.unwrap().slots, 5_912);
        // --max-total-tokens 1000 in pages of 64: 960 tokens.
        let mut paged = SglangSettings::default();
        paged.page_size = 64;
        paged.max_total_tokens = Some(1000);
        let estimate = estimate(&config, &EstimateSettings::new().positions(2048)).unwrap();
        let pools = sglang_pools(&config, &estimate, &paged, GIB_40).unwrap();
        assert_eq!(pools.full.tokens, 960);
    }
}

/// An UnlimitedOCR-like config no script ships: a `kv_lora_rank` (vLLM's
/// latent), an architecture off SGLang's MLA list, every layer SGLang's SWA.
fn small_unlimited_ocr() -> Value {
    json!({
        "architectures": ["UnlimitedOCRForCausalLM"], "model_type": "unlimited-ocr",
        "torch_dtype": "bfloat16",
        "text_config": {
            "model_type": "unlimited_language", "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 512,
            "v_head_dim": 64, "kv_lora_rank": 256, "qk_rope_head_dim": 64,
            "max_position_embeddings": 4096,
        },
    })
}

#[test]
fn off_sglangs_mla_list_a_latent_is_k_and_v_heads_in_an_all_swa_pool() {
    // SGLang keeps 2 KV heads, K 512 / 4 = 128 wide, V `v_head_dim` 64:
    // (2 x 128 + 2 x 64) x 2 B = 768 B a layer, 1,536 B for both layers, all
    // in the SWA pool with no ratio. 40 GiB less the multimodal reservation
    // of 104,857,600 B = 42,844,815,360 B // 1,536 = 27,893,760 tokens.
    // K: 1,024 B x 27,893,761 rows = 28,563,211,264 B = 26.60 GiB; V half.
    let p = pools(&small_unlimited_ocr(), &SglangSettings::default(), 40 << 30).unwrap();
    assert_eq!(p.full.tokens, 0);
    assert_eq!(p.swa.as_ref().unwrap().tokens, 27_893_760);
    assert_eq!(p.max_running_requests, 4096);
    assert_eq!(
        p.lines()[1..],
        [
            "Use sliding window memory pool (all SWA). swa_layer_tokens=27893760",
            "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 0, K size: 0.00 GB, \
             V size: 0.00 GB",
            "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 27893760, K size: \
             26.60 GB, V size: 13.30 GB",
            "SWAKVPool mem usage: 39.90 GB, swa size: 27893760, full size: 0",
        ]
    );
    // --max-total-tokens below it: solved again, both lines logged.
    let mut capped = SglangSettings::default();
    capped.max_total_tokens = Some(1000);
    let p = pools(&small_unlimited_ocr(), &capped, 40 << 30).unwrap();
    assert_eq!(p.swa.as_ref().unwrap().tokens, 1000);
    assert_eq!(
        p.lines()[1..3],
        [
            "Use sliding window memory pool (all SWA). swa_layer_tokens=27893760",
            "Use sliding window memory pool (all SWA). swa_layer_tokens=1000",
        ]
    );
    assert_eq!(p.max_running_requests, 500);
}

#[test]
fn minimax_m3_sparse_is_refused_with_or_without_its_sparse_config() {
    let mut m3 = qwen3_8b();
    m3["architectures"] = json!(["MiniMaxM3SparseForConditionalGeneration"]);
    let text = refused(&m3);
    assert!(
        text.contains("SGLang would not start: ValueError: Could not find sparse config"),
        "{text}"
    );
    m3["text_config"] = json!({"sparse_attention_config": {"sparse_layer_ids": [1]}});
    let text = refused(&m3);
    assert!(text.contains("sparse-attention pools"), "{text}");
    // At the top level, where `text_config` has none, it is found too.
    m3["text_config"] = json!({"sparse_attention_config": null});
    m3["sparse_attention_config"] = json!({"sparse_layer_ids": [1]});
    let text = refused(&m3);
    assert!(text.contains("sparse-attention pools"), "{text}");
    // Only as the first architecture.
    m3["architectures"] = json!(["Qwen3ForCausalLM", "MiniMaxM3SparseForCausalLM"]);
    assert!(pools(&m3, &SglangSettings::default(), GIB_40).is_ok());
}

#[test]
fn an_all_swa_pool_keeps_whole_pages_and_a_cap_at_its_size_solves_once() {
    // 7,777,777,777 B less the 104,857,600 B reservation: 7,672,920,177 //
    // 1,536 = 4,995,390 tokens, 312,211 whole pages of 16: 4,995,376.
    let mut paged = SglangSettings::default();
    paged.page_size = 16;
    let p = pools(&small_unlimited_ocr(), &paged, 7_777_777_777).unwrap();
    assert_eq!(p.swa.as_ref().unwrap().tokens, 4_995_376);
    // A cap of exactly that many tokens changes nothing: one line.
    paged.max_total_tokens = Some(4_995_376);
    let p = pools(&small_unlimited_ocr(), &paged, 7_777_777_777).unwrap();
    let solved: Vec<String> = p
        .lines()
        .into_iter()
        .filter(|l| l.starts_with("Use sliding"))
        .collect();
    assert_eq!(
        solved,
        ["Use sliding window memory pool (all SWA). swa_layer_tokens=4995376"]
    );
    // A cap of 1,000 keeps 62 whole pages: 992.
    paged.max_total_tokens = Some(1000);
    let p = pools(&small_unlimited_ocr(), &paged, 7_777_777_777).unwrap();
    assert_eq!(p.swa.as_ref().unwrap().tokens, 992);
}

#[test]
fn unlimited_ocrs_plain_heads_are_all_swa_too() {
    // Without `kv_lora_rank` its K/V heads are vLLM's too: still every
    // layer SGLang's SWA layer. 2 layers x 2 heads x (128 + 128) x 2 B =
    // 2,048 B; 42,844,815,360 // 2,048 = 20,920,320 tokens.
    let mut plain = small_unlimited_ocr();
    let text = plain["text_config"].as_object_mut().unwrap();
    for key in ["kv_lora_rank", "qk_rope_head_dim", "v_head_dim"] {
        text.remove(key);
    }
    let p = pools(&plain, &SglangSettings::default(), 40 << 30).unwrap();
    assert_eq!(p.full.tokens, 0);
    assert_eq!(p.swa.as_ref().unwrap().tokens, 20_920_320);
}

#[test]
fn a_hybrid_swa_architecture_with_no_sliding_layer_is_refused_as_sglang_refuses() {
    // gpt-oss with neither a layer pattern nor a window: every layer full,
    // and SGLang's SWA configurator asserts at least one SWA layer.
    let mut no_window = gpt_oss_20b();
    let config = no_window.as_object_mut().unwrap();
    config.remove("layer_types");
    config.remove("sliding_window");
    let text = refused(&no_window);
    assert!(
        text.contains("Hybrid SWA model must have at least one SWA layer"),
        "{text}"
    );
    // A latent (a family kv reads by its keys) off SGLang's MLA list on such
    // an architecture is full attention too, not SWA.
    no_window["model_type"] = json!("not_a_family");
    no_window["kv_lora_rank"] = json!(512);
    no_window["qk_rope_head_dim"] = json!(64);
    let text = refused(&no_window);
    assert!(
        text.contains("Hybrid SWA model must have at least one SWA layer"),
        "{text}"
    );
}

#[test]
fn deepseek_vl2_is_mla_unless_its_text_model_says_otherwise() {
    // DeepSeek-VL2's text model under `language_config`: 4 layers, a 512 +
    // 64 latent; SGLang caches it as MLA unless `use_mla` is false, then
    // K and V heads: 4 heads of 2,048 / 16 = 128, V `v_head_dim` 128.
    let mut vl2 = json!({
        "architectures": ["DeepseekVL2ForCausalLM"], "model_type": "deepseek_vl_v2",
        "torch_dtype": "bfloat16",
        "language_config": {
            "model_type": "deepseek_v2", "num_hidden_layers": 4, "hidden_size": 2048,
            "num_attention_heads": 16, "num_key_value_heads": 4, "kv_lora_rank": 512,
            "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
            "max_position_embeddings": 4096,
        },
    });
    let p = sized(&vl2);
    assert!(p.mla);
    vl2["language_config"]["use_mla"] = json!(false);
    let p = sized(&vl2);
    assert!(!p.mla);
    // 4 layers x 4 heads x (128 + 128) x 2 B = 8,192 B a token;
    // (42,949,672,960 - 104,857,600) // 8,192 = 5,230,080.
    assert_eq!(p.full.tokens, 5_230_080);
    // A `v_head_dim` of 0 is SGLang's "unset": V as wide as K.
    vl2["language_config"]["v_head_dim"] = json!(0);
    let p = sized(&vl2);
    assert_eq!(p.full.tokens, 5_230_080);
}

#[test]
fn a_looped_models_pool_repeats_its_layers_loops_times_loops() {
    // SGLang's ModelConfig counts Nanbeige's layers `num_loops` times, and
    // its model runner multiplies that by `num_loops` again: 2 layers x 2 x 2
    // = 8 cached layers x 2 heads x (64 + 64) x 2 B = 4,096 B a token;
    // 42,949,672,960 / 4,096 = 10,485,760 tokens.
    let mut nanbeige = json!({
        "architectures": ["NanbeigeForCausalLM"], "model_type": "nanbeige",
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "hidden_size": 256, "num_loops": 2,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16",
    });
    let p = sized(&nanbeige);
    assert_eq!(p.full.tokens, 10_485_760);
    // The classifier's ModelConfig does not repeat; the runner still does:
    // 4 layers, 2,048 B a token.
    nanbeige["architectures"] = json!(["NanbeigeForSequenceClassification"]);
    let p = sized(&nanbeige);
    assert_eq!(p.full.tokens, 20_971_520);
    // A `loop_num` of null at the top level is 1 to the runner, whatever
    // `num_loops` says: the causal model's 4 layers.
    nanbeige["architectures"] = json!(["NanbeigeForCausalLM"]);
    nanbeige["loop_num"] = Value::Null;
    let p = sized(&nanbeige);
    assert_eq!(p.full.tokens, 20_971_520);
    nanbeige["num_loops"] = json!(0);
    let text = refused(&nanbeige);
    assert!(
        text.contains("`num_loops` is 0, not a positive count"),
        "{text}"
    );
}
