#!/usr/bin/env python3
"""Compile-time cost of #[derive(ModelLocalKv)] (issue #6). Run via bench/compile.sh.

Measures, interleaving the two sides in every round (A B, then B A, ...):
  clean        `cargo check` of the generated crate alone: its artifacts and
               incremental cache removed with `cargo clean -p`, every dependency
               (kv-core, kv-derive, syn, ...) already built in the shared
               target dir, so only the 200-struct crate is compiled (the
               derive side includes loading and running the macro).
  incremental  `cargo check` after one module file (1/10 of the structs) is
               edited: the body of `edit_marker()` in src/m03.rs changes.
  no-op        `cargo check` with nothing changed: cargo's own overhead, the
               floor under both figures above.
  deps         clean `cargo build` of kv-derive vs thiserror-impl, each with its
               own syn (the crate, syn, quote, proc-macro2, unicode-ident, build
               scripts), each in a fresh target dir.
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.environ.get("KV_BENCH_DIR", os.path.join(ROOT, "target", "kv-compile-bench"))
TARGET = os.path.join(WORK, "target")
CLEAN_ROUNDS = int(os.environ.get("KV_BENCH_CLEAN_ROUNDS", "7"))
INCR_ROUNDS = int(os.environ.get("KV_BENCH_INCR_ROUNDS", "7"))
DEPS_ROUNDS = int(os.environ.get("KV_BENCH_DEPS_ROUNDS", "3"))
STRUCTS = os.environ.get("KV_BENCH_STRUCTS", "200")
THISERROR_IMPL = os.environ.get("KV_BENCH_THISERROR_IMPL", "=2.0.21")
SIDES = ["derive", "hand"]


def run(args, cwd, env=None, check=True):
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if check and result.returncode != 0:
        sys.exit(f"failed: {' '.join(args)} in {cwd}\n{result.stdout}{result.stderr}")
    return result


# KV_BENCH_CLOCK=cpu: seconds of CPU (user + system) the command and its
# children (cargo, rustc, the proc macro) used, instead of wall-clock time.
# Other load on the machine then moves the figures far less, since a process
# waiting for a core is not charged; caches shared with that load still are.
CLOCK = os.environ.get("KV_BENCH_CLOCK", "wall")
if CLOCK not in ("wall", "cpu"):
    sys.exit(f"KV_BENCH_CLOCK is {CLOCK!r}: use wall or cpu")


def timed(args, cwd, env):
    if CLOCK == "cpu":
        before = os.times()
        run(args, cwd, env)
        after = os.times()
        return (after.children_user - before.children_user) + (
            after.children_system - before.children_system
        )
    start = time.perf_counter()
    run(args, cwd, env)
    return time.perf_counter() - start


def cargo_env(target):
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    env.pop("RUSTFLAGS", None)
    return env


def crate_dir(side):
    return os.path.join(WORK, side)


def interleaved(rounds, measure):
    """measure(side, round) -> seconds; sides alternate order every round."""
    samples = {side: [] for side in SIDES}
    for r in range(rounds):
        order = SIDES if r % 2 == 0 else SIDES[::-1]
        for side in order:
            samples[side].append(measure(side, r))
    return samples


def report(title, samples, names=("derive", "hand"), label=("derive", "hand-written")):
    a, b = samples[names[0]], samples[names[1]]
    ma, mb = statistics.median(a), statistics.median(b)
    ratios = [x / y for x, y in zip(a, b)]
    fmt = lambda xs: " ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    print(f"\n{title}")
    print(f"  {label[0]:<14} median {ma:7.3f} s   samples: {fmt(a)}")
    print(f"  {label[1]:<14} median {mb:7.3f} s   samples: {fmt(b)}")
    print(
        f"  ratio {label[0]}/{label[1]}: {ma / mb:.3f} (ratio of medians), "
        f"{statistics.median(ratios):.3f} (median of per-round ratios)"
    )
    return ma, mb


def compile_bench():
    env = cargo_env(TARGET)
    run([sys.executable, os.path.join(ROOT, "bench", "gen_compile.py"), WORK,
         os.path.join(ROOT, "kv-core"), os.path.join(ROOT, "Cargo.lock"), STRUCTS], ROOT)
    check = ["cargo", "check", "--offline", "-q"]
    # Build the shared dependencies once (and prove both crates compile).
    for side in SIDES:
        run(["cargo", "check", "--offline"], crate_dir(side), env)
        res = run(["cargo", "check", "--offline", "--message-format=short"], crate_dir(side), env)
        if "warning" in res.stderr:
            sys.exit(f"{side} crate has warnings:\n{res.stderr}")
    if os.environ.get("KV_BENCH_VERIFY", "1") != "0":
        # In a target dir of its own: its `registry` feature and bootstrap
        # flag would otherwise change the shared dependencies' fingerprints,
        # and the first timed clean sample would rebuild every one of them.
        expand_env = cargo_env(os.path.join(WORK, "target-expand"))
        expanded = {}
        for side in SIDES:
            # With kv-core's `registry` feature `__kv_register!(T)` expands to an
            # item (it is empty otherwise, and a missing call would go unseen).
            out = run(["cargo", "rustc", "--offline", "--profile", "check", "-q", "--features", "registry",
                       "--", "-Zunpretty=expanded"],
                      crate_dir(side), dict(expand_env, RUSTC_BOOTSTRAP="1"))
            expanded[side] = os.path.join(WORK, f"expanded-{side}.rs")
            with open(expanded[side], "w") as f:
                f.write(out.stdout)
        res = run([sys.executable, os.path.join(ROOT, "bench", "compare_expanded.py"),
                   expanded["derive"], expanded["hand"]], ROOT, check=False)
        print("hand-written crate vs derive expansion:", res.stdout.strip())
        if res.returncode != 0:
            sys.exit("the hand-written crate is not what the derive generates; fix bench/gen_compile.py")

    def clean(side, _):
        run(["cargo", "clean", "--offline", "-q", "-p", f"kv-compile-{side}"], crate_dir(side), env)
        return timed(check, crate_dir(side), env)

    def noop(side, _):
        return timed(check, crate_dir(side), env)

    def incremental(side, r):
        path = os.path.join(crate_dir(side), "src", "m03.rs")
        with open(path) as f:
            text = f.read()
        text = re.sub(r"(pub fn edit_marker\(\) -> u32 \{\n    )\d+", lambda m: f"{m.group(1)}{r + 1}", text, count=1)
        with open(path, "w") as f:
            f.write(text)
        return timed(check, crate_dir(side), env)

    print(f"\n{STRUCTS} structs; clock: {CLOCK}; rounds: clean {CLEAN_ROUNDS}, incremental {INCR_ROUNDS}; order alternates each round")
    results = {"clean": report("clean `cargo check` of the generated crate (deps prebuilt)",
                               interleaved(CLEAN_ROUNDS, clean))}
    for side in SIDES:  # leave both built with an incremental cache
        run(check, crate_dir(side), env)
    results["incremental"] = report("incremental `cargo check` after editing one of 10 module files",
                                    interleaved(INCR_ROUNDS, incremental))
    results["noop"] = report("no-op `cargo check` (cargo overhead, nothing to compile)",
                             interleaved(INCR_ROUNDS, noop))
    return results


def deps_bench():
    dirs = {}
    for name, dep in [("kv-derive", f'kv-derive = {{ path = "{os.path.join(ROOT, "kv-derive")}" }}'),
                      ("thiserror-impl", f'thiserror-impl = "{THISERROR_IMPL}"')]:
        d = os.path.join(WORK, "deps", name)
        os.makedirs(os.path.join(d, "src"), exist_ok=True)
        with open(os.path.join(d, "Cargo.toml"), "w") as f:
            f.write(f'[package]\nname = "uses-{name}"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
                    f"[dependencies]\n{dep}\n\n[workspace]\n")
        with open(os.path.join(d, "src", "lib.rs"), "w") as f:
            f.write("")
        if name == "kv-derive":
            shutil.copy(os.path.join(ROOT, "Cargo.lock"), os.path.join(d, "Cargo.lock"))
        if run(["cargo", "generate-lockfile", "--offline"], d, check=False).returncode != 0:
            run(["cargo", "generate-lockfile"], d)
        dirs[name] = d
    for name, d in dirs.items():
        tree = run(["cargo", "tree", "--offline", "-e", "normal", "-p", name, "--prefix", "none", "-f", "{p} {f}"],
                   d).stdout
        syn = [line for line in tree.splitlines() if line.startswith("syn ")]
        print(f"  {name}: {sorted(set(syn))[0] if syn else 'no syn'}")

    def build(side, _):
        target = os.path.join(WORK, "deps", f"target-{side}")
        shutil.rmtree(target, ignore_errors=True)
        return timed(["cargo", "build", "--offline", "-q", "-p", side], dirs[side], cargo_env(target))

    global SIDES
    SIDES = ["kv-derive", "thiserror-impl"]
    samples = interleaved(DEPS_ROUNDS, build)
    SIDES = ["derive", "hand"]
    return report(f"clean `cargo build` of the proc-macro crate with its syn ({DEPS_ROUNDS} rounds)",
                  samples, names=("kv-derive", "thiserror-impl"), label=("kv-derive", "thiserror-impl"))


def main():
    what = sys.argv[1:] or ["compile", "deps"]
    print(f"nproc {os.cpu_count()}; {run(['rustc', '-V'], ROOT).stdout.strip()}")
    if "compile" in what:
        compile_bench()
    if "deps" in what:
        print("\nsyn used by each proc-macro crate (features):")
        deps_bench()


if __name__ == "__main__":
    main()
