"""`kv fit --engine sglang` end to end against SGLang 0.5.23's own code, on
every shipped config, four GPUs, TP 1, 2 and 8 and DP attention. Not run by
CI.

    cargo build -p kv-cli
    /work/.venv-sglang/bin/python scripts/sglang/compare_fit.py --kv $CARGO_TARGET_DIR/debug/kv [-- CONFIG.json...]

Per config, transformers' own class writes the checkpoint's header
(`scripts/vllm/hf_checkpoint.py`, data sparse), and `kv fit` reads it. Per
GPU and layout, SGLang's side is three of its own steps:

1. the default `mem_fraction_static`: its `ServerArgs` resolved on the
   emulated GPU (`mem_fraction.py`, in a process of its own: that run needs
   SGLang's cached `is_cuda()` true, the model builds need it false);
2. the weights it holds once loaded: its model class built on the meta
   device at rank 0 of the layout (`loaded_buffers.measure`: parameters,
   buffers, and the tensors `post_load_weights` makes);
3. the pools: its `KVCacheConfigurator` given the free memory before
   loading (`Load weight begin. avail mem=`, the one input, as `kv fit
   --avail-mem-gb`) and after it (that less the weights, in GiB: the
   emulation is that loading takes exactly what the model holds), with the
   fraction of step 1 (`sglang_pools.run_case`).

Compared: the fraction, the weights, the token pools (full, SWA), the
state slots, `max_running_requests` and every pool line; or both refusing.
A config whose class kv has not checked (`kv fit` refuses it before any
figure) is counted and not run through SGLang again at the other layouts.
"""

import argparse
import glob
import json
import logging
import os
import shutil
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

# nvidia-smi's memory.total (kv_engines::fit::gpus), and the free memory
# before loading that each run gives (what SGLang logs a GiB or so below).
GPUS = {"H100": 81559, "L4": 23034, "A100-40GB": 40960, "B200": 183359}
# (tp, dp): dp > 1 is DP attention.
LAYOUTS = [(1, 1), (2, 1), (8, 1), (2, 2), (8, 8)]
GIB = 1 << 30


def avail_before_gb(gpu_mib):
    return round(gpu_mib / 1024 - 1.2, 2)


def shipped_configs():
    return sorted(set(
        glob.glob(os.path.join(ROOT, "examples/configs/*/config.json"))
        + glob.glob(os.path.join(ROOT, "scripts/sglang/configs/*.json"))
        + glob.glob(os.path.join(ROOT, "scripts/vllm/configs/*.json"))
        + glob.glob(os.path.join(ROOT, "scripts/vllm/fit-configs/*.json"))
    ))


def kv_fit(kv, folder, gpu, tp, dp):
    p = subprocess.run(
        [kv, "fit", folder, "--engine", "sglang", "--gpu", gpu,
         "--avail-mem-gb", str(avail_before_gb(GPUS[gpu])), "--tp", str(tp), "--dp", str(dp),
         "--format", "json"],
        capture_output=True, text=True,
    )
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["?"])[-1]
    out = json.loads(p.stdout)[0]
    fit, pools = out["fit"], out["pools"]
    loaded = fit["loaded"]
    return {
        "mem_fraction_static": fit["mem_fraction_static"],
        "weight_bytes": loaded["tensor_bytes"] + loaded["rotary_bytes"]
        + loaded["other_buffer_bytes"] + loaded["other_tensor_bytes"],
        "tokens": pools["full"]["tokens"] if pools.get("full") else None,
        "swa_tokens": pools["swa"]["tokens"] if pools.get("swa") else None,
        "max_running_requests": pools["max_running_requests"],
        "lines": out["lines"],
    }, None


def sglang_fractions(cases):
    """mem_fraction.py over every case, in its own process."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cases, f)
    try:
        done = subprocess.run([sys.executable, os.path.join(HERE, "mem_fraction.py"), f.name],
                              capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    rows = [json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")]
    if len(rows) != len(cases):
        sys.exit(f"mem_fraction.py gave {len(rows)} of {len(cases)} cases: {done.stderr[-2000:]}")
    return rows


def sglang_fit(config, gpu, tp, dp, fraction, measured, handler):
    if "error" in measured:
        return None, f"build: {measured['error']}"
    weight_bytes = (sum(measured["param_bytes"].values()) + sum(b[3] for b in measured["buffers"])
                    + measured["other_tensor_bytes"])
    before = avail_before_gb(GPUS[gpu])
    handler.lines = []
    case = {"config": config, "tp": tp, "dp": dp, "avail_before_gb": before,
            "avail_after_gb": before - weight_bytes / GIB, "mem_fraction_static": fraction}
    try:
        r = sp.run_case(case, handler.lines)
    except Exception as error:  # SGLang's refusal is a result here
        return None, f"{type(error).__name__}: {error}"[:240]
    swa = r["swa_max_total_num_tokens"] if r["swa_max_total_num_tokens"] else None
    return {
        "mem_fraction_static": fraction,
        "weight_bytes": weight_bytes,
        "tokens": r["full_max_total_num_tokens"] or r["max_total_num_tokens"],
        "swa_tokens": swa,
        "max_running_requests": r["max_running_requests"],
        "lines": [l for l in handler.lines if not l.startswith("Memory pool end")],
    }, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kv", required=True)
    ap.add_argument("configs", nargs="*")
    a = ap.parse_args()
    configs = [os.path.abspath(c) for c in a.configs] or shipped_configs()

    sp._as_hopper()
    # As compare_weights_hf.py: the rotary tables stay float32, as on CUDA.
    import sglang.srt.layers.rotary_embedding.base as rotary_base

    rotary_base._is_cuda = True
    handler = sp._Lines()
    logging.getLogger("sglang").addHandler(handler)
    logging.getLogger("sglang").setLevel(logging.INFO)

    counts = {"same": 0, "differ": 0, "refused alike": 0, "kv refuses": 0,
              "kv refuses: class not checked": 0, "sglang refuses": 0, "no checkpoint": 0}
    tmp = tempfile.mkdtemp()
    try:
        # kv first, on every config: SGLang runs only where kv has checked the
        # class, and its default fractions come from one process.
        runs = []
        for i, config in enumerate(configs):
            name = os.path.relpath(config, ROOT)
            folder = os.path.join(tmp, str(i), "model")
            os.makedirs(folder)
            shutil.copy(config, os.path.join(folder, "config.json"))
            try:
                hf_checkpoint(os.path.join(folder, "config.json"), folder)
            except Exception as e:  # noqa: BLE001  (reported; the next runs)
                counts["no checkpoint"] += 1
                print(json.dumps({"config": name, "verdict": "no checkpoint",
                                  "why": f"{type(e).__name__}: {e}"[:200]}), flush=True)
                continue
            ours = {(g, tp, dp): kv_fit(a.kv, folder, g, tp, dp)
                    for g in GPUS for tp, dp in LAYOUTS}
            unchecked = [e for _, e in ours.values()
                         if e and "has not checked what SGLang's" in e]
            if len(unchecked) == len(ours):
                counts["kv refuses: class not checked"] += len(ours)
                print(json.dumps({"config": name, "verdict": "kv refuses: class not checked",
                                  "kv": unchecked[0][:160]}), flush=True)
                continue
            runs.append((name, folder, ours))
        cases = [{"config": os.path.join(folder, "config.json"), "gpu_mib": GPUS[g], "tp": tp,
                  "dp": dp} for _, folder, ours in runs for (g, tp, dp) in ours]
        fractions = iter(sglang_fractions(cases))
        for name, folder, ours in runs:
            config_json = os.path.join(folder, "config.json")
            measured = {}
            for (gpu, tp, dp), (mine, mine_err) in ours.items():
                row = next(fractions)
                if "error" in row:
                    theirs, theirs_err = None, f"ServerArgs: {row['error']}"
                else:
                    if (tp, dp) not in measured:
                        measured[tp, dp] = loaded_buffers.measure(config_json, tp, dp)
                    theirs, theirs_err = sglang_fit(config_json, gpu, tp, dp,
                                                    row["mem_fraction_static"],
                                                    measured[tp, dp], handler)
                if mine_err and theirs_err:
                    verdict = "refused alike"
                elif mine_err:
                    verdict = "kv refuses"
                elif theirs_err:
                    verdict = "sglang refuses"
                else:
                    verdict = "same" if mine == theirs else "differ"
                counts[verdict] += 1
                out = {"config": name, "gpu": gpu, "tp": tp, "dp": dp, "verdict": verdict}
                if verdict == "same":
                    out |= {k: mine[k] for k in ("mem_fraction_static", "weight_bytes", "tokens",
                                                  "swa_tokens", "max_running_requests")}
                elif verdict == "differ":
                    out["kv"] = {k: v for k, v in mine.items() if v != theirs.get(k)}
                    out["sglang"] = {k: theirs[k] for k in out["kv"]}
                else:
                    out["kv"] = (mine_err or "sized")[-240:]
                    out["sglang"] = theirs_err or "sized"
                print(json.dumps(out), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
