"""SGLang 0.5.23's model registry as kv's test universe: every `EntryClass` of
`sglang/srt/models/*.py` (what `models/registry.py` registers), each sized by
SGLang's own configurator and built on the meta device (sglang_pools.py),
and by `kv estimate --engine sglang` (compare.py's kv_lines), compared line by
line. Writes docs/coverage/sglang.tsv (format: docs/coverage/README.md) and
registry-results.jsonl beside this script. Run by hand, never by CI:

    /work/.venv-sglang/bin/python scripts/sglang/registry.py [--kv PATH] [--only ARCH,...]

It runs in SGLang's environment because a config an architecture has no
shipped file for is made from its transformers config class's defaults.

Per architecture, the configs are (at most two) shipped ones whose
`architectures` name it (scripts/sglang/configs, examples/configs,
scripts/vllm/configs), else the transformers config class's defaults (the
class found through transformers' auto mappings), with `architectures` set to
the architecture; the cases are TP 1 at 40 GiB and at 7,777,777,777 B, and TP
2 at 40 GiB, the model built at TP 1 and TP 2.
"""

import argparse
import ast
import datetime
import glob
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import compare  # noqa: E402  (kv_lines: kv's side, as compare.py runs it)

GIB = 1 << 30
CASES = [(1, 40 * GIB, True), (1, 7_777_777_777, False), (2, 40 * GIB, True)]
# Seconds a case may take before the SGLang process is taken as hung (the
# first case also imports SGLang and its model modules).
CASE_TIMEOUT = 240
SHIPPED = ["scripts/sglang/configs/*.json", "examples/configs/*/config.json", "scripts/vllm/configs/*.json"]


def registry():
    """{architecture: module file} for every EntryClass of models/*.py, read
    from the source (as registry.py's import_model_classes walks the
    package's modules, packages excluded), so a module that does not import
    on this machine is still in the universe."""
    import sglang.srt.models as models

    out = {}
    for path in sorted(glob.glob(os.path.join(models.__path__[0], "*.py"))):
        tree = ast.parse(open(path).read())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets
            ):
                value = node.value
                for element in value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]:
                    out[ast.unparse(element)] = os.path.basename(path)
    return out


def shipped_configs():
    """{architecture: [paths]} of the shipped configs, in SHIPPED's order."""
    out = {}
    for pattern in SHIPPED:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            try:
                archs = json.load(open(path)).get("architectures") or []
            except (OSError, ValueError):
                continue
            for arch in archs:
                out.setdefault(arch, []).append(path)
    return out


def transformers_default(arch):
    """The transformers config class's defaults for `arch`, found through the
    auto mappings (class name -> model_type -> config class), or why not."""
    import transformers.models.auto.modeling_auto as auto
    from transformers import CONFIG_MAPPING

    for name, mapping in vars(auto).items():
        if not name.endswith("_MAPPING_NAMES") or not isinstance(mapping, dict):
            continue
        for model_type, classes in mapping.items():
            if arch in ((classes,) if isinstance(classes, str) else tuple(classes)):
                try:
                    config = CONFIG_MAPPING[model_type]().to_dict()
                except Exception as error:
                    return None, f"transformers' {model_type} config class fails with defaults: {error}"
                config["architectures"] = [arch]
                return config, f"transformers {type(CONFIG_MAPPING[model_type]()).__name__} defaults"
    return annotated_default(arch)


_HOPPER = False


def annotated_default(arch):
    """The defaults of the config class the SGLang model class's `config`
    parameter names (`def __init__(self, config: LlamaConfig, ...)`), where
    it names one more specific than PretrainedConfig, or why not."""
    import inspect

    from transformers import PretrainedConfig

    global _HOPPER
    if not _HOPPER:
        import sglang_pools

        sglang_pools._as_hopper()  # some model modules ask the platform on import
        _HOPPER = True
    from sglang.srt.models.registry import ModelRegistry

    cls = ModelRegistry.models.get(arch)
    base = f"no shipped config names it, transformers 5.19 maps no model_type to {arch}"
    if cls is None:
        return None, f"{base}, and its module does not import on this machine"
    param = inspect.signature(cls.__init__).parameters.get("config")
    annotation = param.annotation if param is not None else None
    if isinstance(annotation, str):
        try:
            annotation = eval(annotation, vars(sys.modules[cls.__module__]))
        except Exception:
            annotation = None
    if not (isinstance(annotation, type) and issubclass(annotation, PretrainedConfig)
            and annotation is not PretrainedConfig):
        return None, f"{base}, and its class's `config` names no config class"
    try:
        config = annotation().to_dict()
    except Exception as error:
        return None, f"{base}; its class's {annotation.__name__} fails with defaults: {words(str(error), 100)}"
    config["architectures"] = [arch]
    return config, f"{annotation.__name__} defaults (the class's config annotation)"


def configs_for(arch, shipped, workdir):
    """[(label, path)] of the configs to run, or ([], reason)."""
    paths = shipped.get(arch, [])[:2]
    if paths:
        out = []
        for path in paths:
            config = json.load(open(path))
            # SGLang builds the class its config names first: name this one.
            config["architectures"] = [arch]
            copy = os.path.join(workdir, f"{arch}--{os.path.basename(os.path.dirname(path)) if path.endswith('config.json') else os.path.basename(path)[:-5]}.json")
            json.dump(config, open(copy, "w"))
            out.append((os.path.relpath(path, ROOT), copy))
        return out, None
    config, source = transformers_default(arch)
    if config is None:
        return [], source
    copy = os.path.join(workdir, f"{arch}--defaults.json")
    json.dump(config, open(copy, "w"), default=str)
    return [(source, copy)], None


def run_sglang(cases):
    """sglang_pools.py over the cases, restarted after a case that hangs or
    kills the process (that case gets "harness": why)."""
    results = []
    while len(results) < len(cases):
        rest = cases[len(results):]
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(rest, f)
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "sglang_pools.py"), f.name],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        lines = queue.Queue()
        threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout] + [lines.put(None)], daemon=True).start()
        got = 0
        while got < len(rest):
            try:
                line = lines.get(timeout=CASE_TIMEOUT)
            except queue.Empty:
                proc.kill()
                results.append(dict(rest[got], harness=f"no answer in {CASE_TIMEOUT} s"))
                break
            if line is None:
                results.append(dict(rest[got], harness=f"sglang_pools.py exited ({proc.wait()})"))
                break
            if line.startswith("{"):
                results.append(json.loads(line))
                got += 1
                print(f"  sglang {len(results)}/{len(cases)}", file=sys.stderr, flush=True)
        proc.wait()
        os.unlink(f.name)
    return results


# What the build raised, as SGLang refusing the config (an assertion or
# a ValueError in its model code), or as this harness not reaching the end
# of the build (no GPU, a kernel module absent, a key the config lacks).
HARNESS_LIMIT = re.compile(r"NVIDIA|CUDA|cuda|driver|No module named|cannot import|meta|Meta|_C\b|triton|cutlass")


def build_verdict(sg):
    """('refused', why) / ('built', what) / ('not built', why) / (None, None)."""
    if sg.get("built"):
        return "built", sg["built"]
    error = sg.get("build_error")
    if not error:
        return None, None
    where = sg.get("build_where") or "?"
    kind = error.split(":")[0]
    # The registry names no class where the model's module failed to import
    # here (a CUDA-only kernel import): not SGLang refusing the config. Every
    # architecture run is an EntryClass, so the loader's "has no SGlang
    # implementation" for one says the same (Mamba's module needs
    # causal_conv1d_fn, which this machine's build lacks).
    if (
        where.startswith("srt/models/registry.py")
        or "are not supported for now" in error
        or "has no SGlang implementation" in error
    ):
        return "not built", f"its module does not import on this machine ({where}: {error[:100]})"
    if kind in ("AssertionError", "ValueError") and not HARNESS_LIMIT.search(error):
        return "refused", f"{where}: {error[:160]}"
    return "not built", f"{where}: {error[:160]}"


def words(text, n=140):
    return " ".join((text or "").split())[:n]


def judge(case, sg, kv_sized, kv_error):
    """One case: (verdict, detail). Verdicts: match, refused-both,
    cannot-build, differs."""
    if "harness" in sg:
        return "differs", f"not run: {sg['harness']}"
    build, build_why = build_verdict(sg)
    if sg.get("error") and sg.get("stage") in ("server_args", "model_config"):
        return "cannot-build", f"SGLang cannot read the config ({sg['stage']}): {words(sg['error'])}"
    # A Python error while sizing is SGLang failing on a key the config
    # lacks, not a refusal it words.
    if sg.get("error", "").split(":")[0] in ("AttributeError", "TypeError", "KeyError", "IndexError"):
        return "cannot-build", (
            f"SGLang fails on the config while sizing: {words(sg['error'])} "
            f"(kv: {'sizes it' if kv_sized else words(kv_error, 100)})"
        )
    refusal = None
    if sg.get("load_refusal"):
        refusal = f"its loader refuses: {words(sg['load_refusal'])}"
    elif sg.get("error"):
        refusal = f"its configurator refuses: {words(sg['error'])}"
    elif build == "refused":
        refusal = f"its model refuses at build: {build_why}"
    if refusal:
        if kv_sized is None:
            return "refused-both", f"SGLang: {refusal}; kv: {words(kv_error, 160)}"
        return "differs", f"SGLang refuses ({refusal}); kv sizes it"
    if kv_sized is None:
        return "differs", f"kv refuses ({words(kv_error, 200)}); SGLang sizes it"
    pools = kv_sized["pools"]
    diffs = []
    swa = pools.get("swa")
    full_tokens = pools["full"]["tokens"]
    # An all-SWA pool's full pool has 0 tokens, not "unset".
    theirs_full = sg.get("full_max_total_num_tokens")
    if theirs_full is None:
        theirs_full = sg.get("max_total_num_tokens")
    if full_tokens != theirs_full:
        diffs.append(f"full tokens kv {full_tokens} SGLang {theirs_full}")
    if (swa or {}).get("tokens") != sg.get("swa_max_total_num_tokens"):
        diffs.append(f"SWA tokens kv {(swa or {}).get('tokens')} SGLang {sg.get('swa_max_total_num_tokens')}")
    if (pools.get("mamba") or {}).get("slots") != sg.get("max_mamba_cache_size"):
        diffs.append(f"state slots kv {(pools.get('mamba') or {}).get('slots')} SGLang {sg.get('max_mamba_cache_size')}")
    if pools["max_running_requests"] != sg["max_running_requests"]:
        diffs.append(f"max_running_requests kv {pools['max_running_requests']} SGLang {sg['max_running_requests']}")
    ours, theirs = kv_sized["lines"], sg["lines"]
    if ours != theirs:
        pair = next(((a, b) for a, b in zip(ours, theirs) if a != b), None)
        if pair:
            diffs.append(f"line kv '{words(pair[0], 110)}' SGLang '{words(pair[1], 110)}'")
        else:
            diffs.append(f"{len(ours)} lines kv, {len(theirs)} SGLang")
    if diffs:
        return "differs", "; ".join(diffs)
    quantities = 2 + len(ours) + (swa is not None) + (pools.get("mamba") is not None)
    return "match", f"{quantities} quantities"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--kv", default=os.environ.get("KV", os.path.join(ROOT, "target/debug/kv")))
    parser.add_argument("--only", help="comma-separated architectures (a partial run: the other rows are kept)")
    args = parser.parse_args()
    universe = registry()
    if args.only:
        universe = {a: m for a, m in universe.items() if a in args.only.split(",")}
    shipped = shipped_configs()
    workdir = tempfile.mkdtemp(prefix="sglang-registry-")
    plan, cases = {}, []
    for arch in sorted(universe):
        configs, reason = configs_for(arch, shipped, workdir)
        plan[arch] = {"configs": configs, "reason": reason, "cases": []}
        for source, path in configs:
            for tp, budget, build in CASES:
                plan[arch]["cases"].append(len(cases))
                cases.append({
                    "arch": arch, "source": source, "config": path, "budget": budget,
                    "tp": tp, "dp": 1, "kv_cache_dtype": "auto", "build": build,
                })
    print(f"{len(universe)} architectures, {len(cases)} cases", file=sys.stderr, flush=True)
    theirs = run_sglang(cases)
    today = datetime.date.today().isoformat()
    rows, results = [], []
    for arch in sorted(universe):
        entry = plan[arch]
        if not entry["configs"]:
            rows.append((arch, "cannot-build", today, f"no config to build from: {entry['reason']} ({universe[arch]})"))
            continue
        verdicts, builds = [], []
        for i in entry["cases"]:
            case, sg = cases[i], theirs[i]
            kv_sized, kv_error = compare.kv_lines(args.kv, case)
            # kv names the file it read, a temporary copy: drop it.
            kv_error = kv_error and kv_error.replace(f"kv: {case['config']}: ", "")
            verdict, detail = judge(case, sg, kv_sized, kv_error)
            label = f"{case['source']} tp{case['tp']} {case['budget']}"
            verdicts.append((verdict, label, detail))
            if case["build"]:
                builds.append(build_verdict(sg))
            results.append({"arch": arch, "case": label, "verdict": verdict, "detail": detail,
                            "sglang": sg, "kv": kv_sized, "kv_error": kv_error})
        rows.append((arch, *status(verdicts, builds, today, entry["configs"])))
        print(f"{rows[-1][1]:14} {arch}: {rows[-1][3][:200]}", file=sys.stderr, flush=True)
    results_path = os.path.join(HERE, "registry-results.jsonl")
    tsv_path = os.path.join(ROOT, "docs/coverage/sglang.tsv")
    if args.only:
        # A partial run keeps the committed rows and results of the
        # architectures it did not run.
        for row in rows:
            print("\t".join(row))
        rows = sorted(kept_rows(tsv_path, set(universe)) + rows)
        results = kept_results(results_path, set(universe)) + results
    with open(results_path, "w") as f:
        for row in results:
            f.write(json.dumps(row) + "\n")
    counts = {}
    for row in rows:
        counts[row[1]] = counts.get(row[1], 0) + 1
    print(json.dumps(counts), file=sys.stderr)
    with open(tsv_path, "w") as f:
        f.write(f"# sglang 0.5.23: its model registry (every EntryClass of sglang/srt/models/*.py), "
                f"{len(rows)} architectures; written by scripts/sglang/registry.py on {today}\n")
        f.write("# cases per config: TP 1 at 40 GiB and 7,777,777,777 B, TP 2 at 40 GiB (emulated H100, "
                "page size 1, kv dtype auto); the model class built on the meta device at TP 1 and 2\n")
        f.write("# " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "\n")
        f.write("architecture\tstatus\tchecked\tdetail\n")
        for row in rows:
            f.write("\t".join(x.replace("\t", " ").replace("\n", " ") for x in row) + "\n")


def kept_rows(path, ran):
    """The TSV's rows of the architectures not in `ran`."""
    with open(path) as f:
        lines = [line.rstrip("\n") for line in f if not line.startswith("#")]
    rows = [tuple(line.split("\t", 3)) for line in lines[1:] if line]
    return [row for row in rows if row[0] not in ran]


def kept_results(path, ran):
    """registry-results.jsonl's entries of the architectures not in `ran`."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    return [entry for entry in entries if entry["arch"] not in ran]


def status(verdicts, builds, today, configs):
    """The row's status and detail from its cases' verdicts and builds."""
    n = len(verdicts)
    by = {}
    for verdict, label, detail in verdicts:
        by.setdefault(verdict, []).append((label, detail))
    sources = ", ".join(source for source, _ in configs)
    if "cannot-build" in by and len(by["cannot-build"]) == n:
        return "cannot-build", today, f"{sources}: {by['cannot-build'][0][1]}"
    if "differs" in by or "cannot-build" in by:
        bad = by.get("differs", []) + by.get("cannot-build", [])
        return "not-covered", today, (
            f"{n - len(bad)}/{n} cases agree on {sources}; " + "; ".join(f"{l}: {d}" for l, d in bad[:2])
        )[:900]
    if "match" in by:
        refused = by.get("refused-both", [])
        detail = f"{len(by['match'])}/{n} cases equal on {sources}, {by['match'][0][1]} each"
        if refused:
            detail += f"; {len(refused)} refused by both ({refused[0][0]}: {refused[0][1]})"
        built = sum(b == "built" for b, _ in builds)
        detail += f"; model built on meta in {built}/{len(builds)} builds"
        unfinished = [why for b, why in builds if b == "not built"]
        if unfinished:
            detail += f" (not completed here: {unfinished[0][:150]})"
        return "exact", today, detail[:900]
    return "refused-alike", today, f"{n}/{n} cases refused by both on {sources}: {by['refused-both'][0][1]}"[:900]


if __name__ == "__main__":
    main()
