#!/usr/bin/env python3
"""Counts the tokens #[derive(ModelLocalKv)] generates for the bench crate, by
what they spell (issue #6). Reads the hand-written crate (which is the derive's
output as text, checked by bench/compile.sh) and counts tokens the way
proc_macro does: identifiers, literals and punctuation characters one each
(`::` is two), a delimited group one. Usage: bench/token_census.py [HAND_SRC_DIR]"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "kv-compile-bench", "hand", "src")
TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|[A-Za-z_][A-Za-z0-9_]*|\d[0-9a-z_]*|[()\[\]{}]|\S')


def count(text):
    return sum(1 for t in TOKEN.findall(text) if t not in ")]}")


blocks = []
for name in sorted(os.listdir(SRC)):
    if re.fullmatch(r"m\d+\.rs", name):
        text = open(os.path.join(SRC, name)).read()
        blocks += re.findall(r"::kv_core::__kv_impl_v0_1! \{\n.*?\n\}\n", text, re.S)
generated = "".join(blocks)
total = count(generated)
print(f"{len(blocks)} expansions, {total} tokens, {total / len(blocks):.0f} per struct")

# Each row: what, a regex for it, and which matches count (None: all).
NESTED = r"\((?:[^()]|\((?:[^()]|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))*\))*\)"
CALL = rf"__kv::(?:spec|spec_with|after_load_decl|decl){NESTED}(?:\.\w+{NESTED})*"
rows = [
    ("declarations (`__kv::spec(..)`, `spec_with(..)`, `decl(..)..`)", CALL,
     lambda m: not m.startswith("__kv::after_load_decl") and ".after_load_decl(" not in m),
    ("what is known before load (`__kv::after_load_decl(..)`, `decl(..)..`)", CALL,
     lambda m: m.startswith("__kv::after_load_decl") or ".after_load_decl(" in m),
    ("optional keys as setters `.key(\"..\")`",
     r"\.(?:only_when|assumes|note|on_host|whole_on_every_rank)\(\"(?:\\.|[^\"\\])*\"\)", None),
    ("`\"\"` (an absent text)", r'""', None),
    ("`__kv::check!(..);` const checks", rf"__kv::check!{NESTED};", None),
    ("`__kv::unmarked!(..);` checks", r"__kv::unmarked!\([^;]*\);", None),
]
print(f"{'what':<66} {'matches':>7} {'tokens':>7} {'share':>6}")
for what, pattern, keep in rows:
    found = [f for f in re.findall(pattern, generated, re.S) if keep is None or keep(f)]
    tokens = sum(count(f) for f in found)
    print(f"{what:<66} {len(found):>7} {tokens:>7} {tokens / total:>6.1%}")
