#!/usr/bin/env bash
# Compile-time cost of #[derive(ModelLocalKv)] vs the same impls written by hand,
# and kv-derive's clean build vs thiserror-impl's (issue #6). See BENCHMARKS.md.
#
#   bench/compile.sh              # everything (about 5 minutes on 2 cores)
#   bench/compile.sh compile      # only the generated-crate comparison
#   bench/compile.sh deps         # only kv-derive vs thiserror-impl
#
# Knobs (environment): KV_BENCH_CLEAN_ROUNDS=7 KV_BENCH_INCR_ROUNDS=7
# KV_BENCH_DEPS_ROUNDS=3 KV_BENCH_STRUCTS=200 KV_BENCH_VERIFY=1
# KV_BENCH_DIR=target/kv-compile-bench KV_BENCH_CLOCK=wall (cpu: user+system
# seconds of cargo and rustc, less moved by other load) KV_BENCH_MACRO_OPT=0 (1: both generated
# crates build proc macros with opt-level 3). Needs python3 and cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/compile_bench.py "$@"
