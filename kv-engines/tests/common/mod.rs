//! Checkpoints both engines' tests build by hand: DeepSeek-V3's layout
//! (multi-head latent attention, routed and shared experts, an MTP layer)
//! and GPT-OSS's at small sizes, and the tensors they are made of; and the
//! estimate helpers the per-family tests share.
// Each test crate uses some of these.
#![allow(dead_code)]

use kv_core::Parallel;
use kv_engines::estimate::{estimate, Estimate, EstimateSettings, VllmPool};
use kv_engines::weights::StoredTensor;
use serde_json::{json, Value};

/// Bytes per row of the estimate's declaration `name`.
pub fn row(e: &Estimate, name: &str) -> u64 {
    e.specs
        .iter()
        .find(|s| s.name == name)
        .map(|s| s.bytes_per_row().unwrap())
        .unwrap_or_else(|| panic!("no {name}"))
}

/// vLLM's pool on each rank of `tp` x `pp`, at 256 sequences.
pub fn pools(e: &Estimate, tp: u64, pp: u64) -> Vec<VllmPool> {
    e.ranks(Parallel::new(tp, pp).unwrap(), 256)
        .unwrap()
        .into_iter()
        .map(|rank| rank.pool)
        .collect()
}

/// Why `config` is refused under `settings`.
pub fn refused(config: &Value, settings: EstimateSettings) -> String {
    estimate(config, &settings).unwrap_err().to_string()
}

pub fn bf16(name: &str, shape: &[u64]) -> StoredTensor {
    let bytes = shape.iter().product::<u64>() * 2;
    StoredTensor::new(name.into(), "BF16".into(), shape.to_vec(), bytes)
}

/// Hidden 64, 2 heads of 128 + 64 (nope + rope) for q and k and 128 for v,
/// q's LoRA rank 32, the latent 512; layer 0 dense (intermediate 32),
/// layer 1 MoE (4 routed experts and 1 shared, 16 wide); vocabulary 128;
/// YaRN x 2.5 over 10 positions.
pub fn deepseek_v3_config() -> Value {
    json!({
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "hidden_size": 64, "num_attention_heads": 2, "num_key_value_heads": 2,
        "q_lora_rank": 32, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 128,
        "num_hidden_layers": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1,
        "n_routed_experts": 4,
        "n_shared_experts": 1, "moe_intermediate_size": 16, "intermediate_size": 32,
        "num_experts_per_tok": 2, "num_nextn_predict_layers": 1, "topk_method": "noaux_tc",
        "max_position_embeddings": 25, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
        "rope_scaling": {"type": "yarn", "factor": 2.5, "original_max_position_embeddings": 10,
                         "mscale": 1.0, "mscale_all_dim": 1.0},
    })
}

/// `count` experts of `inner` under `mlp` (hidden 64), as the published
/// checkpoints store them: one gate, up and down each.
pub fn experts(mlp: &str, count: u64, inner: u64) -> Vec<StoredTensor> {
    (0..count)
        .flat_map(|expert| {
            let at = |p: &str| format!("{mlp}.experts.{expert}.{p}.weight");
            [
                bf16(&at("gate_proj"), &[inner, 64]),
                bf16(&at("up_proj"), &[inner, 64]),
                bf16(&at("down_proj"), &[64, inner]),
            ]
        })
        .collect()
}

pub fn deepseek_attention(layer: u64) -> Vec<StoredTensor> {
    let at = |part: &str| format!("model.layers.{layer}.{part}");
    vec![
        bf16(&at("self_attn.q_a_proj.weight"), &[32, 64]),
        bf16(&at("self_attn.q_a_layernorm.weight"), &[32]),
        bf16(&at("self_attn.q_b_proj.weight"), &[2 * 192, 32]),
        bf16(&at("self_attn.kv_a_proj_with_mqa.weight"), &[512 + 64, 64]),
        bf16(&at("self_attn.kv_a_layernorm.weight"), &[512]),
        bf16(&at("self_attn.kv_b_proj.weight"), &[2 * (128 + 128), 512]),
        bf16(&at("self_attn.o_proj.weight"), &[64, 2 * 128]),
        bf16(&at("input_layernorm.weight"), &[64]),
        bf16(&at("post_attention_layernorm.weight"), &[64]),
    ]
}

pub fn deepseek_v3_checkpoint() -> Vec<StoredTensor> {
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
    ];
    tensors.extend(deepseek_attention(0));
    tensors.extend([
        bf16("model.layers.0.mlp.gate_proj.weight", &[32, 64]),
        bf16("model.layers.0.mlp.up_proj.weight", &[32, 64]),
        bf16("model.layers.0.mlp.down_proj.weight", &[64, 32]),
    ]);
    tensors.extend(deepseek_attention(1));
    tensors.push(bf16("model.layers.1.mlp.gate.weight", &[4, 64]));
    tensors.push(StoredTensor::new(
        "model.layers.1.mlp.gate.e_score_correction_bias".into(),
        "F32".into(),
        vec![4],
        16,
    ));
    tensors.extend(experts("model.layers.1.mlp", 4, 16));
    tensors.extend([
        bf16(
            "model.layers.1.mlp.shared_experts.gate_proj.weight",
            &[16, 64],
        ),
        bf16(
            "model.layers.1.mlp.shared_experts.up_proj.weight",
            &[16, 64],
        ),
        bf16(
            "model.layers.1.mlp.shared_experts.down_proj.weight",
            &[64, 16],
        ),
    ]);
    tensors
}

/// The MTP layer DeepSeek-V3's checkpoint ships as `model.layers.2`.
pub fn deepseek_mtp_layer() -> Vec<StoredTensor> {
    let mut tensors = deepseek_attention(2);
    tensors.extend([
        bf16("model.layers.2.eh_proj.weight", &[64, 128]),
        bf16("model.layers.2.enorm.weight", &[64]),
        bf16("model.layers.2.hnorm.weight", &[64]),
        bf16("model.layers.2.shared_head.head.weight", &[128, 64]),
        bf16("model.layers.2.embed_tokens.weight", &[128, 64]),
    ]);
    tensors
}

pub fn f32(name: &str, shape: &[u64]) -> StoredTensor {
    let bytes = shape.iter().product::<u64>() * 4;
    StoredTensor::new(name.into(), "F32".into(), shape.to_vec(), bytes)
}

/// scripts/vllm/fit-configs/test-gpt-oss-small.json: hidden 64, 4 heads
/// of 16 and 2 KV heads, every projection biased, attention sinks; 4
/// experts 16 wide with biases, a biased router; YaRN x 4 over 8
/// positions; 128 words, untied.
pub fn gpt_oss_config() -> Value {
    json!({
        "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
        "num_hidden_layers": 2, "num_local_experts": 4, "num_experts_per_tok": 2,
        "intermediate_size": 16, "vocab_size": 128, "max_position_embeddings": 32,
        "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {"rope_type": "yarn", "factor": 4.0,
                            "original_max_position_embeddings": 8, "rope_theta": 150_000.0},
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    })
}

pub fn gpt_oss_checkpoint() -> Vec<StoredTensor> {
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
    ];
    for layer in 0..2 {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        tensors.extend([
            bf16(&at("self_attn.q_proj.weight"), &[64, 64]),
            bf16(&at("self_attn.q_proj.bias"), &[64]),
            bf16(&at("self_attn.k_proj.weight"), &[32, 64]),
            bf16(&at("self_attn.k_proj.bias"), &[32]),
            bf16(&at("self_attn.v_proj.weight"), &[32, 64]),
            bf16(&at("self_attn.v_proj.bias"), &[32]),
            bf16(&at("self_attn.o_proj.weight"), &[64, 64]),
            bf16(&at("self_attn.o_proj.bias"), &[64]),
            bf16(&at("self_attn.sinks"), &[4]),
            bf16(&at("mlp.router.weight"), &[4, 64]),
            bf16(&at("mlp.router.bias"), &[4]),
            // transformers 5's fused experts, gate and up [E, H, 2I].
            bf16(&at("mlp.experts.gate_up_proj"), &[4, 64, 32]),
            bf16(&at("mlp.experts.gate_up_proj_bias"), &[4, 32]),
            bf16(&at("mlp.experts.down_proj"), &[4, 16, 64]),
            bf16(&at("mlp.experts.down_proj_bias"), &[4, 64]),
            bf16(&at("input_layernorm.weight"), &[64]),
            bf16(&at("post_attention_layernorm.weight"), &[64]),
        ]);
    }
    tensors
}

/// scripts/vllm/fit-configs/test-opt-small.json's checkpoint: hidden 64, one
/// layer, an FFN of 128, 100 words, 34 position rows, every bias.
pub fn opt_small_checkpoint() -> Vec<StoredTensor> {
    let at = |part: &str| format!("model.decoder.layers.0.{part}");
    let mut tensors = vec![
        bf16("model.decoder.embed_tokens.weight", &[100, 64]),
        bf16("model.decoder.embed_positions.weight", &[34, 64]),
        bf16("model.decoder.final_layer_norm.weight", &[64]),
        bf16("model.decoder.final_layer_norm.bias", &[64]),
    ];
    for (name, shape) in [
        ("self_attn.q_proj.weight", &[64, 64][..]),
        ("self_attn.q_proj.bias", &[64]),
        ("self_attn.k_proj.weight", &[64, 64]),
        ("self_attn.k_proj.bias", &[64]),
        ("self_attn.v_proj.weight", &[64, 64]),
        ("self_attn.v_proj.bias", &[64]),
        ("self_attn.out_proj.weight", &[64, 64]),
        ("self_attn.out_proj.bias", &[64]),
        ("self_attn_layer_norm.weight", &[64]),
        ("self_attn_layer_norm.bias", &[64]),
        ("fc1.weight", &[128, 64]),
        ("fc1.bias", &[128]),
        ("fc2.weight", &[64, 128]),
        ("fc2.bias", &[64]),
        ("final_layer_norm.weight", &[64]),
        ("final_layer_norm.bias", &[64]),
    ] {
        tensors.push(bf16(&at(name), shape));
    }
    tensors
}

/// scripts/vllm/fit-configs/test-laguna-small.json's checkpoint: 3 layers of
/// width 64 (4 heads of 16, 2 KV heads, an output gate), layer 0 dense (an
/// MLP of 128), the others 4 experts of 32 beside a shared expert of 32.
pub fn laguna_small_checkpoint() -> Vec<StoredTensor> {
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
        bf16("model.layers.0.mlp.gate_proj.weight", &[128, 64]),
        bf16("model.layers.0.mlp.up_proj.weight", &[128, 64]),
        bf16("model.layers.0.mlp.down_proj.weight", &[64, 128]),
    ];
    for layer in 0..3 {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        for (name, shape) in [
            ("input_layernorm.weight", &[64][..]),
            ("post_attention_layernorm.weight", &[64]),
            ("self_attn.q_proj.weight", &[64, 64]),
            ("self_attn.k_proj.weight", &[32, 64]),
            ("self_attn.v_proj.weight", &[32, 64]),
            ("self_attn.o_proj.weight", &[64, 64]),
            ("self_attn.g_proj.weight", &[4, 64]),
            ("self_attn.q_norm.weight", &[16]),
            ("self_attn.k_norm.weight", &[16]),
        ] {
            tensors.push(bf16(&at(name), shape));
        }
        if layer > 0 {
            for (name, shape) in [
                ("mlp.experts.gate_up_proj", &[4, 64, 64][..]),
                ("mlp.experts.down_proj", &[4, 64, 32]),
                ("mlp.gate.weight", &[4, 64]),
                ("mlp.gate.e_score_correction_bias", &[4]),
                ("mlp.shared_experts.gate_proj.weight", &[32, 64]),
                ("mlp.shared_experts.up_proj.weight", &[32, 64]),
                ("mlp.shared_experts.down_proj.weight", &[64, 32]),
            ] {
                tensors.push(bf16(&at(name), shape));
            }
        }
    }
    tensors
}

/// scripts/vllm/fit-configs/test-apertus-small.json's checkpoint: one layer
/// of width 64, an MLP of 32 through xIELU (its four bfloat16 scalars).
pub fn apertus_small_checkpoint() -> Vec<StoredTensor> {
    let at = |part: &str| format!("model.layers.0.{part}");
    let scalar = |name: &str| StoredTensor::new(name.into(), "BF16".into(), vec![], 2);
    vec![
        bf16("model.embed_tokens.weight", &[128, 64]),
        bf16("model.norm.weight", &[64]),
        bf16("lm_head.weight", &[128, 64]),
        bf16(&at("self_attn.q_proj.weight"), &[64, 64]),
        bf16(&at("self_attn.k_proj.weight"), &[32, 64]),
        bf16(&at("self_attn.v_proj.weight"), &[32, 64]),
        bf16(&at("self_attn.o_proj.weight"), &[64, 64]),
        bf16(&at("self_attn.q_norm.weight"), &[16]),
        bf16(&at("self_attn.k_norm.weight"), &[16]),
        bf16(&at("mlp.up_proj.weight"), &[32, 64]),
        bf16(&at("mlp.down_proj.weight"), &[64, 32]),
        bf16(&at("mlp.act_fn.alpha_p"), &[1]),
        bf16(&at("mlp.act_fn.alpha_n"), &[1]),
        scalar(&at("mlp.act_fn.beta")),
        scalar(&at("mlp.act_fn.eps")),
        bf16(&at("attention_layernorm.weight"), &[64]),
        bf16(&at("feedforward_layernorm.weight"), &[64]),
    ]
}

/// GPT-2, small (scripts/vllm/fit-configs/test-gpt2-small.json), under the
/// original checkpoint's names (no `transformer.` prefix) with the causal
/// masks older checkpoints store: 2 layers of width 64 (`n_embd`), 4 heads,
/// 32 learned positions, a vocabulary of 100, tied. `Conv1D` weights are
/// stored `[in, out]`. vLLM's own class gave 230,400 B at TP 1, 123,904 B
/// at TP 2 and 125,952 B on each stage of PP 2; SGLang's 220,672 B and
/// 113,280 B.
pub fn gpt2_small() -> (Value, Vec<StoredTensor>) {
    let config = json!({
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64,
        "n_layer": 2, "n_head": 4, "n_positions": 32, "vocab_size": 100,
        "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    });
    let mut tensors = vec![
        bf16("wte.weight", &[100, 64]),
        bf16("wpe.weight", &[32, 64]),
        bf16("ln_f.weight", &[64]),
        bf16("ln_f.bias", &[64]),
    ];
    for layer in 0..2 {
        let at = |part: &str| format!("h.{layer}.{part}");
        for (name, shape) in [
            ("attn.c_attn.weight", &[64, 192][..]),
            ("attn.c_attn.bias", &[192]),
            ("attn.c_proj.weight", &[64, 64]),
            ("attn.c_proj.bias", &[64]),
            ("attn.bias", &[1, 1, 32, 32]),
            ("ln_1.weight", &[64]),
            ("ln_1.bias", &[64]),
            ("ln_2.weight", &[64]),
            ("ln_2.bias", &[64]),
            ("mlp.c_fc.weight", &[64, 256]),
            ("mlp.c_fc.bias", &[256]),
            ("mlp.c_proj.weight", &[256, 64]),
            ("mlp.c_proj.bias", &[64]),
        ] {
            tensors.push(bf16(&at(name), shape));
        }
    }
    (config, tensors)
}

/// GPT-J, small (scripts/vllm/fit-configs/test-gpt-j-small.json): 2 layers
/// of width 64 (`n_embd`), 4 heads of 16 rotating 8 of each
/// (`rotary_dim`), 32 positions (`n_positions`), a vocabulary of 100,
/// untied with a head bias; the causal masks its checkpoints store. vLLM's
/// own class gave 239,616 B at TP 1 and 124,928 B at TP 2; SGLang's
/// 231,680 B and 116,352 B.
pub fn gpt_j_small() -> (Value, Vec<StoredTensor>) {
    let config = json!({
        "architectures": ["GPTJForCausalLM"], "model_type": "gptj", "n_embd": 64,
        "n_layer": 2, "n_head": 4, "rotary_dim": 8, "n_positions": 32, "vocab_size": 100,
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    });
    let mut tensors = vec![
        bf16("transformer.wte.weight", &[100, 64]),
        bf16("transformer.ln_f.weight", &[64]),
        bf16("transformer.ln_f.bias", &[64]),
        bf16("lm_head.weight", &[100, 64]),
        bf16("lm_head.bias", &[100]),
    ];
    for layer in 0..2 {
        let at = |part: &str| format!("transformer.h.{layer}.{part}");
        for (name, shape) in [
            ("ln_1.weight", &[64][..]),
            ("ln_1.bias", &[64]),
            ("attn.q_proj.weight", &[64, 64]),
            ("attn.k_proj.weight", &[64, 64]),
            ("attn.v_proj.weight", &[64, 64]),
            ("attn.out_proj.weight", &[64, 64]),
            ("attn.bias", &[1, 1, 32, 32]),
            ("attn.masked_bias", &[1]),
            ("mlp.fc_in.weight", &[256, 64]),
            ("mlp.fc_in.bias", &[256]),
            ("mlp.fc_out.weight", &[64, 256]),
            ("mlp.fc_out.bias", &[64]),
        ] {
            tensors.push(bf16(&at(name), shape));
        }
    }
    (config, tensors)
}

/// scripts/vllm/fit-configs/test-lfm2-small.json: hidden 64, a short
/// convolution, an attention layer (4 heads of 16, 2 KV heads) and a
/// convolution again, an MLP of 128, 100 words, 32 positions, tied.
pub fn lfm2_config() -> Value {
    json!({
        "architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2",
        "hidden_size": 64, "conv_L_cache": 3, "conv_bias": false,
        "num_hidden_layers": 3, "layer_types": ["conv", "full_attention", "conv"],
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
        "max_position_embeddings": 32, "tie_word_embeddings": true,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
        "torch_dtype": "bfloat16"
    })
}

/// Its checkpoint as transformers writes it.
pub fn lfm2_checkpoint() -> Vec<StoredTensor> {
    let mut tensors = vec![
        bf16("model.embed_tokens.weight", &[100, 64]),
        bf16("model.embedding_norm.weight", &[64]),
    ];
    for layer in 0..3 {
        let at = |part: &str| format!("model.layers.{layer}.{part}");
        let mixer: &[(&str, &[u64])] = if layer == 1 {
            &[
                ("self_attn.q_proj.weight", &[64, 64]),
                ("self_attn.k_proj.weight", &[32, 64]),
                ("self_attn.v_proj.weight", &[32, 64]),
                ("self_attn.out_proj.weight", &[64, 64]),
                ("self_attn.q_layernorm.weight", &[16]),
                ("self_attn.k_layernorm.weight", &[16]),
            ]
        } else {
            &[
                ("conv.conv.weight", &[64, 1, 3]),
                ("conv.in_proj.weight", &[192, 64]),
                ("conv.out_proj.weight", &[64, 64]),
            ]
        };
        for (name, shape) in mixer.iter().chain(&[
            ("feed_forward.w1.weight", &[128, 64][..]),
            ("feed_forward.w3.weight", &[128, 64]),
            ("feed_forward.w2.weight", &[64, 128]),
            ("operator_norm.weight", &[64]),
            ("ffn_norm.weight", &[64]),
        ]) {
            tensors.push(bf16(&at(name), shape));
        }
    }
    tensors
}

/// scripts/vllm/fit-configs/test-lfm2-moe-small.json: test-lfm2-small's
/// widths over four layers (conv, attention, conv, attention), the first
/// dense, the others 4 experts of 32 with a router bias; tied.
pub fn lfm2_moe_config() -> Value {
    let mut config = lfm2_config();
    let more = json!({
        "architectures": ["Lfm2MoeForCausalLM"], "model_type": "lfm2_moe",
        "num_hidden_layers": 4, "num_dense_layers": 1,
        "layer_types": ["conv", "full_attention", "conv", "full_attention"],
        "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "use_expert_bias": true,
    });
    for (key, value) in more.as_object().unwrap() {
        config[key] = value.clone();
    }
    config
}

pub fn lfm2_moe_checkpoint() -> Vec<StoredTensor> {
    let mut tensors: Vec<StoredTensor> = lfm2_checkpoint()
        .into_iter()
        .filter(|t| !t.name.starts_with("model.layers.1.feed_forward."))
        .collect();
    let at = |layer: u64, part: &str| format!("model.layers.{layer}.{part}");
    for t in lfm2_checkpoint() {
        if let Some(rest) = t.name.strip_prefix("model.layers.1.") {
            if rest.starts_with("self_attn.") || rest.ends_with("norm.weight") {
                tensors.push(bf16(&at(3, rest), &t.shape));
            }
        }
    }
    for layer in [1, 2, 3] {
        tensors.push(bf16(&at(layer, "feed_forward.expert_bias"), &[4]));
        tensors.push(bf16(&at(layer, "feed_forward.gate.weight"), &[4, 64]));
        tensors.push(bf16(
            &at(layer, "feed_forward.experts.gate_up_proj"),
            &[4, 64, 64],
        ));
        tensors.push(bf16(
            &at(layer, "feed_forward.experts.down_proj"),
            &[4, 64, 32],
        ));
    }
    tensors
        .into_iter()
        .filter(|t| !t.name.starts_with("model.layers.2.feed_forward.w"))
        .collect()
}
