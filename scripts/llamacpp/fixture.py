"""A header-only GGUF twin for any llama.cpp architecture: the metadata that
llama.cpp's own `tests/test-llama-archs.cpp` (`get_gguf_ctx`, at 0c1e57098)
gives every architecture it builds, ported key for key, written with no
tensors. llama.cpp makes the weights itself from it
(`llama_model_init_from_user`, see `cache_lines.py --no-weights`), so the
tensor list always satisfies its own loader; kv reads the header alone.

    fixture.py SRC OUT.gguf ARCH [--moe] [--set KEY=TYPE:VALUE ...]

SRC is llama.cpp's source (the sdist's vendor/llama.cpp): the key names are
read from src/llama-arch.cpp (LLM_KV_NAMES). `--set` adds or replaces a key
after the fixture's (`{arch}` in KEY is the architecture; TYPE u32, i32,
f32, bool, str, or u32s / bools for a comma list), to give a twin real cache
geometry.
"""
import argparse
import re

import gguf

# llama.cpp's test fixture, per architecture (names as LLM_ARCH_NAMES).
MLA = {"deepseek2", "deepseek32", "glm-dsa", "dots3note", "kimi-linear", "bailingmoe3",
       "kimi-k3", "glm5-next", "hy_v4", "mistral4"}
PER_LAYER_HEADS = {"plamo2", "jamba", "nemotron_h", "nemotron_h_moe", "granitehybrid", "lfm2",
                   "lfm2moe", "kimi-linear", "bailingmoe3", "kimi-k3", "glm5-next"}
PATTERN_ARRAY = {"cohere2moe", "mimo2", "step35", "spark2_5", "muse-glimmer", "granite_swa",
                 "dots3note", "maple"}
MOE_MANDATORY = {
    "llama4", "cohere2moe", "grok", "qwen2moe", "qwen3moe", "qwen3next", "qwen3vlmoe",
    "qwen35moe", "qwen4exp", "phimoe", "dbrx", "olmoe", "arctic", "deepseek", "deepseek2",
    "deepseek32", "dots3note", "deepseek4", "glm4moe", "glm-dsa", "exaone-moe", "bailingmoe",
    "bailingmoe2", "bailingmoe3", "dots1", "afmoe", "ernie4_5", "ernie4_5-moe", "hunyuan-moe",
    "hy_v3", "hy_v4", "gpt-oss", "lfm2moe", "smallthinker", "llada-moe", "grovemoe",
    "minimax-01", "minimax-m2", "minimax-m3", "rnd1", "paddleocr", "mimo2", "kimi-linear",
    "kimi-k3", "glm5-next", "step35", "mistral4", "mellum", "laguna", "maple"}


# Not in test-llama-archs (it skips deepseek2-ocr): the expert keys its loader
# requires, so the twin loads. (The other departures are in fixture().)
MOE_TO_LOAD = {"deepseek2-ocr"}


def moe_for(arch):
    return arch in MOE_MANDATORY or arch in MOE_TO_LOAD


def kv_names(src):
    text = open(f"{src}/src/llama-arch.cpp").read()
    start = text.index("LLM_KV_NAMES")
    return dict(re.findall(r'\{\s*(LLM_KV_\w+),\s*"([^"]+)"\s*\}', text[start:]))


def fixture(arch, moe):
    """(enum, type, value) in get_gguf_ctx's order; a later one replaces."""
    out = []

    def add(key, kind, value):
        out.append((key, kind, value))

    n_ctx, n_vocab, n_embd, n_head, n_ff, n_layer = 256, 128, 256, 2, 384, 2
    if arch == "llama4":
        n_layer = 4
    elif arch == "gemma4":
        n_embd, n_head, n_ff, n_layer = 128, 2, 192, 5
    elif arch == "gemma3n":
        n_embd, n_head, n_ff, n_layer = 64, 1, 96, 22
    elif arch == "deepseek4":
        n_embd, n_head, n_ff, n_layer = 512, 8, 1024, 4
    elif arch in ("step35", "laguna"):
        n_embd = 160
    elif arch in ("qwen3", "muse-glimmer", "afmoe"):
        n_head = 4
    elif arch in MLA:
        n_embd, n_head, n_ff = 128, 1, 192
    elif arch in ("nemotron_h", "nemotron_h_moe"):
        n_layer = 3
    elif arch == "chameleon":
        n_vocab = 10240
    elif arch == "qwen3tts":
        n_vocab = 3072
    elif arch == "hrm_text":
        n_layer = 6
    n_head_kv = n_head
    if arch == "qwen3":
        n_head_kv = 1
    elif arch in ("muse-glimmer", "afmoe"):
        n_head_kv = 2
    n_embd_head = n_embd // n_head

    add("LLM_KV_VOCAB_SIZE", "u32", n_vocab)
    add("LLM_KV_CONTEXT_LENGTH", "u32", n_ctx)
    add("LLM_KV_EMBEDDING_LENGTH", "u32", n_embd)
    add("LLM_KV_FEATURES_LENGTH", "u32", n_embd)
    add("LLM_KV_BLOCK_COUNT", "u32", n_layer)
    add("LLM_KV_LEADING_DENSE_BLOCK_COUNT", "u32", 1)
    if arch in ("nemotron_h", "nemotron_h_moe"):
        add("LLM_KV_FEED_FORWARD_LENGTH", "u32s", [0 if il <= 1 else n_ff for il in range(n_layer)])
    else:
        add("LLM_KV_FEED_FORWARD_LENGTH", "u32", n_ff)
    add("LLM_KV_USE_PARALLEL_RESIDUAL", "bool", False)
    add("LLM_KV_LOGIT_SCALE", "f32", 1.0)
    add("LLM_KV_TIME_MIX_EXTRA_DIM", "u32", 64)
    add("LLM_KV_TIME_DECAY_EXTRA_DIM", "u32", 128)
    add("LLM_KV_FULL_ATTENTION_INTERVAL", "u32", 2)
    if arch in PER_LAYER_HEADS:
        per = [0 if il == 1 else n_head for il in range(n_layer)]
        add("LLM_KV_ATTENTION_HEAD_COUNT", *(("u32", n_head) if arch == "glm5-next" else ("u32s", per)))
        add("LLM_KV_ATTENTION_HEAD_COUNT_KV", "u32s", per)
    else:
        add("LLM_KV_ATTENTION_HEAD_COUNT", "u32", n_head)
        add("LLM_KV_ATTENTION_HEAD_COUNT_KV", "u32", 1 if arch == "deepseek4" else n_head_kv)
    add("LLM_KV_ATTENTION_MAX_ALIBI_BIAS", "f32", 8.0)
    if arch == "deepseek4":
        add("LLM_KV_ATTENTION_KEY_LENGTH", "u32", n_embd_head)
        add("LLM_KV_ATTENTION_VALUE_LENGTH", "u32", n_embd_head)
        add("LLM_KV_ROPE_DIMENSION_COUNT", "u32", n_embd_head // 2)
    elif arch in MLA:
        g5 = arch == "glm5-next"
        add("LLM_KV_ATTENTION_KEY_LENGTH", "u32", 512 if g5 else 576)
        add("LLM_KV_ATTENTION_VALUE_LENGTH", "u32", 512)
        add("LLM_KV_ROPE_DIMENSION_COUNT", "u32", 0 if g5 else 64)
        add("LLM_KV_ATTENTION_KEY_LENGTH_MLA", "u32", 192)
        add("LLM_KV_ATTENTION_VALUE_LENGTH_MLA", "u32", 128)
        if arch == "dots3note":
            add("LLM_KV_ATTENTION_KV_LORA_RANK_SWA", "u32", 512)
            add("LLM_KV_ATTENTION_KEY_LENGTH_SWA", "u32", 576)
            add("LLM_KV_ATTENTION_VALUE_LENGTH_SWA", "u32", 512)
            add("LLM_KV_ATTENTION_KEY_LENGTH_MLA_SWA", "u32", 192)
            add("LLM_KV_ATTENTION_VALUE_LENGTH_MLA_SWA", "u32", 128)
            add("LLM_KV_ROPE_FREQ_BASE_SWA", "f32", 10000.0)
            add("LLM_KV_ATTENTION_INDEXER_TYPES", "u32s", [0 if il % 2 else 1 for il in range(n_layer)])
    elif arch == "minimax-m3":
        add("LLM_KV_ROPE_DIMENSION_COUNT", "u32", 64)
    add("LLM_KV_ATTENTION_CLAMP_KQV", "f32", 1.0)
    add("LLM_KV_ATTENTION_LAYERNORM_EPS", "f32", 1e-5)
    add("LLM_KV_ATTENTION_LAYERNORM_RMS_EPS", "f32", 1e-5)
    add("LLM_KV_ATTENTION_GROUPNORM_EPS", "f32", 1e-5)
    add("LLM_KV_ATTENTION_GROUPNORM_GROUPS", "u32", 8)
    add("LLM_KV_ATTENTION_Q_LORA_RANK", "u32", 64 if arch == "deepseek4" else 512)
    add("LLM_KV_ATTENTION_KV_LORA_RANK", "u32", 512)
    add("LLM_KV_ATTENTION_RELATIVE_BUCKETS_COUNT", "u32", 8)
    add("LLM_KV_ATTENTION_SLIDING_WINDOW", "u32", n_ctx // 8)
    if arch == "gemma4":
        add("LLM_KV_EMBEDDING_LENGTH_PER_LAYER", "u32", n_embd // 2)
        add("LLM_KV_ATTENTION_SHARED_KV_LAYERS", "u32", 0)
        add("LLM_KV_ATTENTION_KEY_LENGTH_SWA", "u32", n_embd_head)
        add("LLM_KV_ATTENTION_VALUE_LENGTH_SWA", "u32", n_embd_head)
        add("LLM_KV_ROPE_FREQ_BASE_SWA", "f32", 10000.0)
        # test-llama-archs writes 5 and skips gemma4 ("ISWA KV cache
        # initialization needs more fixture params"): gemma4 reads the
        # pattern only as an array, so it is written as one here.
        add("LLM_KV_ATTENTION_SLIDING_WINDOW_PATTERN", "bools", [il % 5 < 4 for il in range(n_layer)])
    elif arch in PATTERN_ARRAY:
        add("LLM_KV_ATTENTION_SLIDING_WINDOW_PATTERN", "u32s", [il % 2 for il in range(n_layer)])
    else:
        add("LLM_KV_ATTENTION_SLIDING_WINDOW_PATTERN", "u32", 2)
    if arch in ("qwen4exp", "glm5-next"):
        add("LLM_KV_HYPER_CONNECTION_COUNT", "u32", 4)
        add("LLM_KV_HYPER_CONNECTION_SINKHORN_ITERATIONS", "u32", 2)
        add("LLM_KV_HYPER_CONNECTION_EPSILON", "f32", 1.0e-6)
        add("LLM_KV_HYPER_CONNECTION_LOW_RANK", "u32", 8)
        add("LLM_KV_ATTENTION_COMPRESS_RATIOS", "u32s", [4] * n_layer)
        ngram, per_ngram = 3, 2
        ple_heads = (ngram - 1) * per_ngram
        add("LLM_KV_PLE_LAYERS", "u32s", [0])
        add("LLM_KV_PLE_NGRAM_SIZE", "u32", ngram)
        add("LLM_KV_PLE_HEADS_PER_NGRAM", "u32", per_ngram)
        add("LLM_KV_PLE_CONV_KERNEL", "u32", 4)
        add("LLM_KV_PLE_EOS_TOKEN_ID", "u32", 0)
        add("LLM_KV_EMBEDDING_LENGTH_PER_LAYER", "u32", n_embd // ple_heads)
        add("LLM_KV_PLE_LAYER_MULTIPLIERS", "u64s", [1, 3, 5])
        add("LLM_KV_PLE_HEAD_OFFSETS", "u64s", [h * n_vocab for h in range(ple_heads)])
        add("LLM_KV_PLE_HEAD_VOCAB_SIZES", "u64s", [n_vocab] * ple_heads)
    add("LLM_KV_ATTENTION_INDEXER_HEAD_COUNT", "u32", n_head if arch == "minimax-m3" else 64)
    add("LLM_KV_ATTENTION_INDEXER_KEY_LENGTH", "u32", n_embd_head if arch == "qwen4exp" else 128)
    add("LLM_KV_ATTENTION_INDEXER_TOP_K", "u32", 131072)
    add("LLM_KV_ATTENTION_INDEXER_BLOCK_SIZE", "u32", 4)
    add("LLM_KV_ATTENTION_INDEXER_KPOOL", "u32", 4)
    add("LLM_KV_ATTENTION_INDEXER_KPOOL_SELECT_TAIL", "bool", True)
    add("LLM_KV_ATTENTION_INDEXER_LOCAL_BLOCKS", "u32", 1)
    if arch == "bailingmoe3":
        add("LLM_KV_ROPE_DIMENSION_SECTIONS", "u32s", [8, 12, 12, 0])
    else:
        add("LLM_KV_ROPE_DIMENSION_SECTIONS", "u32s", [n_embd_head // 4] * 4)
    if arch == "hy_v4":
        add("LLM_KV_HYPER_CONNECTION_COUNT", "u32", 4)
        add("LLM_KV_HYPER_CONNECTION_EPSILON", "f32", 1.0e-6)
        add("LLM_KV_HYPER_CONNECTION_MAGNITUDE", "f32", 2.0)
        add("LLM_KV_SWIGLU_CLAMP_EXP", "f32", 10.0)
        add("LLM_KV_EXPERT_WEIGHTS_SCALE", "f32", 1.0)
        add("LLM_KV_EXPERT_WEIGHTS_NORM", "bool", True)
        add("LLM_KV_ATTENTION_INDEXER_TYPES", "u32s", [0 if il % 2 else 1 for il in range(n_layer)])
    if arch == "deepseek4":
        add("LLM_KV_ATTENTION_OUTPUT_GROUP_COUNT", "u32", 8)
        add("LLM_KV_ATTENTION_OUTPUT_LORA_RANK", "u32", 32)
        add("LLM_KV_ATTENTION_COMPRESS_RATIOS", "u32s", [0, 0, 4, 128])
        add("LLM_KV_ATTENTION_COMPRESS_ROPE_FREQ_BASE", "f32", 160000.0)
        add("LLM_KV_HYPER_CONNECTION_COUNT", "u32", 4)
        add("LLM_KV_HYPER_CONNECTION_SINKHORN_ITERATIONS", "u32", 2)
        add("LLM_KV_HYPER_CONNECTION_EPSILON", "f32", 1.0e-6)
        add("LLM_KV_HASH_LAYER_COUNT", "u32", 0)
        add("LLM_KV_SWIGLU_CLAMP_EXP", "f32", 10.0)
        add("LLM_KV_EXPERT_WEIGHTS_SCALE", "f32", 1.0)
        add("LLM_KV_EXPERT_WEIGHTS_NORM", "bool", True)
    if arch == "hrm_text":
        add("LLM_KV_HRM_LAYERS_PER_STACK", "u32", 1)
        add("LLM_KV_HRM_H_CYCLES", "u32", 2)
        add("LLM_KV_HRM_L_CYCLES", "u32", 2)
    if arch == "maple":
        add("LLM_KV_SWIGLU_CLAMP_EXP", "f32", 7.0)
    add("LLM_KV_TOKENIZER_MODEL", "str", "test")
    add("LLM_KV_TOKENIZER_LIST", "strs", [f"tok_{i}" for i in range(n_vocab)])
    add("LLM_KV_TOKENIZER_SCORES", "f32s", [0.0] * n_vocab)
    if moe:
        add("LLM_KV_EXPERT_FEED_FORWARD_LENGTH", "u32", n_ff)
        add("LLM_KV_EXPERT_SHARED_FEED_FORWARD_LENGTH", "u32", n_ff // 2)
        add("LLM_KV_EXPERT_LATENT_LENGTH", "u32", n_ff)
        add("LLM_KV_INTERLEAVE_MOE_LAYER_STEP", "u32", 2)
        add("LLM_KV_EXPERT_COUNT", "u32", 2)
        add("LLM_KV_EXPERT_USED_COUNT", "u32", 2)
        add("LLM_KV_EXPERT_SHARED_COUNT", "u32", 1)
        add("LLM_KV_EXPERT_GATING_FUNC", "u32", 4 if arch == "deepseek4" else 2)
        add("LLM_KV_EXPERT_GROUP_SCALE", "f32", 1.0)
        add("LLM_KV_EXPERTS_PER_GROUP", "u32", 1)
    add("LLM_KV_POSNET_EMBEDDING_LENGTH", "u32", n_embd)
    add("LLM_KV_POSNET_BLOCK_COUNT", "u32", n_layer)
    add("LLM_KV_CONVNEXT_EMBEDDING_LENGTH", "u32", n_embd)
    add("LLM_KV_CONVNEXT_BLOCK_COUNT", "u32", n_layer)
    add("LLM_KV_XIELU_ALPHA_N", "f32", 1.0)
    add("LLM_KV_XIELU_ALPHA_P", "f32", 1.0)
    add("LLM_KV_XIELU_BETA", "f32", 1.0)
    add("LLM_KV_XIELU_EPS", "f32", 1.0e-7)
    qwen_gdn = arch in ("qwen3next", "qwen35", "qwen35moe", "qwen4exp")
    add("LLM_KV_SSM_INNER_SIZE", "u32", 256 if qwen_gdn else 2 * n_embd)
    add("LLM_KV_SSM_CONV_KERNEL", "u32", 4)
    add("LLM_KV_SSM_STATE_SIZE", "u32", 128)
    add("LLM_KV_SSM_TIME_STEP_RANK", "u32", n_head)
    add("LLM_KV_SSM_GROUP_COUNT", "u32", 0 if arch == "plamo2" else 2)
    add("LLM_KV_KDA_HEAD_DIM", "u32", 128)
    add("LLM_KV_KDA_SAFE_GATE", "bool", True)
    if arch == "bailingmoe3":
        add("LLM_KV_SWIGLU_CLAMP_EXP", "f32s", [0.0, 4.0])
        add("LLM_KV_SWIGLU_CLAMP_SHEXP", "f32s", [0.0, 5.0])
    add("LLM_KV_WKV_HEAD_SIZE", "u32", n_embd // n_head)
    add("LLM_KV_SHORTCONV_L_CACHE", "u32", 3)
    add("LLM_KV_RESIDUAL_SCALE", "f32", 3.5565588200778455)
    add("LLM_KV_ATTN_RES_BLOCK_SIZE", "u32", 12)
    add("LLM_KV_ACTIVATION_SITU_BETA", "f32", 4.0)
    add("LLM_KV_ACTIVATION_SITU_LINEAR_BETA", "f32", 25.0)
    add("LLM_KV_KDA_GATE_LOWER_BOUND", "f32", -5.0)
    if arch in ("eagle3", "dflash"):
        # Not in test-llama-archs (it skips draft heads): the target's layers
        # their loaders require, so the twin loads.
        add("LLM_KV_TARGET_LAYERS", "u32s", [0, 1, 1] if arch == "eagle3" else [0, 1])
        add("LLM_KV_TARGET_HIDDEN_SIZE", "u32", n_embd)
        if arch == "dflash":
            add("LLM_KV_ATTENTION_SLIDING_WINDOW_PATTERN", "bools", [il % 2 == 0 for il in range(n_layer)])
    if arch == "gemma4-assistant":
        # As gemma4: the pattern as an array, the sliding head sizes.
        add("LLM_KV_ATTENTION_SLIDING_WINDOW_PATTERN", "bools", [il % 5 < 4 for il in range(n_layer)])
        add("LLM_KV_ATTENTION_KEY_LENGTH_SWA", "u32", n_embd_head)
        add("LLM_KV_ATTENTION_VALUE_LENGTH_SWA", "u32", n_embd_head)
        add("LLM_KV_EMBEDDING_LENGTH_OUT", "u32", 2 * n_embd)
    if arch == "graniteswitch":
        # Not in test-llama-archs: the adapter keys granite-switch.cpp
        # requires (two adapters, their token ids), so the twin loads.
        add("LLM_KV_ADAPTER_COUNT", "u32", 2)
        add("LLM_KV_ADAPTER_LORA_RANK", "u32", 8)
        add("LLM_KV_ADAPTER_TOKEN_IDS_ACTIVATE", "u32s", [5, 6])
        add("LLM_KV_ADAPTER_TOKEN_IDS_SUBSTITUTE", "u32s", [7, 8])
    if arch in ("rwkv7", "arwkv7"):
        # Not in test-llama-archs (it skips RWKV): the ranks rwkv7's loader
        # requires, so the twin loads.
        add("LLM_KV_ATTENTION_DECAY_LORA_RANK", "u32", 64)
        add("LLM_KV_ATTENTION_ICLR_LORA_RANK", "u32", 64)
        add("LLM_KV_ATTENTION_VALUE_RESIDUAL_MIX_LORA_RANK", "u32", 32)
        add("LLM_KV_ATTENTION_GATE_LORA_RANK", "u32", 128)
    return out


def write(src, path, arch, moe=False, sets=(), tensors=()):
    """The twin at `path`; `tensors` (name, raw bytes as a uint8 array of
    byte shape, ggml type) are written with their data (model_buffers_registry.py)."""
    names = kv_names(src)
    values = {}
    for enum, kind, value in fixture(arch, moe):
        values[names[enum].replace("%s", arch)] = (kind, value)
    for s in sets:
        key, typed = s.split("=", 1)
        kind, value = typed.split(":", 1)
        key = key.replace("{arch}", arch)
        if kind in ("u32", "i32"):
            value = int(value)
        elif kind == "f32":
            value = float(value)
        elif kind == "bool":
            value = value in ("1", "true")
        elif kind == "u32s":
            value = [int(x) for x in value.split(",")]
        elif kind == "bools":
            value = [x in ("1", "true") for x in value.split(",")]
        values[key] = (kind, value)
    w = gguf.GGUFWriter(path, arch)
    vt = gguf.GGUFValueType
    scalar = {"u32": vt.UINT32, "i32": vt.INT32, "f32": vt.FLOAT32, "bool": vt.BOOL,
              "str": vt.STRING}
    arrays = {"u32s": vt.UINT32, "u64s": vt.UINT64, "f32s": vt.FLOAT32, "bools": vt.BOOL,
              "strs": vt.STRING}
    for key, (kind, value) in values.items():
        if kind in scalar:
            w.add_key_value(key, value, scalar[kind])
        else:
            w.add_key_value(key, value, vt.ARRAY, sub_type=arrays[kind])
    for name, data, ty in tensors:
        w.add_tensor(name, data, raw_dtype=ty)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("out")
    p.add_argument("arch")
    p.add_argument("--moe", action="store_true")
    p.add_argument("--set", action="append", default=[])
    a = p.parse_args()
    write(a.src, a.out, a.arch, a.moe or moe_for(a.arch), a.set)


if __name__ == "__main__":
    main()
