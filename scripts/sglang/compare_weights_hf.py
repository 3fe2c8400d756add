"""`kv fit --engine sglang`'s loaded weights against SGLang 0.5.23's own
class at TP 1 (or --tp N, --dp D), on checkpoints whose tensors come from transformers' own
class for the config (built on the meta device: its state dict is what
`save_pretrained` writes, tied weights once), for every shipped config of
the classes `kv_engines::fit::sglang::CHECKED_ARCHITECTURES` lists. Not run
by CI.

    cargo build -p kv-cli
    /work/.venv-sglang/bin/python scripts/sglang/compare_weights_hf.py --kv $CARGO_TARGET_DIR/debug/kv [CONFIG.json...]

Compared: SGLang's parameter bytes with `fit.loaded.tensor_bytes`, its
buffers' bytes (one tensor once, however many modules share it) with
`fit.loaded.rotary_bytes` and `other_buffer_bytes`, and the tensors its modules hold beside both
once `post_load_weights` has run on the meta model (DeepSeek's `w_kc` and
`w_vc`) with `fit.loaded.other_tensor_bytes`. `--all-classes` runs every config whatever its
class (kv refuses those it has not checked).
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts", "vllm"))
from hf_checkpoint import hf_checkpoint  # noqa: E402
import loaded_buffers  # noqa: E402
import sglang_pools as sp  # noqa: E402

CHECKED = {
    "CohereForCausalLM", "Cohere2ForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM",
    "Ernie4_5ForCausalLM", "GemmaForCausalLM",
    "Gemma3ForCausalLM", "Glm4ForCausalLM", "Glm4MoeForCausalLM", "GptOssForCausalLM",
    "GraniteMoeHybridForCausalLM", "NemotronHForCausalLM", "Lfm2ForCausalLM", "Lfm2MoeForCausalLM",
    "GPTNeoXForCausalLM",
    "GraniteForCausalLM", "GraniteMoeForCausalLM", "HunYuanDenseV1ForCausalLM",
    "Llama4ForCausalLM", "LlamaForCausalLM", "MiniCPM3ForCausalLM", "MistralForCausalLM",
    "MixtralForCausalLM", "OlmoForCausalLM", "Olmo2ForCausalLM", "Olmo3ForCausalLM",
    "OlmoeForCausalLM", "PhiForCausalLM", "PhiMoEForCausalLM", "Phi3ForCausalLM", "Qwen2ForCausalLM",
    "Qwen2MoeForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "Qwen3NextForCausalLM",
    "SeedOssForCausalLM",
    "SmolLM3ForCausalLM", "StableLmForCausalLM", "Starcoder2ForCausalLM",
    "Gemma2ForCausalLM", "OPTForCausalLM", "ApertusForCausalLM", "DeepseekV32ForCausalLM",
    "Exaone4ForCausalLM", "LagunaForCausalLM", "GPT2LMHeadModel", "GPTJForCausalLM",
}
def kv_bytes(kv, folder, tp, dp=1):
    # A GPU no model here outgrows (16 TiB): only the weights are compared.
    p = subprocess.run([kv, "fit", os.path.join(folder, "config.json"), "--engine", "sglang",
                        "--gpu-memory-mib", "16777216", "--avail-mem-gb", "16000",
                        "--mem-fraction-static", "0.9", "--tp", str(tp), "--dp", str(dp),
                        "--format", "json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["?"])[-1][-200:]
    loaded = json.loads(p.stdout)[0]["fit"]["loaded"]
    return (loaded["tensor_bytes"], loaded["rotary_bytes"] + loaded["other_buffer_bytes"],
            loaded["other_tensor_bytes"]), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kv", required=True)
    ap.add_argument("--tp", type=int, nargs="*", default=[1])
    ap.add_argument("--dp", type=int, default=1, help="DP attention size (each TP a multiple)")
    ap.add_argument("--all-classes", action="store_true",
                    help="every config, not only the classes kv has checked")
    ap.add_argument("configs", nargs="*")
    a = ap.parse_args()
    sp._as_hopper()
    # As loaded_buffers.main: the rotary tables stay float32, as on CUDA.
    import sglang.srt.layers.rotary_embedding.base as rotary_base

    rotary_base._is_cuda = True
    paths = a.configs or sorted(set(glob.glob(os.path.join(ROOT, "scripts/*/configs/*.json"))
                                    + glob.glob(os.path.join(ROOT, "examples/configs/*.json"))
                                    + glob.glob(os.path.join(ROOT, "examples/configs/*/config.json"))))
    counts = {"same": 0, "differ": 0, "one refuses": 0, "refused alike": 0, "no checkpoint": 0}
    for path in paths:
        c = json.load(open(path))
        if not a.all_classes and (c.get("architectures") or [None])[0] not in CHECKED:
            continue
        folder = tempfile.mkdtemp()
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(c, f)
        try:
            hf_checkpoint(os.path.join(folder, "config.json"), folder)
        except Exception as e:  # noqa: BLE001  (reported; the next runs)
            counts["no checkpoint"] += 1
            print(json.dumps({"config": os.path.relpath(path, ROOT), "verdict": "no checkpoint",
                              "why": f"{type(e).__name__}: {e}"[:200]}), flush=True)
            continue
        for tp in a.tp:
            k, k_err = kv_bytes(a.kv, folder, tp, a.dp)
            m = loaded_buffers.measure(os.path.join(folder, "config.json"), tp, a.dp)
            s = None
            if "param_bytes" in m:
                s = (sum(m["param_bytes"].values()), sum(b[3] for b in m["buffers"]),
                     m["other_tensor_bytes"])
            s_err = m.get("error")
            if k_err and s_err:
                verdict = "refused alike"
            elif k_err or s_err:
                verdict = "one refuses"
            else:
                verdict = "same" if k == s else "differ"
            counts[verdict] += 1
            print(json.dumps({"config": os.path.relpath(path, ROOT), "class": c["architectures"][0],
                              "tp": tp, "dp": a.dp, "verdict": verdict, "kv": k or k_err,
                              "sglang": s or s_err}), flush=True)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
