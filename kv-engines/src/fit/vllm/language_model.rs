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

/// One multimodal class kv has checked under `--language-model-only`.
#[derive(Clone, Copy)]
struct Wrapper {
    class: &'static str,
    text: TextClass,
    /// `hf_to_vllm_mapper.orig_to_new_prefix`, in its order: each prefix
    /// that matches is replaced in turn; `None` drops the tensor.
    prefixes: &'static [(&'static str, Option<&'static str>)],
    /// The modules vLLM marks as towers, by their name after the mapper:
    /// empty under `--language-model-only`.
    towers: &'static [&'static str],
    /// The towers' config sections: vLLM builds each tower (then swaps it
    /// for a placeholder), so a tensor-parallel size its heads or MLP do
    /// not divide fails as it would with the towers.
    tower_configs: &'static [TowerSizes],
    /// Modules outside the language model that vLLM builds all the same
    /// (LLaVA-NeXT's `image_newline`), each whole on every rank and stage.
    beside: &'static [&'static str],
    /// The wrapper config's `tie_word_embeddings` when its config.json
    /// leaves it out (transformers 5's default for the class), which vLLM
    /// copies onto the text config; `None` where the wrapper's config class
    /// has no such setting or vLLM builds the text model without copying
    /// it: the text config's own then stands.
    tie_default: Option<bool>,
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
        prefixes: LLAVA,
        towers: LLAVA_TOWERS,
        tower_configs: &[VISION],
        beside: &[],
        tie_default: Some(tie_default),
    }
}

/// A wrapper whose text model is `model.language_model.` and vision tower
/// `model.visual.` (Glm4v, GLM-OCR, Qwen3-VL, Qwen3.5), untied by default.
const fn visual(class: &'static str, text: &'static str) -> Wrapper {
    Wrapper {
        class,
        text: TextClass::Named(text),
        prefixes: VISUAL,
        towers: &["visual."],
        tower_configs: &[VISION],
        beside: &[],
        tie_default: Some(false),
    }
}

/// LLaVA-NeXT's, LLaVA-OneVision's too.
const LLAVA_NEXT: Wrapper = Wrapper {
    class: "LlavaNextForConditionalGeneration",
    text: TextClass::OfTextConfig,
    prefixes: LLAVA,
    towers: LLAVA_NEXT_TOWERS,
    tower_configs: &[VISION],
    beside: &["image_newline"],
    tie_default: Some(false),
};

/// Qwen2-VL's, Qwen2.5-VL's too.
const QWEN2_VL_WRAPPER: Wrapper = Wrapper {
    class: "Qwen2VLForConditionalGeneration",
    text: TextClass::Named("Qwen2ForCausalLM"),
    prefixes: QWEN2_VL,
    towers: &["visual."],
    tower_configs: &[VISION],
    beside: &[],
    tie_default: Some(false),
};

/// MiniCPM-V 4.6's, 4.7's too.
const MINICPMV_4_6: Wrapper = Wrapper {
    class: "MiniCPMV4_6ForConditionalGeneration",
    text: TextClass::Named("Qwen3_5ForCausalLM"),
    prefixes: MINICPMV,
    towers: &["vpm.", "vit_merger.", "merger."],
    tower_configs: &[VISION],
    beside: &[],
    tie_default: Some(false),
};

/// Idefics3's, SmolVLM's too.
const IDEFICS3_WRAPPER: Wrapper = Wrapper {
    class: "Idefics3ForConditionalGeneration",
    text: TextClass::Named("LlamaForCausalLM"),
    prefixes: IDEFICS3,
    towers: &["model.vision_model.", "model.connector."],
    tower_configs: &[VISION],
    beside: &[],
    // idefics3.py builds its text model itself, and ties its head as
    // `text_config` says.
    tie_default: None,
};

/// Qwen2-Audio's, AudioFlamingo3's too.
const QWEN2_AUDIO: Wrapper = Wrapper {
    class: "Qwen2AudioForConditionalGeneration",
    text: TextClass::Named("Qwen2ForCausalLM"),
    prefixes: &[],
    towers: AUDIO_TOWERS,
    // vLLM builds its audio tower at TP 8 with 20 heads: not split.
    tower_configs: &[],
    beside: &[],
    tie_default: None,
};

/// Granite Speech's, Granite Speech Plus's too.
const GRANITE_SPEECH_WRAPPER: Wrapper = Wrapper {
    class: "GraniteSpeechForConditionalGeneration",
    text: TextClass::OfTextConfig,
    prefixes: GRANITE_SPEECH,
    towers: &["encoder.", "projector."],
    // Its encoder's CTC output is column-parallel (granite_speech.py);
    // vLLM builds it at TP 4 and 8 with 8 heads.
    tower_configs: &[("encoder_config", &["output_dim"], &[])],
    beside: &[],
    tie_default: Some(true),
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
        prefixes: LLAVA,
        towers: &[
            "vision_tower.",
            "multi_modal_projector.",
            "image_newline",
            "vision_resampler.",
        ],
        tower_configs: &[VISION],
        beside: &[],
        tie_default: Some(false),
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
        tie_default: Some(true),
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
        tie_default: Some(false),
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
        tie_default: Some(true),
    },
    visual("Qwen3VLForConditionalGeneration", "Qwen3ForCausalLM"),
    Wrapper {
        class: "PaddleOCRVLForConditionalGeneration",
        text: TextClass::Named("Ernie4_5ForCausalLM"),
        prefixes: &[
            ("model.", Some("language_model.model.")),
            ("lm_head.", Some("language_model.lm_head.")),
        ],
        towers: &["visual.", "mlp_AR."],
        tower_configs: &[VISION],
        beside: &[],
        tie_default: Some(true),
    },
    Wrapper {
        class: "Llama4ForConditionalGeneration",
        text: TextClass::Named("Llama4ForCausalLM"),
        prefixes: &[],
        towers: &["vision_model.", "multi_modal_projector."],
        tower_configs: &[VISION],
        beside: &[],
        tie_default: Some(false),
    },
    Wrapper {
        class: "Blip2ForConditionalGeneration",
        text: TextClass::OfTextConfig,
        prefixes: &[],
        towers: &["vision_model.", "qformer.", "language_projection."],
        tower_configs: &[VISION, ("qformer_config", HEADS, MLP)],
        // blip2.py builds `query_tokens` outside its towers.
        beside: &["query_tokens"],
        tie_default: None,
    },
    IDEFICS3_WRAPPER,
    IDEFICS3_WRAPPER.named("SmolVLMForConditionalGeneration"),
    QWEN2_AUDIO,
    QWEN2_AUDIO.named("AudioFlamingo3ForConditionalGeneration"),
    Wrapper {
        class: "GlmAsrForConditionalGeneration",
        text: TextClass::Named("LlamaForCausalLM"),
        prefixes: &[("audio_tower.embed_positions", None)],
        towers: AUDIO_TOWERS,
        tower_configs: &[("audio_config", HEADS, MLP)],
        beside: &[],
        tie_default: Some(true),
    },
    GRANITE_SPEECH_WRAPPER,
    GRANITE_SPEECH_WRAPPER.named("GraniteSpeechPlusForConditionalGeneration"),
];

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
            });
        };
        let mut kept = Vec::new();
        let mut beside = Vec::new();
        for tensor in tensors {
            let Some(name) = mapped(w, &tensor.name) else {
                continue;
            };
            if let Some(text_name) = name.strip_prefix("language_model.") {
                let mut t = tensor.clone();
                t.name = text_name.to_owned();
                kept.push(t);
            } else if w.beside.iter().any(|b| name.starts_with(b)) {
                beside.push(tensor.clone());
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
        })
    }
}

/// Each tower's head count and MLP width, where its config gives them.
/// A tower section without a head count is refused by name: kv could not
/// say which tensor-parallel sizes vLLM builds it at.
fn tower_sizes(config: &Value, w: &Wrapper) -> Result<Vec<(String, u64)>, String> {
    let mut sizes = Vec::new();
    for (section, required, optional) in w.tower_configs {
        let Some(tower) = config.get(*section).filter(|t| !t.is_null()) else {
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
    /// vLLM's refusal of `tp` where it does not divide a tower it builds.
    pub(crate) fn tower_refusal(&self, tp: u64) -> Option<String> {
        let (key, value) = self.tower_sizes.iter().find(|(_, v)| *v % tp != 0)?;
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
        if config.get("text_config").is_some() && !text_only {
            return Err(format!(
                "kv has not checked what vLLM's `{}` holds under --language-model-only \
                 (checked: {})",
                architecture(config),
                LANGUAGE_MODEL_ONLY_ARCHITECTURES.join(", ")
            ));
        }
        return Ok(config.clone());
    };
    let mut text = config
        .get("text_config")
        .filter(|t| t.is_object())
        .cloned()
        .ok_or_else(|| format!("`{}`: the config has no `text_config` object", w.class))?;
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
    let tie = match (w.tie_default, outer) {
        (Some(_), Some(given)) => Some(given),
        (Some(default), None) => Some(default),
        (None, _) => None,
    };
    let fields = text
        .as_object_mut()
        .ok_or("`text_config` is not an object")?;
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
