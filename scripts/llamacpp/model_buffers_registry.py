"""llama.cpp's model buffers against `kv fit --engine llama.cpp`, over its
registry (#38): for every architecture registry.py covers, the twin
(fixture.py) is built by llama.cpp itself (llama_model_init_from_user, one
CPU buffer, weights allocated), the tensors it creates are written as a GGUF
with data (zeros, llama.cpp's types and shapes, in its order), and that
file is loaded as users load one, mapped and allocated; each `load_tensors:
... model buffer size` line is compared with what `kv fit --engine
llama.cpp --n-gpu-layers 0` gives (CUDA_Host compared as CPU, as in
model_buffers.py); then each cache's `KV buffer size` / `RS buffer size`
line of a context at llama.cpp's defaults (n_ctx 0: the model's length).

    model_buffers_registry.py SRC [--kv target/debug/kv] [--work DIR] [--only A,B] [--mtp]

With --mtp, each twin has one MTP layer (`nextn_predict_layers` 1): llama.cpp
makes its tensors with `load_mtp` on, and the file is then loaded as users
load one, which skips them where the architecture's loader does.

Prints one row per architecture: `same`, `DIFF` (both lines), `kv-refuses`
(kv's reason) or `no-twin` (llama.cpp did not build or load it), then the
counts. About 5 minutes.
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = sys.executable

# ggml type id: (elements per block, bytes per block), the types a twin's
# tensors take.
BLOCK = {0: (1, 4), 1: (1, 2), 24: (1, 1), 25: (1, 2), 26: (1, 4), 30: (1, 2)}


def materialize(src, twin, out, mtp=False):
    """Builds `twin` in llama.cpp and writes the tensors it created to `out`
    (child process: llama.cpp may abort)."""
    sys.path.insert(0, HERE)
    import fixture
    import gguf
    import llama_cpp
    from cache_lines import GgufInitParams

    lib = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib",
                                   "libggml-base.so"))
    lib.ggml_get_name.restype = ctypes.c_char_p
    lib.ggml_get_name.argtypes = [ctypes.c_void_p]
    lib.gguf_init_from_file.restype = ctypes.c_void_p
    lib.gguf_init_from_file.argtypes = [ctypes.c_char_p, GgufInitParams]
    created = {}

    @llama_cpp.llama_model_set_tensor_data_t
    def record(tensor, _user):
        name = lib.ggml_get_name(tensor).decode()
        ty = ctypes.c_int32.from_address(tensor).value
        ne = list((ctypes.c_int64 * 4).from_address(tensor + 16))
        created.setdefault(name, (ty, ne))

    @ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
    def quiet(_level, _text, _user):
        pass

    llama_cpp.llama_log_set(quiet, None)
    llama_cpp.llama_backend_init()
    meta = lib.gguf_init_from_file(twin.encode(), GgufInitParams(True, None))
    mp = llama_cpp.llama_model_default_params()
    # With MTP layers, llama.cpp must create their tensors for the file to
    # hold them; loading the file, it skips them again (load_mtp off).
    mp.load_mtp = mtp
    m = llama_cpp.llama_model_init_from_user(meta, record, None, mp)
    if not m:
        sys.exit("llama.cpp did not build the twin")
    arch = gguf.GGUFReader(twin).fields["general.architecture"]
    arch = bytes(arch.parts[arch.data[0]]).decode()
    tensors = []
    layers = gguf.GGUFReader(twin).fields[f"{arch}.block_count"]
    last = f"blk.{int(layers.parts[layers.data[0]][0]) - 1}."
    for name, (ty, ne) in created.items():
        # An MTP layer's optional scales: llama.cpp asks for them only beside
        # weights it loads, so a file holding them with the weights skipped
        # is refused (wrong number of tensors); published files have none.
        if mtp and name.startswith(last) and name.endswith(("scale", "input_scale")):
            continue
        if ty not in BLOCK:
            sys.exit(f"tensor {name} has ggml type {ty}")
        per, size = BLOCK[ty]
        shape = [d for d in reversed(ne)]
        while len(shape) > 1 and shape[0] == 1:
            shape = shape[1:]
        shape[-1] = shape[-1] // per * size
        tensors.append((name, np.zeros(shape, dtype=np.uint8), gguf.GGMLQuantizationType(ty)))
    sets = ["{arch}.nextn_predict_layers=u32:1"] if mtp else []
    fixture.write(src, out, arch, fixture.moe_for(arch), sets, tensors=tensors)


def load(path, mapped):
    """llama.cpp's model buffer lines for `path` (child process)."""
    import llama_cpp
    lines = []

    @ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
    def log(_level, text, _user):
        lines.append(text.decode("utf-8", "replace"))

    llama_cpp.llama_log_set(log, None)
    llama_cpp.llama_backend_init()
    mp = llama_cpp.llama_model_default_params()
    mp.load_mode = llama_cpp.LLAMA_LOAD_MODE_AUTO if mapped else llama_cpp.LLAMA_LOAD_MODE_NONE
    m = llama_cpp.llama_model_load_from_file(path.encode(), mp)
    if not m:
        text = "".join(lines)
        print("failed: " + [l for l in text.split("\n") if l.strip()][-1])
        return
    def flush():
        for line in "".join(lines).split("\n"):
            if "buffer size" in line and ("model" in line or "KV" in line or "RS" in line
                                         or "DSV4" in line):
                print(line.strip(), flush=True)
        del lines[:]

    flush()
    cp = llama_cpp.llama_context_default_params()
    cp.n_ctx = 0  # the model's context_length, as llama-server's default
    c = llama_cpp.llama_init_from_model(m, cp)
    flush()
    print(f"# context: {'created' if c else 'refused'}")


def kv_lines(kv, path, mapped):
    cmd = [kv, "fit", "--engine", "llama.cpp", path, "--gpu-memory-mib", "81559",
           "--n-gpu-layers", "0", "--format", "json"]
    if not mapped:
        cmd += ["--load-mode", "none"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().split("\n")[-1]
    fit = json.loads(out.stdout)[0]
    model = [f"load_tensors: {('CPU' if b['name'] == 'CUDA_Host' else b['name']):>12} model "
             f"buffer size = {b['bytes'] / 1024.0 / 1024.0:8.2f} MiB".strip()
             for b in fit["model"]["buffers"]]
    return model + [l.strip() for l in fit["kv_lines"] if "buffer size" in l], None


def main():
    if sys.argv[1:2] == ["--materialize"]:
        return materialize(*sys.argv[2:5], mtp=sys.argv[5:6] == ["mtp"])
    if sys.argv[1:2] == ["--load"]:
        return load(sys.argv[2], sys.argv[3] == "mapped")
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("--kv", default=os.path.join(ROOT, "target", "debug", "kv"))
    p.add_argument("--work", default="/tmp/kv-llamacpp-buffers")
    p.add_argument("--only", default="")
    p.add_argument("--mtp", action="store_true",
                   help="twins with one MTP layer (nextn_predict_layers 1), made by llama.cpp "
                        "with load_mtp on, loaded as users load them (MTP skipped)")
    a = p.parse_args()
    sys.path.insert(0, HERE)
    import fixture
    import registry

    os.makedirs(a.work, exist_ok=True)
    names = registry.arch_names(a.src)
    excluded = {names[e] for e in registry.no_memory(a.src)}
    only = set(filter(None, a.only.split(",")))
    counts = {}
    for arch in sorted(names.values()):
        if arch in excluded or arch in registry.NOT_ARCHS or arch in registry.NOT_MODELS:
            continue
        if only and arch not in only:
            continue
        twin = os.path.join(a.work, arch + ".twin.gguf")
        real = os.path.join(a.work, arch + ".gguf")
        sets = ["{arch}.nextn_predict_layers=u32:1"] if a.mtp else []
        fixture.write(a.src, twin, arch, fixture.moe_for(arch), sets)
        made = subprocess.run([PY, __file__, "--materialize", a.src, twin, real]
                              + (["mtp"] if a.mtp else []),
                              capture_output=True, text=True, timeout=300)
        if made.returncode != 0:
            status, detail = "no-twin", (made.stderr.strip().split("\n") or [""])[-1][:160]
        else:
            status, detail = "same", ""
            for mapped in (True, False):
                mode = "mapped" if mapped else "allocated"
                theirs = subprocess.run([PY, __file__, "--load", real, mode],
                                        capture_output=True, text=True, timeout=300,
                                        env=dict(os.environ, GGML_NO_BACKTRACE="1"))
                theirs = theirs.stdout.strip().split("\n")
                if theirs and theirs[0].startswith("failed"):
                    status, detail = "no-twin", theirs[0][:160]
                    break
                made = theirs[-1:] == ["# context: created"]
                theirs = [l for l in theirs if not l.startswith("#")]
                ours, refused = kv_lines(a.kv, real, mapped)
                if refused:
                    status, detail = "kv-refuses", refused[:200]
                    break
                if not made:
                    # llama.cpp aborted or refused the context: its model
                    # buffers are still compared.
                    ours = [l for l in ours if "model buffer" in l]
                    detail += "(no context) "
                if ours != theirs:
                    status, detail = "DIFF", f"{mode}: llama.cpp {theirs} kv {ours}"
                    break
                detail += f"{mode}: {theirs} "
        counts[status] = counts.get(status, 0) + 1
        print(f"{status:10} {arch:18} {detail}", flush=True)
    print("# " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
