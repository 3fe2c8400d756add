//! Which of vLLM 0.33's classes `kv fit` has checked against vLLM's own
//! class built on the meta device.

use crate::fit::config::joined;
use crate::fit::shard::SHARDED_ARCHITECTURES;

/// The architectures whose model, built by vLLM 0.33's own class on the
/// meta device, kv has checked holds exactly the checkpoint's tensors in the
/// served dtype (the vocabulary padded to 64), its rotary table, and four
/// float32 scales per attention layer (scripts/vllm/compare_weights_hf.py,
/// on checkpoints written from transformers' own class for each config,
/// at TP 1, 2, 4 and 8 and at PP 2 and 3). Beside that rule: the Gemmas
/// hold a `normalizer` scalar (`GEMMA_NORMALIZER`) and Gemma 3 a table per
/// layer type; the classes of `TRANSFORMERS_BACKEND` `inv_freq` buffers in place of the
/// cos/sin cache; the latent-attention classes are `LATENT_ATTENTION`.
/// Zamba2 is checked at TP 1 only (above it refused by name); vLLM's
/// class does not implement pipeline parallelism.
/// Not here: HunYuan (transformers cannot build the shipped config to check
/// it).
pub const CHECKED_ARCHITECTURES: &[&str] =
    &joined::<CHECKED_COUNT>(SHARDED_ARCHITECTURES, VLLM_ONLY_ARCHITECTURES);

/// Of [`CHECKED_ARCHITECTURES`], those checked for vLLM only (SGLang's
/// classes for them were not compared).
const VLLM_ONLY_ARCHITECTURES: &[&str] = &[
    "Zamba2ForCausalLM",
    "Lfm2MoeForCausalLM",
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "Ernie4_5ForCausalLM",
    "Exaone4ForCausalLM",
    "Gemma2ForCausalLM",
    "Gemma3ForCausalLM",
    "GlmForCausalLM",
    "Glm4ForCausalLM",
    "GPTNeoXForCausalLM",
    "Olmo3ForCausalLM",
    "PhiForCausalLM",
    "Qwen3NextForCausalLM",
    "SeedOssForCausalLM",
    "SmolLM3ForCausalLM",
    "StableLmForCausalLM",
    "GraniteMoeHybridForCausalLM",
    "JambaForCausalLM",
    "Lfm2ForCausalLM",
    "NemotronHForCausalLM",
    "Glm4MoeForCausalLM",
    "Cohere2MoeForCausalLM",
    "ExaoneMoEForCausalLM",
    "ExaoneMoeForCausalLM",
    "FalconForCausalLM",
    "GraniteMoeSharedForCausalLM",
    "GraniteMoeSWAForCausalLM",
    "GraniteSWAForCausalLM",
    "HrmTextForCausalLM",
    "HyperCLOVAXForCausalLM",
    "IQuestCoderForCausalLM",
    "InternLM3ForCausalLM",
    "LLaMAForCausalLM",
    "MiniCPM3ForCausalLM",
    "TeleChat3ForCausalLM",
    "Ernie4_5_MoeForCausalLM",
    "Ministral3ForCausalLM",
    "OPTForCausalLM",
    "PhiMoEForCausalLM",
    "FalconMambaForCausalLM",
    "MambaForCausalLM",
    "Mamba2ForCausalLM",
    "GptOssForCausalLM",
    "FalconH1ForCausalLM",
    "AXK1ForCausalLM",
    "Gemma4ForCausalLM",
    "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForCausalLM",
    "DeepseekV32ForCausalLM",
    "GlmMoeDsaForCausalLM",
    "ApertusForCausalLM",
    "Gemma3nForCausalLM",
    "LagunaForCausalLM",
    "GPT2LMHeadModel",
    "BloomForCausalLM",
    "GPTJForCausalLM",
    "DbrxForCausalLM",
    "BeamForCausalLM",
];
const CHECKED_COUNT: usize = SHARDED_ARCHITECTURES.len() + VLLM_ONLY_ARCHITECTURES.len();
