"""`kv fit --engine vllm`'s weights per rank against vLLM 0.33's own model
built on the meta device (loaded_weights.py), for every shipped config of
the classes kv has checked, at TP 1, 2, 4 and 8 (and with --pp P, every
pipeline stage of each). Not run by CI.

    cargo build -p kv-cli
    /work/.venv-vllm/bin/python scripts/vllm/compare_fit.py --kv $CARGO_TARGET_DIR/debug/kv

Each config gets a folder with a sparse safetensors file holding the
tensors a Hugging Face checkpoint of its class stores (names and shapes from
the config: the embedding, per layer q/k/v/o with Qwen2's biases and
Qwen3's q/k norms, gate/up/down or Mixtral's and Qwen3-MoE's router and
experts, two norms, the final norm, the head unless tied), in the config's dtype. kv reads that header; vLLM builds the class.
One line per config and TP: both figures, or the refusal of each.
"""

import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import loaded_weights  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLASSES = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
           "MixtralForCausalLM", "Qwen3MoeForCausalLM"}
DTYPES = {"bfloat16": ("BF16", 2), "float16": ("F16", 2), "float32": ("F32", 4)}


def hf_tensors(c):
    t = c.get("text_config", c)
    h, heads = t["hidden_size"], t["num_attention_heads"]
    kv = t.get("num_key_value_heads") or heads
    hd = t.get("head_dim") or h // heads
    inter, vocab, layers = t["intermediate_size"], t["vocab_size"], t["num_hidden_layers"]
    arch = c["architectures"][0]
    out = [("model.embed_tokens.weight", [vocab, h])]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [
            (p + "self_attn.q_proj.weight", [heads * hd, h]),
            (p + "self_attn.k_proj.weight", [kv * hd, h]),
            (p + "self_attn.v_proj.weight", [kv * hd, h]),
            (p + "self_attn.o_proj.weight", [h, heads * hd]),
            (p + "input_layernorm.weight", [h]),
            (p + "post_attention_layernorm.weight", [h]),
        ]
        if arch == "MixtralForCausalLM":
            out.append((p + "block_sparse_moe.gate.weight", [t["num_local_experts"], h]))
            for e in range(t["num_local_experts"]):
                q = p + f"block_sparse_moe.experts.{e}."
                out += [(q + "w1.weight", [inter, h]), (q + "w3.weight", [inter, h]),
                        (q + "w2.weight", [h, inter])]
        elif (arch == "Qwen3MoeForCausalLM" and i not in (t.get("mlp_only_layers") or [])
              and (i + 1) % (t.get("decoder_sparse_step") or 1) == 0):
            mi = t["moe_intermediate_size"]
            out.append((p + "mlp.gate.weight", [t["num_experts"], h]))
            for e in range(t["num_experts"]):
                q = p + f"mlp.experts.{e}."
                out += [(q + "gate_proj.weight", [mi, h]), (q + "up_proj.weight", [mi, h]),
                        (q + "down_proj.weight", [h, mi])]
        else:
            out += [(p + "mlp.gate_proj.weight", [inter, h]), (p + "mlp.up_proj.weight", [inter, h]),
                    (p + "mlp.down_proj.weight", [h, inter])]
        if arch == "Qwen2ForCausalLM":
            out += [(p + "self_attn.q_proj.bias", [heads * hd]),
                    (p + "self_attn.k_proj.bias", [kv * hd]),
                    (p + "self_attn.v_proj.bias", [kv * hd])]
        if arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
            out += [(p + "self_attn.q_norm.weight", [hd]), (p + "self_attn.k_norm.weight", [hd])]
    out.append(("model.norm.weight", [h]))
    if not t.get("tie_word_embeddings", c.get("tie_word_embeddings", False)):
        out.append(("lm_head.weight", [vocab, h]))
    return out


def write_checkpoint(config_path, folder):
    c = json.load(open(config_path))
    t = c.get("text_config", c)
    name, size = DTYPES.get(t.get("torch_dtype") or c.get("torch_dtype") or "bfloat16", ("BF16", 2))
    header, at = {}, 0
    for n, shape in hf_tensors(c):
        b = size
        for d in shape:
            b *= d
        header[n] = {"dtype": name, "shape": shape, "data_offsets": [at, at + b]}
        at += b
    raw = json.dumps(header).encode()
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(c, f)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.truncate(8 + len(raw) + at)


def kv_weights(kv, folder, tp, pp=1):
    """kv's weights per stage (one entry without a pipeline), or its refusal."""
    p = subprocess.run([kv, "fit", os.path.join(folder, "config.json"), "--gpu", "B200",
                        "--tp", str(tp), "--pp", str(pp), "--format", "json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["?"])[-1]
    return [s["weights_bytes"] for s in json.loads(p.stdout)[0]["fit"]["stages"]], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kv", required=True)
    ap.add_argument("--tp", type=int, nargs="*", default=[1, 2, 4, 8])
    ap.add_argument("--pp", type=int, default=1)
    a = ap.parse_args()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    compare.load_stub_libcuda(tempfile.mkdtemp())
    import logging

    logging.disable(logging.WARNING)
    compare.install_hopper()
    paths = sorted(set(glob.glob(os.path.join(ROOT, "scripts/*/configs/*.json"))
                       + glob.glob(os.path.join(ROOT, "examples/configs/*.json"))))
    counts = {"same": 0, "differ": 0, "refused alike": 0, "one refuses": 0}
    for path in paths:
        c = json.load(open(path))
        if not (c.get("architectures") or [None])[0] in CLASSES:
            continue
        folder = tempfile.mkdtemp()
        try:
            write_checkpoint(path, folder)
        except KeyError as e:
            print(json.dumps({"config": os.path.relpath(path, ROOT), "skipped": f"no {e}"}))
            continue
        for tp in a.tp:
            kv_bytes, kv_err = kv_weights(a.kv, folder, tp, a.pp)
            stages = [loaded_weights.loaded(os.path.join(folder, "config.json"), tp, a.pp, s)
                      for s in range(a.pp)]
            v_err = next((v["error"] for v in stages if v.get("error")), None)
            v_bytes = None if v_err else [v["total"] for v in stages]
            if kv_err and v_err:
                verdict = "refused alike"
            elif kv_err or v_err:
                verdict = "one refuses"
            else:
                verdict = "same" if kv_bytes == v_bytes else "differ"
            counts[verdict] += 1
            print(json.dumps({"config": os.path.relpath(path, ROOT), "tp": tp, "pp": a.pp,
                              "verdict": verdict,
                              "kv": kv_bytes or kv_err, "vllm": v_bytes or v_err}), flush=True)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
