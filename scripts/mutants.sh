#!/usr/bin/env bash
# Mutation testing with cargo-mutants: inject a bug, check some test fails.
# Not run in CI (hours on 2 cores); see BENCHMARKS.md, "Mutation score".
#
#   scripts/mutants.sh CRATE [SHARD] [-- EXTRA cargo-mutants ARGS]
#   scripts/mutants.sh kv-core 1/4        # one of four shards of kv-core's mutants
#   scripts/mutants.sh kv-derive          # all of kv-derive's mutants
#   scripts/mutants.sh kv-core -- -f kv-core/src/planner.rs   # one file
#
# Each crate is tested by the tests that really exercise it:
# - kv-core: its own tests with every feature its code has (json, fresh,
#   chart, registry), the compile-fail (trybuild) suite included, since the
#   const checks are only observable there;
# - kv-derive: the whole workspace (kv-core's ui suite and the examples run
#   the derive; its own fuzz tests only prove it never panics);
# - kv-candle: its own tests.
# Shards split the mutants evenly; with 4 shards for kv-core and 6 for
# kv-derive each fits in about an hour on a 2-core machine. Results go to
# mutants-out/CRATE[-shard-k-of-n]/mutants.out (caught.txt, missed.txt, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

crate="${1:?usage: scripts/mutants.sh CRATE [k/n] [-- args]}"
shift
shard=()
out="mutants-out/$crate"
if [[ $# -gt 0 && "$1" != "--" ]]; then
    shard=(--shard "$1")
    out="$out-shard-${1/\//-of-}"
    shift
fi
[[ "${1:-}" == "--" ]] && shift

command -v cargo-mutants >/dev/null || {
    echo "cargo-mutants is not installed: cargo install cargo-mutants --locked" >&2
    exit 2
}

case "$crate" in
    kv-core)
        exec cargo mutants -p kv-core --test-package kv-core \
            --features json,fresh,chart,registry "${shard[@]}" -o "$out" "$@" \
            -- --lib --tests
        ;;
    kv-derive)
        # cargo-mutants tests only the mutated package; the derive's behaviour
        # is observed through the crates that use it, named after `--`.
        exec cargo mutants -p kv-derive "${shard[@]}" -o "$out" "$@" \
            -- -p kv-core -p kv-examples -p kv-tests --tests
        ;;
    kv-candle)
        exec cargo mutants -p kv-candle --test-package kv-candle "${shard[@]}" -o "$out" "$@" \
            -- --lib --tests
        ;;
    *)
        echo "unknown crate \`$crate\`: kv-core, kv-derive or kv-candle" >&2
        exit 2
        ;;
esac
