"""Writes the compared configs to configs/NAME.json: the published configs
shipped in kv's examples/configs, and transformers config classes whose
defaults are a published checkpoint (with `architectures` and a dtype set,
as the published config.json carries them), patched where the published file
has a key the example or transformers 5's defaults lack (each patch says why).

    /work/.venv-vllm/bin/python scripts/vllm/make_configs.py [EXAMPLES_DIR]
"""
import json, os, shutil, sys, glob
import transformers as t

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs")  # beside this script
os.makedirs(out, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))
examples = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "examples", "configs")
for d in sorted(glob.glob(f"{examples}/*/config.json")):
    name = os.path.basename(os.path.dirname(d))
    config = json.load(open(d))
    if name == "deepseek-v2-lite":  # published keys the trimmed example leaves out
        config.update(n_group=1, topk_group=1, topk_method="greedy", max_position_embeddings=163840)
    if name == "deepseek-v2-lite":  # published DeepSeek-V2-Lite's MoE keys
        config.update(moe_intermediate_size=1408, intermediate_size=10944, n_routed_experts=64,
                      num_experts_per_tok=6, n_shared_experts=2, first_k_dense_replace=1)
    if name == "gemma-3-27b":  # published Gemma-3-27B's SigLIP tower (16 heads)
        config["vision_config"] = dict(
            model_type="siglip_vision_model", hidden_size=1152, image_size=896,
            intermediate_size=4304, num_attention_heads=16, num_hidden_layers=27,
            patch_size=14, vision_use_head=False)
    if name == "hy3-fp8":  # the MoE key vLLM's HYV3 asks for (moves no KV figure)
        config.setdefault("first_k_dense_replace", 1)
    if name == "llama-3-8b":
        config.update(max_position_embeddings=8192)
    with open(f"{out}/{name}.json", "w") as f:
        json.dump(config, f, indent=1)

# name: (config class, architecture, dtype, overrides)
CLASSES = {
    "llama-2-7b": ("LlamaConfig", "LlamaForCausalLM", "float16", {}),
    "mistral-7b": ("MistralConfig", "MistralForCausalLM", "bfloat16", {}),
    "qwen2-7b": ("Qwen2Config", "Qwen2ForCausalLM", "bfloat16", {}),
    "qwen3-8b": ("Qwen3Config", "Qwen3ForCausalLM", "bfloat16", {}),
    "qwen3-30b-a3b": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", "bfloat16", {}),
    "qwen3-next-80b": ("Qwen3NextConfig", "Qwen3NextForCausalLM", "bfloat16", {}),
    "gemma-2-9b": ("Gemma2Config", "Gemma2ForCausalLM", "bfloat16", {}),
    "gemma-3-1b": ("Gemma3TextConfig", "Gemma3ForCausalLM", "bfloat16",
                   {"num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1,
                    "head_dim": 256, "hidden_size": 1152, "intermediate_size": 6912,
                    "sliding_window": 512, "max_position_embeddings": 32768}),
    "gemma-3-4b-text": ("Gemma3TextConfig", "Gemma3ForCausalLM", "bfloat16", {}),
    "gemma-3n-e4b-text": ("Gemma3nTextConfig", "Gemma3nForCausalLM", "bfloat16", {}),
    "llama-4-scout-text": ("Llama4TextConfig", "Llama4ForCausalLM", "bfloat16", {}),
    "falcon-7b": ("FalconConfig", "FalconForCausalLM", "bfloat16", {}),
    "gpt-bigcode-santacoder": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", "float32", {}),
    "dbrx": ("DbrxConfig", "DbrxForCausalLM", "bfloat16", {}),
    "glm-4-9b": ("GlmConfig", "GlmForCausalLM", "bfloat16", {}),
    "glm4-9b-0414": ("Glm4Config", "Glm4ForCausalLM", "bfloat16", {}),
    "glm-4.5": ("Glm4MoeConfig", "Glm4MoeForCausalLM", "bfloat16", {}),
    "mamba-2.8b": ("MambaConfig", "MambaForCausalLM", "bfloat16", {}),
    "falcon-mamba-7b": ("FalconMambaConfig", "FalconMambaForCausalLM", "bfloat16", {}),
    "falcon-h1": ("FalconH1Config", "FalconH1ForCausalLM", "bfloat16", {}),
    "zamba2-2.7b": ("Zamba2Config", "Zamba2ForCausalLM", "bfloat16", {}),
    "mamba2-2.7b": ("Mamba2Config", "Mamba2ForCausalLM", "bfloat16", {}),
    "deepseek-v2": ("DeepseekV2Config", "DeepseekV2ForCausalLM", "bfloat16", {}),
    "deepseek-v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", "bfloat16", {}),
    "nemotron-h-8b": ("NemotronHConfig", "NemotronHForCausalLM", "bfloat16", {}),
    "lfm2-1.2b": ("Lfm2Config", "Lfm2ForCausalLM", "bfloat16", {}),
    "granite-4.0-h": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM", "bfloat16", {}),
    "jamba-default": ("JambaConfig", "JambaForCausalLM", "bfloat16", {}),
    "phi-3-mini": ("Phi3Config", "Phi3ForCausalLM", "bfloat16", {}),
    "olmo-7b": ("OlmoConfig", "OlmoForCausalLM", "float32", {}),
    "olmo2-7b": ("Olmo2Config", "Olmo2ForCausalLM", "bfloat16", {}),
    "command-r": ("CohereConfig", "CohereForCausalLM", "float16", {}),
    "command-r7b": ("Cohere2Config", "Cohere2ForCausalLM", "bfloat16", {}),
    "gpt-oss-20b": ("GptOssConfig", "GptOssForCausalLM", "bfloat16", {}),
    "starcoder2-7b": ("Starcoder2Config", "Starcoder2ForCausalLM", "bfloat16", {}),
    "qwen2-moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", "bfloat16", {}),
    "mixtral-8x7b": ("MixtralConfig", "MixtralForCausalLM", "bfloat16", {}),
    "phi-2": ("PhiConfig", "PhiForCausalLM", "float16", {}),
    "gpt-neox-20b": ("GPTNeoXConfig", "GPTNeoXForCausalLM", "float16", {}),
    "stablelm-3b": ("StableLmConfig", "StableLmForCausalLM", "bfloat16", {}),
    "granite-3": ("GraniteConfig", "GraniteForCausalLM", "bfloat16", {}),
    "granite-3-moe": ("GraniteMoeConfig", "GraniteMoeForCausalLM", "bfloat16", {}),
    "ernie-4.5": ("Ernie4_5Config", "Ernie4_5ForCausalLM", "bfloat16", {}),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", "bfloat16", {}),
    "olmoe": ("OlmoeConfig", "OlmoeForCausalLM", "bfloat16", {}),
    "minimax-text": ("MiniMaxConfig", "MiniMaxText01ForCausalLM", "bfloat16", {}),
    "exaone4": ("Exaone4Config", "Exaone4ForCausalLM", "bfloat16", {}),
    "hunyuan-dense": ("HunYuanDenseV1Config", "HunYuanDenseV1ForCausalLM", "bfloat16", {}),
    "olmo3": ("Olmo3Config", "Olmo3ForCausalLM", "bfloat16", {}),
    "gemma-7b": ("GemmaConfig", "GemmaForCausalLM", "bfloat16", {}),
    "lfm2-moe": ("Lfm2MoeConfig", "Lfm2MoeForCausalLM", "bfloat16", {}),
    "dots1": ("Dots1Config", "Dots1ForCausalLM", "bfloat16", {}),
    "seed-oss": ("SeedOssConfig", "SeedOssForCausalLM", "bfloat16", {}),
    "minicpm3-4b": ("MiniCPM3Config", "MiniCPM3ForCausalLM", "bfloat16", {}),
    "gpt-j-6b": ("GPTJConfig", "GPTJForCausalLM", "float16", {}),
    "kimi-linear": ("KimiLinearConfig", "KimiLinearForCausalLM", "bfloat16", {}),
}
for name, (cls, arch, dtype, over) in CLASSES.items():
    d = getattr(t, cls)(**over).to_dict()
    for k in ("transformers_version", "_name_or_path"):
        d.pop(k, None)
    if name == "dbrx":  # transformers 5 moved it out; vLLM reads it here
        d["attn_config"]["rope_theta"] = 500000
    if name == "glm-4.5":  # published GLM-4.5 writes it; transformers 5 drops it
        d["head_dim"] = 128
    if name == "lfm2-1.2b":  # published LFM2-1.2B: 16 layers, 6 of them attention
        types = ["conv"] * 16
        for i in (2, 5, 8, 10, 12, 14):
            types[i] = "full_attention"
        d.update(num_hidden_layers=16, layer_types=types, full_attn_idxs=[2, 5, 8, 10, 12, 14],
                 max_position_embeddings=128000, conv_dim=d["hidden_size"],
                 conv_dim_out=d["hidden_size"], conv_L_cache=3, conv_bias=False)
        # and the block keys vLLM reads
        d.update(block_dim=d["hidden_size"], block_ff_dim=d["intermediate_size"],
                 block_multiple_of=256, block_ffn_dim_multiplier=1.0,
                 block_auto_adjust_ff_dim=True)
    if name == "granite-4.0-h":  # published Granite-4.0-H-Small's layers (transformers 5
        # writes its mamba layers as "linear_attention")
        types = ["mamba"] * 40
        for i in (5, 15, 25, 35):
            types[i] = "attention"
        d.update(layer_types=types, num_hidden_layers=40, hidden_size=4096,
                 num_attention_heads=32, num_key_value_heads=8, mamba_d_conv=4,
                 mamba_d_head=64, mamba_d_state=128, mamba_expand=2, mamba_n_groups=1,
                 mamba_n_heads=128, max_position_embeddings=131072)
    if name == "zamba2-2.7b":  # published layout: "mamba" and "hybrid" blocks
        d["layers_block_type"] = ["mamba" if t == "linear_attention" else t
                                  for t in d["layers_block_type"]]
    if name == "nemotron-h-8b":  # published layout: the pattern and the layer count
        # (transformers 5's default is a 4-layer MoE toy). Nemotron-H-8B: 52
        # layers, 22 Mamba2, 4 attention, 26 MLP; the attention positions are
        # reconstructed (totals depend on their count only).
        pattern = list("M-" * 26)
        for i in (8, 20, 32, 44):
            pattern[i] = "*"
        for k in ("layers_block_type", "mtp_layers_block_type", "num_nextn_predict_layers"):
            d.pop(k, None)
        d.update(hybrid_override_pattern="".join(pattern), num_hidden_layers=52,
                 hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                 head_dim=128, mamba_num_heads=128, mamba_head_dim=64, ssm_state_size=128,
                 n_groups=8, conv_kernel=4, expand=2, max_position_embeddings=8192)
    if name == "kimi-linear":  # published Kimi-Linear: MLA without RoPE
        d["mla_use_nope"] = True
    if name == "deepseek-v2":  # published DeepSeek-V2's routing and expert width
        d.update(n_group=8, topk_group=3, moe_intermediate_size=1536, topk_method="group_limited_greedy")
    d["architectures"] = [arch]
    d["torch_dtype"] = dtype
    d.pop("dtype", None)
    with open(f"{out}/{name}.json", "w") as f:
        json.dump(d, f, indent=1, sort_keys=True)
print(len(os.listdir(out)), "configs in", out)
