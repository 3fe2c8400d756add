//! The metadata section of a GGUF header: its entries, each key with its
//! value, read as ggml's `gguf.c` reads them (the module doc of
//! [`crate::gguf`] says what is refused and what is kept).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use kv_core::KvError;

/// The versions read: 1 (before August 2023) wrote 32-bit counts.
const VERSIONS: [u32; 2] = [2, 3];

/// An array keeps its elements up to this many (llama.cpp's per-layer
/// arrays hold at most `LLAMA_MAX_LAYERS`, 512); a longer one, or one of
/// strings (a tokenizer's vocabulary), is kept as its type and length.
pub const KEPT_ELEMENTS: u64 = 512;

/// A string value longer than this is kept as its length only (no cache
/// rule reads a long string: chat templates, licences).
pub const KEPT_STRING_BYTES: u64 = 1 << 20;

/// The GGUF specification's bound on a key: "at most 2^16-1 (65535) bytes".
pub const MAX_KEY_BYTES: u64 = 65_535;

/// kv reads at most this many metadata entries (published GGUFs hold a few
/// dozen; each array is one): more is refused rather than held.
pub const MAX_ENTRIES: u64 = 65_536;

/// One metadata value, in the type the file gives it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum GgufValue {
    /// `GGUF_TYPE_UINT8`.
    U8(u8),
    /// `GGUF_TYPE_INT8`.
    I8(i8),
    /// `GGUF_TYPE_UINT16`.
    U16(u16),
    /// `GGUF_TYPE_INT16`.
    I16(i16),
    /// `GGUF_TYPE_UINT32`.
    U32(u32),
    /// `GGUF_TYPE_INT32`.
    I32(i32),
    /// `GGUF_TYPE_FLOAT32`.
    F32(f32),
    /// `GGUF_TYPE_BOOL`.
    Bool(bool),
    /// `GGUF_TYPE_STRING`. (Not named `String`: a public item of that name
    /// would make rustc print `std::string::String` in full in every
    /// user's diagnostics.)
    Text(String),
    /// `GGUF_TYPE_ARRAY`: its element type and length, and its elements
    /// where they are kept.
    Array(GgufArray),
    /// `GGUF_TYPE_STRING` longer than [`KEPT_STRING_BYTES`]: its length in
    /// bytes, the bytes read past.
    LongText(u64),
    /// `GGUF_TYPE_UINT64`.
    U64(u64),
    /// `GGUF_TYPE_INT64`.
    I64(i64),
    /// `GGUF_TYPE_FLOAT64`.
    F64(f64),
}

impl GgufValue {
    /// The value as a count: an integer of any width that is not negative
    /// (a bool is not a count).
    pub fn as_count(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// ggml's name of the value's type (`gguf_type_name`), for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            GgufValue::U8(_) => "u8",
            GgufValue::I8(_) => "i8",
            GgufValue::U16(_) => "u16",
            GgufValue::I16(_) => "i16",
            GgufValue::U32(_) => "u32",
            GgufValue::I32(_) => "i32",
            GgufValue::F32(_) => "f32",
            GgufValue::Bool(_) => "bool",
            GgufValue::Text(_) | GgufValue::LongText(_) => "str",
            GgufValue::Array(_) => "arr",
            GgufValue::U64(_) => "u64",
            GgufValue::I64(_) => "i64",
            GgufValue::F64(_) => "f64",
        }
    }

    /// The value in words for a message: its type, and the number itself
    /// where it is one (a string's bytes are never echoed, only counted).
    pub fn describe(&self) -> String {
        match self {
            GgufValue::U8(v) => format!("u8 {v}"),
            GgufValue::I8(v) => format!("i8 {v}"),
            GgufValue::U16(v) => format!("u16 {v}"),
            GgufValue::I16(v) => format!("i16 {v}"),
            GgufValue::U32(v) => format!("u32 {v}"),
            GgufValue::I32(v) => format!("i32 {v}"),
            GgufValue::F32(v) => format!("f32 {v}"),
            GgufValue::Bool(v) => format!("bool {v}"),
            GgufValue::Text(t) => format!("str of {} bytes", t.len()),
            GgufValue::LongText(len) => format!("str of {len} bytes (not kept)"),
            GgufValue::Array(a) => format!("arr of {} {}", a.len(), a.element_type()),
            GgufValue::U64(v) => format!("u64 {v}"),
            GgufValue::I64(v) => format!("i64 {v}"),
            GgufValue::F64(v) => format!("f64 {v}"),
        }
    }
}

/// A `GGUF_TYPE_ARRAY` value: ggml's name of its element type, its length,
/// and its elements where they are kept (see [`KEPT_ELEMENTS`]).
#[derive(Clone, Debug, PartialEq)]
pub struct GgufArray {
    element_type: &'static str,
    len: u64,
    items: Option<Vec<GgufValue>>,
}

impl GgufArray {
    /// An array of `items`, all of `element_type` (ggml's name), kept.
    pub fn of(element_type: &'static str, items: Vec<GgufValue>) -> GgufArray {
        GgufArray {
            element_type,
            len: u64::try_from(items.len()).unwrap_or(u64::MAX),
            items: Some(items),
        }
    }

    /// ggml's name of the elements' type.
    pub fn element_type(&self) -> &'static str {
        self.element_type
    }

    /// How many elements the file gives.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it has no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements, where kept: numbers and flags, at most
    /// [`KEPT_ELEMENTS`] of them.
    pub fn items(&self) -> Option<&[GgufValue]> {
        self.items.as_deref()
    }
}

/// A GGUF file's header: its version, tensor count and metadata in file
/// order.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufMetadata {
    source: String,
    version: u32,
    tensor_count: u64,
    entries: Vec<(String, GgufValue)>,
    /// Each key's place in `entries` (keys are unique, as gguf.cpp requires).
    index: HashMap<String, usize>,
}

impl GgufMetadata {
    /// Reads the header of the GGUF file at `path`, and nothing after it;
    /// every length in it is checked against the file's size.
    pub fn from_path(path: impl AsRef<Path>) -> Result<GgufMetadata, KvError> {
        let (reader, size, source) = open_sized(path.as_ref())?;
        GgufMetadata::read_sized(reader, Some(size), &source)
    }

    /// Reads a GGUF header from `reader`; `source` names it in errors.
    pub fn read(reader: impl Read, source: &str) -> Result<GgufMetadata, KvError> {
        GgufMetadata::read_sized(reader, None, source)
    }

    /// Reads a GGUF header from `reader`, of `size` bytes where known (a
    /// length past it is refused before anything is read for it).
    pub fn read_sized(
        reader: impl Read,
        size: Option<u64>,
        source: &str,
    ) -> Result<GgufMetadata, KvError> {
        let mut input = Input {
            reader,
            big_endian: false,
            at: 0,
            size,
            source,
        };
        GgufMetadata::read_from(&mut input)
    }

    /// Reads the header from `input`, leaving it at the first tensor info.
    pub(super) fn read_from<R: Read>(input: &mut Input<'_, R>) -> Result<GgufMetadata, KvError> {
        let source = input.source;
        let mut magic = [0; 4];
        input.fill(&mut magic, "the magic")?;
        if &magic != b"GGUF" {
            return Err(input.error(format!(
                "not a GGUF file: it starts with {}, not `GGUF`",
                hex_bytes(&magic)
            )));
        }
        let mut raw = [0; 4];
        input.fill(&mut raw, "the version")?;
        let version = match (u32::from_le_bytes(raw), u32::from_be_bytes(raw)) {
            (le, _) if VERSIONS.contains(&le) => le,
            (_, be) if VERSIONS.contains(&be) => {
                input.big_endian = true;
                be
            }
            (1, _) | (_, 1) => {
                return Err(input.error(
                    "GGUF version 1 (before August 2023) is not read; convert the model again \
                     with a current llama.cpp"
                        .to_owned(),
                ))
            }
            (le, _) => {
                return Err(input.error(format!("GGUF version {le} is not one kv reads (2 or 3)")))
            }
        };
        let tensor_count = input.signed_count("tensors")?;
        let count = input.signed_count("key value pairs")?;
        if count > MAX_ENTRIES {
            return Err(input.error(format!(
                "the header has {count} metadata entries; kv reads at most {MAX_ENTRIES} \
                 (published models hold a few dozen)"
            )));
        }
        let mut entries = Vec::new();
        let mut index = HashMap::new();
        for entry in 0..count {
            let key = input.key(entry, count)?;
            if key.is_empty() {
                return Err(input.error(format!(
                    "metadata entry {entry} has an empty key; llama.cpp refuses: key {entry} is \
                     empty"
                )));
            }
            let slot = usize::try_from(entry).unwrap_or(usize::MAX);
            if let Some(first) = index.insert(key.clone(), slot) {
                return Err(input.error(format!(
                    "`{key}` is given twice (metadata entries {first} and {entry}); llama.cpp \
                     refuses: duplicate key '{key}' for tensors {first} and {entry}"
                )));
            }
            let what = format!("`{key}`");
            let kind = input.u32(&what)?;
            let value = input.value(kind, &what)?;
            entries.push((key, value));
        }
        Ok(GgufMetadata {
            source: source.to_owned(),
            version,
            tensor_count,
            entries,
            index,
        })
    }

    /// The file as named when read, for messages.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// How many tensors the file says it holds (their data is not read).
    pub fn tensor_count(&self) -> u64 {
        self.tensor_count
    }

    /// Every metadata entry, in file order.
    pub fn entries(&self) -> &[(String, GgufValue)] {
        &self.entries
    }

    /// The value of `key`, if the file has it.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        let at = *self.index.get(key)?;
        self.entries.get(at).map(|(_, value)| value)
    }

    /// `general.architecture`, which prefixes the model's own keys.
    pub fn architecture(&self) -> Result<&str, KvError> {
        match self.get("general.architecture") {
            Some(GgufValue::Text(arch)) => Ok(arch),
            Some(GgufValue::LongText(len)) => Err(self.error(format!(
                "`general.architecture` is a string of {len} bytes, not an architecture's name"
            ))),
            Some(other) => Err(self.error(format!(
                "`general.architecture` is a {0}, not a string; llama.cpp refuses: key \
                 general.architecture has wrong type {0} but expected type str",
                other.type_name()
            ))),
            None => Err(self.error("no `general.architecture`".to_owned())),
        }
    }

    /// `{architecture}.{suffix}` as a count, `None` when absent; a value
    /// that is not a non-negative integer is an error naming the key.
    pub fn count(&self, suffix: &str) -> Result<Option<u64>, KvError> {
        let key = format!("{}.{suffix}", self.architecture()?);
        match self.get(&key) {
            None => Ok(None),
            Some(value) => value.as_count().map(Some).ok_or_else(|| {
                self.error(format!(
                    "`{key}` is {}, not a non-negative integer",
                    value.describe()
                ))
            }),
        }
    }

    /// `{architecture}.{suffix}` per layer: a number the same for all
    /// `layers`, or an array of one per layer (as llama.cpp writes
    /// `head_count_kv` for models whose layers differ). `None` when absent.
    pub fn per_layer(&self, suffix: &str, layers: u64) -> Result<Option<Vec<u64>>, KvError> {
        let key = format!("{}.{suffix}", self.architecture()?);
        let Some(value) = self.get(&key) else {
            return Ok(None);
        };
        let not_count = |v: &GgufValue| {
            self.error(format!(
                "`{key}` holds {}, not a non-negative integer",
                v.describe()
            ))
        };
        match value {
            GgufValue::Array(array) => {
                if array.len() != layers {
                    return Err(self.error(format!(
                        "`{key}` has {} entries for {layers} layers",
                        array.len()
                    )));
                }
                let Some(items) = array.items() else {
                    return Err(self.error(format!(
                        "`{key}` is an arr of {} {}; kv keeps at most {KEPT_ELEMENTS} numbers \
                         per array",
                        array.len(),
                        array.element_type()
                    )));
                };
                items
                    .iter()
                    .map(|item| item.as_count().ok_or_else(|| not_count(item)))
                    .collect::<Result<Vec<u64>, KvError>>()
                    .map(Some)
            }
            scalar => {
                let count = scalar.as_count().ok_or_else(|| not_count(scalar))?;
                if layers > KEPT_ELEMENTS {
                    return Err(self.error(format!(
                        "`{key}` for {layers} layers: kv keeps at most {KEPT_ELEMENTS} per layer"
                    )));
                }
                let layers = usize::try_from(layers)
                    .map_err(|_| self.error(format!("{layers} layers do not fit in memory")))?;
                Ok(Some(vec![count; layers]))
            }
        }
    }

    fn error(&self, problem: String) -> KvError {
        KvError::ConfigFile {
            path: self.source.clone(),
            problem,
        }
    }
}

/// `bytes` as hex pairs and as ggml prints a bad magic (`isprint` or `?`),
/// so that no byte of a foreign file reaches the terminal as it is.
fn hex_bytes(bytes: &[u8]) -> String {
    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let shown: String = bytes
        .iter()
        .map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '?'
            }
        })
        .collect();
    format!("bytes {} ('{shown}')", hex.join(" "))
}

/// The reader with its byte order and offset, for errors that say where,
/// and the file's size where known.
pub(super) struct Input<'a, R> {
    pub(super) reader: R,
    pub(super) big_endian: bool,
    pub(super) at: u64,
    pub(super) size: Option<u64>,
    pub(super) source: &'a str,
}

/// The bytes one element of a fixed-size type takes, by GGUF type id.
fn element_size(kind: u32) -> Option<u64> {
    match kind {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

/// ggml's name of GGUF type `kind` (`GGUF_TYPE_NAME`), where it defines one.
fn type_name(kind: u32) -> Option<&'static str> {
    const NAMES: [&str; 13] = [
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
    ];
    NAMES.get(usize::try_from(kind).ok()?).copied()
}

impl<R: Read> Input<'_, R> {
    pub(super) fn error(&self, problem: String) -> KvError {
        KvError::ConfigFile {
            path: self.source.to_owned(),
            problem,
        }
    }

    /// Bytes left in the file after the offset, where its size is known.
    pub(super) fn left(&self) -> Option<u64> {
        self.size.map(|size| size.saturating_sub(self.at))
    }

    /// Refuses `needed` bytes for `what` where the file has fewer left, in
    /// gguf.cpp's words, before anything is read or allocated for them.
    pub(super) fn check_left(&self, needed: Option<u64>, what: &str) -> Result<(), KvError> {
        let Some(left) = self.left() else {
            return Ok(());
        };
        match needed {
            Some(needed) if needed <= left => Ok(()),
            needed => Err(self.error(format!(
                "truncated GGUF header: {what} needs {} bytes at byte {}, but the file has \
                 {left} left (llama.cpp: exceeds remaining file size)",
                needed.map_or_else(|| "more than 2^64".to_owned(), |n| n.to_string()),
                self.at
            ))),
        }
    }

    pub(super) fn fill(&mut self, buf: &mut [u8], what: &str) -> Result<(), KvError> {
        self.reader.read_exact(buf).map_err(|e| {
            let problem = if e.kind() == io::ErrorKind::UnexpectedEof {
                format!(
                    "truncated GGUF header: the file ends inside {what} (at byte {})",
                    self.at
                )
            } else {
                format!("reading {what} at byte {}: {e}", self.at)
            };
            self.error(problem)
        })?;
        // A header is far below 2^64 bytes; saturating keeps the offset honest.
        self.at = self
            .at
            .saturating_add(u64::try_from(buf.len()).unwrap_or(u64::MAX));
        Ok(())
    }

    pub(super) fn bytes<const N: usize>(&mut self, what: &str) -> Result<[u8; N], KvError> {
        let mut buf = [0; N];
        self.fill(&mut buf, what)?;
        if self.big_endian {
            buf.reverse();
        }
        Ok(buf)
    }

    pub(super) fn u32(&mut self, what: &str) -> Result<u32, KvError> {
        self.bytes(what).map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self, what: &str) -> Result<u64, KvError> {
        self.bytes(what).map(u64::from_le_bytes)
    }

    /// A count gguf.cpp reads as `int64_t`: one above `INT64_MAX` is
    /// negative there, and refused in its words.
    pub(super) fn signed_count(&mut self, what: &str) -> Result<u64, KvError> {
        let at = self.at;
        let raw = self.u64(&format!("the number of {what}"))?;
        if i64::try_from(raw).is_err() {
            return Err(self.error(format!(
                "the number of {what} (at byte {at}) is {raw}, above INT64_MAX; llama.cpp \
                 refuses: number of {what} is {} but must be in [0, ...]",
                i64::from_le_bytes(raw.to_le_bytes())
            )));
        }
        Ok(raw)
    }

    /// Skips `len` bytes without holding them.
    pub(super) fn skip(&mut self, len: u64, what: &str) -> Result<(), KvError> {
        let skipped = io::copy(&mut (&mut self.reader).take(len), &mut io::sink())
            .map_err(|e| self.error(format!("reading {what} at byte {}: {e}", self.at)))?;
        if skipped != len {
            let end = self.at.saturating_add(skipped);
            return Err(self.error(format!(
                "truncated GGUF header: the file ends inside {what} (at byte {end})"
            )));
        }
        self.at = self.at.saturating_add(len);
        Ok(())
    }

    /// The `len` bytes of a UTF-8 string whose length was read: a length
    /// past the end of a file of known size is refused before any
    /// allocation, and one of unknown size is read in pieces, so that it
    /// fails at the end of the file.
    pub(super) fn string_of(&mut self, len: u64, what: &str) -> Result<String, KvError> {
        self.check_left(Some(len), what)?;
        let mut text = Vec::new();
        let read = (&mut self.reader).take(len).read_to_end(&mut text);
        let read =
            read.map_err(|e| self.error(format!("reading {what} at byte {}: {e}", self.at)))?;
        if u64::try_from(read) != Ok(len) {
            return Err(self.error(format!(
                "truncated GGUF header: {what} is {len} bytes long, but the file ends {read} \
                 bytes into it (at byte {})",
                self.at
                    .saturating_add(u64::try_from(read).unwrap_or(u64::MAX))
            )));
        }
        self.at = self.at.saturating_add(len);
        String::from_utf8(text).map_err(|_| self.error(format!("{what} is not UTF-8")))
    }

    /// A key: a string of at most [`MAX_KEY_BYTES`], as the GGUF
    /// specification bounds it (a longer one is refused before it is read).
    pub(super) fn key(&mut self, entry: u64, count: u64) -> Result<String, KvError> {
        let what = format!("the key of metadata entry {entry} of {count}");
        let mut raw = [0; 8];
        self.fill(&mut raw, &what)?;
        if self.big_endian {
            raw.reverse();
        }
        let len = u64::from_le_bytes(raw);
        if len > MAX_KEY_BYTES {
            return Err(self.error(format!(
                "{what} is {len} bytes long (at byte {}); the GGUF specification bounds keys \
                 to {MAX_KEY_BYTES} bytes",
                self.at - 8
            )));
        }
        self.string_of(len, &what)
    }

    /// A string value: kept up to [`KEPT_STRING_BYTES`], else read past
    /// and kept as its length.
    pub(super) fn text(&mut self, what: &str) -> Result<GgufValue, KvError> {
        let len = self.u64(what)?;
        if len > KEPT_STRING_BYTES {
            self.check_left(Some(len), what)?;
            self.skip(len, what)?;
            return Ok(GgufValue::LongText(len));
        }
        self.string_of(len, what).map(GgufValue::Text)
    }

    /// A string whose bytes nothing reads: skipped, not held.
    pub(super) fn skip_string(&mut self, what: &str) -> Result<(), KvError> {
        let len = self.u64(what)?;
        self.check_left(Some(len), what)?;
        self.skip(len, what)
    }

    pub(super) fn value(&mut self, kind: u32, what: &str) -> Result<GgufValue, KvError> {
        Ok(match kind {
            0 => GgufValue::U8(u8::from_le_bytes(self.bytes(what)?)),
            1 => GgufValue::I8(i8::from_le_bytes(self.bytes(what)?)),
            2 => GgufValue::U16(u16::from_le_bytes(self.bytes(what)?)),
            3 => GgufValue::I16(i16::from_le_bytes(self.bytes(what)?)),
            4 => GgufValue::U32(self.u32(what)?),
            5 => GgufValue::I32(i32::from_le_bytes(self.bytes(what)?)),
            6 => GgufValue::F32(f32::from_le_bytes(self.bytes(what)?)),
            7 => match u8::from_le_bytes(self.bytes(what)?) {
                0 => GgufValue::Bool(false),
                1 => GgufValue::Bool(true),
                other => return Err(self.error(format!("{what}: bool byte {other}, not 0 or 1"))),
            },
            8 => self.text(what)?,
            9 => GgufValue::Array(self.array(what)?),
            10 => GgufValue::U64(self.u64(what)?),
            11 => GgufValue::I64(i64::from_le_bytes(self.bytes(what)?)),
            12 => GgufValue::F64(f64::from_le_bytes(self.bytes(what)?)),
            other => {
                return Err(self.error(format!(
                    "{what} has value type {other}, which GGUF does not define (0 to 12) at \
                     byte {}",
                    self.at
                )))
            }
        })
    }

    /// An array: its element type and length, then its elements, kept only
    /// where they are numbers or flags and at most [`KEPT_ELEMENTS`]; the
    /// bytes they need are checked against the bytes left first (a string
    /// takes at least its 8-byte length), as gguf.cpp checks them.
    pub(super) fn array(&mut self, what: &str) -> Result<GgufArray, KvError> {
        let inner = self.u32(what)?;
        let element_type = match (inner, type_name(inner)) {
            (9, _) | (_, None) => {
                return Err(self.error(format!(
                    "{what} is an array of GGUF type {inner}; llama.cpp refuses: key {} has \
                     invalid GGUF type {inner}",
                    what.trim_matches('`')
                )))
            }
            (_, Some(name)) => name,
        };
        let len = self.u64(what)?;
        let fixed = element_size(inner);
        self.check_left(len.checked_mul(fixed.unwrap_or(8)), what)?;
        if let (Some(size), false) = (fixed, len <= KEPT_ELEMENTS) {
            // Too long to keep: skipped in one pass, nothing held.
            let bytes = len.checked_mul(size).ok_or_else(|| {
                self.error(format!(
                    "truncated GGUF header: {what} claims {len} elements of {element_type}, \
                     more than 2^64 bytes"
                ))
            })?;
            self.skip(bytes, what)?;
            return Ok(GgufArray {
                element_type,
                len,
                items: None,
            });
        }
        if fixed.is_none() {
            // Strings: a vocabulary, which no cache rule reads.
            for _ in 0..len {
                self.skip_string(what)?;
            }
            return Ok(GgufArray {
                element_type,
                len,
                items: None,
            });
        }
        // At most KEPT_ELEMENTS, so the vector is small whatever the file says.
        let mut items = Vec::new();
        for _ in 0..len {
            items.push(self.value(inner, what)?);
        }
        Ok(GgufArray {
            element_type,
            len,
            items: Some(items),
        })
    }
}

/// The file at `path`, buffered, with its size and its name for errors.
pub(super) fn open_sized(path: &Path) -> Result<(BufReader<File>, u64, String), KvError> {
    let source = path.display().to_string();
    let opened = File::open(path).and_then(|file| {
        let size = file.metadata()?.len();
        Ok((file, size))
    });
    let (file, size) = opened.map_err(|e| KvError::ConfigFile {
        path: source.clone(),
        problem: e.to_string(),
    })?;
    Ok((BufReader::new(file), size, source))
}
