//! vLLM 0.33's `--language-model-only` on multimodal checkpoints: the text
//! class each wrapper builds, loaded from the checkpoint's language-model
//! tensors, the towers built and dropped. Every figure is worked out by
//! hand from vLLM's classes (models/llava_next.py, gemma3_mm.py, llama.py,
//! gemma3.py) and the 512-byte blocks of the CUDA caching allocator. The
//! same configs (scripts/vllm/fit-configs/test-llava-next-small.json and
//! test-gemma-3-mm-small.json), built by transformers and by vLLM's own
//! classes on the meta device with `language_model_only`, gave these totals
//! (scripts/vllm/compare_weights_hf.py --language-model-only).

mod common;

use common::*;
use kv_core::DType;
use kv_engines::fit::vllm::{
    loaded_language_model_on_stage, loaded_weights, LanguageModel, PipelineStage,
};
use kv_engines::weights::StoredTensor;
use serde_json::{json, Value};

const WHOLE: PipelineStage = PipelineStage::WHOLE;

/// A text model of 4 layers: hidden 256, 4 heads and 2 KV heads of 64, an
/// MLP of 512; 2,048 positions.
fn text_config(model_type: &str, vocab: u64) -> Value {
    json!({
        "model_type": model_type, "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "vocab_size": vocab, "max_position_embeddings": 2048,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    })
}

/// transformers 5's names: the text model under `model.language_model.`.
fn text_layers(norms: &[&str], qk_norm: bool) -> Vec<StoredTensor> {
    let mut tensors = Vec::new();
    for layer in 0..4 {
        let at = |part: &str| format!("model.language_model.layers.{layer}.{part}");
        for (name, shape) in [
            ("self_attn.q_proj.weight", [256, 256]),
            ("self_attn.k_proj.weight", [128, 256]),
            ("self_attn.v_proj.weight", [128, 256]),
            ("self_attn.o_proj.weight", [256, 256]),
            ("mlp.gate_proj.weight", [512, 256]),
            ("mlp.up_proj.weight", [512, 256]),
            ("mlp.down_proj.weight", [256, 512]),
        ] {
            tensors.push(bf16(&at(name), &shape));
        }
        for norm in norms {
            tensors.push(bf16(&at(&format!("{norm}.weight")), &[256]));
        }
        if qk_norm {
            tensors.push(bf16(&at("self_attn.q_norm.weight"), &[64]));
            tensors.push(bf16(&at("self_attn.k_norm.weight"), &[64]));
        }
    }
    tensors
}

/// A CLIP-like tower of one layer, and the projector.
fn towers() -> Vec<StoredTensor> {
    vec![
        bf16(
            "model.vision_tower.vision_model.embeddings.patch_embedding.weight",
            &[128, 3, 14, 14],
        ),
        bf16(
            "model.vision_tower.vision_model.encoder.layers.0.self_attn.q_proj.weight",
            &[128, 128],
        ),
        bf16("model.multi_modal_projector.linear_1.weight", &[256, 128]),
    ]
}

fn llava_next() -> (Value, Vec<StoredTensor>) {
    let config = json!({
        "architectures": ["LlavaNextForConditionalGeneration"], "model_type": "llava_next",
        "text_config": text_config("llama", 4000),
        "vision_config": {"num_attention_heads": 2, "intermediate_size": 256},
        "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    });
    let mut tensors = text_layers(&["input_layernorm", "post_attention_layernorm"], false);
    tensors.extend([
        bf16("model.language_model.embed_tokens.weight", &[4000, 256]),
        bf16("model.language_model.norm.weight", &[256]),
        bf16("lm_head.weight", &[4000, 256]),
        bf16("model.image_newline", &[256]),
    ]);
    tensors.extend(towers());
    (config, tensors)
}

// LLaVA-NeXT's text model is Llama's. One layer at TP 1: qkv (256 + 2 x
// 128) x 256 x 2 = 262,144; o_proj 131,072; gate_up 524,288; down 262,144;
// two norms 512 each: 1,180,672. The vocabulary 4,000 padded to 4,032:
// embedding and head 4,032 x 256 x 2 = 2,064,384 each; the norm 512. The
// rotary table 2,048 x 64 x 2 = 262,144; four float32 scales a layer,
// 2,048; `image_newline`, built outside the towers, 256 x 2 -> 512.

#[test]
fn llava_next_holds_its_text_model_and_image_newline_alone() {
    let (config, tensors) = llava_next();
    let model = LanguageModel::read(&config, &tensors).unwrap();
    assert_eq!(model.class(), "LlamaForCausalLM");
    let held = loaded_language_model_on_stage(&model, DType::BF16, 1, WHOLE).unwrap();
    assert_eq!(held.tensor_bytes, 4 * 1_180_672 + 2 * 2_064_384 + 512 + 512);
    assert_eq!(held.rotary_bytes, 262_144);
    assert_eq!(held.scale_bytes, 4 * 2_048);
    assert_eq!(held.total(), Some(9_122_816));
}

#[test]
fn llava_next_at_tp_2_splits_the_text_model_and_keeps_image_newline_whole() {
    // A layer: qkv (128 + 64 + 64) x 256 x 2 = 131,072; o_proj 65,536;
    // gate_up 262,144; down 131,072; the norms 1,024: 590,848. Embedding
    // and head 2,016 rows, 1,032,192 each.
    let (config, tensors) = llava_next();
    let model = LanguageModel::read(&config, &tensors).unwrap();
    let held = loaded_language_model_on_stage(&model, DType::BF16, 2, WHOLE).unwrap();
    assert_eq!(
        held.total(),
        Some(4 * 590_848 + 2 * 1_032_192 + 512 + 512 + 262_144 + 8_192)
    );
    assert_eq!(held.total(), Some(4_699_136));
}

#[test]
fn llava_next_at_a_tp_its_towers_do_not_divide_is_refused_as_vllm_refuses() {
    // The vision tower's 2 heads: vLLM builds it (then drops it) and
    // asserts `2 is not divisible by 4`.
    let (config, tensors) = llava_next();
    let model = LanguageModel::read(&config, &tensors).unwrap();
    let why = loaded_language_model_on_stage(&model, DType::BF16, 4, WHOLE).unwrap_err();
    assert!(
        why.contains("2 is not divisible by 4")
            && why.contains("vision_config.num_attention_heads"),
        "{why}"
    );
}

#[test]
fn llava_next_on_a_pipeline_holds_image_newline_on_every_stage() {
    // Stage 0: layers 0 and 1, the embedding, image_newline; stage 1:
    // layers 2 and 3, the norm, the head, image_newline. Each its rotary
    // table and two layers' scales. vLLM: 4,692,480 B and 4,692,992 B.
    let (config, tensors) = llava_next();
    let model = LanguageModel::read(&config, &tensors).unwrap();
    let stage = |index| {
        loaded_language_model_on_stage(&model, DType::BF16, 1, PipelineStage { stages: 2, index })
            .unwrap()
            .total()
    };
    let first = 2 * 1_180_672 + 2_064_384 + 512 + 262_144 + 4_096;
    assert_eq!(stage(0), Some(first));
    assert_eq!(stage(1), Some(first + 512));
    assert_eq!(stage(0), Some(4_692_480));
}

#[test]
fn without_the_flag_a_wrapper_is_refused_and_names_it() {
    let (config, tensors) = llava_next();
    let why = loaded_weights(&config, &tensors, DType::BF16, 1).unwrap_err();
    assert!(
        why.contains("--language-model-only") && why.contains("vision_tower."),
        "{why}"
    );
}

#[test]
fn a_tensor_neither_text_nor_tower_is_refused_by_name() {
    let (config, mut tensors) = llava_next();
    tensors.push(bf16("model.something_new.weight", &[4]));
    let why = LanguageModel::read(&config, &tensors).unwrap_err();
    assert!(why.contains("`model.something_new.weight`"), "{why}");
}

// Gemma 3's text model (gemma3.py) at TP 1: qkv 262,144; o_proj 131,072;
// gate_up 524,288; down 262,144; four norms 2,048; q and k norms 64 x 2 ->
// 512 each: 1,182,720 a layer. The embedding 4,096 x 256 x 2 = 2,097,152,
// tied (no head); the norm 512; one rotary table (every layer of 4
// slides, as `sliding_window_pattern` 6 gives) 262,144; the scales 8,192;
// the `normalizer` 512.

fn gemma3_mm() -> (Value, Vec<StoredTensor>) {
    let config = json!({
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "text_config": text_config("gemma3_text", 4096)
            .as_object().unwrap().clone().into_iter()
            .chain([("sliding_window".to_owned(), json!(128)),
                    ("sliding_window_pattern".to_owned(), json!(6)),
                    ("rope_local_base_freq".to_owned(), json!(10000.0))])
            .collect::<serde_json::Map<_, _>>(),
        "vision_config": {"num_attention_heads": 2, "intermediate_size": 256},
        "torch_dtype": "bfloat16",
    });
    let mut tensors = text_layers(
        &[
            "input_layernorm",
            "post_attention_layernorm",
            "pre_feedforward_layernorm",
            "post_feedforward_layernorm",
        ],
        true,
    );
    tensors.extend([
        bf16("model.language_model.embed_tokens.weight", &[4096, 256]),
        bf16("model.language_model.norm.weight", &[256]),
    ]);
    tensors.extend(towers());
    (config, tensors)
}

#[test]
fn gemma_3s_wrapper_ties_its_head_as_transformers_defaults_it() {
    // The config leaves `tie_word_embeddings` out: Gemma3Config's default,
    // true, is what vLLM copies onto the text config.
    let (config, tensors) = gemma3_mm();
    let model = LanguageModel::read(&config, &tensors).unwrap();
    assert_eq!(model.class(), "Gemma3ForCausalLM");
    let held = loaded_language_model_on_stage(&model, DType::BF16, 1, WHOLE).unwrap();
    assert_eq!(
        held.total(),
        Some(4 * 1_182_720 + 2_097_152 + 512 + 262_144 + 8_192 + 512)
    );
    assert_eq!(held.total(), Some(7_099_392));
    // TP 2: a layer 592,896 (the q and k norms whole), the embedding
    // halved.
    let held = loaded_language_model_on_stage(&model, DType::BF16, 2, WHOLE).unwrap();
    assert_eq!(
        held.total(),
        Some(4 * 592_896 + 1_048_576 + 512 + 262_144 + 8_192 + 512)
    );
    assert_eq!(held.total(), Some(3_691_520));
}

#[test]
fn a_quantized_multimodal_checkpoint_is_refused_as_its_text_class_would_be() {
    // The wrapper's `quantization_config` (an AWQ Qwen2.5-VL's, say) stands
    // for its text model too: kv has not checked vLLM's quantized layouts.
    let (mut config, tensors) = llava_next();
    config["quantization_config"] = json!({"quant_method": "awq", "bits": 4});
    let model = LanguageModel::read(&config, &tensors).unwrap();
    let why = loaded_language_model_on_stage(&model, DType::BF16, 1, WHOLE).unwrap_err();
    assert!(why.contains("quantized checkpoint"), "{why}");
}
