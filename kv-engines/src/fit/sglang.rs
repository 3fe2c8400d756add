//! SGLang 0.5.23's memory budget: the default `mem_fraction_static` it
//! computes from the GPU (`handle_gpu_memory_settings`,
//! arg_groups/memory_hook.py), the memory its weights take once loaded,
//! and the KV pool budget it profiles after loading them
//! (`_profile_available_bytes`, mem_cache/kv_cache_configurator.py):
//!
//! ```text
//! rest = avail_after_load - avail_before_load x (1 - mem_fraction_static)
//! ```
//!
//! Both availabilities are what SGLang logs (`Load weight begin. avail
//! mem=X GB`, `Load weight end. ... avail mem=Y GB`), in GiB.

use kv_core::KvError;
use serde::Serialize;
use serde_json::Value;

use super::config::text_section;

/// The sizes SGLang's default prefill CUDA graph captures
/// (`generate_prefill_cuda_graph_batch_sizes`, arg_groups/cuda_graph_hook.py).
fn prefill_graph_sizes(max_bs: u64) -> u64 {
    let ranges: [(u64, u64, u64); 6] = [
        (4, 32, 4),
        (48, 256, 16),
        (288, 512, 32),
        (576, 1024, 64),
        (1280, 4096, 256),
        (4608, u64::MAX, 512),
    ];
    let mut count = 0;
    for (start, last, step) in ranges {
        let last = last.min(max_bs);
        if last >= start {
            count += (last - start) / step + 1;
        }
    }
    count
}

/// What SGLang's default `mem_fraction_static` depends on.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SglangMemoryInputs {
    /// The GPU's `nvidia-smi` memory.total, MiB.
    pub gpu_memory_mib: u64,
    /// --tp-size.
    pub tp: u64,
    /// --dp-size with --enable-dp-attention (1: no DP attention).
    pub dp: u64,
    /// --chunked-prefill-size, when given (positive).
    pub chunked_prefill_size: Option<u64>,
    /// --max-running-requests, when given: caps the decode graph's batch.
    pub max_running_requests: Option<u64>,
    /// --max-total-tokens, when given: caps the prefill graph's tokens.
    pub max_total_tokens: Option<u64>,
    /// --model-path: SGLang caps the prefill graph at 4096 tokens when it
    /// contains `llama-2` (any case).
    pub model_path: String,
    /// The model runs SGLang's MLA backend (DeepSeek's latent attention:
    /// `kv_lora_rank` set): its prefill graph captures at most 8,192 tokens
    /// and reserves 1,536 MiB whatever its sizes.
    pub mla: bool,
}

impl SglangMemoryInputs {
    /// A GPU of `gpu_memory_mib`, tp 1, every other flag unset.
    pub fn new(gpu_memory_mib: u64) -> SglangMemoryInputs {
        SglangMemoryInputs {
            gpu_memory_mib,
            tp: 1,
            dp: 1,
            chunked_prefill_size: None,
            max_running_requests: None,
            max_total_tokens: None,
            model_path: String::new(),
            mla: false,
        }
    }
}

/// SGLang's defaults for a GPU and the reservation they add up to.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SglangMemoryDefaults {
    /// `chunked_prefill_size`, given or the GPU's default, as SGLang
    /// resolves it: divided by the DP attention size (the reservation is
    /// taken on the undivided size).
    pub chunked_prefill_size: u64,
    /// The decode CUDA graph's largest batch (`cuda_graph_config.decode.max_bs`).
    pub decode_graph_max_bs: u64,
    /// The prefill CUDA graph's largest token count.
    pub prefill_graph_max_tokens: u64,
    /// How many prefill sizes it captures.
    pub prefill_graph_sizes: u64,
    /// What the prefill graph reserves, MiB: 8 a size, or 1,536 under MLA.
    pub prefill_graph_mib: f64,
    /// The memory reserved for activations and graphs, MiB.
    pub reserved_mib: f64,
    /// Of it, what DP attention adds for its decode graphs, MiB (0 without).
    pub dp_attention_mib: f64,
    /// `round((gpu - reserved) / gpu, 3)`.
    pub mem_fraction_static: f64,
}

/// SGLang 0.5.23's default `mem_fraction_static` for a text model, with
/// or without MLA (`inputs.mla`), on CUDA, without pipeline or context
/// parallelism (the caller
/// refuses the others: see [`unsupported_for_default`]). Under DP attention
/// (`dp` > 1) the decode graph reserves `max_bs x dp x 3` MiB more, and
/// half as much again where `max_bs` is over 300 (memory_hook.py
/// `reserve_for_graph_mb`); the activation and prefill-graph reserves are
/// taken on the chunked prefill size before SGLang divides it by `dp`
/// (checked on SGLang's ServerArgs: scripts/sglang/mem_fraction.py).
pub fn default_mem_fraction_static(
    inputs: &SglangMemoryInputs,
) -> Result<SglangMemoryDefaults, KvError> {
    let gpu = inputs.gpu_memory_mib;
    if gpu == 0 {
        return Err(KvError::Config {
            what: "gpu memory",
            problem: "the GPU has 0 MiB".into(),
        });
    }
    // (chunked_prefill_size, max_bs for tp < 4, for tp >= 4) by memory.
    let (chunk, small_tp_bs, large_tp_bs) = match gpu {
        g if g < 20 * 1024 => (2048, 8, 8),
        g if g < 35 * 1024 => (4096, 48, 160),
        g if g < 60 * 1024 => (4096, 32, 160),
        g if g < 160 * 1024 => (8192, 256, 512),
        _ => (16384, 512, 512),
    };
    let chunked_prefill_size = inputs.chunked_prefill_size.unwrap_or(chunk);
    let mut decode_graph_max_bs = if inputs.tp < 4 {
        small_tp_bs
    } else {
        large_tp_bs
    };
    if let Some(requests) = inputs.max_running_requests {
        decode_graph_max_bs = decode_graph_max_bs.min(requests);
    }
    // memory_hook.py: "cap MLA capture at 8192 tokens".
    let mut prefill_graph_max_tokens = if inputs.mla {
        chunked_prefill_size.min(8192)
    } else {
        chunked_prefill_size
    };
    if let Some(tokens) = inputs.max_total_tokens {
        prefill_graph_max_tokens = prefill_graph_max_tokens.min(tokens);
    }
    if inputs.model_path.to_lowercase().contains("llama-2") {
        prefill_graph_max_tokens = prefill_graph_max_tokens.min(4096);
    }
    let sizes = prefill_graph_sizes(prefill_graph_max_tokens);
    // Python's arithmetic, in Python's order, in doubles.
    let activation_tokens = chunked_prefill_size.max(2048) as f64;
    let mut reserved = 512.0;
    reserved += activation_tokens * 1.5;
    reserved += inputs.tp as f64 * 1.0 / 8.0 * 1024.0;
    let mut dp_attention_mib = 0.0;
    if inputs.dp > 1 {
        let per_rank = decode_graph_max_bs as f64 * inputs.dp as f64;
        dp_attention_mib += per_rank * 3.0;
        if decode_graph_max_bs > 300 {
            dp_attention_mib += per_rank * 1.5;
        }
    }
    // `reserve_for_graph_mb`: "MLA backend overhead is much higher than
    // expected with fa3".
    let prefill_graph_mib = if inputs.mla {
        1.5 * 1024.0
    } else {
        sizes as f64 * 8.0
    };
    reserved += decode_graph_max_bs as f64 * 2.0 + dp_attention_mib + prefill_graph_mib;
    if gpu > 60 * 1024 {
        reserved = reserved.max(10.0 * 1024.0);
    }
    let gpu_mib = gpu as f64;
    let mem_fraction_static = round3((gpu_mib - reserved) / gpu_mib);
    Ok(SglangMemoryDefaults {
        chunked_prefill_size: chunked_prefill_size / inputs.dp.max(1),
        decode_graph_max_bs,
        prefill_graph_max_tokens,
        prefill_graph_sizes: sizes,
        prefill_graph_mib,
        reserved_mib: reserved,
        dp_attention_mib,
        mem_fraction_static,
    })
}

/// Python's `round(x, 3)`: the exact binary value rounded to three decimals
/// (Rust's formatting rounds the exact value too), read back.
fn round3(x: f64) -> f64 {
    format!("{x:.3}").parse().unwrap_or(x)
}

/// Why kv does not compute SGLang's default for this model, if it does not:
/// the layouts whose reservation SGLang changes by rules kv has not been
/// checked against. The user gives `--mem-fraction-static` instead.
pub fn unsupported_for_default(config: &Value, pp: u64) -> Option<String> {
    if crate::estimate::sglang::is_multimodal(config) {
        return Some(
            "a multimodal model: SGLang lowers the fraction by its vision tower's size and \
             may drop the prefill graph"
                .into(),
        );
    }
    if pp > 1 {
        return Some("pipeline parallelism: SGLang drops the prefill graph".into());
    }
    None
}

/// Whether SGLang runs the model on its MLA backend (`use_mla_backend`:
/// DeepSeek's latent attention, MiniCPM3's), which changes its default
/// fraction: a config whose text section sets `kv_lora_rank`.
pub fn uses_mla_backend(config: &Value) -> bool {
    text_section(config)
        .get("kv_lora_rank")
        .is_some_and(|v| !v.is_null())
}

/// The pool budget SGLang profiles, in bytes, from the two availabilities
/// it logs, in GiB; or its refusal when the weights leave nothing.
pub fn kv_pool_budget(
    avail_before_gib: f64,
    avail_after_gib: f64,
    mem_fraction_static: f64,
) -> Result<u64, KvError> {
    for (what, x) in [
        ("avail mem before loading", avail_before_gib),
        ("avail mem after loading", avail_after_gib),
        ("mem_fraction_static", mem_fraction_static),
    ] {
        if !x.is_finite() || x < 0.0 {
            return Err(KvError::Config {
                what: "SGLang memory",
                problem: format!("{what} is {x}"),
            });
        }
    }
    let slack = avail_before_gib * (1.0 - mem_fraction_static);
    let rest = avail_after_gib - slack;
    if rest <= 0.0 {
        let minimum = 1.0 - avail_after_gib / avail_before_gib;
        let suggested = (minimum * 1000.0).ceil() / 1000.0;
        return Err(KvError::Config {
            what: "SGLang's KV pool budget",
            problem: format!(
                "SGLang would not start: ValueError: Loaded weights leave no GPU memory for the KV cache under \
                 --mem-fraction-static={mem_fraction_static}. Raise --mem-fraction-static \
                 above {suggested:.3} (minimum viable = 1 - available/pre = {minimum:.4})."
            ),
        });
    }
    // int(rest_memory * (1 << 30)): truncation, as Python's int() truncates.
    let bytes = rest * (1u64 << 30) as f64;
    if bytes >= u64::MAX as f64 {
        return Err(KvError::Overflow {
            declaration: "SGLang's KV pool budget".into(),
            step: "rest_memory x 2^30",
        });
    }
    Ok(bytes as u64)
}

mod loaded;
mod rotary;

pub use loaded::{
    loaded_weights, loaded_weights_with_dp_attention, LoadedWeights, CHECKED_ARCHITECTURES,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mla_reserves_a_fixed_prefill_graph_of_1536_mib() {
        let mla = |gpu, tp, dp| {
            let mut inputs = SglangMemoryInputs::new(gpu);
            inputs.tp = tp;
            inputs.dp = dp;
            inputs.mla = true;
            default_mem_fraction_static(&inputs).unwrap()
        };
        // H100, tp 1: 512 + 8,192 x 1.5 + 1/8 x 1,024 + 256 x 2 + 1,536 =
        // 14,976 MiB; (81,559 - 14,976) / 81,559 = 0.8164 -> 0.816.
        let h100 = mla(81_559, 1, 1);
        assert_eq!(h100.reserved_mib, 14_976.0);
        assert_eq!(h100.prefill_graph_mib, 1_536.0);
        assert_eq!(h100.mem_fraction_static, 0.816);
        // B200, tp 2: a chunk of 16,384, the graph capped at 8,192 tokens;
        // 512 + 24,576 + 256 + 1,024 + 1,536 = 27,904: 0.8478 -> 0.848.
        let b200 = mla(183_359, 2, 1);
        assert_eq!(b200.prefill_graph_max_tokens, 8_192);
        assert_eq!(b200.mem_fraction_static, 0.848);
        // L4, tp 8, dp 8: 512 + 4,096 x 1.5 + 1,024 + 160 x 2 + 160 x 8 x 3
        // + 1,536 = 13,376: (23,034 - 13,376) / 23,034 = 0.4193 -> 0.419.
        let l4 = mla(23_034, 8, 8);
        assert_eq!(l4.reserved_mib, 13_376.0);
        assert_eq!(l4.mem_fraction_static, 0.419);
        // The same H100 without MLA: 58 sizes x 8 = 464 MiB for the graph.
        let plain = default_mem_fraction_static(&SglangMemoryInputs::new(81_559)).unwrap();
        assert_eq!(plain.prefill_graph_mib, 464.0);
        assert_eq!(plain.reserved_mib, 14_976.0 - 1_536.0 + 464.0);
    }

    #[test]
    fn prefill_sizes_count_the_capture_list() {
        // 4..32 by 4: 8; 48..256 by 16: 14; 288..512 by 32: 8; 576..1024 by
        // 64: 8; 1280..4096 by 256: 12; 4608..8192 by 512: 8.
        assert_eq!(prefill_graph_sizes(8192), 58);
        assert_eq!(prefill_graph_sizes(4096), 50);
        assert_eq!(prefill_graph_sizes(4095), 49);
        assert_eq!(prefill_graph_sizes(3), 0);
        assert_eq!(prefill_graph_sizes(4), 1);
        // 38 up to 1024, then 1280, 1536, 1792, 2048.
        assert_eq!(prefill_graph_sizes(2048), 42);
        // 16384: 58 + 4608..16384 by 512 adds 16 more than up to 8192.
        assert_eq!(prefill_graph_sizes(16384), 74);
    }

    #[test]
    fn small_gpus_have_no_floor_and_smaller_graphs() {
        // 15,360 MiB (a T4): chunked prefill 2,048, decode max_bs 8, 42
        // prefill sizes: 512 + 2,048 x 1.5 + 128 + 16 + 336 = 4,064 MiB,
        // no 10 GiB floor below 60 GiB; 11,296 / 15,360 = 0.73542 -> 0.735.
        let d = default_mem_fraction_static(&SglangMemoryInputs::new(15360)).unwrap();
        assert_eq!(
            (
                d.chunked_prefill_size,
                d.decode_graph_max_bs,
                d.prefill_graph_sizes
            ),
            (2048, 8, 42)
        );
        assert_eq!((d.reserved_mib, d.mem_fraction_static), (4064.0, 0.735));
        // 24,564 MiB (an RTX 4090), tp 4: chunked prefill 4,096, max_bs 160:
        // 512 + 6,144 + 512 + 320 + 400 = 7,888; 16,676 / 24,564 = 0.67888.
        let mut inputs = SglangMemoryInputs::new(24564);
        inputs.tp = 4;
        let d = default_mem_fraction_static(&inputs).unwrap();
        assert_eq!(d.decode_graph_max_bs, 160);
        assert_eq!((d.reserved_mib, d.mem_fraction_static), (7888.0, 0.679));
        // The same card at tp 3 keeps max_bs 48: 512 + 6,144 + 384 + 96 +
        // 400 = 7,536; 17,028 / 24,564 = 0.69321.
        inputs.tp = 3;
        let d = default_mem_fraction_static(&inputs).unwrap();
        assert_eq!((d.decode_graph_max_bs, d.mem_fraction_static), (48, 0.693));
        // --max-total-tokens 1000 caps the prefill graph at 1,000 tokens:
        // 38 sizes up to 1,000 less the 1,024 one: 37.
        let mut inputs = SglangMemoryInputs::new(81559);
        inputs.max_total_tokens = Some(1000);
        let d = default_mem_fraction_static(&inputs).unwrap();
        assert_eq!(
            (d.prefill_graph_max_tokens, d.prefill_graph_sizes),
            (1000, 37)
        );
        assert!(default_mem_fraction_static(&SglangMemoryInputs::new(0)).is_err());
    }

    #[test]
    fn the_budget_is_what_sglang_profiles() {
        // Python: int((63.41 - 78.43 * (1 - 0.83)) * (1 << 30)).
        assert_eq!(kv_pool_budget(78.43, 63.41, 0.83).unwrap(), 53_769_661_946);
        assert!(kv_pool_budget(10.0, 1.0, 0.5).is_err());
        assert!(kv_pool_budget(f64::NAN, 1.0, 0.5).is_err());
        assert!(kv_pool_budget(10.0, -1.0, 0.5).is_err());
        assert!(kv_pool_budget(1e30, 1e30, 1.0).is_err());
    }

    #[test]
    fn python_round_to_three_places() {
        assert_eq!(round3(0.829_52), 0.83);
        // Python 3.11's round(x, 3), by the exact binary value:
        assert_eq!(round3(0.8295), 0.83); // 0.82950000000000001510
        assert_eq!(round3(0.1235), 0.123); // 0.12349999999999999867
        assert_eq!(round3(0.9995), 1.0); // 0.99950000000000005507
        assert_eq!(round3(1.0), 1.0);
    }

    #[test]
    fn memory_thresholds_fall_where_sglang_puts_them() {
        // memory_hook.py: `gpu_mem < 20 * 1024` and so on, each bound
        // belonging to the larger card; the 10 GiB floor is `> 60 * 1024`.
        let at = |mib: u64| default_mem_fraction_static(&SglangMemoryInputs::new(mib)).unwrap();
        assert_eq!(at(20 * 1024 - 1).chunked_prefill_size, 2048);
        assert_eq!(at(20 * 1024).chunked_prefill_size, 4096);
        assert_eq!(at(35 * 1024 - 1).decode_graph_max_bs, 48);
        assert_eq!(at(35 * 1024).decode_graph_max_bs, 32);
        assert_eq!(at(60 * 1024 - 1).chunked_prefill_size, 4096);
        assert_eq!(at(60 * 1024).chunked_prefill_size, 8192);
        assert_eq!(at(160 * 1024 - 1).chunked_prefill_size, 8192);
        assert_eq!(at(160 * 1024).chunked_prefill_size, 16384);
        // 61,440 MiB with a 1,024-token chunk: 512 + 2,048 x 1.5 + 128 + 512
        // + 38 x 8 = 4,528 MiB, no floor at exactly 60 GiB: 56,912 / 61,440
        // = 0.92630 -> 0.926; one MiB more takes the 10,240 floor: 51,201 /
        // 61,441 = 0.83334 -> 0.833.
        let mut inputs = SglangMemoryInputs::new(60 * 1024);
        inputs.chunked_prefill_size = Some(1024);
        let d = default_mem_fraction_static(&inputs).unwrap();
        assert_eq!((d.reserved_mib, d.mem_fraction_static), (4528.0, 0.926));
        inputs.gpu_memory_mib += 1;
        let d = default_mem_fraction_static(&inputs).unwrap();
        assert_eq!((d.reserved_mib, d.mem_fraction_static), (10240.0, 0.833));
    }

    #[test]
    fn defaults_kv_has_not_checked_are_named() {
        let llama =
            serde_json::json!({"architectures": ["LlamaForCausalLM"], "model_type": "llama"});
        assert_eq!(unsupported_for_default(&llama, 1), None);
        assert!(unsupported_for_default(&llama, 2)
            .unwrap()
            .contains("pipeline"));
        // An MLA model's default is computed (its own reservation).
        let mla = serde_json::json!({"model_type": "deepseek_v3", "kv_lora_rank": 512});
        assert_eq!(unsupported_for_default(&mla, 1), None);
        assert!(uses_mla_backend(&mla));
        assert!(!uses_mla_backend(&llama));
        let nested = serde_json::json!({"text_config": {"kv_lora_rank": 512}});
        assert!(uses_mla_backend(&nested));
        assert!(!uses_mla_backend(
            &serde_json::json!({"kv_lora_rank": null})
        ));
    }

    #[test]
    fn dp_attention_reserves_for_each_dp_ranks_decode_graph() {
        // H100 (81,559 MiB), tp 4: chunked prefill 8,192 (x 1.5 = 12,288),
        // tp 4 / 8 x 1,024 = 512, decode max_bs 512 (x 2 = 1,024), 58
        // prefill sizes (x 8 = 464): 512 + 12,288 + 512 + 1,488 = 14,800;
        // (81,559 - 14,800) / 81,559 = 0.81853 -> 0.819.
        let at = |tp: u64, dp: u64, gpu: u64| {
            let mut inputs = SglangMemoryInputs::new(gpu);
            inputs.tp = tp;
            inputs.dp = dp;
            default_mem_fraction_static(&inputs).unwrap()
        };
        let d = at(4, 1, 81559);
        assert_eq!((d.reserved_mib, d.mem_fraction_static), (14_800.0, 0.819));
        assert_eq!(d.chunked_prefill_size, 8192);
        // dp 2: 512 x 2 x 3 = 3,072, and max_bs 512 > 300: 512 x 2 x 1.5 =
        // 1,536 more: 19,408; 0.76204 -> 0.762. SGLang resolves the chunk
        // as 8,192 / 2 = 4,096; the reserve above is taken on 8,192.
        let d = at(4, 2, 81559);
        assert_eq!((d.reserved_mib, d.mem_fraction_static), (19_408.0, 0.762));
        assert_eq!(d.dp_attention_mib, 4_608.0);
        assert_eq!(d.chunked_prefill_size, 4096);
        // dp 4: 512 x 4 x 4.5 = 9,216: 24,016; 0.70554 -> 0.706.
        assert_eq!(at(4, 4, 81559).mem_fraction_static, 0.706);
        // tp 8, dp 8: 1,024 for tp, 512 x 8 x 4.5 = 18,432: 33,744; 0.586.
        assert_eq!(at(8, 8, 81559).mem_fraction_static, 0.586);
        // H200 (143,771 MiB), tp 2, dp 2: max_bs 256, not over 300: 256 x 2
        // x 3 = 1,536 alone: 512 + 12,288 + 256 + 512 + 1,536 + 464 =
        // 15,568; 0.89172 -> 0.892.
        let d = at(2, 2, 143_771);
        assert_eq!((d.reserved_mib, d.mem_fraction_static), (15_568.0, 0.892));
        // RTX 4090 (24,564 MiB), tp 4, dp 2: chunk 4,096 (6,144), max_bs
        // 160 (320 + 960), 50 sizes (400), no floor: 8,848; 0.63980 -> 0.64.
        let d = at(4, 2, 24_564);
        assert_eq!((d.reserved_mib, d.mem_fraction_static), (8_848.0, 0.64));
        assert_eq!(d.chunked_prefill_size, 2048);
        // Given, the chunk is divided alike: 2,048 at dp 2 reserves 3,072
        // and 42 sizes (336): 10,064, raised to the 10 GiB floor; 0.874.
        let mut inputs = SglangMemoryInputs::new(81559);
        (inputs.tp, inputs.dp, inputs.chunked_prefill_size) = (4, 2, Some(2048));
        let d = default_mem_fraction_static(&inputs).unwrap();
        assert_eq!((d.reserved_mib, d.mem_fraction_static), (10_240.0, 0.874));
        assert_eq!(d.chunked_prefill_size, 1024);
        // --max-running-requests 64 caps max_bs: 128 + 64 x 2 x 3 = 384, not
        // over 300: 512 + 12,288 + 512 + 128 + 384 + 464 = 14,288; 0.825.
        let mut inputs = SglangMemoryInputs::new(81559);
        (inputs.tp, inputs.dp, inputs.max_running_requests) = (4, 2, Some(64));
        let d = default_mem_fraction_static(&inputs).unwrap();
        assert_eq!((d.reserved_mib, d.mem_fraction_static), (14_288.0, 0.825));
        // A max_bs of exactly 300 is not over 300 (`> 300` in memory_hook.py):
        // 600 + 300 x 2 x 3 = 1,800 alone: 16,176 MiB; 0.80166 -> 0.802.
        inputs.max_running_requests = Some(300);
        let d = default_mem_fraction_static(&inputs).unwrap();
        assert_eq!((d.reserved_mib, d.mem_fraction_static), (16_176.0, 0.802));
    }

    #[test]
    fn the_budget_takes_zero_but_not_less() {
        // Nothing free before loading: nothing held back; 5 GiB after.
        assert_eq!(kv_pool_budget(0.0, 5.0, 0.5).unwrap(), 5 << 30);
        assert!(kv_pool_budget(-1.0, 5.0, 0.5).is_err());
        assert!(kv_pool_budget(10.0, f64::NAN, 0.5).is_err());
    }
}
