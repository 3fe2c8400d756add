#!/usr/bin/env python3
"""Checks that the hand-written crate is what the derive generates: compares the
two crates' `-Zunpretty=expanded` output after dropping the inert `#[kv(...)]`
helper attributes (kept by the compiler in the derive crate) and the spacing
the pretty-printer gives macro-produced paths. Usage: compare_expanded.py A B"""

import re
import sys


def normalize(path):
    text = open(path).read()
    text = re.sub(r"#\[kv\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\]", "", text)
    text = text.replace(" :: ", "::")
    text = re.sub(r"kv-compile-(derive|hand)|kv_compile_(derive|hand)", "CRATE", text)
    return re.sub(r"\s+", " ", text).strip()


a, b = normalize(sys.argv[1]), normalize(sys.argv[2])
if a == b:
    print(f"expansions identical ({len(a)} characters after normalizing)")
    sys.exit(0)
i = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y) if any(x != y for x, y in zip(a, b)) else min(len(a), len(b))
print(f"expansions differ at character {i}:\n  derive: ...{a[max(0, i - 200):i + 200]}\n  hand:   ...{b[max(0, i - 200):i + 200]}")
sys.exit(1)
