#!/usr/bin/env python3
"""Where #[derive(ModelLocalKv)]'s time goes (issue #6, incremental goal).

Runs kv-derive's own code (its src/*.rs, included by path, unchanged) outside
the compiler on the 200 struct inputs bench/compile.sh generates, and reports
per struct kind: time per phase (syn parse, attribute AST, validation,
code generation) and the number of tokens generated. proc_macro2 runs its
pure-Rust fallback here, so these times leave out the proc-macro bridge (each
token crossing into rustc) and rustc parsing the output; `-Ztime-passes`
(`expand_crate`, printed last) measures everything together in the real build.

Usage: bench/macro_cost.py [--release]   (after bench/compile.sh has generated
target/kv-compile-bench/derive). Writes only under target/kv-compile-bench/.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.environ.get("KV_BENCH_DIR", os.path.join(ROOT, "target", "kv-compile-bench"))
HARNESS = os.path.join(WORK, "macro-harness")
DERIVE_SRC = os.path.join(ROOT, "kv-derive", "src")

MAIN = r'''
use std::str::FromStr;
use std::time::Instant;
use proc_macro2::{TokenStream as TokenStream2, TokenTree};

LIB

fn tokens(stream: &TokenStream2) -> (usize, usize) {
    // (tokens as the bridge sees them: groups count once, `::` twice; of which idents)
    let (mut all, mut idents) = (0, 0);
    for tree in stream.clone() {
        all += 1;
        match &tree {
            TokenTree::Group(g) => {
                let (a, i) = tokens(&g.stream());
                all += a;
                idents += i;
            }
            TokenTree::Ident(_) => idents += 1,
            _ => {}
        }
    }
    (all, idents)
}

fn main() {
    let text = std::fs::read_to_string(std::env::args().nth(1).unwrap()).unwrap();
    let reps: u32 = std::env::args().nth(2).map_or(20, |r| r.parse().unwrap());
    let inputs: Vec<(String, String)> = text
        .split("\n//@@ ")
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let (kind, body) = s.split_once('\n').unwrap();
            (kind.trim_start_matches("//@@ ").to_owned(), body.to_owned())
        })
        .collect();
    // kind -> [n, lex, parse, ast, valid, expand, total, tokens, idents, input tokens]
    let mut rows: std::collections::BTreeMap<String, [f64; 10]> = Default::default();
    for (kind, body) in &inputs {
        let row = rows.entry(kind.clone()).or_default();
        row[0] += 1.0;
        let mut t = [0f64; 6];
        let mut out_tokens = (0, 0);
        let mut in_tokens = 0;
        for _ in 0..reps {
            let s0 = Instant::now();
            let input = TokenStream2::from_str(body).unwrap();
            let s1 = Instant::now();
            in_tokens = tokens(&input).0;
            let s1b = Instant::now();
            let parsed_input = syn::parse2::<syn::DeriveInput>(input.clone()).unwrap();
            let s2 = Instant::now();
            let mut errors = Errors::default();
            let parsed = ast::parse(&parsed_input, &mut errors);
            let s3 = Instant::now();
            let ast::Parsed::Struct(parsed) = &parsed else { panic!("{kind}: not a struct") };
            let checked = valid::check(parsed, &mut errors);
            let s4 = Instant::now();
            assert!(errors.combined().is_none(), "{kind}: errors");
            let checked = checked.unwrap();
            let s4b = Instant::now();
            let out = expand::expand(&checked);
            let s5 = Instant::now();
            out_tokens = tokens(&out);
            drop(out);
            let s6 = Instant::now();
            let whole = derive(input);
            let s7 = Instant::now();
            drop(whole);
            t[0] += (s1 - s0).as_secs_f64();
            t[1] += (s2 - s1b).as_secs_f64();
            t[2] += (s3 - s2).as_secs_f64();
            t[3] += (s4 - s3).as_secs_f64();
            t[4] += (s5 - s4b).as_secs_f64();
            t[5] += (s7 - s6).as_secs_f64();
        }
        for i in 0..6 {
            row[1 + i] += t[i] / reps as f64 * 1e6;
        }
        row[7] += out_tokens.0 as f64;
        row[8] += out_tokens.1 as f64;
        row[9] += in_tokens as f64;
    }
    println!("per struct, mean over {reps} repetitions (us); tokens as proc_macro counts them");
    println!("{:<8} {:>4} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>9} {:>8} {:>8}",
             "kind", "n", "lex", "syn", "ast", "valid", "expand", "derive()", "in tok", "out tok", "idents");
    let mut total = [0f64; 10];
    for (kind, row) in &rows {
        let n = row[0];
        println!("{:<8} {:>4} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>8.1} {:>8.1} {:>9.0} {:>8.0} {:>8.0}",
                 kind, n, row[1] / n, row[2] / n, row[3] / n, row[4] / n, row[5] / n, row[6] / n,
                 row[9] / n, row[7] / n, row[8] / n);
        for i in 0..10 { total[i] += row[i]; }
    }
    let n = total[0];
    println!("{:<8} {:>4} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>8.1} {:>8.1} {:>9.0} {:>8.0} {:>8.0}",
             "all", n, total[1] / n, total[2] / n, total[3] / n, total[4] / n, total[5] / n, total[6] / n,
             total[9] / n, total[7] / n, total[8] / n);
    println!("sum over {n} structs: derive() {:.2} ms, of which expand {:.2} ms; {:.0} tokens generated",
             total[6] / 1e3, total[5] / 1e3, total[7]);
}
'''

KINDS = {0: "leaf", 1: "attn", 2: "block", 3: "plain", 4: "mixed"}
# Slots 15-19 of each module: the modern kinds (bench/gen_compile.py).
MODERN = {15: "quant", 16: "split", 17: "mla", 18: "mamba", 19: "loaded"}


def main():
    release = "--release" in sys.argv
    src = os.path.join(WORK, "derive", "src")
    inputs = []
    for name in sorted(os.listdir(src)):
        if not re.fullmatch(r"m\d+\.rs", name):
            continue
        text = open(os.path.join(src, name)).read()
        for m in re.finditer(r"#\[derive\(::kv_core::ModelLocalKv\)\]\n.*?\n\}\n", text, re.S):
            k = int(re.search(r"pub struct S\d+_(\d+)", m.group(0)).group(1))
            inputs.append(f"//@@ {MODERN.get(k) or KINDS[k % 5]}\n{m.group(0)}")
    os.makedirs(os.path.join(HARNESS, "src"), exist_ok=True)
    with open(os.path.join(HARNESS, "inputs.txt"), "w") as f:
        f.write("\n".join(inputs))
    lib = open(os.path.join(DERIVE_SRC, "lib.rs")).read()
    lib = lib.replace("use proc_macro::TokenStream;\n", "")
    lib = re.sub(r"#\[proc_macro_derive[^\n]*\]\npub fn [^\n]*\{\n[^\n]*\n\}\n", "", lib)
    lib = re.sub(r"^//!.*\n", "", lib, flags=re.M)
    lib = re.sub(r"^use proc_macro2::\{Span, TokenStream as TokenStream2\};\n", "use proc_macro2::Span;\n", lib, flags=re.M)
    lib = re.sub(r"^mod (\w+);", lambda m: f'#[path = "{DERIVE_SRC}/{m.group(1)}.rs"]\n#[allow(dead_code)]\nmod {m.group(1)};',
                 lib, flags=re.M)
    with open(os.path.join(HARNESS, "src", "main.rs"), "w") as f:
        f.write("#![allow(dead_code)]\n" + MAIN.replace("LIB", lib))
    with open(os.path.join(HARNESS, "Cargo.toml"), "w") as f:
        f.write('[package]\nname = "kv-macro-harness"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
                "[dependencies]\n"
                'syn = { version = "3", default-features = false, features = ["derive", "parsing", "printing", "proc-macro"] }\n'
                'quote = { version = "1", default-features = false }\n'
                'proc-macro2 = { version = "1", default-features = false }\n\n[workspace]\n')
    subprocess.run(["cp", os.path.join(ROOT, "Cargo.lock"), os.path.join(HARNESS, "Cargo.lock")], check=True)
    args = ["cargo", "run", "--offline", "-q"] + (["--release"] if release else [])
    env = dict(os.environ, CARGO_TARGET_DIR=os.path.join(WORK, "target-harness"))
    print(f"kv-derive's code outside rustc, {'release' if release else 'dev (opt-level 0, as cargo builds proc macros)'}:")
    subprocess.run(args + ["--", os.path.join(HARNESS, "inputs.txt"), os.environ.get("KV_BENCH_REPS", "20")],
                   cwd=HARNESS, env=env, check=True)


if __name__ == "__main__":
    main()
