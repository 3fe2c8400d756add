//! A checkpoint's weights read from its headers: safetensors and GGUF files
//! written byte by byte here, their figures worked out by hand from the
//! formats' specifications, and every way a header can lie.

use std::fs;
use std::io::{self, Cursor};
use std::path::{Path, PathBuf};

use kv_core::KvError;
use kv_engines::gguf::GgufFile;
use kv_engines::weights::safetensors::SafetensorsHeader;
use kv_engines::weights::{CheckpointWeights, FileData};
use proptest::prelude::*;

// ---- safetensors -------------------------------------------------------

/// A safetensors file: the 8-byte little-endian length, then the JSON.
/// The data section is never written: the reader is told the file's size.
fn safetensors(json: &str) -> Vec<u8> {
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json.as_bytes());
    out
}

fn read_st(json: &str, data_bytes: u64) -> Result<SafetensorsHeader, KvError> {
    let bytes = safetensors(json);
    let size = bytes.len() as u64 + data_bytes;
    SafetensorsHeader::read(Cursor::new(bytes), size, "model.safetensors")
}

fn st_problem(json: &str, data_bytes: u64) -> String {
    match read_st(json, data_bytes) {
        Ok(header) => panic!("accepted: {header:?}"),
        Err(e) => e.to_string(),
    }
}

/// Five dtypes, one of each width, out of data order in the JSON.
/// BF16 [32000, 64]: 2,048,000 elements x 2 B = 4,096,000
/// F8_E4M3 [64, 64]: 4,096 x 1 B = 4,096
/// F32 []: a scalar, 4 B
/// U8 [8, 2, 16]: 256 x 1 B = 256 (packed int4, as compressed-tensors stores it)
/// F4 [2, 3]: 6 x 4 bits = 24 bits = 3 B
/// In all 4,096,000 + 4,096 + 4 + 256 + 3 = 4,100,359.
const FIVE: &str = r#"{
  "__metadata__": {"format": "pt"},
  "scale": {"dtype": "F8_E4M3", "shape": [64, 64], "data_offsets": [4096000, 4100096]},
  "embed": {"dtype": "BF16", "shape": [32000, 64], "data_offsets": [0, 4096000]},
  "packed": {"dtype": "U8", "shape": [8, 2, 16], "data_offsets": [4100100, 4100356]},
  "step": {"dtype": "F32", "shape": [], "data_offsets": [4100096, 4100100]},
  "fp4": {"dtype": "F4", "shape": [2, 3], "data_offsets": [4100356, 4100359]}
}"#;

#[test]
fn safetensors_tensors_in_data_order_with_their_stored_bytes() {
    let header = read_st(FIVE, 4_100_359).unwrap();
    let got: Vec<(&str, &str, u64)> = header
        .tensors()
        .iter()
        .map(|t| (t.name.as_str(), t.dtype.as_str(), t.bytes))
        .collect();
    assert_eq!(
        got,
        [
            ("embed", "BF16", 4_096_000),
            ("scale", "F8_E4M3", 4_096),
            ("step", "F32", 4),
            ("packed", "U8", 256),
            ("fp4", "F4", 3),
        ]
    );
    assert_eq!(header.tensors()[3].shape, [8, 2, 16]);
    assert_eq!(header.data_bytes(), 4_100_359);
}

#[test]
fn safetensors_every_dtype_width() {
    // One tensor of 16 elements in each dtype: bits x 16 / 8 bytes.
    for (dtype, bytes) in [
        ("F4", 8),
        ("F6_E2M3", 12),
        ("F6_E3M2", 12),
        ("BOOL", 16),
        ("U8", 16),
        ("I8", 16),
        ("F8_E5M2", 16),
        ("F8_E4M3", 16),
        ("F8_E8M0", 16),
        ("F8_E4M3FNUZ", 16),
        ("F8_E5M2FNUZ", 16),
        ("I16", 32),
        ("U16", 32),
        ("F16", 32),
        ("BF16", 32),
        ("I32", 64),
        ("U32", 64),
        ("F32", 64),
        ("I64", 128),
        ("U64", 128),
        ("F64", 128),
        ("C64", 128),
    ] {
        let json = format!(
            r#"{{"t": {{"dtype": "{dtype}", "shape": [4, 4], "data_offsets": [0, {bytes}]}}}}"#
        );
        let header = read_st(&json, bytes).unwrap_or_else(|e| panic!("{dtype}: {e}"));
        assert_eq!(header.tensors()[0].bytes, bytes, "{dtype}");
    }
}

#[test]
fn safetensors_empty_header_and_empty_tensor() {
    assert!(read_st("{}", 0).unwrap().tensors().is_empty());
    let zero = r#"{"z": {"dtype": "F32", "shape": [0, 7], "data_offsets": [0, 0]}}"#;
    assert_eq!(read_st(zero, 0).unwrap().tensors()[0].bytes, 0);
}

#[test]
fn safetensors_lengths_that_lie() {
    // Fewer than 8 bytes.
    let e = SafetensorsHeader::read(Cursor::new(vec![1, 2, 3]), 3, "x.safetensors")
        .unwrap_err()
        .to_string();
    assert!(e.contains("3 bytes, fewer than the 8"), "{e}");
    // A length of 2^64 - 1: refused before any allocation.
    let mut huge = u64::MAX.to_le_bytes().to_vec();
    huge.extend(b"{}");
    let e = SafetensorsHeader::read(Cursor::new(huge), 10, "x.safetensors")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is 18446744073709551615") && e.contains("100000000"),
        "{e}"
    );
    // Just over safetensors' limit, in a file large enough to hold it.
    let mut big = 100_000_001u64.to_le_bytes().to_vec();
    big.extend(b"{}");
    let e = SafetensorsHeader::read(Cursor::new(big), 200_000_000, "x.safetensors")
        .unwrap_err()
        .to_string();
    assert!(e.contains("header too large"), "{e}");
    // Past the end of the file.
    let mut past = 50u64.to_le_bytes().to_vec();
    past.extend(b"{}");
    let e = SafetensorsHeader::read(Cursor::new(past), 10, "x.safetensors")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is 50, but the file has 2 bytes after it"),
        "{e}"
    );
    // The file says it is long enough but the reader ends early.
    let mut short = 10u64.to_le_bytes().to_vec();
    short.extend(b"{}");
    let e = SafetensorsHeader::read(Cursor::new(short), 100, "x.safetensors")
        .unwrap_err()
        .to_string();
    assert!(e.contains("ends 2 bytes into its 10-byte header"), "{e}");
}

#[test]
fn safetensors_offsets_that_lie() {
    let cases = [
        // A gap before the first tensor.
        (
            r#"{"a": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}}"#,
            8,
            "`a` has data_offsets [4, 8], but the tensor before it ends at 0",
        ),
        // Two tensors overlapping.
        (
            r#"{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}"#,
            6,
            "`b` has data_offsets [2, 6], but the tensor before it ends at 4",
        ),
        // End before begin.
        (
            r#"{"a": {"dtype": "U8", "shape": [0], "data_offsets": [0, 0]},
                "b": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                "c": {"dtype": "U8", "shape": [4], "data_offsets": [4, 2]}}"#,
            4,
            "`c` has data_offsets [4, 2]",
        ),
        // The range holds more than the shape.
        (
            r#"{"a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 9]}}"#,
            9,
            "is 8 bytes, but its data_offsets [0, 9] hold 9",
        ),
        // Data left over after the last tensor.
        (
            r#"{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}"#,
            5,
            "cover 4 bytes of data, but the file has 5",
        ),
        // The tensors claim more data than the file has.
        (
            r#"{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}}"#,
            3,
            "cover 4 bytes of data, but the file has 3",
        ),
        // An odd number of 4-bit elements.
        (
            r#"{"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}"#,
            2,
            "is 12 bits, not whole bytes",
        ),
        // A shape whose bits pass 2^64.
        (
            r#"{"a": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}}"#,
            0,
            "`a` of shape [4294967296, 4294967296] and dtype F32 has more than 2^64 bits",
        ),
        (
            r#"{"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]}}"#,
            1,
            "`a` has dtype `Q4`, which safetensors does not define",
        ),
    ];
    for (json, data, want) in cases {
        let e = st_problem(json, data);
        assert!(e.contains(want), "{json}\n{e}");
        assert!(e.contains("model.safetensors"), "{e}");
    }
}

#[test]
fn safetensors_json_that_lies_names_the_key() {
    let e = st_problem(
        r#"{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
            "a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}}"#,
        2,
    );
    assert!(e.contains("`a` is given twice"), "{e}");
    let e = st_problem(
        r#"{"w": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 1]}}"#,
        1,
    );
    assert!(e.contains("(in `w`)"), "{e}");
    let e = st_problem(r#"{"w": {"dtype": "U8", "data_offsets": [0, 1]}}"#, 1);
    assert!(e.contains("(in `w`)") && e.contains("shape"), "{e}");
    let e = st_problem(r#"[1, 2]"#, 0);
    assert!(e.contains("not a safetensors header"), "{e}");
    let e = st_problem(r#"{} trailing"#, 0);
    assert!(e.contains("not a safetensors header"), "{e}");
    let mut bytes = safetensors("{\"\u{e9}\": 1}");
    bytes[11] = 0xff;
    let size = bytes.len() as u64;
    let e = SafetensorsHeader::read(Cursor::new(bytes), size, "x.safetensors")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not UTF-8 at byte 10"), "{e}");
}

// ---- GGUF --------------------------------------------------------------

/// One tensor info: name, dims (innermost first), ggml type id, offset.
struct Info {
    name: String,
    dims: Vec<u64>,
    kind: u32,
    offset: u64,
}

fn info(name: &str, dims: &[u64], kind: u32, offset: u64) -> Info {
    Info {
        name: name.to_owned(),
        dims: dims.to_vec(),
        kind,
        offset,
    }
}

fn put_str(out: &mut Vec<u8>, text: &str) {
    out.extend((text.len() as u64).to_le_bytes());
    out.extend(text.as_bytes());
}

/// A GGUF v3 header as gguf.cpp lays it out: magic, version, counts, the
/// key/values (here `general.architecture` and, when given, a raw
/// `general.alignment` of type `kind`), the tensor infos, padding to the
/// alignment. Returns the bytes up to the data section.
fn gguf(infos: &[Info], alignment: Option<(u32, Vec<u8>)>, pad_to: u64) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((infos.len() as u64).to_le_bytes());
    out.extend((1 + u64::from(alignment.is_some())).to_le_bytes());
    put_str(&mut out, "general.architecture");
    out.extend(8u32.to_le_bytes());
    put_str(&mut out, "llama");
    if let Some((kind, payload)) = alignment {
        put_str(&mut out, "general.alignment");
        out.extend(kind.to_le_bytes());
        out.extend(payload);
    }
    for t in infos {
        put_str(&mut out, &t.name);
        out.extend((t.dims.len() as u32).to_le_bytes());
        for d in &t.dims {
            out.extend(d.to_le_bytes());
        }
        out.extend(t.kind.to_le_bytes());
        out.extend(t.offset.to_le_bytes());
    }
    while !(out.len() as u64).is_multiple_of(pad_to) {
        out.push(0);
    }
    out
}

fn read_gguf(bytes: Vec<u8>, data_bytes: u64) -> Result<GgufFile, KvError> {
    let size = bytes.len() as u64 + data_bytes;
    GgufFile::read(Cursor::new(bytes), size, "model.gguf")
}

fn gguf_problem(bytes: Vec<u8>, data_bytes: u64) -> String {
    match read_gguf(bytes, data_bytes) {
        Ok(file) => panic!("accepted: {:?}", file.tensors()),
        Err(e) => e.to_string(),
    }
}

/// ggml type ids (ggml.h): F32 0, F16 1, Q4_0 2, Q8_0 8, Q4_K 12, Q6_K 14.
/// f32 [64]: 64 x 4 = 256 B, at 0.
/// q4_K [256, 2]: one 144-byte super-block of 256 per row, 2 rows = 288 B,
///   at 256 (256 is a multiple of 32).
/// q8_0 [64, 3]: 34 bytes per 32 elements, 2 blocks per row, 3 rows = 204 B,
///   at 256 + 288 = 544.
/// The data section holds 544 + 204 = 748 bytes.
fn three_tensors() -> Vec<Info> {
    vec![
        info("token_embd.norm", &[64], 0, 0),
        info("blk.0.attn_q.weight", &[256, 2], 12, 256),
        info("blk.0.attn_k.weight", &[64, 3], 8, 544),
    ]
}

#[test]
fn gguf_tensor_infos_with_block_sizes() {
    let header = gguf(&three_tensors(), None, 32);
    let header_len = header.len() as u64;
    let file = read_gguf(header, 748).unwrap();
    let got: Vec<(&str, &str, u64)> = file
        .tensors()
        .iter()
        .map(|t| (t.name.as_str(), t.dtype.as_str(), t.bytes))
        .collect();
    assert_eq!(
        got,
        [
            ("token_embd.norm", "f32", 256),
            ("blk.0.attn_q.weight", "q4_K", 288),
            ("blk.0.attn_k.weight", "q8_0", 204),
        ]
    );
    assert_eq!(file.tensors()[1].shape, [256, 2]);
    assert_eq!(file.data_offset(), header_len);
    assert_eq!(file.data_offset() % 32, 0);
    assert_eq!(file.metadata().architecture().unwrap(), "llama");
}

#[test]
fn gguf_alignment_from_the_header() {
    // general.alignment = 64 (u32, type 4): q4_K's 288 bytes pad to 320.
    let infos = vec![info("a", &[256, 2], 12, 0), info("b", &[64], 0, 320)];
    let file = read_gguf(
        gguf(&infos, Some((4, 64u32.to_le_bytes().to_vec())), 64),
        576,
    )
    .unwrap();
    assert_eq!(file.data_offset() % 64, 0);
    assert_eq!(file.tensors()[1].bytes, 256);
    // The same file read with the default 32 would expect b at 288.
    let e = gguf_problem(gguf(&infos, None, 32), 576);
    assert!(e.contains("tensor `b` has offset 320, expected 288"), "{e}");
    let e = gguf_problem(
        gguf(&infos, Some((4, 48u32.to_le_bytes().to_vec())), 16),
        576,
    );
    assert!(e.contains("alignment 48 is not a power of 2"), "{e}");
    let e = gguf_problem(
        gguf(&infos, Some((10, 64u64.to_le_bytes().to_vec())), 64),
        576,
    );
    assert!(e.contains("must be of type u32 but is u64"), "{e}");
    let e = gguf_problem(
        gguf(&infos, Some((4, 0u32.to_le_bytes().to_vec())), 16),
        576,
    );
    assert!(e.contains("alignment 0 is not a power of 2"), "{e}");
}

#[test]
fn gguf_tensor_infos_that_lie() {
    let one = |t: Info, data: u64| gguf_problem(gguf(&[t], None, 32), data);
    let long = "n".repeat(64);
    let cases = [
        (one(info("w", &[64], 0, 0), 255), "runs past the end of the"),
        (
            one(info("w", &[64], 0, 32), 400),
            "has offset 32, expected 0",
        ),
        (
            one(info("w", &[64], 4, 0), 256),
            "ggml type 4, which ggml removed",
        ),
        (
            one(info("w", &[64], 43, 0), 256),
            "invalid ggml type 43. should be in [0, 43)",
        ),
        (
            one(info("w", &[100, 2], 12, 0), 999),
            "has 100 elements per row",
        ),
        (
            one(info(&long, &[64], 0, 0), 256),
            "tensor name 0 is too long: 64 >= 64",
        ),
        (
            one(info("w", &[1, 1, 1, 1, 1], 0, 0), 4),
            "invalid number of dimensions: 5 > 4",
        ),
        (
            one(info("w", &[u64::MAX], 0, 0), 4),
            "invalid number of elements: -1 < 0",
        ),
        (
            one(info("w", &[1 << 32, 1 << 31], 0, 0), 4),
            "total number of elements is >= 9223372036854775807",
        ),
        (
            // 2^62 f32 elements: fewer than INT64_MAX, but 2^64 bytes.
            one(info("w", &[1 << 31, 1 << 31], 0, 0), 4),
            "its size in bytes overflows",
        ),
    ];
    for (e, want) in cases {
        assert!(e.contains(want), "want {want:?} in {e}");
        assert!(e.contains("model.gguf"), "{e}");
    }
    let e = gguf_problem(
        gguf(
            &[info("w", &[64], 0, 0), info("w", &[64], 0, 256)],
            None,
            32,
        ),
        512,
    );
    assert!(e.contains("duplicate tensor name 'w'"), "{e}");
}

#[test]
fn gguf_tensor_count_beyond_the_file_is_refused_unread() {
    let mut header = gguf(&[], None, 1);
    header[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let e = gguf_problem(header, 0);
    assert!(e.contains("number of tensors is -1"), "{e}");
    let mut header = gguf(&[], None, 1);
    header[8..16].copy_from_slice(&1_000_000u64.to_le_bytes());
    let e = gguf_problem(header, 1000);
    assert!(e.contains("tensor infos"), "{e}");
}

#[test]
fn gguf_cut_short_anywhere_is_an_error_naming_a_place() {
    let full = gguf(&three_tensors(), None, 32);
    for cut in 0..full.len() {
        let bytes = full[..cut].to_vec();
        let size = bytes.len() as u64;
        let e = GgufFile::read(Cursor::new(bytes), size, "model.gguf");
        assert!(e.is_err(), "accepted at {cut} bytes");
    }
}

// ---- files and folders ---------------------------------------------------

/// A fresh folder under the system's temporary one, for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kv-weights-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a header and extends the file to `data_bytes` more, sparsely.
fn write_sparse(path: &Path, header: &[u8], data_bytes: u64) -> io::Result<()> {
    fs::write(path, header)?;
    fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .set_len(header.len() as u64 + data_bytes)
}

fn shard(names: &[(&str, u64)]) -> (Vec<u8>, u64) {
    let mut at = 0;
    let mut json = String::from("{");
    for (i, (name, bytes)) in names.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!(
            r#""{name}": {{"dtype": "BF16", "shape": [{}], "data_offsets": [{at}, {}]}}"#,
            bytes / 2,
            at + bytes
        ));
        at += bytes;
    }
    json.push('}');
    (safetensors(&json), at)
}

#[test]
fn a_sharded_checkpoint_through_its_index() {
    let dir = scratch("sharded");
    let (one, one_bytes) = shard(&[("model.embed.weight", 1 << 30), ("model.layers.0.w", 4096)]);
    let (two, two_bytes) = shard(&[("lm_head.weight", 1 << 30)]);
    write_sparse(
        &dir.join("model-00001-of-00002.safetensors"),
        &one,
        one_bytes,
    )
    .unwrap();
    write_sparse(
        &dir.join("model-00002-of-00002.safetensors"),
        &two,
        two_bytes,
    )
    .unwrap();
    let index = r#"{"metadata": {"total_size": 2147487744}, "weight_map": {
        "lm_head.weight": "model-00002-of-00002.safetensors",
        "model.embed.weight": "model-00001-of-00002.safetensors",
        "model.layers.0.w": "model-00001-of-00002.safetensors"}}"#;
    fs::write(dir.join("model.safetensors.index.json"), index).unwrap();
    // A stray file the index does not name is not loaded.
    let (stray, stray_bytes) = shard(&[("extra", 2)]);
    write_sparse(&dir.join("consolidated.safetensors"), &stray, stray_bytes).unwrap();
    let weights = CheckpointWeights::from_path(&dir).unwrap();
    assert_eq!(weights.files().len(), 2);
    // 2^30 + 4096 + 2^30 = 2,147,487,744: the index's own total_size.
    assert_eq!(weights.total_bytes().unwrap(), 2_147_487_744);
    assert_eq!(weights.bytes_by_dtype().unwrap()["BF16"], 2_147_487_744);
    assert_eq!(weights.tensors()[0].name, "model.embed.weight");
    assert_eq!(weights.tensors()[2].name, "lm_head.weight");

    // The index puts a tensor in a shard that does not hold it.
    let wrong = index.replace(
        r#""lm_head.weight": "model-00002-of-00002.safetensors""#,
        r#""lm_head.weight": "model-00001-of-00002.safetensors""#,
    );
    fs::write(dir.join("model.safetensors.index.json"), wrong).unwrap();
    let e = CheckpointWeights::from_path(&dir).unwrap_err().to_string();
    assert!(
        e.contains(
            "puts `lm_head.weight` in `model-00001-of-00002.safetensors`, which does not hold it"
        ),
        "{e}"
    );
    // A shard outside the folder.
    let escape = index.replace("model-00002-of-00002", "../model-00002-of-00002");
    fs::write(dir.join("model.safetensors.index.json"), escape).unwrap();
    let e = CheckpointWeights::from_path(&dir).unwrap_err().to_string();
    assert!(
        e.contains("not a file name in the checkpoint's folder"),
        "{e}"
    );
    // A missing shard names its path.
    let missing = index.replace("model-00002-of-00002", "model-00003-of-00003");
    fs::write(dir.join("model.safetensors.index.json"), missing).unwrap();
    let e = CheckpointWeights::from_path(&dir).unwrap_err().to_string();
    assert!(e.contains("model-00003-of-00003.safetensors"), "{e}");
    fs::write(
        dir.join("model.safetensors.index.json"),
        "{\"weight_map\": 3}",
    )
    .unwrap();
    let e = CheckpointWeights::from_path(&dir).unwrap_err().to_string();
    assert!(e.contains("not a safetensors index"), "{e}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_folder_without_an_index_loads_every_safetensors_file_once() {
    let dir = scratch("unindexed");
    let (a, a_bytes) = shard(&[("a", 6)]);
    let (b, b_bytes) = shard(&[("b", 10)]);
    write_sparse(&dir.join("b.safetensors"), &b, b_bytes).unwrap();
    write_sparse(&dir.join("a.safetensors"), &a, a_bytes).unwrap();
    fs::write(dir.join("config.json"), "{}").unwrap();
    let weights = CheckpointWeights::from_path(&dir).unwrap();
    assert_eq!(weights.total_bytes().unwrap(), 16);
    assert_eq!(weights.tensors()[0].name, "a");
    // The same tensor in two files.
    let (again, again_bytes) = shard(&[("a", 6)]);
    write_sparse(&dir.join("c.safetensors"), &again, again_bytes).unwrap();
    let e = CheckpointWeights::from_path(&dir).unwrap_err().to_string();
    assert!(e.contains("`a` is held by two of the files"), "{e}");
    fs::remove_dir_all(&dir).unwrap();

    let empty = scratch("empty");
    let e = CheckpointWeights::from_path(&empty)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no .safetensors file"), "{e}");
    fs::remove_dir_all(&empty).unwrap();
}

#[test]
fn single_files_by_their_extension() {
    let dir = scratch("single");
    let header = gguf(&three_tensors(), None, 32);
    write_sparse(&dir.join("m.gguf"), &header, 748).unwrap();
    let weights = CheckpointWeights::from_path(dir.join("m.gguf")).unwrap();
    assert_eq!(weights.total_bytes().unwrap(), 256 + 288 + 204);
    let by = weights.bytes_by_dtype().unwrap();
    assert_eq!((by["f32"], by["q4_K"], by["q8_0"]), (256, 288, 204));
    // The same GGUF one byte short of its last tensor.
    write_sparse(&dir.join("short.gguf"), &header, 747).unwrap();
    let e = CheckpointWeights::from_path(dir.join("short.gguf"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("short.gguf") && e.contains("blk.0.attn_k.weight"),
        "{e}"
    );

    let one = safetensors(FIVE);
    write_sparse(&dir.join("m.safetensors"), &one, 4_100_359).unwrap();
    let weights = CheckpointWeights::from_path(dir.join("m.safetensors")).unwrap();
    assert_eq!(weights.total_bytes().unwrap(), 4_100_359);
    fs::write(dir.join("m.bin"), b"pickle").unwrap();
    let e = CheckpointWeights::from_path(dir.join("m.bin"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a checkpoint"), "{e}");
    let e = CheckpointWeights::from_path(dir.join("absent.safetensors"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("absent.safetensors"), "{e}");
    fs::remove_dir_all(&dir).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any bytes at all: an answer or an error, never a panic, and never
    /// an allocation the file's size does not bound.
    #[test]
    fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256), extra in 0u64..1 << 40) {
        let size = bytes.len() as u64 + extra;
        let _ = SafetensorsHeader::read(Cursor::new(bytes.clone()), size, "p.safetensors");
        let _ = GgufFile::read(Cursor::new(bytes), size, "p.gguf");
    }

    /// A valid header with any one byte changed.
    #[test]
    fn one_byte_changed_never_panics(at in 0usize..4096, to in any::<u8>()) {
        let mut st = safetensors(FIVE);
        let i = at % st.len();
        st[i] = to;
        let size = st.len() as u64 + 4_100_359;
        let _ = SafetensorsHeader::read(Cursor::new(st), size, "p.safetensors");
        let mut gg = gguf(&three_tensors(), None, 32);
        let i = at % gg.len();
        gg[i] = to;
        let size = gg.len() as u64 + 748;
        let _ = GgufFile::read(Cursor::new(gg), size, "p.gguf");
    }
}

#[test]
fn gguf_without_tensors_has_its_data_where_the_header_ends() {
    // magic 4 + version 4 + counts 16 + key 8 + 20 + type 4 + value 8 + 5 =
    // 69 bytes; gguf.cpp pads to the alignment only when tensors follow.
    let bytes = gguf(&[], None, 1);
    assert_eq!(bytes.len(), 69);
    let file = read_gguf(bytes, 0).unwrap();
    assert_eq!(file.data_offset(), 69);
    assert!(file.tensors().is_empty());
}

#[test]
fn an_index_is_read_up_to_64_mib() {
    let dir = scratch("index-size");
    let index = dir.join("model.safetensors.index.json");
    // Exactly 64 MiB of NUL bytes (sparse): read, and refused as JSON.
    write_sparse(&index, b"", 64 << 20).unwrap();
    let e = CheckpointWeights::from_path(&dir).unwrap_err().to_string();
    assert!(!e.contains("kv reads at most"), "{e}");
    // One byte more is refused before it is read.
    write_sparse(&index, b"", (64 << 20) + 1).unwrap();
    let e = CheckpointWeights::from_path(&dir).unwrap_err().to_string();
    assert!(
        e.contains("the index is 67108865 bytes; kv reads at most 67108864"),
        "{e}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bounds_fall_where_the_formats_put_them() {
    // Exactly 8 bytes: a header length of 0 is read, then refused as JSON,
    // not as a file too small for its length.
    let e = SafetensorsHeader::read(Cursor::new(vec![0; 8]), 8, "x.safetensors")
        .unwrap_err()
        .to_string();
    assert!(!e.contains("fewer than the 8"), "{e}");
    // A length of exactly 100,000,000 is allowed by safetensors; here it
    // runs past the 16-byte file instead.
    let mut at_limit = 100_000_000u64.to_le_bytes().to_vec();
    at_limit.extend([0; 8]);
    let e = SafetensorsHeader::read(Cursor::new(at_limit), 16, "x.safetensors")
        .unwrap_err()
        .to_string();
    assert!(!e.contains("header too large"), "{e}");
    // Not an object: serde's words carry what was expected.
    let e = st_problem("[1, 2]", 0);
    assert!(e.contains("expected an object of tensors"), "{e}");
    // GGUF: 4 dimensions are allowed (GGML_MAX_DIMS), 5 are not (tested
    // above); f32 [2, 2, 2, 2] is 64 bytes.
    let infos = vec![info("w", &[2, 2, 2, 2], 0, 0)];
    let file = read_gguf(gguf(&infos, None, 32), 64).unwrap();
    assert_eq!(file.tensors()[0].bytes, 64);
    // One dimension of INT64_MAX elements: gguf.cpp refuses the count
    // itself (>= INT64_MAX), before any size.
    let infos = vec![info("w", &[i64::MAX as u64], 0, 0)];
    let e = gguf_problem(gguf(&infos, None, 32), 64);
    assert!(e.contains("total number of elements is >="), "{e}");
}

// ---- files holding their headers alone (--headers-only) -------------------

fn read_st_as(json: &str, data_bytes: u64, data: FileData) -> Result<SafetensorsHeader, KvError> {
    let bytes = safetensors(json);
    let size = bytes.len() as u64 + data_bytes;
    SafetensorsHeader::read_as(Cursor::new(bytes), size, "model.safetensors", data)
}

#[test]
fn a_safetensors_file_cut_after_its_header_is_read_when_asked() {
    let cut = FileData::MayEndAfterHeader;
    // FIVE's tensors cover 4,100,359 bytes; the file holds none, some or
    // all of them: the same tensors each time.
    for held in [0, 1, 4_100_358, 4_100_359] {
        let header = read_st_as(FIVE, held, cut).unwrap();
        assert_eq!(
            header.tensors(),
            read_st(FIVE, 4_100_359).unwrap().tensors()
        );
        assert_eq!(header.data_bytes(), 4_100_359);
        assert_eq!(header.held_bytes(), held);
    }
    // A whole file read either way holds its data.
    let whole = read_st(FIVE, 4_100_359).unwrap();
    assert_eq!(whole.held_bytes(), whole.data_bytes());
    // More data than the tensors cover is refused both ways.
    let e = read_st_as(FIVE, 4_100_360, cut).unwrap_err().to_string();
    assert!(
        e.contains("the tensors cover 4100359 bytes of data, but the file has 4100360"),
        "{e}"
    );
    assert!(!e.contains("ends before its data"), "{e}");
    // Unasked, the cut file is an error naming what it may be.
    let e = st_problem(FIVE, 0);
    assert!(
        e.contains("the tensors cover 4100359 bytes of data, but the file has 0 after its header")
            && e.contains(
                "the file ends before its data does (a download cut short, or its \
                 header alone)"
            ),
        "{e}"
    );
    // Every check of the header itself still holds: a range that does not
    // follow the one before, a size that is not the shape's.
    let gap = r#"{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                  "b": {"dtype": "U8", "shape": [4], "data_offsets": [5, 9]}}"#;
    let e = read_st_as(gap, 0, cut).unwrap_err().to_string();
    assert!(e.contains("tensor `b` has data_offsets [5, 9]"), "{e}");
    let short = r#"{"a": {"dtype": "BF16", "shape": [4], "data_offsets": [0, 4]}}"#;
    let e = read_st_as(short, 0, cut).unwrap_err().to_string();
    assert!(
        e.contains("is 8 bytes, but its data_offsets [0, 4] hold 4"),
        "{e}"
    );
    // A header longer than the file is refused: the header must be whole.
    let mut bytes = safetensors(FIVE);
    bytes.truncate(bytes.len() - 1);
    let size = bytes.len() as u64;
    let e = SafetensorsHeader::read_as(Cursor::new(bytes), size, "x.safetensors", cut)
        .unwrap_err()
        .to_string();
    assert!(e.contains("but the file has"), "{e}");
}

#[test]
fn a_gguf_cut_after_its_tensor_infos_is_read_when_asked() {
    let cut = FileData::MayEndAfterHeader;
    let header = gguf(&three_tensors(), None, 32);
    let header_len = header.len() as u64;
    let whole = read_gguf(header.clone(), 748).unwrap();
    assert!(whole.is_whole());
    // 0 bytes of data, or all but the last byte of q8_0's 204: the tensor
    // infos are the whole file's.
    for held in [0, 747] {
        let file = GgufFile::read_as(
            Cursor::new(header.clone()),
            header_len + held,
            "model.gguf",
            cut,
        )
        .unwrap();
        assert_eq!(file.tensors(), whole.tensors());
        assert_eq!(file.data_offset(), whole.data_offset());
        assert!(!file.is_whole());
    }
    let read_whole = GgufFile::read_as(Cursor::new(header.clone()), header_len + 748, "m", cut);
    assert!(read_whole.unwrap().is_whole());
    // Unasked, llama.cpp's refusal.
    let e = gguf_problem(header.clone(), 747);
    assert!(
        e.contains("tensor `blk.0.attn_k.weight` (204 bytes at data offset 544) runs past"),
        "{e}"
    );
    // A file cut inside its tensor infos is refused either way, at the byte.
    let mut inside = header;
    inside.truncate(inside.len() - 40);
    let size = inside.len() as u64;
    let e = GgufFile::read_as(Cursor::new(inside), size, "model.gguf", cut)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("truncated GGUF header: the file ends inside"),
        "{e}"
    );
    // An offset out of its place is refused either way.
    let infos = vec![info("w", &[64], 0, u64::MAX - 32)];
    let bytes = gguf(&infos, None, 32);
    let size = bytes.len() as u64;
    let e = GgufFile::read_as(Cursor::new(bytes), size, "model.gguf", cut)
        .unwrap_err()
        .to_string();
    assert!(e.contains("has offset"), "{e}");
}

#[test]
fn a_checkpoint_of_headers_alone_names_its_cut_files() {
    let dir = scratch("headers-only");
    let (one, _) = shard(&[("model.embed.weight", 1 << 30), ("model.layers.0.w", 4096)]);
    let (two, two_bytes) = shard(&[("lm_head.weight", 1 << 30)]);
    // One shard as its header alone, the other whole (sparse).
    fs::write(dir.join("model-00001-of-00002.safetensors"), &one).unwrap();
    write_sparse(
        &dir.join("model-00002-of-00002.safetensors"),
        &two,
        two_bytes,
    )
    .unwrap();
    let index = r#"{"weight_map": {
        "lm_head.weight": "model-00002-of-00002.safetensors",
        "model.embed.weight": "model-00001-of-00002.safetensors",
        "model.layers.0.w": "model-00001-of-00002.safetensors"}}"#;
    fs::write(dir.join("model.safetensors.index.json"), index).unwrap();
    let weights = CheckpointWeights::from_path_as(&dir, FileData::MayEndAfterHeader).unwrap();
    // 2^30 + 4,096 + 2^30, as the whole checkpoint.
    assert_eq!(weights.total_bytes().unwrap(), 2_147_487_744);
    assert_eq!(
        weights.cut_files(),
        [dir.join("model-00001-of-00002.safetensors")]
    );
    let e = CheckpointWeights::from_path(&dir).unwrap_err().to_string();
    assert!(
        e.contains("model-00001-of-00002.safetensors") && e.contains("ends before its data"),
        "{e}"
    );
    // Without an index: every .safetensors file of the folder.
    fs::remove_file(dir.join("model.safetensors.index.json")).unwrap();
    let weights = CheckpointWeights::from_path_as(&dir, FileData::MayEndAfterHeader).unwrap();
    assert_eq!(weights.total_bytes().unwrap(), 2_147_487_744);
    assert_eq!(
        weights.cut_files(),
        [dir.join("model-00001-of-00002.safetensors")]
    );
    // One file named, cut or whole.
    let one_file = dir.join("model-00001-of-00002.safetensors");
    let weights = CheckpointWeights::from_path_as(&one_file, FileData::MayEndAfterHeader).unwrap();
    assert_eq!(weights.cut_files(), [one_file]);
    let two_file = dir.join("model-00002-of-00002.safetensors");
    let weights = CheckpointWeights::from_path_as(&two_file, FileData::MayEndAfterHeader).unwrap();
    assert!(weights.cut_files().is_empty());
    // A GGUF of its header alone.
    let gguf_file = dir.join("m.gguf");
    fs::write(&gguf_file, gguf(&three_tensors(), None, 32)).unwrap();
    let weights = CheckpointWeights::from_path_as(&gguf_file, FileData::MayEndAfterHeader).unwrap();
    assert_eq!(weights.total_bytes().unwrap(), 256 + 288 + 204);
    assert_eq!(weights.cut_files(), std::slice::from_ref(&gguf_file));
    assert!(CheckpointWeights::from_path(&gguf_file).is_err());
    fs::remove_dir_all(&dir).unwrap();
}

/// The shipped `examples/checkpoints/llama-3.1-8b`: the published shards'
/// headers alone. Each file holds 8 + N bytes; the data its header gives
/// brings it to the published file's size, as third-party manifests of
/// the Hub's files record them (4,976,698,672, 4,999,802,720,
/// 4,915,916,176 and 1,168,138,808 B), and the four total the index's
/// `total_size`, 16,060,522,496 B. The first header's length, 9,512
/// (`28 25 00 00 00 00 00 00`), is what a third-party range read of the
/// published first shard printed.
#[test]
fn the_shipped_llama_checkpoint_is_its_published_headers() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/checkpoints/llama-3.1-8b");
    let published = [
        ("model-00001-of-00004.safetensors", 4_976_698_672u64),
        ("model-00002-of-00004.safetensors", 4_999_802_720),
        ("model-00003-of-00004.safetensors", 4_915_916_176),
        ("model-00004-of-00004.safetensors", 1_168_138_808),
    ];
    for (name, size) in published {
        let path = folder.join(name);
        let header = SafetensorsHeader::from_path_as(&path, FileData::MayEndAfterHeader).unwrap();
        let held = fs::metadata(&path).unwrap().len();
        assert_eq!(header.held_bytes(), 0, "{name}");
        assert_eq!(held + header.data_bytes(), size, "{name}");
    }
    let first = fs::read(folder.join(published[0].0)).unwrap();
    assert_eq!(first[..8], [0x28, 0x25, 0, 0, 0, 0, 0, 0]);
    let weights = CheckpointWeights::from_path_as(&folder, FileData::MayEndAfterHeader).unwrap();
    assert_eq!(weights.tensors().len(), 291);
    assert_eq!(weights.total_bytes().unwrap(), 16_060_522_496);
    assert_eq!(weights.cut_files().len(), 4);
}
