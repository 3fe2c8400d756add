"""`kv fit --engine sglang`'s default mem_fraction_static against SGLang
0.5.23's own (mem_fraction.py's resolution), over every shipped config and
a set of GPUs. Not run by CI.

    cargo build -p kv-cli
    /work/.venv-sglang/bin/python scripts/sglang/compare_fit.py --kv $CARGO_TARGET_DIR/debug/kv

Each config gets a folder with a one-tensor safetensors file beside it (the
weights do not move the fraction). A config kv refuses a default for (its
message on stderr) counts as refused; SGLang's figure is printed beside it.
"""

import argparse
import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mem_fraction  # noqa: E402

GPUS = {"H100": 81559, "L4": 23034, "A100-40GB": 40960, "B200": 183359}


def tiny_weights(folder):
    header = json.dumps({"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}).encode()
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + b"\0\0")


def kv_default(kv, folder, gpu):
    out = subprocess.run(
        [kv, "fit", folder, "--engine", "sglang", "--gpu", gpu, "--avail-mem-gb", "10",
         "--format", "json"],
        capture_output=True, text=True,
    )
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1][-160:] if out.stderr.strip() else "?"
    fit = json.loads(out.stdout)[0]["fit"]
    return fit["mem_fraction_static"], None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kv", required=True)
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    configs = sorted(
        glob.glob(os.path.join(root, "examples/configs/*/config.json"))
        + glob.glob(os.path.join(root, "scripts/sglang/configs/*.json"))
        + glob.glob(os.path.join(root, "scripts/vllm/configs/*.json"))
    )
    mem_fraction.sglang_pools._as_hopper()
    import sglang.srt.utils

    sglang.srt.utils.is_cuda.cache_clear()
    counts = {"exact": 0, "differ": 0, "kv refuses": 0, "sglang error": 0}
    for config in configs:
        name = os.path.relpath(config, root)
        tmp = tempfile.mkdtemp()
        try:
            folder = os.path.join(tmp, "model")
            os.makedirs(folder)
            shutil.copy(config, os.path.join(folder, "config.json"))
            tiny_weights(folder)
            for gpu, mib in GPUS.items():
                theirs = mem_fraction.run_case({"config": config, "gpu_mib": mib})
                ours, refusal = kv_default(args.kv, folder, gpu)
                if "error" in theirs:
                    verdict = "sglang error"
                elif refusal is not None:
                    verdict = "kv refuses"
                elif ours == theirs["mem_fraction_static"]:
                    verdict = "exact"
                else:
                    verdict = "differ"
                counts[verdict] += 1
                if verdict != "exact":
                    print(json.dumps({"config": name, "gpu": gpu, "verdict": verdict, "kv": ours,
                                      "kv_refusal": refusal, "sglang": theirs}), flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
