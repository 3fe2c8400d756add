//! What vLLM 0.33 holds once it has loaded a Zamba2 checkpoint
//! (models/zamba2.py): Mamba2 mixers, and hybrid layers that share one
//! attention block, held once however many of the checkpoint's hybrid
//! layers carry a copy of it. Figures worked out by hand from zamba2.py,
//! mamba_mixer2.py and the CUDA caching allocator's 512-byte blocks; the
//! same config (`scripts/vllm/fit-configs/test-zamba2-small.json`), built by
//! transformers and by vLLM's own class on the meta device, gave 388,608 B
//! at TP 1 (scripts/vllm/compare_weights_hf.py).

use kv_core::DType;
use kv_engines::fit::vllm::{loaded_weights, loaded_weights_on_stage, PipelineStage};
use kv_engines::weights::StoredTensor;
use serde_json::{json, Value};

/// Three layers: a Mamba layer, then two hybrid layers (1 and 2) running
/// the one shared block; hidden 64, attention 128 wide (4 heads of 32),
/// intermediate 128, Mamba2 with 4 heads of 32 (inner 128), one group of
/// state 16, a rope of 16 positions, a vocabulary of 100, untied.
fn config() -> Value {
    json!({
        "architectures": ["Zamba2ForCausalLM"], "model_type": "zamba2",
        "hidden_size": 64, "attention_hidden_size": 128, "attention_head_dim": 32,
        "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 128,
        "num_hidden_layers": 3, "layers_block_type": ["mamba", "hybrid", "hybrid"],
        "hybrid_layer_ids": [1, 2], "num_mem_blocks": 1, "use_mem_rope": true,
        "use_shared_attention_adapter": false, "adapter_rank": 8,
        "mamba_expand": 2, "mamba_headdim": 32, "n_mamba_heads": 4, "mamba_ngroups": 1,
        "mamba_d_state": 16, "mamba_d_conv": 4, "max_position_embeddings": 16,
        "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
        "vocab_size": 100, "tie_word_embeddings": false, "torch_dtype": "bfloat16"
    })
}

fn bf16(name: &str, shape: &[u64]) -> StoredTensor {
    let bytes = shape.iter().product::<u64>() * 2;
    StoredTensor::new(name.into(), "BF16".into(), shape.to_vec(), bytes)
}

/// A Mamba2 mixer and its layer's norm, under `prefix`.
fn mamba(prefix: &str, norm: &str) -> Vec<StoredTensor> {
    let mut t = vec![bf16(&format!("{norm}.input_layernorm.weight"), &[64])];
    for (name, shape) in [
        ("A_log", &[4][..]),
        ("D", &[4]),
        ("conv1d.bias", &[160]),
        ("conv1d.weight", &[160, 1, 4]),
        ("dt_bias", &[4]),
        ("in_proj.weight", &[292, 64]),
        ("norm.weight", &[128]),
        ("out_proj.weight", &[64, 128]),
    ] {
        t.push(bf16(&format!("{prefix}.{name}"), shape));
    }
    t
}

/// The shared block as hybrid layer `layer` carries it.
fn shared_block(layer: u64) -> Vec<StoredTensor> {
    let p = format!("model.layers.{layer}.shared_transformer");
    let mut t = vec![
        bf16(&format!("{p}.input_layernorm.weight"), &[128]),
        bf16(&format!("{p}.pre_ff_layernorm.weight"), &[64]),
        bf16(&format!("{p}.feed_forward.gate_up_proj.weight"), &[256, 64]),
        bf16(&format!("{p}.feed_forward.down_proj.weight"), &[64, 128]),
        bf16(&format!("{p}.self_attn.o_proj.weight"), &[64, 128]),
    ];
    for proj in ["q", "k", "v"] {
        t.push(bf16(
            &format!("{p}.self_attn.{proj}_proj.weight"),
            &[128, 128],
        ));
    }
    for adapter in 0..2 {
        let a = format!("{p}.feed_forward.gate_up_proj_adapter_list.{adapter}");
        t.push(bf16(&format!("{a}.0.weight"), &[8, 64]));
        t.push(bf16(&format!("{a}.1.weight"), &[256, 8]));
    }
    t
}

/// The checkpoint transformers writes: the shared block at both hybrid
/// layers, and an untied head.
fn checkpoint() -> Vec<StoredTensor> {
    let mut t = vec![
        bf16("model.embed_tokens.weight", &[100, 64]),
        bf16("model.final_layernorm.weight", &[64]),
        bf16("lm_head.weight", &[100, 64]),
    ];
    t.extend(mamba("model.layers.0.mamba", "model.layers.0"));
    for layer in [1, 2] {
        let decoder = format!("model.layers.{layer}.mamba_decoder");
        t.extend(mamba(&format!("{decoder}.mamba"), &decoder));
        t.push(bf16(
            &format!("model.layers.{layer}.linear.weight"),
            &[64, 64],
        ));
        t.extend(shared_block(layer));
    }
    t
}

// In 512-byte blocks:
//   a Mamba stack: in_proj 292 x 64 x 2 = 37,376; conv1d weight 160 x 4 x 2
//     = 1,280 -> 1,536; conv1d bias, dt_bias, D, the gated norm (128) and
//     the layer's norm 512 each; A float32 4 x 4 -> 512; out_proj 64 x 128
//     x 2 = 16,384: 58,368. Three of them (layer 0, and each hybrid layer's
//     `mamba_decoder`): 175,104.
//   the shared block, once: its input norm (128 wide) 512; q, k and v in one
//     qkv_proj 3 x 128 x 128 x 2 = 98,304; o_proj 64 x 128 x 2 = 16,384;
//     pre_ff norm 512; gate_up 256 x 64 x 2 = 32,768; down 16,384; two
//     LoRA adapters on gate_up, each A 8 x 64 x 2 = 1,024 and B 256 x 8 x 2
//     = 4,096: 10,240. In all 175,104.
//   each hybrid layer's `linear` 64 x 64 x 2 = 8,192: 16,384.
//   the embedding, its vocabulary padded to 128: 128 x 64 x 2 = 16,384; the
//     final norm 512; the head tied to the embedding whatever the config
//     says (zamba2.py ties it): the checkpoint's 100 x 64 x 2 = 12,800
//     skipped.
// Tensors: 175,104 + 175,104 + 16,384 + 16,384 + 512 = 383,488.
// The rope: one table [16, 32] in bf16, 1,024. The scales: an `Attention`
// per hybrid layer, 4 float32 scalars in a block each: 2 x 2,048 = 4,096.
#[test]
fn zamba2_holds_its_shared_block_once() {
    let held = loaded_weights(&config(), &checkpoint(), DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 383_488);
    assert_eq!(held.skipped_bytes, 12_800);
    // The second copy as stored: norms 256 + 128, q, k, v 3 x 32,768, o
    // 16,384, gate_up 32,768, down 16,384, adapters 2 x (1,024 + 4,096).
    assert_eq!(held.repeated_bytes, 174_464);
    assert_eq!(held.rotary_bytes, 1_024);
    assert_eq!(held.scale_bytes, 4_096);
    assert_eq!(held.total(), Some(388_608));
    // A checkpoint that stores the block once is held alike.
    let once: Vec<StoredTensor> = checkpoint()
        .into_iter()
        .filter(|t| !t.name.starts_with("model.layers.2.shared_transformer."))
        .collect();
    let held_once = loaded_weights(&config(), &once, DType::BF16, 1).unwrap();
    assert_eq!(held_once.total(), Some(388_608));
    assert_eq!(held_once.repeated_bytes, 0);
}

#[test]
fn zamba2_with_two_blocks_holds_each_once_and_no_rope_without_use_mem_rope() {
    // Two blocks: hybrid layer 1 runs block 0 and layer 2 block 1, each
    // with the LoRA adapter of its own hybrid layer only (the other an
    // `nn.Identity`): 175,104 - 5,120 = 169,984 a block, both held.
    let mut two = config();
    two["num_mem_blocks"] = json!(2);
    two["use_mem_rope"] = json!(false);
    let tensors: Vec<StoredTensor> = checkpoint()
        .into_iter()
        .filter(|t| {
            !t.name
                .contains("layers.1.shared_transformer.feed_forward.gate_up_proj_adapter_list.1")
                && !t.name.contains(
                    "layers.2.shared_transformer.feed_forward.gate_up_proj_adapter_list.0",
                )
        })
        .collect();
    let held = loaded_weights(&two, &tensors, DType::BF16, 1).unwrap();
    assert_eq!(held.tensor_bytes, 383_488 - 175_104 + 2 * 169_984);
    assert_eq!(held.repeated_bytes, 0);
    assert_eq!(held.rotary_bytes, 0);
    assert_eq!(held.scale_bytes, 4_096);
}

#[test]
fn zamba2_refuses_what_kv_has_not_checked_or_vllm_cannot_build() {
    let e = loaded_weights(&config(), &checkpoint(), DType::BF16, 2).unwrap_err();
    assert!(e.contains("above TP 1"), "{e}");
    let stage = PipelineStage {
        stages: 2,
        index: 0,
    };
    let e = loaded_weights_on_stage(&config(), &checkpoint(), DType::BF16, 1, stage).unwrap_err();
    assert!(e.contains("does not implement `SupportsPP`"), "{e}");
    // A shared block at a layer `hybrid_layer_ids` does not name.
    let mut stray = checkpoint();
    stray.push(bf16(
        "model.layers.0.shared_transformer.pre_ff_layernorm.weight",
        &[64],
    ));
    let e = loaded_weights(&config(), &stray, DType::BF16, 1).unwrap_err();
    assert!(
        e.contains("layer 0 is not one of `hybrid_layer_ids` [1, 2]"),
        "{e}"
    );
    for (key, words) in [
        ("hybrid_layer_ids", "no `hybrid_layer_ids` list"),
        ("num_mem_blocks", "no positive `num_mem_blocks`"),
        ("attention_head_dim", "no `attention_head_dim`"),
    ] {
        let mut missing = config();
        missing.as_object_mut().unwrap().remove(key);
        let e = loaded_weights(&missing, &checkpoint(), DType::BF16, 1).unwrap_err();
        assert!(e.contains(words), "{key}: {e}");
    }
    let mut zero = config();
    zero["num_mem_blocks"] = json!(0);
    let e = loaded_weights(&zero, &checkpoint(), DType::BF16, 1).unwrap_err();
    assert!(e.contains("no positive `num_mem_blocks`"), "{e}");
}
