//! GGUF headers written byte by byte as ggml's `gguf.c` lays them out, read
//! back by `kv_engines::gguf`; and every way a file can be cut short or foreign.

use std::io::{self, Read};

use kv_core::KvError;
use kv_engines::gguf::{GgufArray, GgufMetadata, GgufValue};

/// A value as the test writes it: ggml's type id and its payload.
enum W {
    U32(u32),
    I32(i32),
    U64(u64),
    F32(f32),
    Bool(u8),
    Str(&'static str),
    /// Element type id and the elements.
    Array(u32, Vec<W>),
    /// A type id GGUF does not define, with no payload.
    Unknown(u32),
    /// Any scalar: its type id and little-endian bytes.
    Raw(u32, Vec<u8>),
}

struct Writer {
    big_endian: bool,
    out: Vec<u8>,
}

impl Writer {
    fn raw<const N: usize>(&mut self, mut bytes: [u8; N]) {
        if self.big_endian {
            bytes.reverse();
        }
        self.out.extend(bytes);
    }

    fn string(&mut self, text: &str) {
        self.raw((text.len() as u64).to_le_bytes());
        self.out.extend(text.as_bytes());
    }

    fn type_id(value: &W) -> u32 {
        match value {
            W::U32(_) => 4,
            W::I32(_) => 5,
            W::F32(_) => 6,
            W::Bool(_) => 7,
            W::Str(_) => 8,
            W::Array(..) => 9,
            W::U64(_) => 10,
            W::Unknown(id) | W::Raw(id, _) => *id,
        }
    }

    fn payload(&mut self, value: &W) {
        match value {
            W::U32(v) => self.raw(v.to_le_bytes()),
            W::I32(v) => self.raw(v.to_le_bytes()),
            W::U64(v) => self.raw(v.to_le_bytes()),
            W::F32(v) => self.raw(v.to_le_bytes()),
            W::Bool(v) => self.out.push(*v),
            W::Str(v) => self.string(v),
            W::Array(inner, items) => {
                self.raw(inner.to_le_bytes());
                self.raw((items.len() as u64).to_le_bytes());
                for item in items {
                    self.payload(item);
                }
            }
            W::Unknown(_) => {}
            W::Raw(_, bytes) => {
                let mut bytes = bytes.clone();
                if self.big_endian {
                    bytes.reverse();
                }
                self.out.extend(bytes);
            }
        }
    }
}

fn gguf(version: u32, big_endian: bool, entries: &[(&str, W)]) -> Vec<u8> {
    let mut w = Writer {
        big_endian,
        out: b"GGUF".to_vec(),
    };
    w.raw(version.to_le_bytes());
    w.raw(291u64.to_le_bytes());
    w.raw((entries.len() as u64).to_le_bytes());
    for (key, value) in entries {
        w.string(key);
        w.raw(Writer::type_id(value).to_le_bytes());
        w.payload(value);
    }
    w.out
}

/// Mistral-7B as llama.cpp's converter writes it (the keys that size the
/// cache, a tokenizer array, a float).
fn mistral() -> Vec<(&'static str, W)> {
    vec![
        ("general.architecture", W::Str("llama")),
        ("general.name", W::Str("Mistral-7B-v0.1")),
        ("llama.context_length", W::U32(32_768)),
        ("llama.block_count", W::U32(32)),
        ("llama.attention.head_count", W::U32(32)),
        ("llama.attention.head_count_kv", W::U32(8)),
        ("llama.attention.layer_norm_rms_epsilon", W::F32(1e-5)),
        (
            "tokenizer.ggml.tokens",
            W::Array(8, vec![W::Str("<unk>"), W::Str("<s>")]),
        ),
        ("general.file_type", W::U32(7)),
    ]
}

fn problem(result: Result<GgufMetadata, KvError>) -> String {
    match result {
        Err(KvError::ConfigFile { path, problem }) => {
            assert_eq!(path, "model.gguf");
            problem
        }
        other => panic!("expected a file error, got {other:?}"),
    }
}

#[test]
fn a_llama_header_reads_its_cache_keys() {
    let file = gguf(3, false, &mistral());
    let meta = GgufMetadata::read(&file[..], "model.gguf").unwrap();
    assert_eq!((meta.version(), meta.tensor_count()), (3, 291));
    assert_eq!(meta.entries().len(), 9);
    assert_eq!(meta.architecture().unwrap(), "llama");
    assert_eq!(meta.count("block_count").unwrap(), Some(32));
    assert_eq!(meta.count("context_length").unwrap(), Some(32_768));
    assert_eq!(meta.count("attention.key_length").unwrap(), None);
    assert_eq!(
        meta.per_layer("attention.head_count_kv", 32).unwrap(),
        Some(vec![8; 32])
    );
    assert_eq!(
        meta.get("llama.attention.layer_norm_rms_epsilon"),
        Some(&GgufValue::F32(1e-5))
    );
    // A vocabulary is kept as its type and length: no cache rule reads it.
    let Some(GgufValue::Array(tokens)) = meta.get("tokenizer.ggml.tokens") else {
        panic!("no tokens array");
    };
    assert_eq!((tokens.element_type(), tokens.len()), ("str", 2));
    assert_eq!(tokens.items(), None);
    // Version 2 has the same layout.
    let v2 = GgufMetadata::read(&gguf(2, false, &mistral())[..], "model.gguf").unwrap();
    assert_eq!(v2.version(), 2);
    assert_eq!(v2.entries(), meta.entries());
}

#[test]
fn a_big_endian_file_reads_as_the_little_endian_one() {
    let little = GgufMetadata::read(&gguf(3, false, &mistral())[..], "model.gguf").unwrap();
    let big = GgufMetadata::read(&gguf(3, true, &mistral())[..], "model.gguf").unwrap();
    assert_eq!(big, little);
}

#[test]
fn head_count_kv_per_layer_is_an_array_of_one_per_layer() {
    // Jamba's converter writes 0 KV heads for its Mamba layers.
    let heads: Vec<W> = (0..8)
        .map(|i| W::I32(if i % 8 == 4 { 8 } else { 0 }))
        .collect();
    let file = gguf(
        3,
        false,
        &[
            ("general.architecture", W::Str("jamba")),
            ("jamba.block_count", W::U64(8)),
            ("jamba.attention.head_count_kv", W::Array(5, heads)),
        ],
    );
    let meta = GgufMetadata::read(&file[..], "model.gguf").unwrap();
    assert_eq!(
        meta.per_layer("attention.head_count_kv", 8).unwrap(),
        Some(vec![0, 0, 0, 0, 8, 0, 0, 0])
    );
    // One entry per layer, or it is an error naming the key.
    let err = meta
        .per_layer("attention.head_count_kv", 32)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`jamba.attention.head_count_kv` has 8 entries for 32 layers"),
        "{err}"
    );
}

#[test]
fn a_value_that_is_not_a_count_is_an_error_naming_the_key() {
    let file = gguf(
        3,
        false,
        &[
            ("general.architecture", W::Str("llama")),
            ("llama.block_count", W::I32(-1)),
            ("llama.context_length", W::Str("long")),
            (
                "llama.attention.head_count_kv",
                W::Array(6, vec![W::F32(8.0)]),
            ),
        ],
    );
    let meta = GgufMetadata::read(&file[..], "model.gguf").unwrap();
    for (key, got) in [
        ("block_count", meta.count("block_count")),
        ("context_length", meta.count("context_length")),
    ] {
        let err = got.unwrap_err().to_string();
        assert!(
            err.contains(&format!("`llama.{key}` is"))
                && err.contains("not a non-negative integer"),
            "{err}"
        );
    }
    let err = meta
        .per_layer("attention.head_count_kv", 1)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("holds f32 8, not a non-negative integer"),
        "{err}"
    );
    // No architecture key, or one that is not a string.
    let none = GgufMetadata::read(&gguf(3, false, &[])[..], "model.gguf").unwrap();
    assert!(none
        .architecture()
        .unwrap_err()
        .to_string()
        .contains("no `general.architecture`"));
    let number = gguf(3, false, &[("general.architecture", W::U32(1))]);
    let meta = GgufMetadata::read(&number[..], "model.gguf").unwrap();
    assert!(meta
        .architecture()
        .unwrap_err()
        .to_string()
        .contains("`general.architecture` is a u32, not a string"));
}

#[test]
fn every_cut_of_a_header_is_a_truncation_error_never_a_panic() {
    let file = gguf(3, false, &mistral());
    for len in 0..file.len() {
        let got = problem(GgufMetadata::read(&file[..len], "model.gguf"));
        assert!(
            got.starts_with("truncated GGUF header: "),
            "cut at {len}: {got}"
        );
    }
    // Where it stopped is said.
    let got = problem(GgufMetadata::read(&file[..30], "model.gguf"));
    assert!(got.contains("the key of metadata entry 0 of 9"), "{got}");
}

#[test]
fn corrupt_lengths_end_at_the_end_of_the_file_without_allocating_them() {
    // A key of 2^64 - 1 bytes in a file of a few dozen.
    let mut file = gguf(3, false, &[]);
    file[16..24].copy_from_slice(&1u64.to_le_bytes());
    file.extend(u64::MAX.to_le_bytes());
    file.extend(b"general");
    let got = problem(GgufMetadata::read(&file[..], "model.gguf"));
    assert_eq!(
        got,
        "the key of metadata entry 0 of 1 is 18446744073709551615 bytes long (at byte 24); \
         the GGUF specification bounds keys to 65535 bytes"
    );
    // A key at the bound is read, and ends where the file ends.
    file[24..32].copy_from_slice(&65_535u64.to_le_bytes());
    let got = problem(GgufMetadata::read(&file[..], "model.gguf"));
    assert!(
        got.contains("is 65535 bytes long, but the file ends 7 bytes into it"),
        "{got}"
    );
    // A string value of 1 MiB (kept) claimed in a file of a few dozen bytes.
    let mut file = gguf(3, false, &[("name", W::Str("x"))]);
    let at = file.len() - 9;
    file[at..at + 8].copy_from_slice(&(1u64 << 20).to_le_bytes());
    let got = problem(GgufMetadata::read(&file[..], "model.gguf"));
    assert!(
        got.contains("`name` is 1048576 bytes long, but the file ends 1 bytes into it"),
        "{got}"
    );
    // An array of 2^64 - 1 elements.
    let mut file = gguf(3, false, &[("a", W::Array(4, vec![]))]);
    let at = file.len() - 8;
    file[at..].copy_from_slice(&u64::MAX.to_le_bytes());
    file.extend(7u32.to_le_bytes());
    let got = problem(GgufMetadata::read(&file[..], "model.gguf"));
    assert!(
        got.starts_with("truncated GGUF header: `a` claims 18446744073709551615 elements of u32"),
        "{got}"
    );
}

#[test]
fn foreign_and_unsupported_files_say_what_they_are() {
    let json = problem(GgufMetadata::read(
        &b"{\"model_type\": 1}"[..],
        "model.gguf",
    ));
    assert_eq!(
        json,
        "not a GGUF file: it starts with bytes 7b 22 6d 6f ('{\"mo'), not `GGUF`"
    );
    let v1 = problem(GgufMetadata::read(&gguf(1, false, &[])[..], "model.gguf"));
    assert!(
        v1.starts_with("GGUF version 1 (before August 2023)"),
        "{v1}"
    );
    let v1_big = problem(GgufMetadata::read(&gguf(1, true, &[])[..], "model.gguf"));
    assert_eq!(v1_big, v1);
    let v9 = problem(GgufMetadata::read(&gguf(9, false, &[])[..], "model.gguf"));
    assert_eq!(v9, "GGUF version 9 is not one kv reads (2 or 3)");
    let unknown = problem(GgufMetadata::read(
        &gguf(3, false, &[("odd", W::Unknown(13))])[..],
        "model.gguf",
    ));
    assert!(
        unknown.starts_with("`odd` has value type 13, which GGUF does not define (0 to 12)"),
        "{unknown}"
    );
    let bool_byte = problem(GgufMetadata::read(
        &gguf(3, false, &[("flag", W::Bool(2))])[..],
        "model.gguf",
    ));
    assert_eq!(bool_byte, "`flag`: bool byte 2, not 0 or 1");
    let ok = GgufMetadata::read(&gguf(3, false, &[("flag", W::Bool(1))])[..], "model.gguf");
    assert_eq!(ok.unwrap().get("flag"), Some(&GgufValue::Bool(true)));
    // An array of arrays is refused, as gguf.cpp refuses it (it reads the
    // element type and takes no GGUF_TYPE_ARRAY there), at any depth.
    let nested = problem(GgufMetadata::read(
        &gguf(
            3,
            false,
            &[("deep", W::Array(9, vec![W::Array(4, vec![])]))],
        )[..],
        "model.gguf",
    ));
    assert_eq!(
        nested,
        "`deep` is an array of GGUF type 9; llama.cpp refuses: key deep has invalid GGUF type 9"
    );
    let bad_utf8 = {
        let mut file = gguf(3, false, &[("k", W::Str("ab"))]);
        let at = file.len() - 2;
        file[at] = 0xff;
        problem(GgufMetadata::read(&file[..], "model.gguf"))
    };
    assert_eq!(bad_utf8, "`k` is not UTF-8");
}

#[test]
fn every_scalar_type_reads_in_its_own_type_and_integers_are_counts() {
    let file = gguf(
        3,
        false,
        &[
            ("u8", W::Raw(0, vec![200])),
            ("i8", W::Raw(1, (-3i8).to_le_bytes().to_vec())),
            ("u16", W::Raw(2, 60_000u16.to_le_bytes().to_vec())),
            ("i16", W::Raw(3, (-300i16).to_le_bytes().to_vec())),
            ("i16+", W::Raw(3, 300i16.to_le_bytes().to_vec())),
            ("i32", W::I32(70_000)),
            ("i64", W::Raw(11, (-5i64).to_le_bytes().to_vec())),
            ("i64+", W::Raw(11, (1i64 << 40).to_le_bytes().to_vec())),
            ("f64", W::Raw(12, 0.5f64.to_le_bytes().to_vec())),
            ("u64", W::U64(1 << 50)),
            ("i8+", W::Raw(1, 7i8.to_le_bytes().to_vec())),
        ],
    );
    let meta = GgufMetadata::read(&file[..], "model.gguf").unwrap();
    let got: Vec<(&str, Option<u64>, &str)> = meta
        .entries()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_count(), v.type_name()))
        .collect();
    assert_eq!(
        got,
        [
            ("u8", Some(200), "u8"),
            ("i8", None, "i8"),
            ("u16", Some(60_000), "u16"),
            ("i16", None, "i16"),
            ("i16+", Some(300), "i16"),
            ("i32", Some(70_000), "i32"),
            ("i64", None, "i64"),
            ("i64+", Some(1 << 40), "i64"),
            ("f64", None, "f64"),
            ("u64", Some(1 << 50), "u64"),
            ("i8+", Some(7), "i8"),
        ]
    );
    assert_eq!(meta.get("f64"), Some(&GgufValue::F64(0.5)));
    assert_eq!(meta.get("i16"), Some(&GgufValue::I16(-300)));
    assert_eq!(meta.get("i64"), Some(&GgufValue::I64(-5)));
    assert_eq!(meta.get("i8"), Some(&GgufValue::I8(-3)));
    assert_eq!(meta.get("u16"), Some(&GgufValue::U16(60_000)));
    // A bool and a string are not counts; type names for the rest.
    for (value, name) in [
        (GgufValue::Bool(true), "bool"),
        (GgufValue::F32(1.0), "f32"),
        (GgufValue::Text("8".into()), "str"),
        (GgufValue::Array(GgufArray::of("u32", vec![])), "arr"),
        (GgufValue::U32(4), "u32"),
    ] {
        assert_eq!(value.type_name(), name);
        assert_eq!(value.as_count(), (name == "u32").then_some(4));
    }
}

/// A reader that fails the test if anything past the header is read.
struct Poisoned;

impl Read for Poisoned {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        panic!("read past the metadata")
    }
}

#[test]
fn nothing_past_the_metadata_is_read() {
    let header = gguf(3, false, &mistral());
    let meta = GgufMetadata::read((&header[..]).chain(Poisoned), "model.gguf").unwrap();
    assert_eq!(meta.count("block_count").unwrap(), Some(32));
}

#[test]
fn a_file_on_disk_is_read_and_a_missing_one_is_named() {
    let dir = std::env::temp_dir().join(format!("kv-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mistral.gguf");
    let mut file = gguf(3, false, &mistral());
    file.extend([0u8; 64]); // tensor infos, never read as metadata
    std::fs::write(&path, file).unwrap();
    let meta = GgufMetadata::from_path(&path).unwrap();
    assert_eq!(meta.count("attention.head_count").unwrap(), Some(32));
    let missing = GgufMetadata::from_path(dir.join("absent.gguf")).unwrap_err();
    assert!(
        matches!(&missing, KvError::ConfigFile { path, .. } if path.ends_with("absent.gguf")),
        "{missing:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
