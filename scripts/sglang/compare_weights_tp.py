"""`kv fit --engine sglang --tp N`'s weights per rank against SGLang 0.5.23's
own model built on the meta device at rank 0 of N (loaded_buffers.py's
`measure`), for every shipped config of the classes kv shards, at TP 1, 2,
4 and 8, and any configs given; with --dp D, under DP attention (attention
over tp / D ranks). Not run by CI.

    cargo build -p kv-cli
    /work/.venv-sglang/bin/python scripts/sglang/compare_weights_tp.py --kv $CARGO_TARGET_DIR/debug/kv [CONFIG.json...]

The checkpoint beside each config is scripts/vllm/compare_fit.py's (the
tensors a Hugging Face checkpoint of the class stores, sparse). Compared:
the parameters' bytes (SGLang's) with `fit.loaded.tensor_bytes` (kv's).
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
import compare_fit  # noqa: E402  (scripts/vllm: the checkpoint writer)
import loaded_buffers  # noqa: E402
import sglang_pools as sp  # noqa: E402


def kv_tensor_bytes(kv, folder, tp, dp=1):
    p = subprocess.run([kv, "fit", os.path.join(folder, "config.json"), "--engine", "sglang",
                        "--gpu", "B200", "--avail-mem-gb", "170", "--mem-fraction-static", "0.9",
                        "--tp", str(tp), "--dp", str(dp), "--format", "json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, (p.stderr.strip().splitlines() or ["?"])[-1][-200:]
    return json.loads(p.stdout)[0]["fit"]["loaded"]["tensor_bytes"], None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kv", required=True)
    ap.add_argument("--tp", type=int, nargs="*", default=[1, 2, 4, 8])
    ap.add_argument("--dp", type=int, default=1, help="DP attention size (each TP a multiple)")
    ap.add_argument("configs", nargs="*")
    a = ap.parse_args()
    sp._as_hopper()
    paths = a.configs or sorted(set(glob.glob(os.path.join(ROOT, "scripts/*/configs/*.json"))
                                    + glob.glob(os.path.join(ROOT, "examples/configs/*.json"))))
    counts = {"same": 0, "differ": 0, "refused alike": 0, "one refuses": 0}
    for path in paths:
        c = json.load(open(path))
        if (c.get("architectures") or [None])[0] not in compare_fit.CLASSES:
            continue
        folder = tempfile.mkdtemp()
        try:
            compare_fit.write_checkpoint(path, folder)
        except KeyError as e:
            print(json.dumps({"config": path, "skipped": f"no {e}"}))
            continue
        for tp in a.tp:
            k, k_err = kv_tensor_bytes(a.kv, folder, tp, a.dp)
            m = loaded_buffers.measure(os.path.join(folder, "config.json"), tp, a.dp)
            s = sum(m["param_bytes"].values()) if "param_bytes" in m else None
            s_err = m.get("error")
            if k_err and s_err:
                verdict = "refused alike"
            elif k_err or s_err:
                verdict = "one refuses"
            else:
                verdict = "same" if k == s else "differ"
            counts[verdict] += 1
            print(json.dumps({"config": os.path.basename(path), "tp": tp, "dp": a.dp,
                              "verdict": verdict,
                              "kv": k or k_err, "sglang": s or s_err}), flush=True)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
