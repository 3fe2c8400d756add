"""Load a GGUF on the CPU and create a context; print llama.cpp's own cache
lines (info, warning and error level; debug lines and the device-specific
`... KV buffer size` / `RS buffer size` lines left out) on stdout.

    cache_lines.py MODEL.gguf N_CTX N_SEQ [TYPE_K [TYPE_V]] [--ubatch N]
        [--batch N] [--flash-attn on|off|auto] [--kv-unified] [--swa-full]

TYPE_K/TYPE_V: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (f16 by
default; TYPE_V defaults to TYPE_K). --flash-attn defaults to on.
"""
import argparse
import ctypes
import os
import sys

os.environ.setdefault("GGML_NO_BACKTRACE", "1")  # no gdb output on an abort
import llama_cpp  # noqa: E402

TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7,
         "q8_0": 8, "iq4_nl": 20, "bf16": 30}
FLASH = {"auto": -1, "off": 0, "on": 1}
PREFIXES = ("llama_kv_cache", "llama_memory_recurrent", "llama_init_from_model",
            "llama_memory_hybrid", "llama_dsv4_comp_state",
            # llama_memory_hybrid_idx logs its indexer cache from a lambda
            "operator(): creating indexer KV cache")
# ggml_log_level: DEBUG 1, INFO 2, WARN 3, ERROR 4, CONT 5. Lines are printed
# as they come: llama.cpp may abort after its caches are made (the per-layer
# test model's layer-0-shaped weights fail the graph's shape check).
pending, last_level = [""], [0]


def emit(line):
    if line.startswith(PREFIXES) and "buffer size" not in line and ": layer " not in line:
        print(line, flush=True)


@ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
def log(level, text, _user):
    text = text.decode("utf-8", "replace")
    if level != 5:
        last_level[0] = level
    if last_level[0] < 2:
        return
    if last_level[0] == 4 and not text.startswith(PREFIXES):
        # Why a load failed, for registry.py's detail.
        sys.stderr.write(text)
    pending[0] += text
    *done, pending[0] = pending[0].split("\n")
    for line in done:
        emit(line)


class GgufInitParams(ctypes.Structure):
    _fields_ = [("no_alloc", ctypes.c_bool), ("ctx", ctypes.c_void_p)]


@llama_cpp.llama_model_set_tensor_data_t
def no_data(_tensor, _user):
    pass


def from_header(path, mp):
    """A header-only GGUF (fixture.py): llama.cpp makes the tensors itself
    from the metadata (llama_model_init_from_user), none allocated."""
    lib = os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so")
    ggml = ctypes.CDLL(lib)
    ggml.gguf_init_from_file.restype = ctypes.c_void_p
    ggml.gguf_init_from_file.argtypes = [ctypes.c_char_p, GgufInitParams]
    meta = ggml.gguf_init_from_file(path.encode(), GgufInitParams(True, None))
    if not meta:
        return None
    mp.no_alloc = True
    return llama_cpp.llama_model_init_from_user(meta, no_data, None, mp)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("n_ctx", type=int)
    p.add_argument("n_seq", type=int)
    p.add_argument("type_k", nargs="?", default="f16")
    p.add_argument("type_v", nargs="?", default=None)
    p.add_argument("--ubatch", type=int, default=512)
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--flash-attn", default="on", choices=FLASH)
    p.add_argument("--kv-unified", action="store_true")
    p.add_argument("--swa-full", action="store_true")
    p.add_argument("--no-weights", action="store_true")
    a = p.parse_args()
    llama_cpp.llama_log_set(log, None)
    llama_cpp.llama_backend_init()
    mp = llama_cpp.llama_model_default_params()
    if a.no_weights:
        m = from_header(a.model, mp)
    else:
        m = llama_cpp.llama_model_load_from_file(a.model.encode(), mp)
    if not m:
        print("model failed to load", file=sys.stderr)
        sys.exit(2)
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx = a.n_ctx
    cp.n_seq_max = a.n_seq
    cp.n_batch = a.batch
    cp.n_ubatch = a.ubatch
    cp.type_k = TYPES[a.type_k]
    cp.type_v = TYPES[a.type_v or a.type_k]
    cp.flash_attn_type = FLASH[a.flash_attn]
    cp.kv_unified = a.kv_unified
    cp.swa_full = a.swa_full
    c = llama_cpp.llama_init_from_model(m, cp)
    if pending[0]:
        emit(pending[0])
    print(f"# context: {'created' if c else 'refused'}")


if __name__ == "__main__":
    main()
