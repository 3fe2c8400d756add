"""`kv fit --engine vllm`'s loaded weights (`Model loading took`) against
vLLM 0.33's own class built on the meta device at TP 1 (loaded_weights.py),
on checkpoints whose tensors come from transformers' own class for each
shipped config (hf_checkpoint.py), for the classes SGLang's and vLLM's
checked lists name. Not run by CI.

    cargo build -p kv-cli
    /work/.venv-vllm/bin/python scripts/vllm/compare_weights_hf.py --kv $CARGO_TARGET_DIR/debug/kv [CONFIG.json...]
"""

import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import loaded_weights  # noqa: E402
from hf_checkpoint import hf_checkpoint  # noqa: E402

CLASSES = {
    "Zamba2ForCausalLM", "Lfm2MoeForCausalLM", "CohereForCausalLM", "Cohere2ForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM",
    "Ernie4_5ForCausalLM", "Exaone4ForCausalLM", "GemmaForCausalLM", "Gemma2ForCausalLM",
    "Gemma3ForCausalLM", "GlmForCausalLM", "Glm4ForCausalLM", "GPTNeoXForCausalLM",
    "Olmo3ForCausalLM", "PhiForCausalLM", "Qwen3NextForCausalLM", "SeedOssForCausalLM",
    "SmolLM3ForCausalLM",
    "StableLmForCausalLM", "GraniteForCausalLM", "GraniteMoeHybridForCausalLM",
    "JambaForCausalLM", "Lfm2ForCausalLM", "NemotronHForCausalLM", "Glm4MoeForCausalLM",
    "Cohere2MoeForCausalLM", "ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM", "FalconForCausalLM",
    "GraniteMoeSharedForCausalLM", "GraniteMoeSWAForCausalLM", "GraniteSWAForCausalLM",
    "HrmTextForCausalLM", "HyperCLOVAXForCausalLM", "IQuestCoderForCausalLM",
    "InternLM3ForCausalLM", "LLaMAForCausalLM", "MiniCPM3ForCausalLM", "TeleChat3ForCausalLM",
    "Ernie4_5_MoeForCausalLM", "Ministral3ForCausalLM", "OPTForCausalLM", "PhiMoEForCausalLM", "FalconMambaForCausalLM",
    "MambaForCausalLM", "Mamba2ForCausalLM", "GptOssForCausalLM", "FalconH1ForCausalLM",
    "AXK1ForCausalLM", "Gemma4ForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
    "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "ApertusForCausalLM", "Gemma3nForCausalLM",
    "LagunaForCausalLM", "GPT2LMHeadModel", "BloomForCausalLM", "GPTJForCausalLM",
    "DbrxForCausalLM", "BeamForCausalLM",
    "GraniteMoeForCausalLM", "HunYuanDenseV1ForCausalLM", "Llama4ForCausalLM",
    "LlamaForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "OlmoForCausalLM",
    "Olmo2ForCausalLM", "OlmoeForCausalLM", "Phi3ForCausalLM", "Qwen2ForCausalLM",
    "Qwen2MoeForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Starcoder2ForCausalLM",
}


def add_lm_head_bias(folder, c, tp, stages):
    """What vLLM's Transformers backend registers while it loads a checkpoint
    with `lm_head.bias` (transformers/causal.py `_register_bias`), which a
    class built on meta lacks: one entry per padded vocabulary row of the
    rank, in the served dtype, on the last stage."""
    from vllm.model_executor.models.registry import _TRANSFORMERS_SUPPORTED_MODELS

    if c["architectures"][0] not in _TRANSFORMERS_SUPPORTED_MODELS or "error" in stages[-1]:
        return
    with open(os.path.join(folder, "model.safetensors"), "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    if "lm_head.bias" not in header:
        return
    width = {"torch.bfloat16": 2, "torch.float16": 2, "torch.float32": 4}[stages[-1]["dtype"]]
    rows = (c["vocab_size"] + 63) // 64 * 64 // tp
    stages[-1]["total"] += (rows * width + 511) // 512 * 512


def add_mtp_layers(folder, c):
    """The MTP layers DeepSeek-V3's checkpoint ships after the decoder's
    (`model.layers.N` for N from num_hidden_layers): the last layer's tensors
    again, with eh_proj, enorm, hnorm, shared_head and embed_tokens."""
    n, h = c["num_hidden_layers"], c["hidden_size"]
    path = os.path.join(folder, "model.safetensors")
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
    at = max(t["data_offsets"][1] for t in header.values())
    last = f"model.layers.{n - 1}."
    dtype = next(iter(header.values()))["dtype"]
    qwen3_next = c["architectures"][0] == "Qwen3NextForCausalLM"
    count = c.get("num_nextn_predict_layers") or (1 if qwen3_next else 0)
    for i in range(count):
        # Qwen3-Next's checkpoint: `mtp.layers.0.` and `mtp.fc`, `mtp.norm`,
        # `mtp.pre_fc_norm_*`; DeepSeek-V3's: `model.layers.N.`, ...
        to = f"mtp.layers.{i}." if qwen3_next else f"model.layers.{n + i}."
        extra = {k.replace(last, to): (t["dtype"], t["shape"])
                 for k, t in header.items() if k.startswith(last)}
        if qwen3_next:
            more = [("mtp.fc.weight", [h, 2 * h]), ("mtp.norm.weight", [h]),
                    ("mtp.pre_fc_norm_embedding.weight", [h]),
                    ("mtp.pre_fc_norm_hidden.weight", [h])]
        else:
            more = [(f"{to}{k}", shape) for k, shape in [
                ("eh_proj.weight", [h, 2 * h]), ("enorm.weight", [h]), ("hnorm.weight", [h]),
                ("shared_head.norm.weight", [h]),
                ("shared_head.head.weight", [c["vocab_size"], h]),
                ("embed_tokens.weight", [c["vocab_size"], h])]]
        for k, shape in more:
            extra[k] = (dtype, shape)
        for k, (dt, shape) in extra.items():
            bytes_ = {"BF16": 2, "F16": 2, "F32": 4}[dt]
            for d in shape:
                bytes_ *= d
            header[k] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + bytes_]}
            at += bytes_
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + at)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kv", required=True)
    ap.add_argument("--tp", type=int, nargs="*", default=[1])
    ap.add_argument("--pp", type=int, default=1, help="compare every stage of this pipeline")
    ap.add_argument("--all-classes", action="store_true",
                    help="every config, not only the classes kv checks (kv refuses the others)")
    ap.add_argument("--mtp", action="store_true",
                    help="add the MTP layers a published checkpoint ships (num_nextn_predict_layers)")
    ap.add_argument("--language-model-only", action="store_true",
                    help="vLLM's --language-model-only: a multimodal class's towers not built")
    ap.add_argument("--legacy-names", action="store_true",
                    help="write a multimodal checkpoint under the published checkpoints' older "
                         "names (transformers 5's renames reversed)")
    ap.add_argument("configs", nargs="*")
    a = ap.parse_args()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    compare.load_stub_libcuda(tempfile.mkdtemp())
    import logging

    logging.disable(logging.WARNING)
    compare.install_hopper()
    paths = a.configs or sorted(glob.glob(os.path.join(ROOT, "scripts/*/configs/*.json"))
                                  + glob.glob(os.path.join(HERE, "fit-configs/*.json")))
    counts = {"same": 0, "differ": 0, "kv refuses": 0, "vllm refuses": 0, "no checkpoint": 0}
    for path in paths:
        c = json.load(open(path))
        if not a.all_classes and (c.get("architectures") or [None])[0] not in CLASSES:
            continue
        folder = tempfile.mkdtemp()
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(c, f)
        try:
            hf_checkpoint(os.path.join(folder, "config.json"), folder, a.legacy_names)
            if a.mtp:
                add_mtp_layers(folder, c)
        except Exception as e:  # noqa: BLE001  (reported; the next runs)
            counts["no checkpoint"] += 1
            print(json.dumps({"config": os.path.relpath(path, ROOT), "verdict": "no checkpoint",
                              "why": f"{type(e).__name__}: {e}"[:200]}), flush=True)
            continue
        for tp in a.tp:
            p = subprocess.run([a.kv, "fit", os.path.join(folder, "config.json"),
                                "--gpu-memory-mib", "16777216", "--tp", str(tp), "--pp", str(a.pp),
                                "--format", "json"]
                               + (["--language-model-only"] if a.language_model_only else []),
                               capture_output=True, text=True)
            stages = [loaded_weights.loaded(os.path.join(folder, "config.json"), tp, a.pp, s,
                                            a.language_model_only)
                      for s in range(a.pp)]
            add_lm_head_bias(folder, c, tp, stages)
            errors = [s["error"] for s in stages if "error" in s]
            v = {"error": errors[0]} if errors else {"total": [s["total"] for s in stages]}
            kv_stages = lambda: [s["weights_bytes"] for s in json.loads(p.stdout)[0]["fit"]["stages"]]
            if p.returncode != 0 and "error" in v:
                verdict, k = "refused alike", (p.stderr.strip().splitlines() or ["?"])[-1][-200:]
            elif p.returncode != 0:
                verdict, k = "kv refuses", (p.stderr.strip().splitlines() or ["?"])[-1][-200:]
            elif "error" in v:
                verdict, k = "vllm refuses", kv_stages()
            else:
                k = kv_stages()
                verdict = "same" if k == v["total"] else "differ"
            counts[verdict] = counts.get(verdict, 0) + 1
            print(json.dumps({"config": os.path.relpath(path, ROOT), "class": c["architectures"][0],
                              "tp": tp, "pp": a.pp, "verdict": verdict, "kv": k,
                              "vllm": v.get("total") or v.get("error")}), flush=True)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
