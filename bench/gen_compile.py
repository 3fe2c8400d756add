#!/usr/bin/env python3
"""Generates the two crates bench/compile.sh compares (issue #6).

`derive/`: N model structs annotated with #[derive(ModelLocalKv)] / #[kv(...)].
`hand/`:   the same structs, with the `DeclaredKv` + `ModelLocalKv` impls written
           out as kv-derive/src/expand.rs generates them (same items, same
           compile-time checks, same helper calls), so the difference between
           the two is the cost of running the macro and nothing else.

The mix, per module of 20 structs (kind = index % 5):
  0 Leaf   struct-level static declaration, gated on a bool field
  1 Attn   field-level declaration with `self` values, gated on a method
  2 Block  struct-level declaration with const expressions (checked at
           compile time), children `Vec<Leaf>` and `Option<Attn>`
  3 Plain  no declaration, children only (a plain struct and a Vec)
  4 Mixed  a gated static declaration with note/assumes and v_head_dim, plus a
           field-level `self` declaration with rows = fixed(self...), one child

Usage: gen_compile.py OUT_DIR KV_CORE_PATH LOCKFILE [STRUCTS]
"""

import os
import shutil
import sys

PER_MODULE = 20
K = "::kv_core"
DTYPES = {"f32": "F32", "bf16": "BF16", "f16": "F16", "f8e4m3": "F8E4M3"}
SCOPES = {"invocation": "Invocation", "request": "Request", "session": "Session", "model": "Model"}


def lit(v):
    return ("lit", str(v))


def const(tokens):
    return ("const", tokens)


def selfv(tokens):
    return ("self", tokens)


class Decl:
    def __init__(self, name=None, field=None, **kv):
        self.name = name  # explicit name, else the field's
        self.field = field
        self.kv = kv

    def decl_name(self):
        return self.name or self.field

    def geometry_is_const(self):
        keys = ["layers", "kv_heads", "head_dim", "v_head_dim"]
        if any(self.kv.get(k, ("", ""))[0] == "self" for k in keys):
            return False
        return not self.kv["dtype"].startswith("self.")

    def positions_are_const(self):
        return self.kv["positions"][0][0] != "self"

    def after_load(self):
        if not self.geometry_is_const() or not self.positions_are_const():
            return True
        rows = self.kv["rows"]
        return rows != "max_num_seqs" and rows[0][0] == "self"

    # ---- the attribute, as a user writes it ----
    def attribute(self):
        kv = self.kv
        parts = []
        if self.name:
            parts.append(f'name = "{self.name}"')
        parts.append(f'cache = "{kv["cache"]}"')
        for key in ["layers", "kv_heads", "head_dim", "v_head_dim"]:
            if key in kv:
                parts.append(f"{key} = {kv[key][1]}")
        parts.append(f"dtype = {kv['dtype']}")
        count, because = kv["positions"]
        parts.append(f'positions = bounded({count[1]}, because = "{because}")')
        parts.append(f"scope = {kv['scope']}")
        if kv["rows"] == "max_num_seqs":
            parts.append("rows = max_num_seqs")
        else:
            count, because = kv["rows"]
            parts.append(f'rows = fixed({count[1]}, because = "{because}")')
        for key in ["only_when", "assumes", "note"]:
            if key in kv:
                parts.append(f'{key} = "{kv[key]}"')
        return "#[kv(\n    " + ",\n    ".join(parts) + ",\n)]"


# ---- the expansion, as kv-derive/src/expand.rs writes it ----
# The fixed text (the `const _` block, the impls, `use ..::__private_v0_1 as __kv`,
# the check messages) is kv-core's `__kv_impl_v0_1!` and `__kv_check_v0_1!`, as
# in the derive.
def rs(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def count_expr(value, key):
    kind, tokens = value
    if kind == "lit":
        return tokens
    if kind == "const":
        return f"(({tokens}) as __kv::u64)"
    return f"__kv::IntoCount::into_count({tokens}, {rs(key)})?"


def geometry(decl):
    kv = decl.kv
    layers = count_expr(kv["layers"], "layers")
    kv_heads = count_expr(kv["kv_heads"], "kv_heads")
    head_dim = count_expr(kv["head_dim"], "head_dim")
    if "v_head_dim" in kv:
        v = f".with_v_head_dim({count_expr(kv['v_head_dim'], 'v_head_dim')})"
    else:
        v = ""
    if kv["dtype"] in DTYPES:
        dtype = f"__kv::{DTYPES[kv['dtype']]}"
    else:
        dtype = f"__kv::IntoDType::into_dtype({kv['dtype']})"
    return f"__kv::geometry({layers}, {kv_heads}, {head_dim}, {dtype}){v}"


def gate_text(decl):
    return decl.kv.get("only_when", "").removesuffix("()")


def spec(decl):
    """A `KvSpec` through the `__private_v0_1::spec` const fn, as expand.rs writes it."""
    kv = decl.kv
    count, because = kv["positions"]
    if kv["rows"] == "max_num_seqs":
        rows = "__kv::MaxNumSeqs"
    else:
        rcount, rbecause = kv["rows"]
        rows = f"__kv::fixed({count_expr(rcount, 'rows')}, {rs(rbecause)})"
    texts = ", ".join(rs(t) for t in (gate_text(decl), kv.get("assumes", ""), kv.get("note", "")))
    return (
        f"__kv::spec({rs(decl.decl_name())}, {rs(kv['cache'])}, "
        f"{geometry(decl)}, {count_expr(count, 'positions')}, {rs(because)}, "
        f"__kv::{SCOPES[kv['scope']]}, {rows}, {texts},)"
    )


def after_load_decl(decl):
    """What is known before load of a declaration with after-load values
    (`after_load_decl` in expand.rs): every part that is const, else 0 or ""."""
    kv = decl.kv
    count, because = kv["positions"]
    position_count = count_expr(count, "positions") if decl.positions_are_const() else "0"
    if decl.positions_are_const() and decl.geometry_is_const():
        bytes_per_row = f"__kv::const_bytes_per_row({geometry(decl)}, {position_count})"
    else:
        bytes_per_row = "0"
    if kv["rows"] == "max_num_seqs":
        rows = "__kv::MAX_NUM_SEQS"
    else:
        rcount, rbecause = kv["rows"]
        rc = "0" if rcount[0] == "self" else count_expr(rcount, "rows")
        rows = f"__kv::after_load_fixed({rc}, {rs(rbecause)})"
    return (
        f"__kv::after_load_decl({rs(decl.decl_name())}, {rs(kv['cache'])}, "
        f"__kv::{SCOPES[kv['scope']]}, {position_count}, {rs(because)}, {bytes_per_row}, "
        f"{rows}, {rs(gate_text(decl))}, {rs(kv.get('assumes', ''))},)"
    )


def literal(decl):
    """Every figure known before load is a literal: checked while expanding
    (`fold_literals` in kv-derive/src/checks.rs), no generated check."""
    kv = decl.kv
    parts = [kv[k] for k in ["layers", "kv_heads", "head_dim", "v_head_dim"] if k in kv]
    rows = kv["rows"]
    return (
        all(kind == "lit" for kind, _ in parts)
        and kv["dtype"] in DTYPES
        and kv["positions"][0][0] == "lit"
        and (rows == "max_num_seqs" or rows[0][0] in ("lit", "self"))
    )


def const_checks(decl, owner_dot_name, static_index):
    """As kv-derive/src/checks.rs: `__kv::check!`s, whose messages live in kv-core."""
    kv = decl.kv
    checks = []
    if literal(decl):
        return checks
    owner = rs(owner_dot_name.replace("{", "{{").replace("}", "}}"))
    counts = [(k, kv[k]) for k in ["layers", "kv_heads", "head_dim", "v_head_dim"] if k in kv]
    counts.append(("positions", kv["positions"][0]))
    if kv["rows"] != "max_num_seqs":
        counts.append(("rows", kv["rows"][0]))
    for key, (kind, tokens) in counts:
        if kind == "const":
            checks.append(f"__kv::check!(count {tokens}, {owner}, {rs(key)});")
    if static_index is not None:
        spec_ref = f"Self::__KV_STATIC[{static_index}usize]"
        geom = f"__kv::spec_geometry(&{spec_ref})"
        bytes_per_row = f"__kv::spec_row_fits(&{spec_ref})"
        peak = f"__kv::spec_peak_fits(&{spec_ref})" if kv["rows"] != "max_num_seqs" else None
    elif decl.geometry_is_const() and decl.positions_are_const():
        geom = geometry(decl)
        bytes_per_row = f"__kv::row_fits({geom}, {count_expr(kv['positions'][0], 'positions')})"
        peak = None
    else:
        return checks
    checks.append(f"__kv::check!(position {geom}, {owner});")
    checks.append(f"__kv::check!(row {bytes_per_row}, {owner});")
    if peak is not None:
        checks.append(f"__kv::check!(peak {peak}, {owner});")
    return checks


def gate(name):
    if name.endswith("()"):
        return f"__kv::gate(Self::{name[:-2]}(self))"
    return f"__kv::gate(self.{name})"


def expansion(ident, struct_decls, field_decls, children):
    decls = struct_decls + field_decls  # the derive reads struct attributes first
    static_specs, after_load, checks, declarations = [], [], [], []
    for decl in decls:
        name = decl.decl_name()
        index = None
        if decl.after_load():
            after_load.append(after_load_decl(decl))
            push = f"__kv::declare(__kv_out, {rs(ident)}, {rs(name)}, || __kv::Ok({spec(decl)}))?;"
        else:
            index = len(static_specs)
            static_specs.append(spec(decl))
            push = f"__kv_out.push(Self::__KV_STATIC[{index}usize].clone());"
        checks.extend(const_checks(decl, f"{ident}.{name}", index))
        if "only_when" in decl.kv:
            push = f"if {gate(decl.kv['only_when'])} {{ {push} }}"
        declarations.append(push)
    nl = "\n            "
    if checks:
        declarations.insert(0, "let () = <Self as __kv::DeclaredKv>::__KV_CHECKS;")
    visit = ""
    if children:
        body = nl.join(f"__kv::visit_field(&self.{c}, {rs(c)}, __kv_visitor);" for c in children)
        visit = f"        children (__kv_visitor) {{{nl}{body}\n        }}\n"
    check = f"    check {{ const _: () = <{ident} as __kv::DeclaredKv>::__KV_CHECKS; }}\n" if checks else ""
    return f"""{K}::__kv_impl_v0_1! {{
    impl [] {ident} where [];
    name {rs(ident)};
    static [{", ".join(static_specs)}];
    after_load [{", ".join(after_load)}];
    checks [{nl}{nl.join(checks)}
    ];
    fn (self, __kv_out) {{{nl}{nl.join(declarations)}
    }}
{visit}{check}    register {ident};
}}
"""


class Struct:
    def __init__(self, ident, struct_decls, fields, methods=""):
        self.ident = ident
        self.struct_decls = struct_decls
        self.fields = fields  # (name, type, Decl | "child" | None)
        self.methods = methods

    def field_decls(self):
        return [d for (_, _, d) in self.fields if isinstance(d, Decl)]

    def children(self):
        return [n for (n, _, d) in self.fields if d == "child"]

    def field_names(self):
        return [n for (n, _, _) in self.fields]

    def body(self, derive):
        out = []
        if derive:
            out.append(f"#[derive({K}::ModelLocalKv)]")
            out.extend(d.attribute() for d in self.struct_decls)
        out.append(f"pub struct {self.ident} {{")
        for name, ty, d in self.fields:
            if derive and d == "child":
                out.append("    #[kv(child)]")
            elif derive and isinstance(d, Decl):
                out.append("    " + d.attribute().replace("\n", "\n    "))
            out.append(f"    pub {name}: {ty},")
        out.append("}")
        text = "\n".join(out) + "\n"
        if not derive:
            text += "\n" + expansion(
                self.ident, self.struct_decls, self.field_decls(), self.children()
            )
        if self.methods:
            text += f"\nimpl {self.ident} {{\n{self.methods}}}\n"
        return text


def make_struct(m, k):
    i = m * PER_MODULE + k
    ident = f"S{m:02}_{k:02}"
    prev = lambda d: f"S{m:02}_{k - d:02}"  # noqa: E731
    kind = k % 5
    layers = 1 + i % 32
    if kind == 0:
        return Struct(
            ident,
            [Decl(
                name="retained", cache="sliding DynamicCache",
                layers=lit(layers), kv_heads=lit(16), head_dim=lit(64), dtype="f32",
                positions=(lit(71), "sliding_window(72) - 1"), scope="request",
                rows="max_num_seqs", only_when="enabled",
            )],
            [("enabled", "bool", None), ("hidden", "u32", None)],
        )
    if kind == 1:
        return Struct(
            ident, [],
            [
                ("num_layers", "usize", None),
                ("kv_heads", "i64", None),
                ("max_len", "u32", None),
                ("dtype", f"{K}::DType", None),
                ("cache", "Option<()>", Decl(
                    field="cache", cache="StaticCache",
                    layers=selfv("self.num_layers"), kv_heads=selfv("self.kv_heads"),
                    head_dim=lit(64 + 64 * (i % 2)), dtype="self.dtype",
                    positions=(selfv("self.max_len"), "hardcoded max_cache_len"), scope="invocation",
                    rows=(lit(1), "calls are serialized"), only_when="active()",
                )),
            ],
            methods="    pub fn active(&self) -> bool {\n        self.max_len > 0\n    }\n",
        )
    if kind == 2:
        return Struct(
            ident,
            [Decl(
                name="encoder", cache="EncoderDecoderCache",
                layers=const(f"LAYERS + {i % 7}"), kv_heads=lit(16), head_dim=const("HIDDEN / HEADS"),
                dtype="bf16", positions=(const("WINDOW - 1"), "embed_positions rows"), scope="session",
                rows=(lit(2 + i % 5), "one cache per duplex session"),
            )],
            [
                ("layers", f"Vec<{prev(2)}>", "child"),
                ("talker", f"Option<{prev(1)}>", "child"),
                ("scale", "f32", None),
            ],
        )
    if kind == 3:
        return Struct(
            ident, [],
            [
                ("block", prev(1), "child"),
                ("leaves", f"Vec<{prev(3)}>", "child"),
                ("name", "String", None),
            ],
        )
    return Struct(
        ident,
        [Decl(
            name="graph_pool", cache="captured CUDA graph buffers",
            layers=lit(layers), kv_heads=lit(64), head_dim=lit(192), v_head_dim=lit(128),
            dtype="f8e4m3", positions=(lit(11), "decode steps per capture"), scope="model",
            rows=(lit(261), "sum of captured buckets"), only_when="graphs",
            assumes="graphs are captured at load", note="one wide allocation per bucket",
        )],
        [
            ("graphs", "bool", None),
            ("sessions", "u32", None),
            ("state", "Option<()>", Decl(
                field="state", cache="duplex session state",
                layers=lit(4), kv_heads=lit(2), head_dim=lit(128), dtype="f16",
                positions=(lit(1500), "audio frames per window"), scope="session",
                rows=(selfv("self.sessions"), "one per duplex session"),
            )),
            ("leaf", f"Option<{prev(4)}>", "child"),
        ],
    )


def write_crate(root, name, lock, kv_core, modules, derive):
    src = os.path.join(root, name, "src")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(root, name, "Cargo.toml"), "w") as f:
        f.write(
            f'[package]\nname = "kv-compile-{name}"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
            f'[dependencies]\nkv-core = {{ path = "{kv_core}", default-features = false, features = ["derive"] }}\n\n'
            "# Only for the expansion check (bench/compile_bench.py): turns `__kv_register!`\n"
            "# into an item, so the check sees it; the timed builds leave it off.\n"
            '[features]\nregistry = ["kv-core/registry"]\n\n'
            "[workspace]\n"
        )
        if os.environ.get("KV_BENCH_MACRO_OPT") == "1":
            # What a user can put in their workspace: optimized proc macros
            # (and syn) in dev builds. Written into both crates alike.
            f.write("\n[profile.dev.build-override]\nopt-level = 3\n")
    shutil.copy(lock, os.path.join(root, name, "Cargo.lock"))
    mods = [f"m{m:02}" for m in range(len(modules))]
    with open(os.path.join(src, "lib.rs"), "w") as f:
        f.write(
            "//! Generated by bench/gen_compile.py; do not edit.\n"
            "#![allow(dead_code)]\n"
            "// Macro output is exempt from these lints; the hand-written copy says so.\n"
            "#![allow(unused_parens)]\n\n"
            "pub const LAYERS: u64 = 24;\npub const HIDDEN: u64 = 1024;\n"
            "pub const HEADS: u64 = 16;\npub const WINDOW: u64 = 1500;\n\n"
        )
        f.write("".join(f"pub mod {m};\n" for m in mods))
    for m, structs in zip(mods, modules):
        with open(os.path.join(src, f"{m}.rs"), "w") as f:
            f.write("//! Generated by bench/gen_compile.py; do not edit.\n#[allow(unused_imports)]\nuse crate::*;\n\n")
            f.write("/// Edited by the incremental benchmark.\npub fn edit_marker() -> u32 {\n    0\n}\n\n")
            f.write("\n".join(s.body(derive) for s in structs))


def main():
    out, kv_core, lock = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 200
    assert n % PER_MODULE == 0, "STRUCTS must be a multiple of 20"
    modules = [[make_struct(m, k) for k in range(PER_MODULE)] for m in range(n // PER_MODULE)]
    for name, derive in [("derive", True), ("hand", False)]:
        shutil.rmtree(os.path.join(out, name, "src"), ignore_errors=True)
        write_crate(out, name, lock, kv_core, modules, derive)
    decls = sum(len(s.struct_decls) + len(s.field_decls()) for mod in modules for s in mod)
    children = sum(len(s.children()) for mod in modules for s in mod)
    print(f"generated {n} structs ({decls} declarations, {children} child fields) in {len(modules)} modules under {out}")


if __name__ == "__main__":
    main()
