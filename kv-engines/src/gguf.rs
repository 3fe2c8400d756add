//! A GGUF file's header, read without its tensors: the metadata that sizes
//! llama.cpp's caches (`{arch}.block_count`, `{arch}.attention.head_count_kv`
//! as a number or one per layer, `{arch}.attention.key_length`,
//! `{arch}.attention.sliding_window`, `{arch}.ssm.*`, `{arch}.context_length`).
//!
//! The layout is ggml's `gguf.c` (versions 2 and 3, either byte order): the
//! magic `GGUF`, the version, the tensor count, the metadata count, then each
//! entry as a key string, a value type and the value. Reading stops at the
//! end of the metadata; the tensor infos and data are never touched. A file
//! that is not GGUF, or ends inside its header, is a
//! [`KvError::ConfigFile`] that says where it stopped.
//!
//! ```
//! use kv_engines::gguf::{GgufMetadata, GgufValue};
//!
//! // A header with one entry: general.architecture = "llama".
//! let mut file = b"GGUF".to_vec();
//! file.extend(3u32.to_le_bytes()); // version
//! file.extend(0u64.to_le_bytes()); // tensors
//! file.extend(1u64.to_le_bytes()); // metadata entries
//! let key = b"general.architecture";
//! file.extend((key.len() as u64).to_le_bytes());
//! file.extend(key);
//! file.extend(8u32.to_le_bytes()); // string
//! file.extend(5u64.to_le_bytes());
//! file.extend(b"llama");
//!
//! let meta = GgufMetadata::read(&file[..], "model.gguf")?;
//! assert_eq!(meta.architecture()?, "llama");
//! assert_eq!(meta.get("general.architecture"), Some(&GgufValue::Text("llama".into())));
//! # Ok::<(), kv_core::KvError>(())
//! ```

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use kv_core::KvError;

/// The versions read: 1 (before August 2023) wrote 32-bit counts.
const VERSIONS: [u32; 2] = [2, 3];

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
    /// `GGUF_TYPE_ARRAY`: its elements, all of one type.
    Array(Vec<GgufValue>),
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

    /// ggml's name of the value's type, for messages.
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
            GgufValue::Text(_) => "string",
            GgufValue::Array(_) => "array",
            GgufValue::U64(_) => "u64",
            GgufValue::I64(_) => "i64",
            GgufValue::F64(_) => "f64",
        }
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
}

impl GgufMetadata {
    /// Reads the header of the GGUF file at `path`, and nothing after it.
    pub fn from_path(path: impl AsRef<Path>) -> Result<GgufMetadata, KvError> {
        let path = path.as_ref();
        let source = path.display().to_string();
        let file = File::open(path).map_err(|e| KvError::ConfigFile {
            path: source.clone(),
            problem: e.to_string(),
        })?;
        GgufMetadata::read(BufReader::new(file), &source)
    }

    /// Reads a GGUF header from `reader`; `source` names it in errors.
    pub fn read(reader: impl Read, source: &str) -> Result<GgufMetadata, KvError> {
        let mut input = Input {
            reader,
            big_endian: false,
            at: 0,
            source,
        };
        let mut magic = [0; 4];
        input.fill(&mut magic, "the magic")?;
        if &magic != b"GGUF" {
            return Err(input.error(format!(
                "not a GGUF file: it starts with {magic:02x?}, not `GGUF`"
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
        let tensor_count = input.u64("the tensor count")?;
        let count = input.u64("the metadata count")?;
        let mut entries = Vec::new();
        for index in 0..count {
            let key = input.string(&format!("the key of metadata entry {index} of {count}"))?;
            let what = format!("`{key}`");
            let kind = input.u32(&what)?;
            let value = input.value(kind, &what, 0)?;
            entries.push((key, value));
        }
        Ok(GgufMetadata {
            source: source.to_owned(),
            version,
            tensor_count,
            entries,
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
        self.entries
            .iter()
            .find_map(|(name, value)| (name == key).then_some(value))
    }

    /// `general.architecture`, which prefixes the model's own keys.
    pub fn architecture(&self) -> Result<&str, KvError> {
        match self.get("general.architecture") {
            Some(GgufValue::Text(arch)) => Ok(arch),
            Some(other) => Err(self.error(format!(
                "`general.architecture` is a {}, not a string",
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
                self.error(format!("`{key}` is {value:?}, not a non-negative integer"))
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
        let not_count =
            |v: &GgufValue| self.error(format!("`{key}` holds {v:?}, not a non-negative integer"));
        match value {
            GgufValue::Array(items) => {
                if u64::try_from(items.len()) != Ok(layers) {
                    return Err(self.error(format!(
                        "`{key}` has {} entries for {layers} layers",
                        items.len()
                    )));
                }
                items
                    .iter()
                    .map(|item| item.as_count().ok_or_else(|| not_count(item)))
                    .collect::<Result<Vec<u64>, KvError>>()
                    .map(Some)
            }
            scalar => {
                let count = scalar.as_count().ok_or_else(|| not_count(scalar))?;
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

/// The reader with its byte order and offset, for errors that say where.
struct Input<'a, R> {
    reader: R,
    big_endian: bool,
    at: u64,
    source: &'a str,
}

/// Arrays nest at most this deep (ggml writes none nested; a deeper one is
/// a corrupt file, not a reason to recurse without end).
const MAX_NESTING: u32 = 4;

impl<R: Read> Input<'_, R> {
    fn error(&self, problem: String) -> KvError {
        KvError::ConfigFile {
            path: self.source.to_owned(),
            problem,
        }
    }

    fn fill(&mut self, buf: &mut [u8], what: &str) -> Result<(), KvError> {
        self.reader.read_exact(buf).map_err(|e| {
            let problem = if e.kind() == std::io::ErrorKind::UnexpectedEof {
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

    fn bytes<const N: usize>(&mut self, what: &str) -> Result<[u8; N], KvError> {
        let mut buf = [0; N];
        self.fill(&mut buf, what)?;
        if self.big_endian {
            buf.reverse();
        }
        Ok(buf)
    }

    fn u32(&mut self, what: &str) -> Result<u32, KvError> {
        self.bytes(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64, KvError> {
        self.bytes(what).map(u64::from_le_bytes)
    }

    /// A length-prefixed UTF-8 string, read in pieces so that a corrupt
    /// length fails at the end of the file, not in an allocation.
    fn string(&mut self, what: &str) -> Result<String, KvError> {
        let len = self.u64(what)?;
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

    fn value(&mut self, kind: u32, what: &str, depth: u32) -> Result<GgufValue, KvError> {
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
            8 => GgufValue::Text(self.string(what)?),
            9 => {
                if depth >= MAX_NESTING {
                    return Err(self.error(format!(
                        "{what}: arrays nested more than {MAX_NESTING} deep"
                    )));
                }
                let inner = self.u32(what)?;
                let len = self.u64(what)?;
                // Grown as read: a corrupt length ends at the end of the file.
                let mut items = Vec::new();
                for _ in 0..len {
                    items.push(self.value(inner, what, depth + 1)?);
                }
                GgufValue::Array(items)
            }
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
}
