#!/usr/bin/env bash
# Mutation testing with cargo-mutants: inject a bug, check some test fails.
# Not run in CI (hours on 2 cores); see BENCHMARKS.md, "Mutation score".
#
#   scripts/mutants.sh CRATE [SHARD] [-- EXTRA cargo-mutants ARGS]
#   scripts/mutants.sh kv-core 0/2        # the first of two shards (k counts from 0) of kv-core's mutants
#   scripts/mutants.sh kv-derive          # all of kv-derive's mutants
#   scripts/mutants.sh kv-core -- -f kv-core/src/planner.rs   # one file
#
# Each crate is tested by the tests that really exercise it:
# - kv-core: its own tests with every feature its code has (json, fresh,
#   chart, registry), the compile-fail (trybuild) suite included, since the
#   const checks are only observable there, and the examples' tests, which
#   compare the committed docs page and chart with what kv-core renders, and
#   kv-engines' tests, whose estimates read configs through kv-core's
#   HfConfig;
# - kv-derive: kv-core's, the examples' and the workspace tests' suites (the
#   derive's behaviour is what the crates using it observe), the trybuild
#   suite included; its own unit and fuzz tests run too;
# - kv-engines: its own tests and the `kv` command's, which print its lines;
# - kv-candle: its own tests.
#
# kv-core and kv-derive run in two passes, because the trybuild suite is the
# slow one (it re-checks every compile-fail case against the mutated crates):
#   1. every mutant against the fast suites (everything but trybuild);
#   2. `--iterate` on the same output: only what pass 1 missed (or timed out)
#      runs again, against the trybuild suite alone.
# A mutant is caught when some test fails; which pass failed it does not
# change that. Pass 1's outcome is kept in OUT/pass1.
#
# Results: mutants-out/CRATE[-shard-k-of-n]/mutants.out (caught.txt,
# missed.txt, unviable.txt, timeout.txt); the last lines printed are the
# counts of both passes together.
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

# `profile.mutants` (workspace Cargo.toml): the test profile without debug
# info, so the many test binaries each mutant rebuilds link faster.
common=(--profile mutants "${shard[@]}" -o "$out")
skip_trybuild=(-- --skip compile_errors)

# Pass 2 lists only its own outcomes (its previously_caught.txt lumps pass 1's
# caught and unviable together, so it is not used).
union() { cat "$@" 2>/dev/null | sort -u | grep -c . || true; }

# Pass 2 re-runs pass 1's timeouts against the trybuild suite only; one that
# does not fail there is still a timeout (of a fast suite), not a miss.
summary() {
    local one="$out/pass1" two="$out/mutants.out" timed_out
    timed_out=$(sort -u "$one/timeout.txt" 2>/dev/null || true)
    echo "caught:   $(union "$one/caught.txt" "$two/caught.txt")"
    echo "missed:   $(cat "$two/missed.txt" 2>/dev/null | sort -u | grep -cvxF -e "${timed_out:-@none@}" || true)"
    echo "timeout:  $( (cat "$two/timeout.txt"; grep -xF -e "${timed_out:-@none@}" "$two/missed.txt") 2>/dev/null | sort -u | grep -c . || true)"
    echo "unviable: $(union "$one/unviable.txt" "$two/unviable.txt")"
}

two_passes() {
    # cargo-mutants exits 2 when some mutant was missed: not a failure here.
    cargo mutants "${common[@]}" "$@" "${pass1_tests[@]}" || [[ $? -eq 2 ]]
    rm -rf "$out/pass1"
    cp -r "$out/mutants.out" "$out/pass1"
    if [[ -s "$out/pass1/missed.txt" || -s "$out/pass1/timeout.txt" ]]; then
        cargo mutants "${common[@]}" --iterate "$@" "${pass2_tests[@]}" || [[ $? -eq 2 ]]
    fi
    summary
}

case "$crate" in
    kv-core)
        features=(--features json,fresh,chart,registry)
        # kv-examples' tests compare the committed docs (page, table, chart)
        # with what kv-core renders now: the only check of the chart's pixels.
        # kv-engines' estimates exercise the config reader.
        # (cargo-mutants takes one --test-package; others are cargo's -p.)
        pass1_tests=(--test-package kv-core "${features[@]}"
            -- -p kv-examples -p kv-engines --lib --tests "${skip_trybuild[@]}")
        pass2_tests=(--test-package kv-core "${features[@]}" -- --test ui)
        two_passes -p kv-core "$@"
        ;;
    kv-derive)
        # cargo-mutants tests only the mutated package; the crates that use
        # the derive are named after `--`.
        # config_fuzz exercises kv-core's config reader, not the derive, and
        # is the slowest fast suite: skipped here.
        pass1_tests=(-- -p kv-core -p kv-examples -p kv-tests --tests "${skip_trybuild[@]}"
            --skip arbitrary_json_gives --skip modern_readers_)
        pass2_tests=(-- -p kv-core --test ui)
        two_passes -p kv-derive "$@"
        ;;
    kv-engines)
        cargo mutants -p kv-engines --test-package kv-engines "${common[@]}" "$@" \
            -- -p kv-cli --tests || [[ $? -eq 2 ]]
        ;;
    kv-candle)
        cargo mutants -p kv-candle --test-package kv-candle "${common[@]}" "$@" \
            -- --lib --tests || [[ $? -eq 2 ]]
        ;;
    *)
        echo "unknown crate \`$crate\`: kv-core, kv-derive, kv-engines or kv-candle" >&2
        exit 2
        ;;
esac
