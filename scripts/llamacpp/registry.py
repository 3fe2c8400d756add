"""llama.cpp's architecture registry as kv's test universe (issue #37).

For every `llm_arch` of llama.cpp 0c1e57098 (LLM_ARCH_NAMES in
src/llama-arch.cpp) that creates a memory in `llama_model::create_memory`:
writes a header-only GGUF twin (fixture.py: the metadata llama.cpp's own
tests/test-llama-archs.cpp gives it), runs llama.cpp on it (cache_lines.py
--no-weights) and `kv estimate --engine llama.cpp --format json` at a few
context settings, compares the lines to the character, and writes
docs/coverage/llamacpp.tsv (format: docs/coverage/README.md), one row per
Hugging Face class that convert_hf_to_gguf.py registers for the arch.
Run by hand, never by CI (it needs the venv of README.md and the source).

    /work/.venv-llamacpp/bin/python scripts/llamacpp/registry.py SRC [--kv PATH]
        [--work DIR] [--only ARCH,...] [--out TSV]

SRC is llama.cpp's source at 0c1e57098 (vendor/llama.cpp of the
llama-cpp-python 0.3.36 sdist). Prints one row per arch and the counts.
"""
import argparse
import ast
import datetime
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = sys.executable
COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"

# (n_ctx, n_seq, type_k, type_v, flags for cache_lines.py)
CONFIGS = [
    (4096, 2, "f16", "f16", ["--flash-attn", "on"]),
    (1000, 3, "q8_0", "f16", ["--flash-attn", "off"]),
    (0, 1, "q4_0", "q4_0", ["--flash-attn", "on", "--kv-unified"]),
]

# Not run: llama.cpp has no text model for them to load.
NOT_MODELS = {
    "clip": "the vision/audio encoder of mtmd (mmproj files), never loaded as a text model",
}
# LLM_ARCH_UNKNOWN's name: no architecture at all, so no row.
NOT_ARCHS = {"(unknown)"}


def arch_names(src):
    text = open(f"{src}/src/llama-arch.cpp").read()
    block = text[text.index("LLM_ARCH_NAMES"):text.index("LLM_KV_NAMES")]
    return dict(re.findall(r'\{\s*(LLM_ARCH_\w+),\s*"([^"]+)"\s*\}', block))


def no_memory(src):
    """The archs create_memory gives no memory (res = nullptr)."""
    text = open(f"{src}/src/llama-model.cpp").read()
    body = text[text.index("llama_model::create_memory"):]
    head = body[:body.index("res = nullptr;")]
    head = head[head.index("switch (arch)"):]
    return re.findall(r"case (LLM_ARCH_\w+):", head)


def hf_classes(src):
    """gguf MODEL_ARCH name -> HF class names registered for it (text models)."""
    consts = open(f"{src}/gguf-py/gguf/constants.py").read()
    enum_to_name = dict(re.findall(r'MODEL_ARCH\.(\w+):\s*"([^"]+)"', consts))
    out = {}
    for path in sorted(glob.glob(f"{src}/conversion/*.py")) + [f"{src}/convert_hf_to_gguf.py"]:
        tree = ast.parse(open(path).read())
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            names = []
            for d in node.decorator_list:
                if (isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)
                        and d.func.attr == "register"):
                    names += [a.value for a in d.args if isinstance(a, ast.Constant)]
            arch = None
            for st in node.body:
                if (isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None
                        and isinstance(st.value, ast.Attribute)
                        and ast.unparse(st.value).startswith("gguf.MODEL_ARCH.")):
                    targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                    if any(getattr(t, "id", "") == "model_arch" for t in targets):
                        arch = st.value.attr
            if not names or arch is None or arch == "MMPROJ":
                continue
            name = enum_to_name.get(arch)
            if name:
                out.setdefault(name, set()).update(names)
    return out


def kv_args(n_ctx, n_seq, tk, tv, flags):
    out = ["--ctx-size", str(n_ctx), "--parallel", str(n_seq),
           "--cache-type-k", tk, "--cache-type-v", tv]
    it = iter(flags)
    for f in it:
        if f == "--flash-attn":
            out += ["--flash-attn", next(it)]
        else:
            out.append(f)
    return out


def run_arch(arch, path, kv):
    """(status, detail) for one arch's twin."""
    matched_lines = total_lines = 0
    diffs, refusals, kv_refused = [], 0, None
    for n_ctx, n_seq, tk, tv, flags in CONFIGS:
        try:
            real = subprocess.run(
                [PY, os.path.join(HERE, "cache_lines.py"), path, str(n_ctx), str(n_seq), tk, tv,
                 "--no-weights"] + flags, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return "not-covered", "not run: llama.cpp did not make the context within 120 s"
        out = [l for l in real.stdout.splitlines() if l.startswith(("llama_", "operator(): ", "#"))]
        theirs = [l for l in out if not l.startswith("#")]
        if not out or not out[-1].startswith("# context"):
            errs = real.stderr.strip().splitlines()
            loading = [l for l in errs if "error loading model" in l]
            why = ((loading or errs or ["(no message)"])[-1]).strip()
            # An assert names the build's own path: keep it from src/ on.
            why = re.sub(r"\S*/vendor/llama\.cpp/", "", why)[:200]
            if "unsupported model architecture" in why:
                return "cannot-build", f"llama.cpp has no loader for it ({why})"
            if not theirs:
                return "not-covered", (f"not run: llama.cpp did not load the test-llama-archs "
                                       f"fixture ({why})")
        refused = out[-1] == "# context: refused" if out else True
        # A draft head (eagle3, dflash, gemma4-assistant): llama.cpp makes its
        # context only beside a target model's.
        if refused and any("requires ctx_other to be set" in l for l in theirs):
            return "cannot-build", ("llama.cpp makes its context only beside a target "
                                    "model's (" + theirs[-1].strip()[:160] + ")")
        k = subprocess.run([kv, "estimate", "--engine", "llama.cpp", path, "--format", "json"]
                           + kv_args(n_ctx, n_seq, tk, tv, flags), capture_output=True, text=True)
        if k.returncode != 0 and "kv does not know llama.cpp's cache rules" in k.stderr:
            kv_refused = "kv refuses the architecture by name (no rules for it)"
        label = f"n_ctx={n_ctx} n_seq={n_seq} {tk}/{tv} {' '.join(flags)}"
        if refused:
            refusals += 1
            m = sum(1 for l in theirs if k.returncode != 0 and l in k.stderr)
            ok = m == len(theirs) and k.returncode != 0
        else:
            ours = json.loads(k.stdout)[0]["lines"] if k.returncode == 0 else []
            m = sum(1 for x, y in zip(theirs, ours) if x == y)
            ok = k.returncode == 0 and m == len(theirs) and len(ours) == len(theirs)
        matched_lines += m
        total_lines += len(theirs)
        if not ok:
            diffs.append(label)
    if kv_refused:
        return "not-covered", f"{kv_refused}; llama.cpp made {total_lines} lines"
    if diffs:
        return "not-covered", (f"{matched_lines}/{total_lines} lines matched; differs at "
                               + "; ".join(diffs))
    if refusals == len(CONFIGS):
        return "refused-alike", f"llama.cpp refuses all {len(CONFIGS)} contexts and kv alike"
    return "exact", (f"{matched_lines}/{total_lines} lines equal over {len(CONFIGS)} contexts "
                     f"({'; '.join(' '.join(map(str, c[:4])) for c in CONFIGS)})")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("--kv", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "kv"))
    p.add_argument("--work", default="/tmp/kv-llamacpp-registry")
    p.add_argument("--only", default="")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "coverage", "llamacpp.tsv"))
    a = p.parse_args()
    sys.path.insert(0, HERE)
    import fixture

    os.makedirs(a.work, exist_ok=True)
    names = arch_names(a.src)
    excluded = {names[e] for e in no_memory(a.src)}
    classes = hf_classes(a.src)
    today = datetime.date.today().isoformat()
    only = set(filter(None, a.only.split(",")))
    rows, counts = [], {}
    for enum, arch in sorted(names.items(), key=lambda kv: kv[1]):
        if arch in excluded or arch in NOT_ARCHS or (only and arch not in only):
            continue
        if arch in NOT_MODELS:
            status, detail, checked = "cannot-build", NOT_MODELS[arch], today
        else:
            path = os.path.join(a.work, arch + ".gguf")
            fixture.write(a.src, path, arch, fixture.moe_for(arch))
            status, detail = run_arch(arch, path, a.kv)
            checked = "-" if detail.startswith("not run") else today
        detail = f"llm_arch {arch}: {detail}"
        counts[status] = counts.get(status, 0) + 1
        print(f"{status:14} {arch:18} {detail}", flush=True)
        for hf in sorted(classes.get(arch, [])) or [f"llama.cpp:{arch}"]:
            rows.append((hf, status, checked, detail))
    if only:
        return
    with open(a.out, "w") as f:
        f.write(f"# llama.cpp {COMMIT} (llama-cpp-python 0.3.36): scripts/llamacpp/registry.py "
                f"on {today}; one row per HF class convert_hf_to_gguf.py registers\n")
        f.write("# excluded, create_memory gives them no memory (encoder-only, embedding or "
                "diffusion models): " + ", ".join(sorted(excluded)) + "\n")
        f.write("# twins: header-only GGUFs of tests/test-llama-archs.cpp's fixture "
                "(scripts/llamacpp/fixture.py), loaded by llama_model_init_from_user\n")
        f.write("architecture\tstatus\tchecked\tdetail\n")
        for row in sorted(rows):
            f.write("\t".join(row) + "\n")
    print("archs:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


if __name__ == "__main__":
    main()
