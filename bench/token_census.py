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
        blocks += re.findall(r"#\[allow\(clippy::all.*?\n\};\n", text, re.S)
generated = "".join(blocks)
total = count(generated)
print(f"{len(blocks)} expansions, {total} tokens, {total / len(blocks):.0f} per struct")

# Each row: what, regex, and what a shorter spelling would cost per match.
rows = [
    ("`::core::option::Option::{Some,None}`", r"::core::option::Option::(?:Some|None)", None),
    ("`::kv_core::__private::Cow::Borrowed(..)`", r"::kv_core::__private::Cow::Borrowed\(\"(?:\\.|[^\"\\])*\"\)", None),
    ("every `::kv_core::` prefix", r"::kv_core::", None),
    ("field names `ident:` in struct literals", r"\b(?:name|cache|geometry|positions|scope|rows|only_when|assumes|note|"
     r"layers|kv_heads|head_dim|v_head_dim|dtype|count|bound|because|positions_bound|bytes_per_row|type_name|"
     r"static_specs|after_load):(?!:)", None),
    ("`<Self as ::kv_core::DeclaredKv>::KV_DECLS.static_specs[Nusize]`",
     r"<Self as ::kv_core::DeclaredKv>::KV_DECLS\.static_specs\[\d+usize\]", None),
    ("`::core::assert!(..);` const checks", r"::core::assert!\((?:[^()]|\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))*\);", None),
    ("`::kv_core::Geometry { .. }` literals", r"::kv_core::Geometry \{[^{}]*\}", None),
    ("`::kv_core::KvSpec { .. }` literals", r"::kv_core::KvSpec \{(?:[^{}]|\{[^{}]*(?:\{[^{}]*\})?[^{}]*\})*\}", None),
    ("`::kv_core::AfterLoadDecl { .. }` literals", r"::kv_core::AfterLoadDecl \{(?:[^{}]|\{[^{}]*(?:\{[^{}]*\})?[^{}]*\})*\}", None),
    ("`__kv_register!` call", r"::kv_core::__kv_register!\(\w+\);", None),
    ("impl headers, kv_declare signature, attributes", r"#\[allow\(clippy::all[^\]]*\]\]|#\[automatically_derived\]|"
     r"impl ::kv_core::(?:DeclaredKv|ModelLocalKv) for \w+|fn kv_declare\(\s*&self,\s*__kv_out: &mut ::kv_core::__private::Vec<::kv_core::KvSpec>,\s*\)\s*-> ::kv_core::__private::Result<\(\), ::kv_core::KvError>", None),
]
print(f"{'what':<66} {'matches':>7} {'tokens':>7} {'share':>6}")
for what, pattern, _ in rows:
    found = re.findall(pattern, generated, re.S)
    tokens = sum(count(f) for f in found)
    print(f"{what:<66} {len(found):>7} {tokens:>7} {tokens / total:>6.1%}")
