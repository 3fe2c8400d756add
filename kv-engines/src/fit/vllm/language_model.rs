//! vLLM 0.33's `--language-model-only` on a multimodal class: its towers
//! are built as `StageMissingLayer`s (`_mark_tower_model`,
//! models/interfaces.py) and hold nothing, so the rank holds the text class
//! the wrapper builds, loaded from the checkpoint's language-model tensors.
//! kv answers it as that text class, on the text config, with the
//! tensors renamed as the wrapper's `hf_to_vllm_mapper` renames them.

use serde_json::Value;

use crate::fit::config::architecture;
use crate::stored_tensor::StoredTensor;

/// Where vLLM's wrapper gets its text class.
#[derive(Clone, Copy)]
enum TextClass {
    /// The wrapper names it (`architectures=[...]` or the class itself).
    Named(&'static str),
    /// `text_config`'s own: its `architectures`, else transformers' causal
    /// class for its `model_type` (`VllmConfig.with_hf_config`).
    OfTextConfig,
}

/// Where the wrapper's config keeps its text model's config.
#[derive(Clone, Copy)]
enum TextAt {
    /// `text_config`.
    TextConfig,
    /// `thinker_config.text_config` (Qwen2.5-Omni's thinker).
    Thinker,
    /// `thinker_config.text_config`, or where `thinker_config` is absent or
    /// null, `text_config`: vLLM's `Qwen3ASRConfig` builds its thinker from
    /// the top level's sections then (transformers' flat layout,
    /// vllm/transformers_utils/configs/qwen3_asr.py).
    ThinkerElseTop,
}

/// Where the text model's `tie_word_embeddings` comes from.
#[derive(Clone, Copy)]
enum Tie {
    /// The wrapper's config class has the setting, defaulting to this where
    /// config.json leaves it out (transformers 5's default for the class):
    /// vLLM copies it onto the text config (`VllmConfig.with_hf_config`).
    Wrapper(bool),
    /// The text config's own: the wrapper's config class has no such
    /// setting, or vLLM builds the text model without copying it.
    Text,
    /// The wrapper's config class has no such setting, so vLLM copies the
    /// top level's only where config.json gives it (the class keeps it as an
    /// attribute; `with_hf_config` copies what `hasattr` finds); else the
    /// text config's own stands, else its class's default, this where kv
    /// has checked it (else as the text class reads a config without it).
    Given(Option<bool>),
}

/// One multimodal class kv has checked under `--language-model-only`.
#[derive(Clone, Copy)]
struct Wrapper {
    class: &'static str,
    text: TextClass,
    text_at: TextAt,
    /// `hf_to_vllm_mapper.orig_to_new_prefix`, in its order: each prefix
    /// that matches is replaced in turn; `None` drops the tensor.
    prefixes: &'static [(&'static str, Option<&'static str>)],
    /// The modules vLLM marks as towers, by their name after the mapper:
    /// empty under `--language-model-only`.
    towers: &'static [&'static str],
    /// The towers' config sections, by their dotted path: vLLM builds each
    /// tower (then swaps it for a placeholder), so a tensor-parallel size
    /// its heads or MLP do not divide fails as it would with the towers.
    tower_configs: &'static [TowerSizes],
    /// Modules outside the language model that vLLM builds all the same
    /// (LLaVA-NeXT's `image_newline`), each whole on every rank and stage.
    beside: &'static [&'static str],
    /// Where the text model's `tie_word_embeddings` comes from.
    tie: Tie,
    /// The `positions_factor` the text class as the wrapper builds it hands
    /// vLLM's `MRotaryEmbedding` for a `default` rope with an
    /// `mrope_section` (`get_rope`'s default, 4, where its attention passes
    /// none); `None` where kv has not checked it: the table is then
    /// counted as the text class's alone would be.
    mrope_positions: Option<u64>,
    /// The vLLM class whose `load_weights` is a plain `AutoWeightsLoader`
    /// (no prefixes skipped or ignored): a tensor the mapper leaves under
    /// none of its modules fails the load, in its words.
    strict_loader: Option<&'static str>,
}

/// A tower's config section, the keys of which one at least must be
/// given, and others checked where given: each a size vLLM splits over
/// the ranks.
type TowerSizes = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
);

const HEADS: &[&str] = &[
    "num_attention_heads",
    "num_heads",
    "encoder_attention_heads",
];
const MLP: &[&str] = &["intermediate_size", "encoder_ffn_dim"];
/// A vision tower: its heads and its MLP split over the ranks.
const VISION: TowerSizes = ("vision_config", HEADS, MLP);

/// The prefixes of the LLaVA-style classes (llava.py's mapper).
const LLAVA: &[(&str, Option<&str>)] = &[
    ("model.language_model.", Some("language_model.model.")),
    ("model.vision_tower.", Some("vision_tower.")),
    (
        "model.multi_modal_projector.",
        Some("multi_modal_projector."),
    ),
    ("model.image_newline", Some("image_newline")),
    ("lm_head.", Some("language_model.lm_head.")),
];

/// The prefixes of the Qwen2-VL-style classes, whose older checkpoints keep
/// the text model under `model.`.
const QWEN2_VL: &[(&str, Option<&str>)] = &[
    ("model.language_model.", Some("language_model.model.")),
    ("model.visual.", Some("visual.")),
    ("lm_head.", Some("language_model.lm_head.")),
    ("model.", Some("language_model.model.")),
];

/// The prefixes of the classes whose text model is `model.language_model.`
/// and vision tower `model.visual.` (Glm4v, GLM-OCR, Qwen3-VL, Qwen3.5).
const VISUAL: &[(&str, Option<&str>)] = &[
    ("model.visual.", Some("visual.")),
    ("lm_head.", Some("language_model.lm_head.")),
    ("model.language_model.", Some("language_model.model.")),
    ("mtp.", None),
];

const LLAVA_TOWERS: &[&str] = &["vision_tower.", "multi_modal_projector.", "image_newline"];

/// LLaVA-NeXT's and LLaVA-OneVision's: their `image_newline` is built
/// outside the towers (llava_next.py), so held under
/// `--language-model-only` too.
const LLAVA_NEXT_TOWERS: &[&str] = &["vision_tower.", "multi_modal_projector."];

impl Wrapper {
    /// The same wrapper under another class's name.
    const fn named(self, class: &'static str) -> Wrapper {
        Wrapper { class, ..self }
    }
}

/// A LLaVA-style wrapper: llava.py's names, a vision tower and projector.
const fn llava(class: &'static str, text: TextClass, tie_default: bool) -> Wrapper {
    Wrapper {
        class,
        text,
        text_at: TextAt::TextConfig,
        prefixes: LLAVA,
        towers: LLAVA_TOWERS,
        tower_configs: &[VISION],
        beside: &[],
        tie: Tie::Wrapper(tie_default),
        mrope_positions: None,
        strict_loader: None,
    }
}

/// A wrapper whose text model is `model.language_model.` and vision tower
/// `model.visual.` (Glm4v, GLM-OCR, Qwen3-VL, Qwen3.5), untied by default.
const fn visual(class: &'static str, text: &'static str) -> Wrapper {
    Wrapper {
        class,
        text: TextClass::Named(text),
        text_at: TextAt::TextConfig,
        prefixes: VISUAL,
        towers: &["visual."],
        tower_configs: &[VISION],
        beside: &[],
        tie: Tie::Wrapper(false),
        mrope_positions: None,
        strict_loader: None,
    }
}

/// LLaVA-NeXT's, LLaVA-OneVision's too.
const LLAVA_NEXT: Wrapper = Wrapper {
    class: "LlavaNextForConditionalGeneration",
    text: TextClass::OfTextConfig,
    text_at: TextAt::TextConfig,
    prefixes: LLAVA,
    towers: LLAVA_NEXT_TOWERS,
    tower_configs: &[VISION],
    beside: &["image_newline"],
    tie: Tie::Wrapper(false),
    mrope_positions: None,
    strict_loader: None,
};

/// Qwen2-VL's, Qwen2.5-VL's too.
const QWEN2_VL_WRAPPER: Wrapper = Wrapper {
    class: "Qwen2VLForConditionalGeneration",
    text: TextClass::Named("Qwen2ForCausalLM"),
    text_at: TextAt::TextConfig,
    prefixes: QWEN2_VL,
    towers: &["visual."],
    tower_configs: &[VISION],
    beside: &[],
    tie: Tie::Wrapper(false),
    // qwen2.py's attention asks `get_rope` for none: 4.
    mrope_positions: Some(4),
    strict_loader: None,
};

/// MiniCPM-V 4.6's, 4.7's too.
const MINICPMV_4_6: Wrapper = Wrapper {
    class: "MiniCPMV4_6ForConditionalGeneration",
    text: TextClass::Named("Qwen3_5ForCausalLM"),
    text_at: TextAt::TextConfig,
    prefixes: MINICPMV,
    towers: &["vpm.", "vit_merger.", "merger."],
    tower_configs: &[VISION],
    beside: &[],
    tie: Tie::Wrapper(false),
    mrope_positions: None,
    strict_loader: None,
};

/// Idefics3's, SmolVLM's too.
const IDEFICS3_WRAPPER: Wrapper = Wrapper {
    class: "Idefics3ForConditionalGeneration",
    text: TextClass::Named("LlamaForCausalLM"),
    text_at: TextAt::TextConfig,
    prefixes: IDEFICS3,
    towers: &["model.vision_model.", "model.connector."],
    tower_configs: &[VISION],
    beside: &[],
    // idefics3.py builds its text model itself, and ties its head as
    // `text_config` says.
    tie: Tie::Text,
    mrope_positions: None,
    strict_loader: None,
};

/// Qwen2-Audio's, AudioFlamingo3's too.
const QWEN2_AUDIO: Wrapper = Wrapper {
    class: "Qwen2AudioForConditionalGeneration",
    text: TextClass::Named("Qwen2ForCausalLM"),
    text_at: TextAt::TextConfig,
    prefixes: &[],
    towers: AUDIO_TOWERS,
    // vLLM builds its audio tower at TP 8 with 20 heads: not split.
    tower_configs: &[],
    beside: &[],
    // Its config class has no `tie_word_embeddings`: vLLM copies the top
    // level's only where config.json gives it (`with_hf_config`).
    tie: Tie::Given(None),
    mrope_positions: None,
    strict_loader: None,
};

/// Granite Speech's, Granite Speech Plus's too.
const GRANITE_SPEECH_WRAPPER: Wrapper = Wrapper {
    class: "GraniteSpeechForConditionalGeneration",
    text: TextClass::OfTextConfig,
    text_at: TextAt::TextConfig,
    prefixes: GRANITE_SPEECH,
    towers: &["encoder.", "projector."],
    // Its encoder's CTC output is column-parallel (granite_speech.py);
    // vLLM builds it at TP 4 and 8 with 8 heads.
    tower_configs: &[("encoder_config", &["output_dim"], &[])],
    beside: &[],
    tie: Tie::Wrapper(true),
    mrope_positions: None,
    strict_loader: None,
};

const WRAPPERS: &[Wrapper] = &[
    llava(
        "LlavaForConditionalGeneration",
        TextClass::OfTextConfig,
        false,
    ),
    LLAVA_NEXT,
    Wrapper {
        class: "LlavaNextVideoForConditionalGeneration",
        text: TextClass::OfTextConfig,
        text_at: TextAt::TextConfig,
        prefixes: LLAVA,
        towers: &[
            "vision_tower.",
            "multi_modal_projector.",
            "image_newline",
            "vision_resampler.",
        ],
        tower_configs: &[VISION],
        beside: &[],
        tie: Tie::Wrapper(false),
        mrope_positions: None,
        strict_loader: None,
    },
    LLAVA_NEXT.named("LlavaOnevisionForConditionalGeneration"),
    llava(
        "PaliGemmaForConditionalGeneration",
        TextClass::OfTextConfig,
        true,
    ),
    llava(
        "Gemma3ForConditionalGeneration",
        TextClass::Named("Gemma3ForCausalLM"),
        true,
    ),
    Wrapper {
        class: "Mistral3ForConditionalGeneration",
        text: TextClass::OfTextConfig,
        text_at: TextAt::TextConfig,
        prefixes: &[
            ("model.language_model.", Some("language_model.model.")),
            ("model.vision_tower.", Some("vision_tower.")),
            (
                "model.multi_modal_projector.",
                Some("multi_modal_projector."),
            ),
            ("lm_head.", Some("language_model.lm_head.")),
            ("model.", Some("language_model.model.")),
        ],
        towers: LLAVA_TOWERS,
        tower_configs: &[VISION],
        beside: &[],
        tie: Tie::Wrapper(true),
        mrope_positions: None,
        strict_loader: None,
    },
    llava(
        "InternVLForConditionalGeneration",
        TextClass::OfTextConfig,
        true,
    ),
    llava(
        "Cohere2VisionForConditionalGeneration",
        TextClass::OfTextConfig,
        true,
    ),
    QWEN2_VL_WRAPPER,
    QWEN2_VL_WRAPPER.named("Qwen2_5_VLForConditionalGeneration"),
    Wrapper {
        class: "Exaone4_5_ForConditionalGeneration",
        text: TextClass::Named("Exaone4ForCausalLM"),
        text_at: TextAt::TextConfig,
        prefixes: &[
            ("model.language_model.", Some("language_model.model.")),
            ("model.visual.", Some("visual.")),
            ("lm_head.", Some("language_model.lm_head.")),
            ("model.", Some("language_model.model.")),
            ("mtp.", None),
        ],
        towers: &["visual."],
        tower_configs: &[VISION],
        beside: &[],
        tie: Tie::Wrapper(false),
        mrope_positions: None,
        strict_loader: None,
    },
    visual("Glm4vForConditionalGeneration", "Glm4ForCausalLM"),
    visual("GlmOcrForConditionalGeneration", "Glm4ForCausalLM"),
    visual("Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"),
    visual(
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5MoeForCausalLM",
    ),
    MINICPMV_4_6,
    MINICPMV_4_6.named("MiniCPMV4_7ForConditionalGeneration"),
    Wrapper {
        class: "Gemma4ForConditionalGeneration",
        text: TextClass::Named("Gemma4ForCausalLM"),
        text_at: TextAt::TextConfig,
        prefixes: &[
            ("model.vision_tower", Some("vision_tower")),
            ("model.embed_vision", Some("embed_vision")),
            ("model.audio_tower.", Some("audio_tower.")),
            ("model.embed_audio.", Some("embed_audio.")),
            ("model.language_model.", Some("language_model.model.")),
            ("lm_head.", Some("language_model.lm_head.")),
            ("model", Some("language_model.model")),
        ],
        towers: &[
            "vision_tower.",
            "embed_vision.",
            "audio_tower.",
            "embed_audio.",
        ],
        // vLLM builds its vision tower at TP 8 with 12 heads: its heads
        // are not split.
        tower_configs: &[],
        beside: &[],
        tie: Tie::Wrapper(true),
        mrope_positions: None,
        strict_loader: None,
    },
    visual("Qwen3VLForConditionalGeneration", "Qwen3ForCausalLM"),
    Wrapper {
        class: "PaddleOCRVLForConditionalGeneration",
        text: TextClass::Named("Ernie4_5ForCausalLM"),
        text_at: TextAt::TextConfig,
        prefixes: &[
            ("model.", Some("language_model.model.")),
            ("lm_head.", Some("language_model.lm_head.")),
        ],
        towers: &["visual.", "mlp_AR."],
        tower_configs: &[VISION],
        beside: &[],
        tie: Tie::Wrapper(true),
        mrope_positions: None,
        strict_loader: None,
    },
    Wrapper {
        class: "Llama4ForConditionalGeneration",
        text: TextClass::Named("Llama4ForCausalLM"),
        text_at: TextAt::TextConfig,
        prefixes: &[],
        towers: &["vision_model.", "multi_modal_projector."],
        tower_configs: &[VISION],
        beside: &[],
        tie: Tie::Wrapper(false),
        mrope_positions: None,
        strict_loader: None,
    },
    Wrapper {
        class: "Blip2ForConditionalGeneration",
        text: TextClass::OfTextConfig,
        text_at: TextAt::TextConfig,
        prefixes: &[],
        towers: &["vision_model.", "qformer.", "language_projection."],
        tower_configs: &[VISION, ("qformer_config", HEADS, MLP)],
        // blip2.py builds `query_tokens` outside its towers.
        beside: &["query_tokens"],
        // Its config class has no `tie_word_embeddings`: vLLM copies the top
        // level's only where config.json gives it (`with_hf_config`).
        tie: Tie::Given(None),
        mrope_positions: None,
        strict_loader: None,
    },
    IDEFICS3_WRAPPER,
    IDEFICS3_WRAPPER.named("SmolVLMForConditionalGeneration"),
    QWEN2_AUDIO,
    QWEN2_AUDIO.named("AudioFlamingo3ForConditionalGeneration"),
    Wrapper {
        class: "GlmAsrForConditionalGeneration",
        text: TextClass::Named("LlamaForCausalLM"),
        text_at: TextAt::TextConfig,
        prefixes: &[("audio_tower.embed_positions", None)],
        towers: AUDIO_TOWERS,
        tower_configs: &[("audio_config", HEADS, MLP)],
        beside: &[],
        tie: Tie::Wrapper(true),
        mrope_positions: None,
        strict_loader: None,
    },
    GRANITE_SPEECH_WRAPPER,
    GRANITE_SPEECH_WRAPPER.named("GraniteSpeechPlusForConditionalGeneration"),
    Wrapper {
        class: "Qwen2_5OmniForConditionalGeneration",
        // qwen2_5_omni_thinker.py: `init_vllm_registered_model(...,
        // hf_config=thinker_config.text_config,
        // architectures=["Qwen2ForCausalLM"])`.
        text: TextClass::Named("Qwen2ForCausalLM"),
        text_at: TextAt::Thinker,
        prefixes: &[
            ("thinker.lm_head.", Some("language_model.lm_head.")),
            ("thinker.model.", Some("language_model.model.")),
            ("thinker.", Some("")),
            ("talker.", None),
            ("token2wav.", None),
        ],
        towers: &["audio_tower.", "visual."],
        // Its audio tower is transformers' own (no tensor parallelism); its
        // vision tower Qwen2.5-VL's, which splits its heads and MLP.
        tower_configs: &[("thinker_config.vision_config", HEADS, MLP)],
        beside: &[],
        // Qwen2_5OmniConfig has no `tie_word_embeddings`; its text config
        // class's defaults to true (transformers 5).
        tie: Tie::Given(Some(true)),
        // qwen2.py's attention asks `get_rope` for none: 4.
        mrope_positions: Some(4),
        strict_loader: Some("Qwen2_5OmniThinkerForConditionalGeneration"),
    },
    QWEN3_ASR,
    Wrapper {
        strict_loader: Some("Qwen3ASRRealtimeGeneration"),
        ..QWEN3_ASR.named("Qwen3ASRRealtimeGeneration")
    },
];

/// Qwen3-ASR's (qwen3_asr.py), its realtime class's too (a subclass with
/// another processor, qwen3_asr_realtime.py).
const QWEN3_ASR: Wrapper = Wrapper {
    class: "Qwen3ASRForConditionalGeneration",
    // `Qwen3ForCausalLM(vllm_config=vllm_config.with_hf_config(
    // thinker_config.text_config, architectures=["Qwen3ForCausalLM"]))`.
    text: TextClass::Named("Qwen3ForCausalLM"),
    text_at: TextAt::ThinkerElseTop,
    // The published checkpoints' thinker names, then transformers' flat
    // ones; the mapper has no `lm_head.`, so vLLM cannot load transformers'
    // untied head (`strict_loader`).
    prefixes: &[
        ("thinker.lm_head.", Some("language_model.lm_head.")),
        ("thinker.model.", Some("language_model.model.")),
        ("thinker.", Some("")),
        ("model.audio_tower.", Some("audio_tower.")),
        ("model.language_model.", Some("language_model.model.")),
        (
            "model.multi_modal_projector.linear_1.",
            Some("audio_tower.proj1."),
        ),
        (
            "model.multi_modal_projector.linear_2.",
            Some("audio_tower.proj2."),
        ),
        ("talker.", None),
        ("code2wav.", None),
    ],
    towers: &["audio_tower."],
    // Its audio tower keeps whole what its heads do not divide
    // (qwen3_omni_moe_thinker.py, `disable_tp`): no size refuses.
    tower_configs: &[],
    beside: &[],
    // vLLM's Qwen3ASRConfig has no `tie_word_embeddings` unless config.json
    // gives it; its text config class's defaults to false.
    tie: Tie::Given(Some(false)),
    // qwen3.py's decoder layer defaults `mrope_positions_factor` to 4, and
    // qwen3_asr.py builds `Qwen3ForCausalLM` as it is (Qwen3-VL's layers
    // pass 1).
    mrope_positions: Some(4),
    strict_loader: Some("Qwen3ASRForConditionalGeneration"),
};

/// Idefics3's and SmolVLM's names, which vLLM loads as they are: the text
/// model is `model.text_model`.
const IDEFICS3: &[(&str, Option<&str>)] = &[
    ("model.text_model.", Some("language_model.model.")),
    ("lm_head.", Some("language_model.lm_head.")),
];

/// Granite Speech's mapper.
const GRANITE_SPEECH: &[(&str, Option<&str>)] =
    &[("language_model.model.model.", Some("language_model.model."))];

/// The audio classes' towers, as their published checkpoints name them.
const AUDIO_TOWERS: &[&str] = &["audio_tower.", "multi_modal_projector."];

/// MiniCPM-V 4.6's and 4.7's prefixes.
const MINICPMV: &[(&str, Option<&str>)] = &[
    ("model.vision_tower.vit_merger.", Some("vit_merger.")),
    ("model.vision_tower.", Some("vpm.")),
    ("model.vpm.", Some("vpm.")),
    ("model.vit_merger.", Some("vit_merger.")),
    ("model.merger.", Some("merger.")),
    ("model.language_model.", Some("language_model.model.")),
    ("lm_head.", Some("language_model.lm_head.")),
    ("mtp.", None),
];

/// transformers 5's causal class for a text config's `model_type`
/// (`MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`), for the types whose class kv has
/// checked.
const CAUSAL_CLASS_OF_TYPE: &[(&str, &str)] = &[
    ("cohere", "CohereForCausalLM"),
    ("cohere2", "Cohere2ForCausalLM"),
    ("gemma", "GemmaForCausalLM"),
    ("gemma2", "Gemma2ForCausalLM"),
    ("granite", "GraniteForCausalLM"),
    ("llama", "LlamaForCausalLM"),
    ("ministral3", "Ministral3ForCausalLM"),
    ("mistral", "MistralForCausalLM"),
    ("opt", "OPTForCausalLM"),
    ("qwen2", "Qwen2ForCausalLM"),
    ("qwen3", "Qwen3ForCausalLM"),
];

/// The multimodal classes kv answers under `--language-model-only`.
pub const LANGUAGE_MODEL_ONLY_ARCHITECTURES: [&str; WRAPPERS.len()] = {
    let mut names = [""; WRAPPERS.len()];
    let mut i = 0;
    while i < WRAPPERS.len() {
        names[i] = WRAPPERS[i].class;
        i += 1;
    }
    names
};

fn wrapper(config: &Value) -> Option<&'static Wrapper> {
    let class = architecture(config);
    WRAPPERS.iter().find(|w| w.class == class)
}

/// Whether `config` is a multimodal class kv answers only under
/// `--language-model-only`: with its towers, what it holds is unchecked.
pub(crate) fn towers_refusal(config: &Value) -> Option<String> {
    wrapper(config).map(|w| {
        format!(
            "vLLM builds `{}`'s towers ({}) beside its text model, which kv has not checked; \
             give --language-model-only to size the text model alone, as vLLM's \
             --language-model-only serves it",
            w.class,
            w.towers.join(", ")
        )
    })
}

/// What vLLM builds under `--language-model-only`, and loads into it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LanguageModel {
    /// The text config, with `architectures` the text class vLLM builds and
    /// `tie_word_embeddings` the wrapper's (vLLM copies it over,
    /// `VllmConfig.with_hf_config`).
    pub config: Value,
    /// The language model's tensors, under the text class's names.
    pub tensors: Vec<StoredTensor>,
    /// Tensors vLLM holds beside it, whole on every rank and stage.
    pub beside: Vec<StoredTensor>,
    /// The towers' sizes that each rank's share must divide: their config
    /// key and value.
    tower_sizes: Vec<(String, u64)>,
    /// The wrapper's `mrope_positions`.
    mrope_positions: Option<u64>,
}

impl LanguageModel {
    /// The class vLLM builds for it.
    pub fn class(&self) -> &str {
        architecture(&self.config)
    }

    /// vLLM's `--language-model-only` for `config` and its checkpoint's
    /// `tensors`: the language model's renamed as the wrapper's
    /// `hf_to_vllm_mapper` renames them, the towers' left out (vLLM builds
    /// none of them), and a tensor that is neither refused by name. A
    /// text-only config is kept whole, as vLLM ignores the flag for it.
    pub fn read(config: &Value, tensors: &[StoredTensor]) -> Result<LanguageModel, String> {
        let text = language_model_config(config)?;
        let Some(w) = wrapper(config) else {
            return Ok(LanguageModel {
                config: text,
                tensors: tensors.to_vec(),
                beside: Vec::new(),
                tower_sizes: Vec::new(),
                mrope_positions: None,
            });
        };
        let mut kept = Vec::new();
        let mut beside = Vec::new();
        for tensor in tensors {
            let Some(name) = mapped(w, &tensor.name) else {
                continue;
            };
            if let Some(text_name) = name.strip_prefix("language_model.") {
                // A tower's tensor the mapper sends into the language model
                // (PaddleOCR-VL's `model.` -> `language_model.model.` takes
                // transformers 5's `model.visual.` along): the text class
                // has no such module.
                let inner = text_name.strip_prefix("model.").unwrap_or(text_name);
                if let Some(tower) = w.towers.iter().find(|t| inner.starts_with(*t)) {
                    return Err(format!(
                        "`{}` (`{name}` after `{}`'s mapper): the `{tower}` tower's tensor \
                         lands in the language model, which has no such module; kv has not \
                         checked what vLLM does with it (the published checkpoints' names keep \
                         the tower apart)",
                        tensor.name, w.class
                    ));
                }
                let mut t = tensor.clone();
                t.name = text_name.to_owned();
                kept.push(t);
            } else if w.beside.iter().any(|b| name.starts_with(b)) {
                beside.push(tensor.clone());
            } else if let (Some(class), false) = (
                w.strict_loader,
                w.towers.iter().any(|t| name.starts_with(t)),
            ) {
                // AutoWeightsLoader names the first step under no module.
                let first = name.split('.').next().unwrap_or(&name);
                return Err(format!(
                    "vLLM fails to load `{}` (`{name}` after `{}`'s mapper): ValueError: \
                     There is no module or parameter named '{first}' in {class}",
                    tensor.name, w.class
                ));
            } else if !w.towers.iter().any(|t| name.starts_with(t)) {
                return Err(format!(
                    "`{}` (`{name}` in vLLM's `{}`): neither its language model nor a tower \
                     ({}); kv does not know what vLLM holds for it",
                    tensor.name,
                    w.class,
                    w.towers.join(", ")
                ));
            }
        }
        Ok(LanguageModel {
            config: text,
            tensors: kept,
            beside,
            tower_sizes: tower_sizes(config, w)?,
            mrope_positions: w.mrope_positions,
        })
    }

    /// The language model of `config` with the text class's own `tensors`
    /// (computed from the text config, [`language_model_config`]): refused
    /// where vLLM also holds a tensor beside it that only a checkpoint
    /// gives.
    pub fn computed(config: &Value, tensors: Vec<StoredTensor>) -> Result<LanguageModel, String> {
        if let Some(w) = wrapper(config).filter(|w| !w.beside.is_empty()) {
            return Err(format!(
                "vLLM holds `{}` beside `{}`'s language model, which kv reads from a \
                 checkpoint, not from the config",
                w.beside.join("`, `"),
                w.class
            ));
        }
        Ok(LanguageModel {
            config: language_model_config(config)?,
            tensors,
            beside: Vec::new(),
            tower_sizes: match wrapper(config) {
                Some(w) => tower_sizes(config, w)?,
                None => Vec::new(),
            },
            mrope_positions: wrapper(config).and_then(|w| w.mrope_positions),
        })
    }
}

/// Each tower's head count and MLP width, where its config gives them.
/// A tower section without a head count is refused by name: kv could not
/// say which tensor-parallel sizes vLLM builds it at.
fn tower_sizes(config: &Value, w: &Wrapper) -> Result<Vec<(String, u64)>, String> {
    let mut sizes = Vec::new();
    for (section, required, optional) in w.tower_configs {
        let Some(tower) = nested(config, section).filter(|t| !t.is_null()) else {
            continue;
        };
        let given = |key: &&str| tower.get(*key).and_then(Value::as_u64);
        let first = required
            .iter()
            .find_map(|k| given(k).map(|v| (*k, v)))
            .ok_or_else(|| {
                format!(
                    "`{section}` has none of `{}`: kv cannot say which tensor-parallel sizes \
                     vLLM builds `{}`'s tower at (give it)",
                    required.join("`, `"),
                    w.class
                )
            })?;
        sizes.push((format!("{section}.{}", first.0), first.1));
        for key in *optional {
            if let Some(value) = given(key) {
                sizes.push((format!("{section}.{key}"), value));
            }
        }
    }
    Ok(sizes)
}

impl LanguageModel {
    /// The `positions_factor` vLLM's `MRotaryEmbedding` gets in the text
    /// class as the wrapper builds it, where kv has checked it.
    pub(crate) fn mrope_positions(&self) -> Option<u64> {
        self.mrope_positions
    }

    /// vLLM's refusal of `tp` where it does not divide a tower it builds;
    /// none where it does not divide the text model's attention heads, which
    /// vLLM refuses first, before it builds anything
    /// (`ModelConfig.verify_with_parallel_config`, config/model.py:1557, in
    /// words kv's estimate says).
    pub(crate) fn tower_refusal(&self, tp: u64) -> Option<String> {
        // A size of 0 the text model refuses (`tensor parallel size 0`).
        let divides = |v: u64| v.checked_rem(tp).is_some_and(|r| r == 0);
        let heads = self
            .config
            .get("num_attention_heads")
            .and_then(Value::as_u64);
        if tp == 0 || heads.is_some_and(|h| !divides(h)) {
            return None;
        }
        let (key, value) = self.tower_sizes.iter().find(|(_, v)| !divides(*v))?;
        Some(format!(
            "vLLM refuses: AssertionError: {value} is not divisible by {tp} (`{key}`: under \
             --language-model-only vLLM still builds the towers, then drops them)"
        ))
    }
}

/// The text config vLLM's `--language-model-only` builds its text class
/// from ([`LanguageModel::config`]); a text-only config unchanged.
pub fn language_model_config(config: &Value) -> Result<Value, String> {
    let Some(w) = wrapper(config) else {
        // A text class of kv's checked list is text-only, whatever its
        // config nests (vLLM ignores the flag for it).
        let text_only = super::checked::CHECKED_ARCHITECTURES.contains(&architecture(config));
        let nests = ["text_config", "thinker_config"]
            .iter()
            .any(|k| config.get(*k).is_some());
        if nests && !text_only {
            return Err(format!(
                "kv has not checked what vLLM's `{}` holds under --language-model-only \
                 (checked: {})",
                architecture(config),
                LANGUAGE_MODEL_ONLY_ARCHITECTURES.join(", ")
            ));
        }
        return Ok(config.clone());
    };
    let path = text_path(config, w);
    let mut text = nested(config, path)
        .filter(|t| t.is_object())
        .cloned()
        .ok_or_else(|| format!("`{}`: the config has no `{path}` object", w.class))?;
    let class = match w.text {
        TextClass::Named(class) => class.to_owned(),
        TextClass::OfTextConfig => text_class(&text)?,
    };
    let outer = config
        .get("tie_word_embeddings")
        .filter(|v| !v.is_null())
        .map(|v| {
            v.as_bool()
                .ok_or("`tie_word_embeddings` is not true or false")
        })
        .transpose()?;
    let own = text
        .get("tie_word_embeddings")
        .filter(|v| !v.is_null())
        .map(|v| {
            v.as_bool()
                .ok_or_else(|| format!("`{path}.tie_word_embeddings` is not true or false"))
        })
        .transpose()?;
    let tie = match (w.tie, outer) {
        (Tie::Wrapper(_) | Tie::Given(_), Some(given)) => Some(given),
        (Tie::Wrapper(default), None) => Some(default),
        (Tie::Given(default), None) => own.or(default),
        (Tie::Text, _) => None,
    };
    let fields = text
        .as_object_mut()
        .ok_or_else(|| format!("`{path}` is not an object"))?;
    fields.insert("architectures".into(), Value::from(vec![class]));
    if let Some(tie) = tie {
        fields.insert("tie_word_embeddings".into(), Value::Bool(tie));
    }
    // The wrapper's dtype and quantization apply to its text model too (a
    // quantized checkpoint is then refused as the text class's would be).
    for key in ["torch_dtype", "dtype", "quantization_config"] {
        if let (false, Some(v)) = (fields.contains_key(key), config.get(key)) {
            fields.insert(key.into(), v.clone());
        }
    }
    Ok(text)
}

/// The dotted path of `w`'s text config in `config`.
fn text_path(config: &Value, w: &Wrapper) -> &'static str {
    match w.text_at {
        TextAt::TextConfig => "text_config",
        TextAt::Thinker => "thinker_config.text_config",
        TextAt::ThinkerElseTop => match config.get("thinker_config") {
            Some(thinker) if !thinker.is_null() => "thinker_config.text_config",
            _ => "text_config",
        },
    }
}

/// The value at a dotted `path` in `config`, `None` where a step is absent
/// or not an object.
fn nested<'a>(config: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(config, |value, step| value.as_object()?.get(step))
}

/// The class `text_config` names, or transformers' causal class for its
/// `model_type`.
fn text_class(text: &Value) -> Result<String, String> {
    if let Some(class) = text
        .get("architectures")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
    {
        return Ok(class.to_owned());
    }
    let model_type = text
        .get("model_type")
        .and_then(Value::as_str)
        .ok_or("`text_config` has neither `architectures` nor `model_type`")?;
    CAUSAL_CLASS_OF_TYPE
        .iter()
        .find(|(t, _)| *t == model_type)
        .map(|(_, class)| (*class).to_owned())
        .ok_or_else(|| {
            format!(
                "`text_config.model_type` `{model_type}`: kv does not know which class vLLM \
                 builds for it (it knows {})",
                CAUSAL_CLASS_OF_TYPE
                    .iter()
                    .map(|(t, _)| format!("`{t}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// `name` renamed as the wrapper's mapper renames it: each matching prefix
/// replaced in turn, or `None` where the mapper drops it.
fn mapped(w: &Wrapper, name: &str) -> Option<String> {
    let mut name = name.to_owned();
    for (prefix, to) in w.prefixes {
        if let Some(rest) = name.strip_prefix(prefix) {
            name = format!("{}{rest}", (*to)?);
        }
    }
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tensor(name: &str) -> StoredTensor {
        StoredTensor::new(name.into(), "BF16".into(), vec![2], 4)
    }

    #[test]
    fn the_text_class_is_the_wrappers_or_the_text_configs() {
        let qwen2_vl = json!({"architectures": ["Qwen2VLForConditionalGeneration"],
                              "text_config": {"model_type": "qwen2_vl_text"}});
        let text = language_model_config(&qwen2_vl).unwrap();
        assert_eq!(text["architectures"], json!(["Qwen2ForCausalLM"]));
        assert_eq!(text["tie_word_embeddings"], json!(false));
        let llava = |text: Value| {
            json!({"architectures": ["LlavaForConditionalGeneration"],
                                          "text_config": text, "torch_dtype": "float16"})
        };
        let named = language_model_config(&llava(json!({"architectures": ["MistralForCausalLM"]})));
        assert_eq!(
            named.unwrap()["architectures"],
            json!(["MistralForCausalLM"])
        );
        let by_type = language_model_config(&llava(json!({"model_type": "llama"}))).unwrap();
        assert_eq!(by_type["architectures"], json!(["LlamaForCausalLM"]));
        assert_eq!(by_type["torch_dtype"], json!("float16"));
        let mut quantized = llava(json!({"model_type": "llama"}));
        quantized["quantization_config"] = json!({"quant_method": "awq"});
        let text = language_model_config(&quantized).unwrap();
        assert_eq!(text["quantization_config"]["quant_method"], json!("awq"));
        let e = language_model_config(&llava(json!({"model_type": "phi3"}))).unwrap_err();
        assert!(e.contains("`phi3`") && e.contains("`llama`"), "{e}");
        let e = language_model_config(&llava(json!({}))).unwrap_err();
        assert!(
            e.contains("neither `architectures` nor `model_type`"),
            "{e}"
        );
    }

    #[test]
    fn the_wrappers_tie_setting_wins_and_its_default_where_absent() {
        let gemma3 = |outer: Value| {
            let mut c = json!({"architectures": ["Gemma3ForConditionalGeneration"],
                               "text_config": {"tie_word_embeddings": false}});
            if !outer.is_null() {
                c["tie_word_embeddings"] = outer;
            }
            language_model_config(&c)
        };
        assert_eq!(
            gemma3(Value::Null).unwrap()["tie_word_embeddings"],
            json!(true)
        );
        assert_eq!(
            gemma3(json!(false)).unwrap()["tie_word_embeddings"],
            json!(false)
        );
        assert!(gemma3(json!("yes")).is_err());
        // Qwen2AudioConfig has no such setting: the top level's is copied
        // only where config.json gives it, else the text config's stands.
        let audio = |outer: Value| {
            let mut c = json!({"architectures": ["Qwen2AudioForConditionalGeneration"],
                               "text_config": {"tie_word_embeddings": false}});
            if !outer.is_null() {
                c["tie_word_embeddings"] = outer;
            }
            language_model_config(&c).unwrap()["tie_word_embeddings"].clone()
        };
        assert_eq!(audio(Value::Null), json!(false));
        assert_eq!(audio(json!(true)), json!(true));
    }

    #[test]
    fn text_configs_pass_unchanged_and_other_wrappers_are_refused() {
        let llama = json!({"architectures": ["LlamaForCausalLM"], "hidden_size": 8});
        assert_eq!(language_model_config(&llama).unwrap(), llama);
        let t = [tensor("model.norm.weight")];
        let whole = LanguageModel::read(&llama, &t).unwrap();
        assert_eq!((whole.config, whole.tensors), (llama.clone(), t.to_vec()));
        let nested = json!({"architectures": ["Llama4ForCausalLM"], "text_config": {}});
        assert_eq!(language_model_config(&nested).unwrap(), nested);
        let other = json!({"architectures": ["FooForConditionalGeneration"], "text_config": {}});
        let e = language_model_config(&other).unwrap_err();
        assert!(e.contains("`FooForConditionalGeneration`"), "{e}");
        assert!(towers_refusal(&other).is_none() && towers_refusal(&llama).is_none());
        let llava = json!({"architectures": ["LlavaForConditionalGeneration"]});
        assert!(towers_refusal(&llava)
            .unwrap()
            .contains("--language-model-only"));
    }

    #[test]
    fn a_tower_the_mapper_sends_into_the_language_model_is_refused() {
        // PaddleOCR-VL's mapper: `model.` -> `language_model.model.`, which
        // takes transformers 5's `model.visual.` into the text model.
        let paddle = json!({"architectures": ["PaddleOCRVLForConditionalGeneration"],
                            "text_config": {"hidden_size": 8}});
        let text = [tensor("model.norm.weight")];
        assert_eq!(
            LanguageModel::read(&paddle, &text).unwrap().tensors.len(),
            1
        );
        for name in [
            "model.visual.blocks.0.attn.qkv.weight",
            "model.mlp_AR.linear_1.weight",
        ] {
            let e = LanguageModel::read(&paddle, &[tensor(name)]).unwrap_err();
            assert!(
                e.contains("tower's tensor lands in the language model"),
                "{e}"
            );
        }
        // The published names keep the tower apart: left out.
        let published = LanguageModel::read(&paddle, &[tensor("visual.blocks.0.attn.qkv.weight")]);
        assert!(published.unwrap().tensors.is_empty());
    }

    #[test]
    fn qwen3_asr_reads_the_thinkers_text_model_else_the_top_levels() {
        let asr = |thinker: Value| {
            json!({"architectures": ["Qwen3ASRForConditionalGeneration"],
                   "thinker_config": thinker, "text_config": {"hidden_size": 2}})
        };
        let text = language_model_config(&asr(json!({"text_config": {"hidden_size": 1}})));
        let text = text.unwrap();
        assert_eq!(text["hidden_size"], json!(1));
        assert_eq!(text["architectures"], json!(["Qwen3ForCausalLM"]));
        // vLLM's Qwen3ASRTextConfig unties by default.
        assert_eq!(text["tie_word_embeddings"], json!(false));
        let flat = language_model_config(&asr(Value::Null)).unwrap();
        assert_eq!(flat["hidden_size"], json!(2));
        let e = language_model_config(&asr(json!({}))).unwrap_err();
        assert!(e.contains("`thinker_config.text_config`"), "{e}");
        let bad = asr(json!({"text_config": {"tie_word_embeddings": "yes"}}));
        let e = language_model_config(&bad).unwrap_err();
        assert!(
            e.contains("`thinker_config.text_config.tie_word_embeddings`"),
            "{e}"
        );
        // An unchecked class that nests its text model in a thinker.
        let other = json!({"architectures": ["Qwen3OmniMoeForConditionalGeneration"],
                           "thinker_config": {"text_config": {}}});
        let e = language_model_config(&other).unwrap_err();
        assert!(e.contains("`Qwen3OmniMoeForConditionalGeneration`"), "{e}");
    }

    #[test]
    fn tensors_are_renamed_and_the_towers_left_out() {
        let qwen2_vl = json!({"architectures": ["Qwen2VLForConditionalGeneration"],
                              "text_config": {}});
        let names = [
            // transformers 5's names, then the published checkpoints'.
            "model.language_model.layers.0.mlp.up_proj.weight",
            "model.visual.blocks.0.attn.qkv.weight",
            "lm_head.weight",
            "model.layers.1.mlp.up_proj.weight",
            "visual.merger.mlp.0.weight",
        ];
        let kept = LanguageModel::read(&qwen2_vl, &names.map(tensor)).unwrap();
        assert!(kept.beside.is_empty());
        let kept: Vec<&str> = kept.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            kept,
            [
                "model.layers.0.mlp.up_proj.weight",
                "lm_head.weight",
                "model.layers.1.mlp.up_proj.weight"
            ]
        );
        let e = LanguageModel::read(&qwen2_vl, &[tensor("rope_deltas")]).unwrap_err();
        assert!(e.contains("`rope_deltas`") && e.contains("visual."), "{e}");
        // A prefix mapped to nothing is never loaded.
        let qwen3_5 = json!({"architectures": ["Qwen3_5ForConditionalGeneration"],
                             "text_config": {}});
        let kept = LanguageModel::read(&qwen3_5, &[tensor("mtp.fc.weight")]).unwrap();
        assert!(kept.tensors.is_empty());
    }

    #[test]
    fn llava_nexts_image_newline_is_held_beside_and_not_computed() {
        let next = json!({"architectures": ["LlavaNextForConditionalGeneration"],
                          "text_config": {"model_type": "llama"}});
        let names = [
            "model.image_newline",
            "model.vision_tower.x.weight",
            "lm_head.weight",
        ];
        let lm = LanguageModel::read(&next, &names.map(tensor)).unwrap();
        assert_eq!(lm.beside, vec![tensor("model.image_newline")]);
        assert_eq!(lm.tensors.len(), 1);
        let e = LanguageModel::computed(&next, Vec::new()).unwrap_err();
        assert!(e.contains("`image_newline`"), "{e}");
        // LLaVA-NeXT-Video builds it inside its towers.
        let video = json!({"architectures": ["LlavaNextVideoForConditionalGeneration"],
                           "text_config": {"model_type": "llama"}});
        let lm = LanguageModel::read(&video, &names.map(tensor)).unwrap();
        assert!(lm.beside.is_empty());
        assert!(LanguageModel::computed(&video, Vec::new()).is_ok());
    }
}
