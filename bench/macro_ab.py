#!/usr/bin/env python3
"""The derive's own running time, two builds side by side (issue #27).

Usage: macro_ab.py BEFORE_TREE AFTER_TREE [PAIRS] [ROUNDS]
       macro_ab.py --instructions BEFORE_TREE AFTER_TREE

Each tree is a checkout of this repository with kv-derive's `cost.rs`
(`macro_cost`, an ignored test). Both test binaries are built (test profile,
opt-level 0, as rustc runs a proc macro in a dev build), then run alternately,
PAIRS times (before, after, then after, before, ...), each expanding every
input ROUNDS times and reporting its fastest round (the least disturbed by
other processes on a shared machine). Inputs: the bench's 200
structs (bench/gen_compile.py, written under the after tree's target/) and the
after tree's ui cases, examples and tests. Prints each pair's ratio
after/before, the median of those, and the medians of each side.

With --instructions, each binary instead runs under valgrind's callgrind with
0 and 2 rounds, and the instructions of one round (half the difference) are
compared: a count that load from other processes does not change.
"""

import os
import re
import statistics
import subprocess
import sys

args = sys.argv[1:]
instructions = args[:1] == ["--instructions"]
if instructions:
    args = args[1:]
before, after = args[0], args[1]
pairs = int(args[2]) if len(args) > 2 else 9
rounds = args[3] if len(args) > 3 else "15"

gen = os.path.join(after, "target", "kv-macro-ab")
subprocess.run(
    [sys.executable, os.path.join(after, "bench", "gen_compile.py"), gen,
     os.path.join(after, "kv-core"), os.path.join(after, "Cargo.lock"), "200"],
    check=True, stdout=subprocess.DEVNULL)
inputs = ":".join([os.path.join(gen, "derive", "src")] + [
    os.path.join(after, d) for d in ("kv-core/tests", "examples", "tests")])

sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True,
                         text=True, check=True).stdout.strip()
env = dict(os.environ, KV_MACRO_INPUTS=inputs, KV_MACRO_ROUNDS=rounds,
           CARGO_BUILD_JOBS=os.environ.get("CARGO_BUILD_JOBS", "1"))
# A proc macro's test binary links libstd dynamically.
env["LD_LIBRARY_PATH"] = os.path.join(sysroot, "lib", "rustlib",
                                      "x86_64-unknown-linux-gnu", "lib")


def build(tree):
    out = subprocess.run(["cargo", "test", "-p", "kv-derive", "--lib", "--no-run"],
                         cwd=tree, env=env, capture_output=True, text=True)
    found = re.search(r"\((target/debug/deps/kv_derive-[0-9a-f]+)\)", out.stderr)
    if out.returncode != 0 or not found:
        sys.exit(f"build failed in {tree}:\n{out.stderr[-2000:]}")
    return os.path.join(tree, found.group(1))


def run(binary):
    out = subprocess.run([binary, "macro_cost", "--ignored", "--nocapture"],
                         env=env, capture_output=True, text=True, check=True).stdout
    return int(re.search(r"round_ns (\d+)", out).group(1)) / 1e6


def instructions_per_round(binary):
    counts = []
    for n in ("0", "2"):
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", binary,
             "macro_cost", "--ignored", "--test-threads=1"],
            env=dict(env, KV_MACRO_ROUNDS=n), capture_output=True, text=True, check=True)
        counts.append(int(re.search(r"Collected : (\d+)", out.stderr).group(1)))
    return (counts[1] - counts[0]) / 2


binaries = {"before": build(before), "after": build(after)}
if instructions:
    per_round = {side: instructions_per_round(b) for side, b in binaries.items()}
    print(f"instructions per round: before {per_round['before'] / 1e6:.1f} M, "
          f"after {per_round['after'] / 1e6:.1f} M, "
          f"ratio {per_round['after'] / per_round['before']:.3f}")
    sys.exit(0)
times = {"before": [], "after": []}
for i in range(pairs):
    order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
    for side in order:
        times[side].append(run(binaries[side]))
    print(f"pair {i + 1}: before {times['before'][-1]:.1f} ms, "
          f"after {times['after'][-1]:.1f} ms, "
          f"ratio {times['after'][-1] / times['before'][-1]:.3f}", flush=True)
ratios = [a / b for a, b in zip(times["after"], times["before"])]
print(f"median round: before {statistics.median(times['before']):.1f} ms, "
      f"after {statistics.median(times['after']):.1f} ms; "
      f"ratio of medians {statistics.median(times['after']) / statistics.median(times['before']):.3f}, "
      f"median of pair ratios {statistics.median(ratios):.3f}")
