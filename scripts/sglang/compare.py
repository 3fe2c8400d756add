"""kv estimate --engine sglang against SGLang 0.5.23's own pools and lines
(sglang_pools.py), case by case, to the character. Not run by CI.

    python3 scripts/sglang/compare.py [--kv target/debug/kv]

Runs every case in one SGLang process (about 20 s of import, then well under
a second a case), then kv once per case; prints each case's verdict and the
matched/total count, and writes results.jsonl beside this script.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SGLANG_PY = "/work/.venv-sglang/bin/python"
GIB = 1 << 30

# Not here: scripts/vllm/configs/kimi-linear.json lacks the `linear_attn_config`
# SGLang's KimiLinearConfig reads, and SGLang fails on it (TypeError).
CONFIGS = {
    "qwen3-8b": "scripts/sglang/configs/qwen3-8b.json",
    "gpt-oss-20b": "scripts/sglang/configs/gpt-oss-20b.json",
    "qwen3-next": "examples/configs/qwen3-next-80b-a3b/config.json",
    "deepseek-v2-lite": "scripts/vllm/configs/deepseek-v2-lite.json",
    "deepseek-v3": "scripts/vllm/configs/deepseek-v3.json",
    "llama-3-8b": "examples/configs/llama-3-8b/config.json",
    "mistral-7b-v0.1": "examples/configs/mistral-7b-v0.1/config.json",
    "gemma-2-9b": "scripts/vllm/configs/gemma-2-9b.json",
    "gemma-3-27b": "examples/configs/gemma-3-27b/config.json",
    "command-r7b": "scripts/vllm/configs/command-r7b.json",
    "nemotron-h-8b": "scripts/vllm/configs/nemotron-h-8b.json",
    "falcon-h1": "scripts/vllm/configs/falcon-h1.json",
    "jamba-v0.1": "examples/configs/jamba-v0.1/config.json",
    "granite-4.0-h": "scripts/vllm/configs/granite-4.0-h.json",
    "zamba2-2.7b": "scripts/vllm/configs/zamba2-2.7b.json",
    "mixtral-8x7b": "scripts/vllm/configs/mixtral-8x7b.json",
    "phi-3-mini": "scripts/vllm/configs/phi-3-mini.json",
    "gemma-3-1b": "scripts/vllm/configs/gemma-3-1b.json",
    "llama-4-scout-text": "scripts/vllm/configs/llama-4-scout-text.json",
    "minicpm3-4b": "scripts/vllm/configs/minicpm3-4b.json",
    "lfm2-1.2b": "scripts/vllm/configs/lfm2-1.2b.json",
    "glm-4.5": "scripts/vllm/configs/glm-4.5.json",
    "qwen3-30b-a3b": "scripts/vllm/configs/qwen3-30b-a3b.json",
}

# Cases with SGLang's request and token caps.
CAPPED = [
    ("qwen3-8b", {"max_running_requests": 100}),
    ("qwen3-8b", {"max_total_tokens": 100000}),
    ("gpt-oss-20b", {"max_total_tokens": 100000}),
    ("qwen3-next", {"max_running_requests": 16}),
    ("qwen3-next", {"max_running_requests": 64, "dp": 4, "tp": 8}),
    ("deepseek-v2-lite", {"max_running_requests": 1000, "dp": 2, "tp": 2}),
]


# Refused by SGLang when it builds the model, which the harness never does:
# read in its source, not run.
REFUSED_AT_MODEL_BUILD = {
    ("gemma-3-1b", 8): "models/gemma3_causal.py asserts total_num_heads % tp_size == 0",
}


def cases():
    out = []
    for name in CONFIGS:
        for tp, dp in [(1, 1), (2, 1), (8, 1), (8, 4)]:
            for dtype in ["auto", "fp8_e4m3", "fp8_e5m2"]:
                if dtype != "auto" and (tp, dp) not in [(1, 1), (8, 4)]:
                    continue
                for budget in [40 * GIB, 7_777_777_777]:
                    if budget != 40 * GIB and (tp, dp, dtype) != (1, 1, "auto"):
                        continue
                    out.append(
                        {
                            "name": name,
                            "config": os.path.join(ROOT, CONFIGS[name]),
                            "budget": budget,
                            "tp": tp,
                            "dp": dp,
                            "kv_cache_dtype": dtype,
                        }
                    )
    for name, extra in CAPPED:
        case = {
            "name": name, "config": os.path.join(ROOT, CONFIGS[name]), "budget": 40 * GIB,
            "tp": 1, "dp": 1, "kv_cache_dtype": "auto",
        }
        case.update(extra)
        out.append(case)
    return out


def kv_lines(kv, case):
    cmd = [
        kv, "estimate", "--engine", "sglang", case["config"],
        "--kv-cache-memory-bytes", str(case["budget"]),
        "--tp", str(case["tp"]), "--dp", str(case["dp"]), "--format", "json",
    ]
    for key in ("max_running_requests", "max_total_tokens"):
        if case.get(key) is not None:
            cmd += ["--" + key.replace("_", "-"), str(case[key])]
    if case["kv_cache_dtype"] != "auto":
        cmd += ["--kv-cache-dtype", case["kv_cache_dtype"]]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return None, done.stderr.strip()
    [sized] = json.loads(done.stdout)
    return sized, None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kv", default=os.path.join(ROOT, "target/debug/kv"))
    args = parser.parse_args()
    all_cases = cases()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(all_cases, f)
    done = subprocess.run(
        [SGLANG_PY, os.path.join(HERE, "sglang_pools.py"), f.name],
        capture_output=True, text=True,
    )
    os.unlink(f.name)
    theirs = [json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")]
    if len(theirs) != len(all_cases):
        sys.exit(f"sglang_pools.py gave {len(theirs)} of {len(all_cases)}:\n{done.stderr[-3000:]}")
    matched = 0
    read_only = 0
    rows = []
    for case, sg in zip(all_cases, theirs):
        ours, error = kv_lines(args.kv, case)
        caps = "".join(f" {k}={case[k]}" for k in ("max_running_requests", "max_total_tokens") if k in case)
        label = f"{case['name']} tp{case['tp']} dp{case['dp']} {case['kv_cache_dtype']} {case['budget']}{caps}"
        read = REFUSED_AT_MODEL_BUILD.get((case["name"], case["tp"] // case["dp"]))
        if read:
            ok = ours is None and "SGLang would not start either" in (error or "")
            verdict = f"refused by both; SGLang's refusal read, not run ({read}): kv: {error[-100:] if error else 'no'}"
            read_only += ok
        elif sg.get("load_refusal"):
            # SGLang's configurator sizes it; its loader refuses it.
            ok = ours is None and sg["load_refusal"] in (error or "")
            verdict = f"SGLang's loader refuses it ({sg['load_refusal'][:80]}); kv refuses: {error[-120:] if error else 'no'}"
        elif "error" in sg:
            ok = ours is None
            verdict = f"SGLang refuses ({sg['error'][:90]}); kv {'refuses: ' + error[:120] if ours is None else 'does not'}"
        else:
            same_lines = ours is not None and ours["lines"] == sg["lines"]
            same_reqs = ours is not None and ours["pools"]["max_running_requests"] == sg["max_running_requests"]
            ok = same_lines and same_reqs
            verdict = "lines and max_running_requests match" if ok else (
                f"differs: kv {error or (ours['lines'], ours['pools']['max_running_requests'])} "
                f"sglang {(sg['lines'], sg['max_running_requests'])}"
            )
        matched += ok
        rows.append({"case": label, "ok": ok, "sglang": sg, "kv": ours, "kv_error": error})
        print(f"{'ok ' if ok else 'BAD'} {label}: {verdict}")
    with open(os.path.join(HERE, "results.jsonl"), "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    print(f"{matched}/{len(all_cases)} matched ({read_only} of them a refusal read in SGLang's source, not run)")


if __name__ == "__main__":
    main()
