#!/usr/bin/env python3
"""Generates the two crates bench/compile.sh compares (issue #6).

`derive/`: N model structs annotated with #[derive(ModelLocalKv)] / #[kv(...)].
`hand/`:   the same structs, with the `DeclaredKv` + `ModelLocalKv` impls written
           out as kv-derive/src/expand/ generates them (same items, same
           compile-time checks, same helper calls), so the difference between
           the two is the cost of running the macro and nothing else.

The mix, per module of 20 structs: indices 0-14 cycle through five kinds
(kind = index % 5, three of each), indices 15-19 are one struct of each kind
of cache the derive gained with the modern keys (2026-12-02):
  0 Leaf   struct-level static declaration, gated on a bool field
  1 Attn   field-level declaration with `self` values, gated on a method
  2 Block  struct-level declaration with const expressions (checked at
           compile time), children `Vec<Leaf>` and `Option<Attn>`
  3 Plain  no declaration, children only (a plain struct and a Vec)
  4 Mixed  a gated static declaration with note/assumes and v_head_dim, plus a
           field-level `self` declaration with rows = fixed(self...), one child
  15 Quant  static attention, `kv_format = q8_0` (llama.cpp blocks), gated
  16 Split  static attention, `kv_format = f8e4m3, v_format = i4`, positions
            `window_minus_one(72)`, `on_host = "..."`, child `Option<Quant>`
  17 Mla    static MLA `latent = kv_core::Latent::new(..)`, positions
            `vllm_sliding_window(WINDOW, ..)` (a const input, checked),
            child `Vec<Split>`
  18 Mamba  static recurrent `state = MAMBA_STATE` (a `static` parts array
            and `RecurrentState::new` in lib.rs), no positions,
            `whole_on_every_rank = "..."`, child `Option<Mla>`
  19 Loaded field-level after-load `state = self.state.clone()`, children
            `Vec<Mamba>` and `Option<Quant>`
So 200 structs hold 200 declarations and 200 child fields, as before the
modern kinds (which replaced the fourth struct of each old kind in a
module: old kinds 30 structs each, was 40; new kinds 10 each).

Usage: gen_compile.py OUT_DIR KV_CORE_PATH LOCKFILE [STRUCTS]
"""

import re
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


class Policy:
    """`positions = NAME(FIRST, input = N, ...)`: `inputs` are (field, value)
    in the policy's order (kv-derive/src/attr/tables.rs's POLICIES)."""

    def __init__(self, name, variant, inputs):
        self.name = name
        self.variant = variant
        self.inputs = inputs

    def text(self):
        """As written, and as the derive keeps it (`TokenStream::to_string`)."""
        first, rest = self.inputs[0], self.inputs[1:]
        args = [first[1][1]] + [f"{field} = {value[1]}" for field, value in rest]
        return f"{self.name}({', '.join(args)})"


class Decl:
    def __init__(self, name=None, field=None, **kv):
        self.name = name  # explicit name, else the field's
        self.field = field
        self.kv = kv

    def decl_name(self):
        return self.name or self.field

    def kind(self):
        """`attention` (parts), `latent` or `state`, as valid.rs's Geometry."""
        for kind in ("latent", "state"):
            if kind in self.kv:
                return kind
        return "attention"

    def geometry_is_const(self):
        if self.kind() != "attention":
            return self.kv[self.kind()][0] != "self"
        keys = ["layers", "kv_heads", "head_dim", "v_head_dim"]
        if any(self.kv.get(k, ("", ""))[0] == "self" for k in keys):
            return False
        if any(self.kv.get(k, "").startswith("self.") for k in ("kv_format", "v_format")):
            return False
        return not self.kv["dtype"].startswith("self.")

    def policy(self):
        """The position policy, or None for `bounded(..)` (or no positions)."""
        positions = self.kv.get("positions")
        return positions if isinstance(positions, Policy) else None

    def bounded(self):
        """`(count, because)` of `bounded(..)`, or None."""
        positions = self.kv.get("positions")
        return None if positions is None or isinstance(positions, Policy) else positions

    def position_counts(self):
        """The counts written in the positions, with the field each fills."""
        if self.policy():
            return list(self.policy().inputs)
        if self.bounded():
            return [("positions", self.bounded()[0])]
        return []

    def positions_are_const(self):
        return all(value[0] != "self" for _, value in self.position_counts())

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
        for key in ["latent", "state"]:
            if key in kv:
                parts.append(f"{key} = {kv[key][1]}")
        for key in ["layers", "kv_heads", "head_dim", "v_head_dim"]:
            if key in kv:
                parts.append(f"{key} = {kv[key][1]}")
        for key in ["dtype", "kv_format", "v_format"]:
            if key in kv:
                parts.append(f"{key} = {kv[key]}")
        if self.policy():
            parts.append(f"positions = {self.policy().text()}")
        elif self.bounded():
            count, because = self.bounded()
            parts.append(f'positions = bounded({count[1]}, because = "{because}")')
        parts.append(f"scope = {kv['scope']}")
        if kv["rows"] == "max_num_seqs":
            parts.append("rows = max_num_seqs")
        else:
            count, because = kv["rows"]
            parts.append(f'rows = fixed({count[1]}, because = "{because}")')
        for key in ["only_when", "assumes", "note", "on_host", "whole_on_every_rank"]:
            if key in kv:
                parts.append(f'{key} = "{kv[key]}"')
        return "#[kv(\n    " + ",\n    ".join(parts) + ",\n)]"


# ---- the expansion, as kv-derive/src/expand/ writes it ----
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
    return (f"__kv::read_count(__kv::IntoCount::into_count({tokens}, {rs(key)}), "
            f"{rs(key)}, {rs(tokens)})?")


BLOCK_FORMATS = {"q8_0": "Q8_0", "q4_0": "Q4_0", "q4_1": "Q4_1", "q5_0": "Q5_0", "q5_1": "Q5_1",
                 "nvfp4": "NVFP4"}
PACKED = {"i4": "I4", "i2": "I2", "f4e2m1": "F4E2M1"}  # no whole-byte size: never folded


def storage(fmt):
    """A storage format as expand.rs's `storage()` writes it."""
    if fmt in DTYPES or fmt in PACKED:
        return f"__kv::Storage::Dense(__kv::{DTYPES.get(fmt) or PACKED[fmt]})"
    if fmt in BLOCK_FORMATS:
        return f"__kv::Storage::Blocks(__kv::BlockFormat::{BLOCK_FORMATS[fmt]})"
    if fmt.startswith("self."):
        return f"__kv::IntoStorage::into_storage({fmt})"
    return fmt


def geometry(decl):
    """The geometry: attention parts, or a latent's or state's value as written."""
    kv = decl.kv
    if decl.kind() != "attention":
        return kv[decl.kind()][1]
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
        dtype = f"__kv::IntoDType::into_dtype({kv['dtype']})?"
    with_storage = f".with_storage({storage(kv['kv_format'])})" if "kv_format" in kv else ""
    with_v_storage = f".with_v_storage({storage(kv['v_format'])})" if "v_format" in kv else ""
    return f"__kv::geometry({layers}, {kv_heads}, {head_dim}, {dtype}){v}{with_storage}{with_v_storage}"


def policy(decl):
    """A position policy's `PositionPolicy` value (expand.rs's `policy()`)."""
    p = decl.policy()
    fields = ", ".join(f"{field}: {count_expr(value, 'positions')}" for field, value in p.inputs)
    return f"__kv::PositionPolicy::{p.variant} {{ {fields} }}"


def layout(decl):
    """The `Layout` of a declaration (expand/declarations.rs's `spec()`)."""
    kv = decl.kv
    if decl.policy():
        positions = f"__kv::policy({policy(decl)})"
    elif decl.bounded():
        count, because = decl.bounded()
        positions = f"__kv::bounded({count_expr(count, 'positions')}, {rs(because)})"
    if decl.kind() == "state":
        kind, tokens = kv["state"]
        if kind == "self":
            return f"__kv::state(__kv::read_whole(__kv::IntoState::into_state({tokens}), {rs(tokens)})?)"
        return f"__kv::state({tokens})"
    if decl.kind() == "latent":
        kind, tokens = kv["latent"]
        if kind == "self":
            return f"__kv::latent(__kv::read_whole(__kv::IntoLatent::into_latent({tokens}), {rs(tokens)})?, {positions})"
        return f"__kv::latent({tokens}, {positions})"
    return f"__kv::attention({geometry(decl)}, {positions})"


def gate_text(decl):
    return decl.kv.get("only_when", "").removesuffix("()")


def head(decl):
    """`__kv::decl(..)` and a setter for each optional key written
    (expand/declarations.rs's `head()`), in the keys table's order."""
    kv = decl.kv
    setters = "".join(f".{key}({rs(kv[key])})" for key in ("assumes", "note", "on_host", "whole_on_every_rank")
                      if key in kv)
    gate = f".only_when({rs(gate_text(decl))})" if "only_when" in kv else ""
    return f"__kv::decl({rs(decl.decl_name())}, {rs(kv['cache'])}, __kv::{SCOPES[kv['scope']]}){gate}{setters}"


def spec(decl):
    """A `KvSpec` through `__private_v0_1::decl`, as expand/declarations.rs writes it."""
    kv = decl.kv
    if kv["rows"] == "max_num_seqs":
        rows = "__kv::MaxNumSeqs"
    else:
        rcount, rbecause = kv["rows"]
        rows = f"__kv::fixed({count_expr(rcount, 'rows')}, {rs(rbecause)})"
    if decl.kind() == "attention" and decl.bounded():
        count, because = decl.bounded()
        return (f"{head(decl)}.bounded_attention({geometry(decl)}, {count_expr(count, 'positions')}, "
                f"{rs(because)}, {rows})")
    return f"{head(decl)}.spec({layout(decl)}, {rows})"


def after_load_decl(decl):
    """What is known before load of a declaration with after-load values
    (`after_load_decl` in expand/declarations.rs): every part that is const, else 0."""
    kv = decl.kv
    bounded = False
    if decl.kind() == "state":
        # kv-core's own text, which its tables recognise.
        position_count, because = "0", None
    elif not decl.positions_are_const():
        position_count = "0"
        because = decl.policy().text() if decl.policy() else decl.bounded()[1]
    elif decl.policy():
        position_count, because = f"__kv::policy_count({policy(decl)})", decl.policy().text()
    else:
        count, because = decl.bounded()
        position_count, bounded = count_expr(count, "positions"), True
    if bounded and decl.kind() == "attention" and decl.geometry_is_const():
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
        f"{head(decl)}.after_load_decl({position_count}, "
        f"{'__kv::NO_POSITIONS' if because is None else rs(because)}, {bytes_per_row}, {rows})"
    )


def literal(decl):
    """Every figure known before load is a literal: checked while expanding
    (`literals_fit` in kv-derive/src/valid.rs), no generated check."""
    kv = decl.kv
    parts = [kv[k] for k in ["layers", "kv_heads", "head_dim", "v_head_dim"] if k in kv]
    rows = kv["rows"]
    if decl.kind() != "attention" or decl.bounded() is None or "kv_format" in kv or "v_format" in kv:
        return False
    return (
        all(kind == "lit" for kind, _ in parts)
        and kv["dtype"] in DTYPES
        and kv["positions"][0][0] == "lit"
        and (rows == "max_num_seqs" or rows[0][0] in ("lit", "self"))
    )


def const_checks(decl, owner_dot_name, static_index):
    """As kv-derive/src/expand/asserts.rs: `__kv::check!`s, whose messages live in kv-core."""
    kv = decl.kv
    checks = []
    if literal(decl):
        return checks
    owner = rs(owner_dot_name.replace("{", "{{").replace("}", "}}"))
    counts = [(k, kv[k]) for k in ["layers", "kv_heads", "head_dim", "v_head_dim"] if k in kv]
    counts.extend(decl.position_counts())
    if kv["rows"] != "max_num_seqs":
        counts.append(("rows", kv["rows"][0]))
    for key, (kind, tokens) in counts:
        if kind == "const":
            checks.append(f"__kv::check!(count {tokens}, {owner}, {rs(key)});")
    if decl.kind() != "attention" or decl.bounded() is None:
        # A latent, a state or a policy: checked whole on its static entry.
        if static_index is not None:
            spec_ref = f"&Self::__KV_STATIC[{static_index}usize]"
            checks.append(f"__kv::check!(valid __kv::spec_has_no_zero({spec_ref}), {owner});")
            checks.append(f"__kv::check!(row __kv::spec_row_fits({spec_ref}), {owner});")
            if kv["rows"] != "max_num_seqs":
                checks.append(f"__kv::check!(peak __kv::spec_peak_fits({spec_ref}), {owner});")
        return checks
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


# Names that cannot make a field's type hold an owner (kv-derive's `INERT`):
# a field typed with these alone gets no unmarked-field check.
INERT = set("""bool char str String u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize f32 f64
    Option Vec Box Rc Arc HashMap BTreeMap PhantomData std core alloc collections marker rc sync
    boxed vec option mut""".split())


def unmarked_checks(ident, unmarked):
    """`__kv::unmarked!` for each field neither a child nor of an inert type."""
    out = []
    for name, ty in unmarked:
        words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"'\w+", "", ty))
        if all(w in INERT for w in words):
            continue
        # The bench's unmarked types are single paths: no guards, no inner type.
        out.append(f"__kv::unmarked!({ty}, [], {rs(f'{ident}.{name}')}, {rs(ty)});")
    return out


def child_types_section(child_types):
    """What each child field's type may hold, as expand.rs names it for the
    registry's walk (`child_types`, inside the impl)."""
    if not child_types:
        return ""
    each = " ".join(
        "__kv::element_types({ #[allow(unused_imports)] use __kv::NoElementTypes as _; "
        f"__kv::Element::<{ty}, __kv::Owners>::TYPES }}, __kv_types);"
        for ty in child_types
    )
    return f"        child_types (__kv_types) {{ {each} }}\n"


def expansion(ident, struct_decls, field_decls, children, unmarked=(), child_types=()):
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
    check_items = [f"const _: () = <{ident} as __kv::DeclaredKv>::__KV_CHECKS;"] if checks else []
    check_items += unmarked_checks(ident, unmarked)
    check = f"    check {{ {' '.join(check_items)} }}\n" if check_items else ""
    return f"""{K}::__kv_impl_v0_1! {{
    impl [] {ident} where [];
    name {rs(ident)};
    static [{", ".join(static_specs)}];
    after_load [{", ".join(after_load)}];
    checks [{nl}{nl.join(checks)}
    ];
    fn (self, __kv_out) {{{nl}{nl.join(declarations)}
    }}
{visit}{child_types_section(child_types)}{check}    register {ident};
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
                self.ident, self.struct_decls, self.field_decls(), self.children(),
                [(n, ty) for (n, ty, d) in self.fields if d != "child"],
                [ty for (_, ty, d) in self.fields if d == "child"],
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
    if k >= 15:
        return make_modern(ident, prev, k - 15, layers)
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


def make_modern(ident, prev, kind, layers):
    """One struct of each kind of cache the modern keys declare (slots 15-19)."""
    if kind == 0:
        return Struct(
            ident,
            [Decl(
                name="q8_0", cache="llama.cpp KV cache",
                layers=lit(layers), kv_heads=lit(8), head_dim=lit(128), dtype="f16", kv_format="q8_0",
                positions=(lit(8192), "n_ctx padded to 256"), scope="request",
                rows="max_num_seqs", only_when="enabled",
            )],
            [("enabled", "bool", None), ("hidden", "u32", None)],
        )
    if kind == 1:
        return Struct(
            ident,
            [Decl(
                name="fp8_keys", cache="split formats",
                layers=lit(layers), kv_heads=lit(2), head_dim=lit(64), dtype="bf16",
                kv_format="f8e4m3", v_format="i4",
                positions=Policy("window_minus_one", "WindowMinusOne", [("window", lit(72))]),
                scope="request", rows="max_num_seqs", on_host="offloaded between steps",
            )],
            [("quant", f"Option<{prev(1)}>", "child"), ("scale", "f32", None)],
        )
    if kind == 2:
        return Struct(
            ident,
            [Decl(
                name="latent", cache="MLA latent",
                latent=const("kv_core::Latent::new(27, 512, 64, kv_core::DType::BF16)"),
                positions=Policy("vllm_sliding_window", "VllmSlidingWindow", [
                    ("window", const("WINDOW")), ("max_num_batched_tokens", lit(2048)),
                    ("max_model_len", lit(8192)), ("block_size", lit(16)),
                ]),
                scope="request", rows="max_num_seqs",
            )],
            [("layers", f"Vec<{prev(1)}>", "child"), ("name", "String", None)],
        )
    if kind == 3:
        return Struct(
            ident,
            [Decl(
                name="mamba", cache="MambaCache", state=const("MAMBA_STATE"),
                scope="request", rows="max_num_seqs",
                whole_on_every_rank="conv and ssm state are not sharded",
            )],
            [("mla", f"Option<{prev(1)}>", "child"), ("hidden", "u32", None)],
        )
    return Struct(
        ident, [],
        [
            ("state", f"{K}::RecurrentState", Decl(
                field="state", cache="Gated DeltaNet", state=selfv("self.state.clone()"),
                scope="request", rows="max_num_seqs",
            )),
            ("mamba", f"Vec<{prev(1)}>", "child"),
            ("quant", f"Option<{prev(4)}>", "child"),
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
            "/// Jamba-v0.1's Mamba layer state, for `state = MAMBA_STATE`.\n"
            "pub static MAMBA_PARTS: [::kv_core::StatePart; 2] = [\n"
            "    ::kv_core::StatePart::mamba_conv_transformers(8192, 4, ::kv_core::DType::F16),\n"
            "    ::kv_core::StatePart::mamba_ssm(8192, 16, ::kv_core::DType::F16),\n"
            "];\n"
            "pub const MAMBA_STATE: ::kv_core::RecurrentState = ::kv_core::RecurrentState::new(28, &MAMBA_PARTS);\n\n"
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
