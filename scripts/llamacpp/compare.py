"""Compare kv's llama.cpp lines with llama.cpp's own, to the character.

For each GGUF (written by tiny_gguf.py into WORKDIR) and each context
setting, runs the real llama.cpp (cache_lines.py, llama-cpp-python 0.3.36)
and `kv estimate --engine llama.cpp --format json`, and compares the lines
one by one. Where llama.cpp refuses the context, each of its lines must
appear in kv's error message and kv must fail. Not run by CI.

    /work/.venv-llamacpp/bin/python scripts/llamacpp/compare.py [WORKDIR] [--kv PATH]

Prints one row per case (lines matched / llama.cpp's lines) and a total;
exits 1 if any line differs.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = sys.executable

# name -> tiny_gguf.py arguments (real cache geometry; tiny weights).
MODELS = {
    # Llama-3-8B: 32 layers, 8 KV heads of 128.
    "llama3-8b": ["--arch", "llama", "--layers", "32", "--kv-heads", "8", "--ctx", "8192"],
    # Per-layer KV heads (OpenELM-style), written as an array.
    "perlayer": ["--arch", "llama", "--layers", "16", "--ctx", "4096",
                 "--kv-heads", "8,8,8,8,4,4,4,4,2,2,2,2,1,1,1,1"],
    # A head of 80 (not whole q8_0 blocks per head? 80 % 32 = 16) and 96.
    "head80": ["--arch", "llama", "--layers", "8", "--kv-heads", "4", "--head-dim", "80",
               "--heads", "8", "--ctx", "4096"],
    "head96": ["--arch", "llama", "--layers", "8", "--kv-heads", "4", "--head-dim", "96",
               "--heads", "8", "--ctx", "4096"],
    # Gemma-3-27B: 62 layers, 16 KV heads of 128, window 1024, one global in 6.
    "gemma3-27b": ["--arch", "gemma3", "--layers", "62", "--kv-heads", "16", "--heads", "32",
                   "--swa", "1024", "--swa-pattern", "6", "--ctx", "8192"],
    # The pattern as a bool array: layers 2, 5, 6 and 11 full.
    "gemma3-array": ["--arch", "gemma3", "--layers", "12", "--kv-heads", "4", "--heads", "8",
                     "--swa", "512", "--ctx", "8192",
                     "--swa-pattern", "1,1,0,1,1,0,0,1,1,1,1,0"],
    # Pattern 0: every layer slides, the full cache is empty.
    "gemma3-allswa": ["--arch", "gemma3", "--layers", "6", "--kv-heads", "4", "--heads", "8",
                      "--swa", "512", "--swa-pattern", "0", "--ctx", "4096"],
    # gemma3 without a window: every layer full.
    "gemma3-nowindow": ["--arch", "gemma3", "--layers", "6", "--kv-heads", "4", "--heads", "8",
                        "--ctx", "8192"],
    # Gemma-2-9B: 42 layers, 8 KV heads of 256, window 4096 by default, 1 in 2.
    "gemma2-9b": ["--arch", "gemma2", "--layers", "42", "--kv-heads", "8", "--heads", "16",
                  "--head-dim", "256", "--ctx", "8192"],
    # Command-R7B-like cohere2: 8 KV heads of 128, window 4096 required, 1 in 4.
    "cohere2": ["--arch", "cohere2", "--layers", "12", "--heads", "8", "--kv-heads", "8",
                "--n-embd", "1024", "--swa", "4096", "--ctx", "16384"],
    # olmo2 with a window (1 in 4), and without one (every layer full).
    "olmo2": ["--arch", "olmo2", "--layers", "12", "--heads", "8", "--kv-heads", "4",
              "--n-embd", "1024", "--swa", "4096", "--ctx", "8192"],
    "olmo2-nowindow": ["--arch", "olmo2", "--layers", "4", "--heads", "8", "--kv-heads", "4",
                       "--n-embd", "1024", "--ctx", "8192"],
    # phi3 with a window, which llama.cpp drops.
    "phi3": ["--arch", "phi3", "--layers", "8", "--heads", "8", "--kv-heads", "8",
             "--n-embd", "1024", "--swa", "2047", "--ctx", "4096"],
    # Mamba (d_inner = 2 x n_embd) and Mamba2 (grouped).
    "mamba": ["--arch", "mamba", "--layers", "24", "--n-embd", "256", "--d-state", "16",
              "--d-conv", "4"],
    "mamba2": ["--arch", "mamba2", "--layers", "8", "--n-embd", "256", "--d-state", "128",
               "--groups", "1"],
}

# (model, n_ctx, n_seq, type_k, type_v, flags)
CASES = [
    ("llama3-8b", 8192, 1, "q8_0", "q8_0", []),
    ("llama3-8b", 5000, 3, "f16", "f16", []),
    ("llama3-8b", 5000, 3, "f16", "f16", ["--kv-unified"]),
    ("llama3-8b", 0, 1, "f16", "f16", []),
    ("llama3-8b", 4000, 4, "q4_0", "q4_0", []),
    ("llama3-8b", 4096, 2, "q4_1", "q5_0", []),
    ("llama3-8b", 4096, 1, "q5_1", "iq4_nl", []),
    ("llama3-8b", 3000, 1, "bf16", "bf16", []),
    ("llama3-8b", 2048, 1, "f32", "f32", []),
    ("llama3-8b", 4096, 1, "q8_0", "f16", ["--flash-attn", "off"]),
    ("llama3-8b", 4096, 1, "f16", "q8_0", ["--flash-attn", "off"]),
    ("llama3-8b", 4096, 1, "f16", "q8_0", ["--flash-attn", "auto"]),
    ("llama3-8b", 4096, 1, "f16", "f16", ["--flash-attn", "auto"]),
    ("llama3-8b", 4096, 300, "f16", "f16", []),
    ("llama3-8b", 1000, 7, "f16", "f16", []),
    ("llama3-8b", 1000, 7, "q8_0", "q8_0", ["--kv-unified"]),
    ("perlayer", 4096, 1, "f16", "f16", []),
    ("perlayer", 4096, 1, "f16", "f16", ["--flash-attn", "off"]),
    ("perlayer", 0, 2, "q8_0", "q8_0", []),
    ("head80", 4096, 1, "q8_0", "q8_0", []),
    ("head80", 4096, 1, "q8_0", "f16", ["--flash-attn", "off"]),
    ("head96", 4096, 1, "q8_0", "q8_0", []),
    ("head96", 4096, 1, "q4_0", "q4_0", []),
    ("gemma3-27b", 8192, 2, "f16", "f16", []),
    ("gemma3-27b", 8192, 2, "f16", "f16", ["--kv-unified"]),
    ("gemma3-27b", 8192, 2, "f16", "f16", ["--swa-full"]),
    ("gemma3-27b", 8192, 1, "q8_0", "q8_0", ["--ubatch", "1024"]),
    ("gemma3-27b", 1000, 1, "f16", "f16", []),
    ("gemma3-27b", 0, 4, "f16", "f16", ["--kv-unified", "--ubatch", "256"]),
    ("gemma3-27b", 600, 1, "f16", "f16", ["--batch", "300"]),
    ("gemma3-27b", 8192, 3, "q4_0", "f16", ["--flash-attn", "off"]),
    ("gemma3-array", 8192, 1, "f16", "f16", []),
    ("gemma3-array", 8192, 4, "f16", "f16", ["--kv-unified", "--swa-full"]),
    ("gemma3-allswa", 4096, 1, "q8_0", "q8_0", []),
    ("gemma3-nowindow", 4096, 1, "f16", "f16", []),
    ("gemma2-9b", 8192, 1, "f16", "f16", []),
    ("gemma2-9b", 16384, 2, "q8_0", "q8_0", ["--kv-unified"]),
    ("gemma2-9b", 4096, 1, "f16", "f16", ["--swa-full", "--flash-attn", "off"]),
    ("cohere2", 16384, 2, "f16", "f16", []),
    ("cohere2", 16384, 2, "f16", "f16", ["--kv-unified"]),
    ("cohere2", 8192, 1, "q8_0", "q8_0", ["--swa-full"]),
    ("cohere2", 0, 3, "q5_0", "q5_0", ["--ubatch", "128"]),
    ("olmo2", 8192, 1, "f16", "f16", []),
    ("olmo2", 8192, 3, "bf16", "bf16", ["--kv-unified"]),
    ("olmo2-nowindow", 8192, 1, "f16", "f16", []),
    ("phi3", 4096, 1, "f16", "f16", []),
    ("phi3", 4096, 2, "q4_1", "q4_1", ["--flash-attn", "auto"]),
    ("mamba", 4096, 1, "f16", "f16", []),
    ("mamba", 4096, 8, "f16", "f16", []),
    ("mamba", 4096, 3, "q8_0", "q8_0", []),
    ("mamba", 4096, 2, "f16", "q8_0", ["--flash-attn", "off"]),
    ("mamba2", 4096, 2, "f16", "f16", []),
    ("mamba2", 0, 5, "f16", "f16", ["--kv-unified"]),
]


def kv_args(n_ctx, n_seq, tk, tv, flags):
    out = ["--ctx-size", str(n_ctx), "--parallel", str(n_seq),
           "--cache-type-k", tk, "--cache-type-v", tv]
    it = iter(flags)
    fa = "on"  # cache_lines.py's default
    for f in it:
        if f == "--flash-attn":
            fa = next(it)
        elif f == "--ubatch":
            out += ["--ubatch-size", next(it)]
        elif f == "--batch":
            out += ["--batch-size", next(it)]
        else:
            out.append(f)
    return out + ["--flash-attn", fa]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("workdir", nargs="?", default="/tmp/kv-llamacpp-compare")
    p.add_argument("--kv", default=os.path.join(ROOT, "target", "debug", "kv"))
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    for name, args in MODELS.items():
        path = os.path.join(a.workdir, name + ".gguf")
        if not os.path.exists(path):
            subprocess.run([PY, os.path.join(HERE, "tiny_gguf.py"), path] + args, check=True)
    total_match = total_lines = failed = 0
    for model, n_ctx, n_seq, tk, tv, flags in CASES:
        path = os.path.join(a.workdir, model + ".gguf")
        real = subprocess.run(
            [PY, os.path.join(HERE, "cache_lines.py"), path, str(n_ctx), str(n_seq), tk, tv]
            + flags, capture_output=True, text=True)
        # ggml's abort backtrace (gdb) also writes to stdout: keep our lines.
        out = [l for l in real.stdout.splitlines() if l.startswith(("llama_", "#"))]
        aborted = real.returncode < 0
        refused = out and out[-1] == "# context: refused"
        theirs = [l for l in out if not l.startswith("#")]
        kv = subprocess.run([a.kv, "estimate", "--engine", "llama.cpp", path, "--format", "json"]
                            + kv_args(n_ctx, n_seq, tk, tv, flags), capture_output=True, text=True)
        if refused:
            matched = sum(1 for l in theirs if kv.returncode != 0 and l in kv.stderr)
            ours = [kv.stderr.strip()]
        else:
            ours = json.loads(kv.stdout)[0]["lines"] if kv.returncode == 0 else [kv.stderr.strip()]
            matched = sum(1 for x, y in zip(theirs, ours) if x == y)
        ok = matched == len(theirs) and (refused or len(ours) == len(theirs))
        total_match += matched
        total_lines += len(theirs)
        label = f"{model} n_ctx={n_ctx} n_seq={n_seq} {tk}/{tv} {' '.join(flags)}".strip()
        note = "(refused) " if refused else "(aborted after the cache) " if aborted else ""
        print(f"{'ok  ' if ok else 'DIFF'} {matched:2}/{len(theirs):2} {note}{label}")
        if not ok:
            failed += 1
            for x in theirs:
                print("   llama.cpp:", x)
            for y in ours:
                print("   kv:       ", y)
    print(f"{total_match}/{total_lines} lines matched; {len(CASES) - failed}/{len(CASES)} cases")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
