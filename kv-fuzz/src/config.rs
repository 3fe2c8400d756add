//! `config.json` files mutated as JSON (a value on a boundary, of another
//! type, dropped, or a key kv reads added where the family did not write
//! it) and as text.

use serde_json::{Map, Value};

use crate::bytes;
use crate::interesting::number;
use crate::rng::Rng;

/// Keys kv's config readers and vLLM's family rules look up: a mutation
/// adds them where a family does not write them.
pub const KEYS: &[&str] = &[
    "architectures",
    "attention_chunk_size",
    "attn_layer_offset",
    "attn_layer_period",
    "conv_kernel",
    "d_conv",
    "d_model",
    "d_state",
    "dtype",
    "encoder_attention_heads",
    "encoder_layers",
    "expand",
    "full_attention_interval",
    "head_dim",
    "hidden_size",
    "hybrid_override_pattern",
    "intermediate_size",
    "kv_channels",
    "kv_lora_rank",
    "layer_types",
    "layers_block_type",
    "linear_conv_kernel_dim",
    "linear_key_head_dim",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_value_head_dim",
    "mamba_d_conv",
    "mamba_d_head",
    "mamba_d_ssm",
    "mamba_d_state",
    "mamba_expand",
    "mamba_head_dim",
    "mamba_n_groups",
    "mamba_n_heads",
    "max_position_embeddings",
    "max_target_positions",
    "model_type",
    "multi_query_group_num",
    "n_groups",
    "n_head",
    "n_head_kv",
    "n_layer",
    "no_rope_layers",
    "num_attention_heads",
    "num_hidden_layers",
    "num_key_value_heads",
    "num_kv_shared_layers",
    "num_layers",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "quantization_config",
    "sliding_window",
    "sliding_window_pattern",
    "ssm_state_size",
    "state_size",
    "text_config",
    "torch_dtype",
    "use_sliding_window",
    "decoder_attention_heads",
    "decoder_layers",
    "num_nextn_predict_layers",
    "attention_type",
];

const MODEL_TYPES: &[&str] = &[
    "llama",
    "qwen2",
    "qwen3_next",
    "gemma3",
    "gemma3_text",
    "jamba",
    "deepseek_v3",
    "whisper",
    "mamba",
    "mamba2",
    "falcon_h1",
    "nemotron_h",
    "zamba2",
    "lfm2",
    "rwkv",
    "gpt_oss",
    "llama4",
    "bamba",
    "granitemoehybrid",
    "minicpm3",
    "no_such_family",
];

/// The configs mutations start from: each shipped under `examples/configs`,
/// built into the binary so a run needs no files.
pub fn seeds() -> Vec<Value> {
    [
        include_str!("../../examples/configs/deepseek-v2-lite/config.json"),
        include_str!("../../examples/configs/gemma-3-27b/config.json"),
        include_str!("../../examples/configs/hy3-fp8/config.json"),
        include_str!("../../examples/configs/jamba-v0.1/config.json"),
        include_str!("../../examples/configs/llama-3-8b/config.json"),
        include_str!("../../examples/configs/ming-talker/config.json"),
        include_str!("../../examples/configs/mistral-7b-v0.1/config.json"),
        include_str!("../../examples/configs/qwen3-next-80b-a3b/config.json"),
        include_str!("../../examples/configs/whisper-large-v3/config.json"),
    ]
    .iter()
    .filter_map(|text| serde_json::from_str(text).ok())
    .collect()
}

/// Case `rng`'s input: a seed, mutated as JSON, then sometimes as text.
pub fn case(seeds: &[Value], rng: &mut Rng) -> Vec<u8> {
    let mut config = rng.pick(seeds).clone();
    for _ in 0..=rng.below(4) {
        mutate(&mut config, rng);
    }
    let mut data = serde_json::to_vec(&config).unwrap_or_default();
    if rng.one_in(8) {
        bytes::mutate(&mut data, rng);
    }
    data
}

fn mutate(config: &mut Value, rng: &mut Rng) {
    // Half the time in a nested section (`text_config`, a quantization
    // config), where one is.
    let nested = match &*config {
        Value::Object(map) if rng.one_in(2) => {
            let nested: Vec<&String> = map
                .iter()
                .filter(|(_, v)| v.is_object())
                .map(|(k, _)| k)
                .collect();
            nested.get(rng.index(nested.len())).map(|k| (*k).clone())
        }
        _ => None,
    };
    if let Some(section) = nested.and_then(|key| config.get_mut(&key)) {
        return mutate_section(section, rng);
    }
    mutate_section(config, rng);
}

fn mutate_section(target: &mut Value, rng: &mut Rng) {
    let Value::Object(map) = target else {
        *target = leaf(rng);
        return;
    };
    match rng.below(6) {
        // A key kv reads, with any value.
        0 | 1 => {
            let key = *rng.pick(KEYS);
            let value = if key == "model_type" && !rng.one_in(4) {
                Value::String((*rng.pick(MODEL_TYPES)).to_owned())
            } else {
                leaf(rng)
            };
            map.insert(key.to_owned(), value);
        }
        // A value the file has, replaced.
        2 | 3 => {
            if let Some(key) = key_of(map, rng) {
                map.insert(key, leaf(rng));
            }
        }
        // A key dropped.
        4 => {
            if let Some(key) = key_of(map, rng) {
                map.remove(&key);
            }
        }
        // A list kv reads per layer, of any length.
        _ => {
            let key = *rng.pick(&[
                "layer_types",
                "layers_block_type",
                "no_rope_layers",
                "sliding_window_pattern",
                "hybrid_override_pattern",
            ]);
            let items = (0..rng.below(70)).map(|_| leaf_scalar(rng)).collect();
            map.insert(key.to_owned(), Value::Array(items));
        }
    }
}

fn key_of(map: &Map<String, Value>, rng: &mut Rng) -> Option<String> {
    let keys: Vec<&String> = map.keys().collect();
    keys.get(rng.index(keys.len())).map(|k| (*k).clone())
}

fn leaf(rng: &mut Rng) -> Value {
    match rng.below(8) {
        0 => Value::Null,
        1 => Value::Array((0..rng.below(5)).map(|_| leaf_scalar(rng)).collect()),
        2 => Value::Object(Map::new()),
        _ => leaf_scalar(rng),
    }
}

fn leaf_scalar(rng: &mut Rng) -> Value {
    match rng.below(10) {
        0 => Value::Bool(rng.one_in(2)),
        1 => Value::String(
            (*rng.pick(&[
                "",
                "full_attention",
                "sliding_attention",
                "linear_attention",
                "mamba",
                "attention",
                "M",
                "*",
                "-",
                "bfloat16",
                "float8_e4m3fn",
                "int8",
                "\u{1b}[2J",
                "auto",
            ]))
            .to_owned(),
        ),
        // Numbers that serde_json reads as u64, i64 or f64, or not at all
        // (past u64): the text decides.
        _ => number(rng),
    }
}
