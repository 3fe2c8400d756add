#!/usr/bin/env bash
# Long fuzz run of #[derive(ModelLocalKv)]: the property tests of
# kv-derive/src/fuzz/ in release mode, a million cases or more.
#
#   scripts/fuzz-derive.sh            # 1,000,000 cases shared out over the properties
#   scripts/fuzz-derive.sh 5000000    # more
#   PROPTEST_RNG_SEED=42 scripts/fuzz-derive.sh   # reproduce a run
#
# Prints the cases each property ran, the time taken and the panics or
# other failures found (each failure also prints its shrunk input).
# Exits non-zero when any property failed.
set -euo pipefail
cd "$(dirname "$0")/.."

total="${1:-1000000}"
log="$(mktemp -t fuzz-derive.XXXXXX)"
echo "fuzz-derive: ${total} cases, release mode; full log in ${log}"
start=$(date +%s)
status=0
KV_FUZZ_TOTAL="$total" RUST_BACKTRACE=0 \
    cargo test -p kv-derive --release --lib fuzz_ -- --nocapture >"$log" 2>&1 || status=$?
end=$(date +%s)

# Each property prints: "fuzz NAME: N cases in T, failures (panics included) found: F"
grep -E '^fuzz [a-z_]+: ' "$log" || true
awk '/^fuzz [a-z_]+: / { cases += $3; failures += $NF }
     END { printf "total: %d cases, %d failures (panics included)\n", cases, failures }' "$log"
echo "wall time: $((end - start)) s"
if [ "$status" -ne 0 ]; then
    echo "FAILED (cargo test exit $status); the shrunk inputs:"
    grep -E -A2 'Test failed|derive panicked|minimal failing input' "$log" | head -80 || true
fi
exit "$status"
