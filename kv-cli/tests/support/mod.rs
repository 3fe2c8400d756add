//! What the `kv` command's test files share: running the binary, reading
//! its output, the shipped configs, scratch files, and a GGUF header.

// Each test binary uses its own part of this.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn kv(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kv"))
        .args(args)
        .output()
        .expect("the kv binary runs")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

pub fn stdout(out: &Output) -> String {
    text(&out.stdout)
}

pub fn stderr(out: &Output) -> String {
    text(&out.stderr)
}

/// The folder of the shipped configs.
pub fn configs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/configs")
}

/// The shipped `examples/configs/NAME/config.json`.
pub fn shipped(name: &str) -> String {
    configs()
        .join(name)
        .join("config.json")
        .display()
        .to_string()
}

/// A fresh directory for one test's files, under the test binary's name so
/// that test files running at once never share one.
pub fn scratch(test: &str) -> PathBuf {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("kv-cli")
        .join(binary)
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `bytes` to `dir/name` and returns the path as text.
pub fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

/// Llama-3-8B's cache geometry as a GGUF v3 header (32 layers, 32 heads, 8
/// KV heads, n_embd 4096, 8192 context), no tensors; the keys in `skip`
/// left out, and `extra` raw entries (key, GGUF type id, value bytes) after.
pub fn llama_gguf(skip: &[&str], extra: &[(&str, u32, Vec<u8>)]) -> Vec<u8> {
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    }
    let numbers: Vec<(&str, u32)> = [
        ("llama.block_count", 32u32),
        ("llama.context_length", 8192),
        ("llama.embedding_length", 4096),
        ("llama.attention.head_count", 32),
        ("llama.attention.head_count_kv", 8),
    ]
    .into_iter()
    .filter(|(key, _)| !skip.contains(key))
    .collect();
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend(0u64.to_le_bytes());
    out.extend(((numbers.len() + extra.len()) as u64 + 1).to_le_bytes());
    string(&mut out, "general.architecture");
    out.extend(8u32.to_le_bytes());
    string(&mut out, "llama");
    for (key, value) in numbers {
        string(&mut out, key);
        out.extend(4u32.to_le_bytes());
        out.extend(value.to_le_bytes());
    }
    for (key, kind, bytes) in extra {
        string(&mut out, key);
        out.extend(kind.to_le_bytes());
        out.extend(bytes);
    }
    out
}
