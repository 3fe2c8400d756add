//! A safetensors file's header, read without its data: each tensor's name,
//! dtype, shape and byte range.
//!
//! The layout is the safetensors format's: 8 bytes of header length `N`
//! (little-endian), `N` bytes of JSON (`{"name": {"dtype", "shape",
//! "data_offsets": [begin, end]}, "__metadata__": {...}}`), then the data.
//! What the `safetensors` crate (0.8, `SafeTensors::read_metadata` and
//! `Metadata::validate`) refuses when an engine loads the file is refused
//! here too, naming the tensor or the byte: a header above its 100,000,000
//! bytes or past the end of the file, a byte range that does not follow the
//! one before it, a size that is not the shape's, a data section the
//! tensors do not cover exactly. Nothing is allocated from the header
//! length before it is checked against the file's size.
//!
//! Asked to (`FileData::MayEndAfterHeader`), a file may end anywhere after
//! its header: the first bytes of a published shard, fetched without its
//! data, give the same tensors as the whole file.

use std::collections::HashSet;
use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use kv_core::KvError;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use crate::stored_tensor::{FileData, StoredTensor};

/// The `safetensors` crate's `MAX_HEADER_SIZE`: a longer header is refused.
pub const MAX_HEADER_BYTES: u64 = 100_000_000;

/// The 8 bytes of header length before the JSON.
const LENGTH_BYTES: u64 = 8;

/// Bits per element of each safetensors dtype (`Dtype::bitsize`).
fn dtype_bits(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" | "F8_E4M3FNUZ"
        | "F8_E5M2FNUZ" => 8,
        "I16" | "U16" | "F16" | "BF16" => 16,
        "I32" | "U32" | "F32" => 32,
        "I64" | "U64" | "F64" | "C64" => 64,
        _ => return None,
    })
}

/// A safetensors file's tensors, in the order of their data, the size of
/// its data section, and how much of that the file holds.
#[derive(Clone, Debug, PartialEq)]
pub struct SafetensorsHeader {
    tensors: Vec<StoredTensor>,
    data_bytes: u64,
    held_bytes: u64,
}

impl SafetensorsHeader {
    /// Reads the header of the file at `path`, which must hold its data
    /// whole; its size bounds every length the header gives.
    pub fn from_path(path: impl AsRef<Path>) -> Result<SafetensorsHeader, KvError> {
        SafetensorsHeader::from_path_as(path, FileData::Whole)
    }

    /// Reads the header of the file at `path`, holding its data as `data`
    /// says.
    pub fn from_path_as(
        path: impl AsRef<Path>,
        data: FileData,
    ) -> Result<SafetensorsHeader, KvError> {
        let path = path.as_ref();
        let source = path.display().to_string();
        let opened = File::open(path).and_then(|file| {
            let size = file.metadata()?.len();
            Ok((file, size))
        });
        let (file, size) = opened.map_err(|e| error(&source, e.to_string()))?;
        SafetensorsHeader::read_as(BufReader::new(file), size, &source, data)
    }

    /// Reads the header of a file of `size` bytes, which must hold its data
    /// whole, from `reader`; `source` names it in errors.
    pub fn read(reader: impl Read, size: u64, source: &str) -> Result<SafetensorsHeader, KvError> {
        SafetensorsHeader::read_as(reader, size, source, FileData::Whole)
    }

    /// Reads the header of a file of `size` bytes, holding its data as
    /// `data` says, from `reader`; `source` names it in errors.
    pub fn read_as(
        mut reader: impl Read,
        size: u64,
        source: &str,
        data: FileData,
    ) -> Result<SafetensorsHeader, KvError> {
        let mut raw = [0; 8];
        if size < LENGTH_BYTES {
            return Err(error(
                source,
                format!(
                    "not a safetensors file: it has {size} bytes, fewer than the 8 of the header \
                     length (safetensors: header too small)"
                ),
            ));
        }
        reader
            .read_exact(&mut raw)
            .map_err(|e| error(source, format!("reading the header length at byte 0: {e}")))?;
        let header_len = u64::from_le_bytes(raw);
        if header_len > MAX_HEADER_BYTES {
            return Err(error(
                source,
                format!(
                    "the header length (bytes 0 to 7) is {header_len}; safetensors refuses \
                     headers above {MAX_HEADER_BYTES} bytes (header too large)"
                ),
            ));
        }
        let left = size - LENGTH_BYTES;
        if header_len > left {
            return Err(error(
                source,
                format!(
                    "the header length (bytes 0 to 7) is {header_len}, but the file has {left} \
                     bytes after it (safetensors: invalid header length)"
                ),
            ));
        }
        // Checked above against the file's size and MAX_HEADER_BYTES.
        let mut json = Vec::new();
        let read = (&mut reader)
            .take(header_len)
            .read_to_end(&mut json)
            .map_err(|e| error(source, format!("reading the header at byte 8: {e}")))?;
        if u64::try_from(read) != Ok(header_len) {
            return Err(error(
                source,
                format!(
                    "the file ends {read} bytes into its {header_len}-byte header (at byte {})",
                    LENGTH_BYTES.saturating_add(u64::try_from(read).unwrap_or(u64::MAX))
                ),
            ));
        }
        let text = std::str::from_utf8(&json).map_err(|e| {
            error(
                source,
                format!(
                    "the header is not UTF-8 at byte {} (safetensors: invalid header)",
                    LENGTH_BYTES.saturating_add(u64::try_from(e.valid_up_to()).unwrap_or(u64::MAX))
                ),
            )
        })?;
        let mut last_key = None;
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let entries = HeaderSeed {
            last_key: &mut last_key,
        }
        .deserialize(&mut deserializer)
        .and_then(|entries| deserializer.end().map(|()| entries))
        .map_err(|e| {
            let place = last_key
                .as_deref()
                .map_or_else(String::new, |key| format!(" (in `{key}`)"));
            error(
                source,
                format!("the header's JSON is not a safetensors header{place}: {e}"),
            )
        })?;
        let held_bytes = left - header_len;
        let (tensors, data_bytes) = validate(entries, held_bytes, source, data)?;
        Ok(SafetensorsHeader {
            tensors,
            data_bytes,
            held_bytes,
        })
    }

    /// The tensors, in the order of their data.
    pub fn tensors(&self) -> &[StoredTensor] {
        &self.tensors
    }

    /// The bytes of the data section (after the header), as the header
    /// gives them.
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// The bytes of the data section the file holds: `data_bytes` for a
    /// whole file, fewer for one cut after its header.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }
}

fn error(source: &str, problem: String) -> KvError {
    KvError::ConfigFile {
        path: source.to_owned(),
        problem,
    }
}

/// One tensor as the header gives it.
#[derive(Deserialize)]
struct RawTensor {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: (u64, u64),
}

/// The header's tensors in file order; `__metadata__` is read past.
struct HeaderSeed<'a> {
    /// The last key read, so that an error inside its value names it.
    last_key: &'a mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for HeaderSeed<'_> {
    type Value = Vec<(String, RawTensor)>;

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for HeaderSeed<'_> {
    type Value = Vec<(String, RawTensor)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of tensors")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut tensors = Vec::new();
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("`{key}` is given twice")));
            }
            *self.last_key = Some(key.clone());
            if key == "__metadata__" {
                map.next_value::<IgnoredAny>()?;
            } else {
                tensors.push((key, map.next_value::<RawTensor>()?));
            }
        }
        *self.last_key = None;
        Ok(tensors)
    }
}

/// The checks `Metadata::validate` makes, in data order: each range starts
/// where the one before ends, holds its shape's bytes exactly, and the last
/// ends at the end of the data section: the end of the file's `held_bytes`,
/// or at or after it where the file may end after its header. Returns the
/// tensors and the data section's bytes.
fn validate(
    entries: Vec<(String, RawTensor)>,
    held_bytes: u64,
    source: &str,
    data: FileData,
) -> Result<(Vec<StoredTensor>, u64), KvError> {
    let mut entries = entries;
    entries.sort_by_key(|(_, t)| t.data_offsets);
    let mut tensors = Vec::with_capacity(entries.len());
    let mut end_of_previous = 0u64;
    for (name, raw) in entries {
        let (begin, end) = raw.data_offsets;
        if begin != end_of_previous || end < begin {
            return Err(error(
                source,
                format!(
                    "tensor `{name}` has data_offsets [{begin}, {end}], but the tensor before it \
                     ends at {end_of_previous} (safetensors: invalid offset for tensor `{name}`)"
                ),
            ));
        }
        end_of_previous = end;
        let Some(bits) = dtype_bits(&raw.dtype) else {
            return Err(error(
                source,
                format!(
                    "tensor `{name}` has dtype `{}`, which safetensors does not define",
                    raw.dtype
                ),
            ));
        };
        let elements = raw
            .shape
            .iter()
            .try_fold(1u64, |n, &dim| n.checked_mul(dim));
        let Some(total_bits) = elements.and_then(|n| n.checked_mul(bits)) else {
            return Err(error(
                source,
                format!(
                    "tensor `{name}` of shape {:?} and dtype {} has more than 2^64 bits \
                     (safetensors: overflow computing buffer size)",
                    raw.shape, raw.dtype
                ),
            ));
        };
        if total_bits % 8 != 0 {
            return Err(error(
                source,
                format!(
                    "tensor `{name}` of shape {:?} and dtype {} is {total_bits} bits, not whole \
                     bytes (safetensors: misaligned slice)",
                    raw.shape, raw.dtype
                ),
            ));
        }
        let bytes = total_bits / 8;
        if end - begin != bytes {
            return Err(error(
                source,
                format!(
                    "tensor `{name}` of shape {:?} and dtype {} is {bytes} bytes, but its \
                     data_offsets [{begin}, {end}] hold {} (safetensors: invalid shape, data \
                     type, or offset for tensor)",
                    raw.shape,
                    raw.dtype,
                    end - begin
                ),
            ));
        }
        tensors.push(StoredTensor::new(name, raw.dtype, raw.shape, bytes));
    }
    let covered = match data {
        FileData::Whole => end_of_previous == held_bytes,
        FileData::MayEndAfterHeader => end_of_previous >= held_bytes,
    };
    if !covered {
        return Err(error(
            source,
            format!(
                "the tensors cover {end_of_previous} bytes of data, but the file has {held_bytes} \
                 after its header (safetensors: incomplete metadata, file not fully covered){}",
                match data {
                    FileData::Whole if end_of_previous > held_bytes =>
                        ": the file ends before its data does (a download cut short, or its \
                         header alone)",
                    _ => "",
                }
            ),
        ));
    }
    Ok((tensors, end_of_previous))
}
