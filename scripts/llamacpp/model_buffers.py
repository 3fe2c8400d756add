"""llama.cpp's model buffers against `kv fit --engine llama.cpp` (#38).

Writes GGUF files with real (zero) data for the architectures kv places
(llama, qwen2, qwen3): tied and untied outputs, rope_freqs, weight types
llama.cpp's CPU backend does not repack, tensors whose sizes are not
multiples of 32. Loads each with llama-cpp-python (a CPU build: every
tensor on the host), with and without mmap, and compares each
`load_tensors: ... model buffer size = X MiB` line it logs with the bytes
`kv fit --engine llama.cpp --n-gpu-layers 0 --format json` gives, printed
the same way; then the `llama_kv_cache: CPU KV buffer size` line of a
context of 4096 cells (llama.cpp's other defaults) against kv's. A CPU build names its allocated host buffer `CPU` where a
CUDA build beside a GPU names it `CUDA_Host`: same type of allocation
(ggml's 32-byte TENSOR_ALIGNMENT), compared under either name.

    model_buffers.py [--kv target/debug/kv] [--work DIR]

Prints one row per case and the count; exit 1 on any difference.
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
import llama_cpp

T = gguf.GGMLQuantizationType
# ggml type: (elements per block, bytes per block)
BLOCK = {T.F32: (1, 4), T.F16: (1, 2), T.BF16: (1, 2), T.Q4_1: (32, 20),
         T.Q5_0: (32, 22), T.Q5_1: (32, 24), T.Q3_K: (256, 110),
         T.IQ4_XS: (256, 136)}
VOCAB = 40

lines = []


@ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
def log(_level, text, _user):
    lines.append(text.decode("utf-8", "replace"))


def add(w, name, ne, ty):
    """A zero tensor of ggml shape `ne` (innermost first) and type `ty`."""
    per, size = BLOCK[ty]
    assert ne[0] % per == 0, (name, ne, ty)
    outer = list(reversed(ne[1:]))
    if ty in (T.F32, T.F16):
        dtype = np.float32 if ty == T.F32 else np.float16
        w.add_tensor(name, np.zeros(outer + [ne[0]], dtype=dtype))
        return
    # gguf-py takes raw bytes as rows of bytes and works the shape out.
    data = np.zeros(outer + [ne[0] // per * size], dtype=np.uint8)
    w.add_tensor(name, data, raw_dtype=ty)


def write(path, arch, layers, n_embd, head_dim, ty, tied, rope_freqs):
    heads = n_embd // head_dim
    kv_heads = max(1, heads // 2)
    ff = 3 * n_embd
    w = gguf.GGUFWriter(path, arch)
    w.add_block_count(layers)
    w.add_context_length(4096)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"t{i}" for i in range(VOCAB)])
    w.add_token_scores([0.0] * VOCAB)
    w.add_token_types([1] * VOCAB)
    add(w, "token_embd.weight", [n_embd, VOCAB], ty)
    if rope_freqs:
        add(w, "rope_freqs.weight", [head_dim // 2], T.F32)
    for i in range(layers):
        b = f"blk.{i}."
        add(w, b + "attn_norm.weight", [n_embd], T.F32)
        add(w, b + "attn_q.weight", [n_embd, heads * head_dim], ty)
        add(w, b + "attn_k.weight", [n_embd, kv_heads * head_dim], ty)
        add(w, b + "attn_v.weight", [n_embd, kv_heads * head_dim], ty)
        if arch == "qwen2":
            add(w, b + "attn_q.bias", [heads * head_dim], T.F32)
            add(w, b + "attn_k.bias", [kv_heads * head_dim], T.F32)
            add(w, b + "attn_v.bias", [kv_heads * head_dim], T.F32)
        if arch == "qwen3":
            add(w, b + "attn_q_norm.weight", [head_dim], T.F32)
            add(w, b + "attn_k_norm.weight", [head_dim], T.F32)
        add(w, b + "attn_output.weight", [heads * head_dim, n_embd], ty)
        add(w, b + "ffn_norm.weight", [n_embd], T.F32)
        add(w, b + "ffn_gate.weight", [n_embd, ff], ty)
        add(w, b + "ffn_up.weight", [n_embd, ff], ty)
        add(w, b + "ffn_down.weight", [ff, n_embd], ty)
    add(w, "output_norm.weight", [n_embd], T.F32)
    if not tied:
        add(w, "output.weight", [n_embd, VOCAB], ty)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama_buffers(path, mmap):
    del lines[:]
    mp = llama_cpp.llama_model_default_params()
    mp.load_mode = llama_cpp.LLAMA_LOAD_MODE_AUTO if mmap else llama_cpp.LLAMA_LOAD_MODE_NONE
    m = llama_cpp.llama_model_load_from_file(path.encode(), mp)
    if not m:
        return ["model failed to load: " + "".join(lines)[-300:]]
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx = 4096
    c = llama_cpp.llama_init_from_model(m, cp)
    if c:
        llama_cpp.llama_free(c)
    llama_cpp.llama_model_free(m)
    text = "".join(lines)
    return [l.strip() for l in text.split("\n")
            if "model buffer size" in l or "KV buffer size" in l]


def kv_buffers(kv, path, mmap):
    cmd = [kv, "fit", "--engine", "llama.cpp", path, "--gpu-memory-mib", "81559",
           "--n-gpu-layers", "0", "--ctx-size", "4096", "--format", "json"]
    if not mmap:
        cmd += ["--load-mode", "none"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return ["kv refused: " + out.stderr.strip()]
    fit = json.loads(out.stdout)[0]
    model = [f"load_tensors: {('CPU' if b['name'] == 'CUDA_Host' else b['name']):>12} model "
             f"buffer size = {b['bytes'] / 1024.0 / 1024.0:8.2f} MiB".strip()
             for b in fit["model"]["buffers"]]
    return model + [l.strip() for l in fit["kv_lines"] if "KV buffer size" in l]


CASES = [
    # arch, layers, n_embd, head_dim, type, tied, rope_freqs
    ("llama", 4, 256, 64, T.F16, False, False),
    ("llama", 4, 256, 64, T.F16, True, False),
    ("llama", 300, 64, 32, T.F32, True, True),
    ("llama", 6, 1024, 128, T.BF16, True, True),
    ("llama", 40, 96, 32, T.Q5_0, False, True),
    ("llama", 40, 96, 32, T.Q5_0, True, True),
    ("llama", 200, 32, 32, T.Q4_1, True, False),
    ("llama", 8, 512, 64, T.Q3_K, True, False),
    ("llama", 8, 512, 64, T.IQ4_XS, False, False),
    ("qwen2", 5, 256, 64, T.F16, True, False),
    ("qwen2", 120, 64, 32, T.Q5_1, True, False),
    ("qwen3", 5, 512, 128, T.BF16, False, False),
    ("qwen3", 150, 64, 32, T.Q5_0, True, False),
]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kv", default="target/debug/kv")
    p.add_argument("--work", default=None)
    a = p.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="kv-model-buffers-")
    llama_cpp.llama_log_set(log, None)
    llama_cpp.llama_backend_init()
    same = total = 0
    for case in CASES:
        arch, layers, n_embd, head_dim, ty, tied, rope = case
        name = f"{arch}-{layers}x{n_embd}-{ty.name.lower()}{'-tied' if tied else ''}" \
               f"{'-rope' if rope else ''}"
        path = os.path.join(work, name + ".gguf")
        write(path, arch, layers, n_embd, head_dim, ty, tied, rope)
        for mmap in (True, False):
            total += 1
            ours, theirs = kv_buffers(a.kv, path, mmap), llama_buffers(path, mmap)
            ok = ours == theirs
            same += ok
            print(f"{'same' if ok else 'DIFF'}\t{name}\tmmap={mmap}\t{theirs}"
                  + ("" if ok else f"\tkv {ours}"))
    print(f"# {same}/{total} cases equal")
    sys.exit(0 if same == total else 1)


if __name__ == "__main__":
    main()
