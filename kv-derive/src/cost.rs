//! The macro's own running time and output on real inputs, without rustc
//! (issue #27): `bench/macro_ab.py` runs this in two builds, alternately.
//! Every `.rs` file under the directories in `KV_MACRO_INPUTS` (`:`-separated:
//! the bench's 200 structs, the ui cases) is lexed once and split into items;
//! each item deriving `ModelLocalKv` is one input to `derive`. With
//! `KV_MACRO_DUMP=FILE` every expansion is written there, to compare two
//! builds' output token for token; with `KV_MACRO_ROUNDS=N` the inputs are
//! expanded N times and the fastest and median rounds' times are printed.
//! In-process, proc_macro2 runs its own token types, not rustc's bridge, so
//! this times the macro's logic; `bench/compile.sh` times it inside rustc.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

use crate::derive;

/// `.rs` files under `dir`, sorted, so two builds see the same order.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `tokens` name `ModelLocalKv` at any depth.
fn names_derive(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|tree| match tree {
        TokenTree::Ident(ident) => ident == "ModelLocalKv",
        TokenTree::Group(group) => names_derive(group.stream()),
        _ => false,
    })
}

/// The derive inputs in `tokens`: items (ended by `;` or a brace group)
/// with a `#[derive(..ModelLocalKv..)]`, that attribute removed as rustc
/// removes it; brace groups are searched too (items in modules, in `fn`s).
fn inputs(tokens: TokenStream, out: &mut Vec<TokenStream>) {
    let mut item: Vec<TokenTree> = Vec::new();
    for tree in tokens {
        let end = match &tree {
            TokenTree::Punct(p) => p.as_char() == ';',
            TokenTree::Group(g) => g.delimiter() == Delimiter::Brace,
            _ => false,
        };
        if let TokenTree::Group(g) = &tree {
            if g.delimiter() == Delimiter::Brace {
                inputs(g.stream(), out);
            }
        }
        item.push(tree);
        if end {
            take_input(std::mem::take(&mut item), out);
        }
    }
}

fn take_input(item: Vec<TokenTree>, out: &mut Vec<TokenStream>) {
    let is_type = item
        .iter()
        .any(|t| matches!(t, TokenTree::Ident(i) if i == "struct" || i == "enum" || i == "union"));
    let mut kept = Vec::new();
    let mut derives = false;
    let mut trees = item.into_iter().peekable();
    while let Some(tree) = trees.next() {
        if let TokenTree::Punct(p) = &tree {
            if p.as_char() == '#' {
                if let Some(TokenTree::Group(g)) = trees.peek() {
                    let inner = g.stream();
                    let first = inner.clone().into_iter().next();
                    if matches!(&first, Some(TokenTree::Ident(i)) if i == "derive")
                        && names_derive(inner)
                    {
                        derives = true;
                        trees.next();
                        continue;
                    }
                }
            }
        }
        kept.push(tree);
    }
    if derives && is_type {
        out.push(kept.into_iter().collect());
    }
}

#[test]
#[ignore = "a measurement: run by bench/macro_ab.py"]
fn macro_cost() {
    let dirs = std::env::var("KV_MACRO_INPUTS").unwrap_or_default();
    let mut files = Vec::new();
    for dir in dirs.split(':').filter(|d| !d.is_empty()) {
        rust_files(Path::new(dir), &mut files);
    }
    let mut all = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if let Ok(tokens) = TokenStream::from_str(&text) {
            let mut found = Vec::new();
            inputs(tokens, &mut found);
            all.extend(found.into_iter().map(|input| (file.clone(), input)));
        }
    }
    println!("inputs {} from {} files", all.len(), files.len());
    if let Ok(dump) = std::env::var("KV_MACRO_DUMP") {
        let mut text = String::new();
        for (file, input) in &all {
            text.push_str(&format!(
                "== {}\n{}\n",
                file.display(),
                derive(input.clone())
            ));
        }
        std::fs::write(dump, text).expect("the dump file is writable");
    }
    let rounds: usize = std::env::var("KV_MACRO_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    let mut times = Vec::new();
    for _ in 0..rounds {
        let start = Instant::now();
        for (_, input) in &all {
            std::hint::black_box(derive(std::hint::black_box(input.clone())));
        }
        times.push(start.elapsed().as_nanos());
    }
    times.sort_unstable();
    // The fastest round is the one least disturbed by other processes.
    if let (Some(fastest), Some(median)) = (times.first(), times.get(times.len() / 2)) {
        println!("round_ns {fastest} median_ns {median}");
    }
}
