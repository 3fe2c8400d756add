//! vLLM 0.33's `--language-model-only` on multimodal checkpoints: the text
//! class each wrapper builds, loaded from the checkpoint's language-model
//! tensors, the towers built and dropped. Every figure is worked out by
//! hand from vLLM's classes (models/llava_next.py, gemma3_mm.py, llama.py,
//! gemma3.py, qwen2_5_omni_thinker.py, qwen3_asr.py, qwen2.py, qwen3.py)
//! and the 512-byte blocks of the CUDA caching allocator. The same configs
//! (scripts/vllm/fit-configs/test-llava-next-small.json,
//! test-gemma-3-mm-small.json, test-qwen2.5-omni-small.json and
//! test-qwen3-asr-small.json), built by transformers and by vLLM's own
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

// Qwen2.5-Omni, Qwen3-ASR and its realtime class (qwen2_5_omni_thinker.py,
// qwen3_asr.py, qwen3_asr_realtime.py): the text model is under
// `thinker_config.text_config`, the checkpoint's under `thinker.`. The
// small configs scripts/vllm/fit-configs/test-qwen2.5-omni-small.json and
// test-qwen3-asr-small.json (the text model of `text_config` above: 4
// layers, hidden 256, 4 heads and 2 KV heads of 64, an MLP of 512, 4,000
// words, 2,048 positions), built by transformers and by vLLM's own classes
// on the meta device with `language_model_only`, gave these totals.

fn small(file: &str) -> Value {
    let text = match file {
        "omni" => include_str!("../../scripts/vllm/fit-configs/test-qwen2.5-omni-small.json"),
        _ => include_str!("../../scripts/vllm/fit-configs/test-qwen3-asr-small.json"),
    };
    serde_json::from_str(text).unwrap()
}

/// The small text model's 4 layers under `prefix` (`thinker.model.`, ...):
/// Qwen2's q, k and v biases, or Qwen3's q and k norms.
fn qwen_layers(prefix: &str, qwen3: bool) -> Vec<StoredTensor> {
    let mut tensors = Vec::new();
    for layer in 0..4 {
        let at = |part: &str| format!("{prefix}layers.{layer}.{part}");
        for (name, shape) in [
            ("self_attn.q_proj.weight", &[256, 256][..]),
            ("self_attn.k_proj.weight", &[128, 256]),
            ("self_attn.v_proj.weight", &[128, 256]),
            ("self_attn.o_proj.weight", &[256, 256]),
            ("mlp.gate_proj.weight", &[512, 256]),
            ("mlp.up_proj.weight", &[512, 256]),
            ("mlp.down_proj.weight", &[256, 512]),
            ("input_layernorm.weight", &[256]),
            ("post_attention_layernorm.weight", &[256]),
        ] {
            tensors.push(bf16(&at(name), shape));
        }
        let extra: &[(&str, u64)] = if qwen3 {
            &[
                ("self_attn.q_norm.weight", 64),
                ("self_attn.k_norm.weight", 64),
            ]
        } else {
            &[
                ("self_attn.q_proj.bias", 256),
                ("self_attn.k_proj.bias", 128),
                ("self_attn.v_proj.bias", 128),
            ]
        };
        for (name, n) in extra {
            tensors.push(bf16(&at(name), &[*n]));
        }
    }
    tensors
}

/// What transformers' `Qwen2_5OmniForConditionalGeneration` writes for the
/// small config: the thinker's text model, its own `thinker.lm_head`
/// (transformers ties by the thinker's `tie_word_embeddings`, false), a
/// tensor of each tower, the talker and token2wav.
fn omni() -> (Value, Vec<StoredTensor>) {
    let mut tensors = qwen_layers("thinker.model.", false);
    tensors.extend([
        bf16("thinker.model.embed_tokens.weight", &[4000, 256]),
        bf16("thinker.model.norm.weight", &[256]),
        bf16("thinker.lm_head.weight", &[4000, 256]),
        bf16("thinker.audio_tower.conv1.weight", &[64, 128, 3]),
        bf16(
            "thinker.visual.patch_embed.proj.weight",
            &[128, 3, 2, 14, 14],
        ),
        bf16("talker.model.layers.0.self_attn.q_proj.weight", &[64, 64]),
        bf16("talker.codec_head.weight", &[512, 64]),
        bf16("token2wav.code2wav_dit_model.proj_out.weight", &[80, 1024]),
    ]);
    (small("omni"), tensors)
}

// Qwen2.5-Omni's text model is Qwen2's (qwen2.py), at TP 1: qkv (256 + 2 x
// 128) x 256 x 2 = 262,144 and its bias 512 x 2 = 1,024; o_proj 131,072;
// gate_up 524,288; down 262,144; two norms 512 each: 1,181,696 a layer.
// The vocabulary 4,000 padded to 4,032: the embedding 4,032 x 256 x 2 =
// 2,064,384, tied (Qwen2_5OmniConfig has no `tie_word_embeddings`, so vLLM
// copies none; Qwen2_5OmniTextConfig's default is true), the checkpoint's
// `thinker.lm_head` skipped; the norm 512. The rope's `mrope_section` makes
// it an MRotaryEmbedding whose table has 4 x 2,048 rows (get_rope's
// `mrope_positions_factor`): 8,192 x 64 x 2 = 1,048,576. Four float32
// scales a layer, 2,048.

#[test]
fn qwen2_5_omni_holds_the_thinkers_text_model_tied_and_a_fourfold_mrope_table() {
    let (config, tensors) = omni();
    let model = LanguageModel::read(&config, &tensors).unwrap();
    assert_eq!(model.class(), "Qwen2ForCausalLM");
    assert_eq!(model.config["tie_word_embeddings"], json!(true));
    let held = loaded_language_model_on_stage(&model, DType::BF16, 1, WHOLE).unwrap();
    assert_eq!(held.tensor_bytes, 4 * 1_181_696 + 2_064_384 + 512);
    assert_eq!(held.rotary_bytes, 1_048_576);
    assert_eq!(held.scale_bytes, 4 * 2_048);
    // vLLM: 7,848,448 B.
    assert_eq!(held.total(), Some(7_848_448));
}

#[test]
fn qwen2_5_omni_at_tp_2_and_4_splits_the_text_model_and_keeps_the_table_whole() {
    // TP 2, a layer: qkv (128 + 64 + 64) x 256 x 2 = 131,072, its bias 512;
    // o_proj 65,536; gate_up 262,144; down 131,072; norms 1,024: 591,360.
    // The embedding 2,016 rows, 1,032,192. vLLM: 4,454,912 B.
    let (config, tensors) = omni();
    let model = LanguageModel::read(&config, &tensors).unwrap();
    let at = |tp| {
        loaded_language_model_on_stage(&model, DType::BF16, tp, WHOLE)
            .unwrap()
            .total()
    };
    assert_eq!(
        at(2),
        Some(4 * 591_360 + 1_032_192 + 512 + 1_048_576 + 8_192)
    );
    assert_eq!(at(2), Some(4_454_912));
    // TP 4: one query head and one KV head (the 2 replicated) a rank: qkv
    // 192 x 256 x 2 = 98,304, its bias 384 -> 512; o_proj 32,768; gate_up
    // 131,072; down 65,536; norms 1,024: 329,216. The embedding 1,008
    // rows, 516,096. vLLM: 2,890,240 B.
    assert_eq!(at(4), Some(4 * 329_216 + 516_096 + 512 + 1_048_576 + 8_192));
    assert_eq!(at(4), Some(2_890_240));
}

#[test]
fn qwen2_5_omni_on_a_pipeline_holds_the_tied_embedding_on_both_stages() {
    // Stage 0: layers 0 and 1, the embedding; stage 1: layers 2 and 3, the
    // norm, the embedding as the tied head. Each its table and two layers'
    // scales. vLLM: 5,480,448 B and 5,480,960 B.
    let (config, tensors) = omni();
    let model = LanguageModel::read(&config, &tensors).unwrap();
    let stage = |index| {
        loaded_language_model_on_stage(&model, DType::BF16, 1, PipelineStage { stages: 2, index })
            .unwrap()
            .total()
    };
    let first = 2 * 1_181_696 + 2_064_384 + 1_048_576 + 4_096;
    assert_eq!(stage(0), Some(first));
    assert_eq!(stage(1), Some(first + 512));
    assert_eq!(stage(0), Some(5_480_448));
}

#[test]
fn qwen2_5_omnis_head_is_untied_where_the_config_says_so_at_either_level() {
    // A top-level `tie_word_embeddings` (kept as an attribute, copied by
    // `with_hf_config`) or the text config's own: the head 2,064,384 more.
    // vLLM: 9,912,832 B either way.
    let (config, tensors) = omni();
    let mut top = config.clone();
    top["tie_word_embeddings"] = json!(false);
    let mut text = config;
    text["thinker_config"]["text_config"]["tie_word_embeddings"] = json!(false);
    for config in [top, text] {
        let model = LanguageModel::read(&config, &tensors).unwrap();
        let held = loaded_language_model_on_stage(&model, DType::BF16, 1, WHOLE).unwrap();
        assert_eq!(held.total(), Some(7_848_448 + 2_064_384));
        assert_eq!(held.total(), Some(9_912_832));
    }
}

#[test]
fn qwen2_5_omnis_vision_heads_refuse_a_tp_but_the_text_heads_are_refused_first() {
    // Its vision tower (Qwen2.5-VL's) splits its heads: with 2, vLLM builds
    // it at TP 4 and asserts `2 is not divisible by 4`.
    let (mut config, tensors) = omni();
    config["thinker_config"]["vision_config"]["num_heads"] = json!(2);
    let model = LanguageModel::read(&config, &tensors).unwrap();
    let why = loaded_language_model_on_stage(&model, DType::BF16, 4, WHOLE).unwrap_err();
    assert!(
        why.contains("2 is not divisible by 4")
            && why.contains("`thinker_config.vision_config.num_heads`"),
        "{why}"
    );
    // At TP 8 the text model's 4 heads are what vLLM refuses, before it
    // builds a tower ("Total number of attention heads (4) must be
    // divisible by tensor parallel size (8)", kv's estimate's words): the
    // tower's assertion is not said.
    let at_8 = loaded_language_model_on_stage(&model, DType::BF16, 8, WHOLE);
    assert!(at_8
        .as_ref()
        .err()
        .is_none_or(|why| !why.contains("vision_config")));
}

#[test]
fn a_thinker_tensor_under_no_module_fails_the_load_in_vllms_words() {
    // The mapper leaves `lm_head.weight` as it is: the thinker class has no
    // `lm_head` of its own, and AutoWeightsLoader raises.
    let (config, mut tensors) = omni();
    tensors.push(bf16("lm_head.weight", &[4000, 256]));
    let why = LanguageModel::read(&config, &tensors).unwrap_err();
    assert!(
        why.contains(
            "There is no module or parameter named 'lm_head' in \
             Qwen2_5OmniThinkerForConditionalGeneration"
        ),
        "{why}"
    );
}

/// The published Qwen3-ASR layout: `thinker.` names, the projector inside
/// the audio tower; the head untied (vLLM's Qwen3ASRTextConfig's default).
fn asr() -> (Value, Vec<StoredTensor>) {
    let mut tensors = qwen_layers("thinker.model.", true);
    tensors.extend([
        bf16("thinker.model.embed_tokens.weight", &[4000, 256]),
        bf16("thinker.model.norm.weight", &[256]),
        bf16("thinker.lm_head.weight", &[4000, 256]),
        bf16("thinker.audio_tower.conv2d1.weight", &[32, 1, 3, 3]),
        bf16("thinker.audio_tower.proj2.weight", &[256, 64]),
    ]);
    (small("asr"), tensors)
}

// Qwen3-ASR's text model is Qwen3's (qwen3.py), at TP 1: qkv 262,144;
// o_proj 131,072; gate_up 524,288; down 262,144; two norms 1,024; q and k
// norms 64 x 2 -> 512 each: 1,181,696 a layer. The embedding and the head
// 2,064,384 each (untied), the norm 512; no `mrope_section`: the table
// 2,048 x 64 x 2 = 262,144; the scales 8,192.

#[test]
fn qwen3_asr_holds_the_thinkers_text_model_untied() {
    let (config, tensors) = asr();
    let model = LanguageModel::read(&config, &tensors).unwrap();
    assert_eq!(model.class(), "Qwen3ForCausalLM");
    let held = loaded_language_model_on_stage(&model, DType::BF16, 1, WHOLE).unwrap();
    assert_eq!(held.tensor_bytes, 4 * 1_181_696 + 2 * 2_064_384 + 512);
    assert_eq!(held.rotary_bytes, 262_144);
    // vLLM: 9,126,400 B.
    assert_eq!(held.total(), Some(9_126_400));
    // TP 2: a layer 591,872 (the q and k norms whole), embedding and head
    // 1,032,192 each. vLLM: 4,702,720 B.
    let held = loaded_language_model_on_stage(&model, DType::BF16, 2, WHOLE).unwrap();
    assert_eq!(
        held.total(),
        Some(4 * 591_872 + 2 * 1_032_192 + 512 + 262_144 + 8_192)
    );
    assert_eq!(held.total(), Some(4_702_720));
}

#[test]
fn qwen3_asr_on_a_pipeline_and_its_realtime_class_alike() {
    // Stage 0: layers 0 and 1, the embedding; stage 1: layers 2 and 3, the
    // norm, the head. vLLM: 4,694,016 B and 4,694,528 B, for both classes.
    let (config, tensors) = asr();
    let mut realtime = config.clone();
    realtime["architectures"] = json!(["Qwen3ASRRealtimeGeneration"]);
    for config in [config, realtime] {
        let model = LanguageModel::read(&config, &tensors).unwrap();
        let stage = |index| {
            loaded_language_model_on_stage(
                &model,
                DType::BF16,
                1,
                PipelineStage { stages: 2, index },
            )
            .unwrap()
            .total()
        };
        let first = 2 * 1_181_696 + 2_064_384 + 262_144 + 4_096;
        assert_eq!(stage(0), Some(first));
        assert_eq!(stage(1), Some(first + 512));
        assert_eq!(stage(1), Some(4_694_528));
    }
}

#[test]
fn qwen3_asrs_mrope_table_is_fourfold_too() {
    // The published text configs' `mrope_section` (interleaved): qwen3.py's
    // decoder layer defaults `mrope_positions_factor` to 4, and qwen3_asr.py
    // builds Qwen3ForCausalLM as it is. 786,432 more. vLLM: 9,912,832 B.
    let (mut config, tensors) = asr();
    config["thinker_config"]["text_config"]["rope_parameters"] = json!({
        "rope_type": "default", "rope_theta": 10000.0,
        "mrope_section": [8, 12, 12], "mrope_interleaved": true,
    });
    let model = LanguageModel::read(&config, &tensors).unwrap();
    let held = loaded_language_model_on_stage(&model, DType::BF16, 1, WHOLE).unwrap();
    assert_eq!(held.rotary_bytes, 1_048_576);
    assert_eq!(held.total(), Some(9_126_400 + 786_432));
}

/// transformers' flat Qwen3-ASR layout (its own `Qwen3ASRConfig`), which
/// vLLM's config class reads as the thinker's: tied, as transformers
/// defaults it.
fn flat_asr(tied: bool) -> (Value, Vec<StoredTensor>) {
    let asr = small("asr");
    let mut text = asr["thinker_config"]["text_config"].clone();
    text["model_type"] = json!("qwen3");
    let config = json!({
        "architectures": ["Qwen3ASRForConditionalGeneration"], "model_type": "qwen3_asr",
        "torch_dtype": "bfloat16", "tie_word_embeddings": tied, "text_config": text,
        "audio_config": {"model_type": "qwen3_asr_encoder", "encoder_attention_heads": 2},
    });
    let mut tensors = qwen_layers("model.language_model.", true);
    tensors.extend([
        bf16("model.language_model.embed_tokens.weight", &[4000, 256]),
        bf16("model.language_model.norm.weight", &[256]),
        bf16("model.audio_tower.conv2d1.weight", &[32, 1, 3, 3]),
        bf16("model.multi_modal_projector.linear_2.weight", &[256, 64]),
    ]);
    if !tied {
        tensors.push(bf16("lm_head.weight", &[4000, 256]));
    }
    (config, tensors)
}

#[test]
fn qwen3_asr_in_transformers_layout_reads_the_top_levels_text_config() {
    // Tied: 9,126,400 less the head, 2,064,384. vLLM: 7,062,016 B.
    let (config, tensors) = flat_asr(true);
    let model = LanguageModel::read(&config, &tensors).unwrap();
    let held = loaded_language_model_on_stage(&model, DType::BF16, 1, WHOLE).unwrap();
    assert_eq!(held.total(), Some(9_126_400 - 2_064_384));
    assert_eq!(held.total(), Some(7_062_016));
    // Untied, transformers writes `lm_head.weight`, which qwen3_asr.py's
    // mapper leaves as it is: vLLM fails to load it.
    let (config, tensors) = flat_asr(false);
    let why = LanguageModel::read(&config, &tensors).unwrap_err();
    assert!(
        why.contains("`lm_head.weight`")
            && why.contains(
                "There is no module or parameter named 'lm_head' in \
                 Qwen3ASRForConditionalGeneration"
            ),
        "{why}"
    );
    // The realtime class's loader, in its own name.
    let mut realtime = config;
    realtime["architectures"] = json!(["Qwen3ASRRealtimeGeneration"]);
    let why = LanguageModel::read(&realtime, &tensors).unwrap_err();
    assert!(why.contains("in Qwen3ASRRealtimeGeneration"), "{why}");
}

#[test]
fn a_thinker_without_a_text_model_is_refused_by_its_key() {
    // vLLM would build its config class's defaults; kv names the key.
    let mut config = small("asr");
    config["thinker_config"] = json!({"audio_config": {}});
    let why = LanguageModel::read(&config, &[]).unwrap_err();
    assert!(why.contains("`thinker_config.text_config`"), "{why}");
    let mut omni = small("omni");
    omni.as_object_mut().unwrap().remove("thinker_config");
    let why = LanguageModel::read(&omni, &[]).unwrap_err();
    assert!(why.contains("`thinker_config.text_config`"), "{why}");
}

#[test]
fn qwen2_vls_mrope_table_is_fourfold() {
    // qwen2_vl.py builds Qwen2ForCausalLM, whose attention asks get_rope
    // for no `mrope_positions_factor`: 4 x 2,048 rows of 64, 1,048,576 B.
    let mut text = text_config("qwen2_vl_text", 4000);
    text["rope_parameters"]["mrope_section"] = json!([8, 12, 12]);
    let config = json!({
        "architectures": ["Qwen2VLForConditionalGeneration"], "text_config": text,
        "vision_config": {"num_heads": 2}, "torch_dtype": "bfloat16",
    });
    let tensors = [bf16(
        "model.language_model.embed_tokens.weight",
        &[4000, 256],
    )];
    let model = LanguageModel::read(&config, &tensors).unwrap();
    let held = loaded_language_model_on_stage(&model, DType::BF16, 1, WHOLE).unwrap();
    assert_eq!(held.rotary_bytes, 1_048_576);
}
