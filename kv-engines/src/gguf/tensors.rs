//! A GGUF file's tensor infos, read after its metadata and before its data,
//! which is never read: each tensor's name, shape, ggml type and offset,
//! checked as gguf.cpp's `gguf_init_from_reader` checks them (in its words)
//! and against the file's size as llama.cpp's model loader does (unless the
//! file is read as cut after its header: `FileData::MayEndAfterHeader`).

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

use kv_core::KvError;

use super::ggml_types::{ggml_tensor_type, GGML_TYPE_COUNT};
use super::metadata::{open_sized, GgufMetadata, GgufValue, Input};
use crate::stored_tensor::{FileData, StoredTensor};

/// ggml's `GGML_MAX_NAME`: a tensor name must be shorter.
pub const MAX_TENSOR_NAME_BYTES: u64 = 64;

/// ggml's `GGML_MAX_DIMS`.
pub const MAX_DIMS: u32 = 4;

/// gguf.cpp's `GGUF_DEFAULT_ALIGNMENT`, where `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// The least bytes one tensor info takes: a name's length (8), its number
/// of dimensions (4), its type (4) and its offset (8).
const LEAST_INFO_BYTES: u64 = 24;

/// A GGUF file's metadata and tensor infos, and where its data starts.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufFile {
    metadata: GgufMetadata,
    tensors: Vec<StoredTensor>,
    /// Each tensor's offset in the data section, as its info gives it.
    offsets: Vec<u64>,
    data_offset: u64,
    /// Whether every tensor's data lies within the file.
    whole: bool,
}

impl GgufFile {
    /// Reads the header and tensor infos of the GGUF file at `path`; every
    /// length and offset is checked against the file's size.
    pub fn from_path(path: impl AsRef<Path>) -> Result<GgufFile, KvError> {
        GgufFile::from_path_as(path, FileData::Whole)
    }

    /// Reads the header and tensor infos of the GGUF file at `path`,
    /// holding its data as `data` says.
    pub fn from_path_as(path: impl AsRef<Path>, data: FileData) -> Result<GgufFile, KvError> {
        let (reader, size, source) = open_sized(path.as_ref())?;
        GgufFile::read_as(reader, size, &source, data)
    }

    /// Reads a GGUF file of `size` bytes, which must hold its data whole,
    /// from `reader`; `source` names it.
    pub fn read(reader: impl Read, size: u64, source: &str) -> Result<GgufFile, KvError> {
        GgufFile::read_as(reader, size, source, FileData::Whole)
    }

    /// Reads a GGUF file of `size` bytes, holding its data as `data` says,
    /// from `reader`; `source` names it. Its header (metadata and tensor
    /// infos) must be whole either way.
    pub fn read_as(
        reader: impl Read,
        size: u64,
        source: &str,
        data: FileData,
    ) -> Result<GgufFile, KvError> {
        let mut input = Input {
            reader,
            big_endian: false,
            at: 0,
            size: Some(size),
            source,
        };
        let metadata = GgufMetadata::read_from(&mut input)?;
        let alignment = alignment(&metadata, &input)?;
        let count = metadata.tensor_count();
        input.check_left(count.checked_mul(LEAST_INFO_BYTES), "the tensor infos")?;
        let mut tensors = Vec::new();
        let mut offsets = Vec::new();
        let mut names = HashSet::new();
        for i in 0..count {
            let (tensor, offset) = input.tensor_info(i)?;
            if !names.insert(tensor.name.clone()) {
                return Err(input.error(format!(
                    "tensor {i} is named `{}` like one before it; llama.cpp refuses: duplicate \
                     tensor name '{}'",
                    tensor.name, tensor.name
                )));
            }
            tensors.push(tensor);
            offsets.push(offset);
        }
        let data_offset = if count > 0 {
            pad(input.at, alignment)
                .ok_or_else(|| input.error("the data offset overflows".into()))?
        } else {
            input.at
        };
        // gguf.cpp: each tensor starts where the one before ends, padded.
        let mut expected = 0u64;
        let mut whole = true;
        for (tensor, &offset) in tensors.iter().zip(&offsets) {
            let name = &tensor.name;
            if offset != expected {
                return Err(input.error(format!(
                    "tensor `{name}` has offset {offset}, expected {expected} (llama.cpp \
                     refuses: tensor '{name}' has offset {offset}, expected {expected})"
                )));
            }
            // llama-model-loader.cpp: the data must lie within the file.
            let end = data_offset
                .checked_add(offset)
                .and_then(|start| start.checked_add(tensor.bytes));
            let Some(end) = end else {
                return Err(input.error(format!(
                    "tensor `{name}` ({} bytes at data offset {offset}): its end overflows",
                    tensor.bytes
                )));
            };
            whole &= end <= size;
            if end > size && data == FileData::Whole {
                return Err(input.error(format!(
                    "tensor `{name}` ({} bytes at data offset {offset}) runs past the end of the \
                     {size}-byte file; llama.cpp refuses: tensor '{name}' data is not within the \
                     file bounds, model is corrupted or incomplete",
                    tensor.bytes
                )));
            }
            expected = pad(tensor.bytes, alignment)
                .and_then(|padded| expected.checked_add(padded))
                .ok_or_else(|| input.error(format!("tensor `{name}`: the data size overflows")))?;
        }
        Ok(GgufFile {
            metadata,
            tensors,
            offsets,
            data_offset,
            whole,
        })
    }

    /// Whether the file holds every tensor's data (always, unless read as
    /// `FileData::MayEndAfterHeader`).
    pub fn is_whole(&self) -> bool {
        self.whole
    }

    /// The metadata.
    pub fn metadata(&self) -> &GgufMetadata {
        &self.metadata
    }

    /// The tensors in file order, each with its bytes as stored
    /// (`ggml_nbytes`, before alignment padding).
    pub fn tensors(&self) -> &[StoredTensor] {
        &self.tensors
    }

    /// Each tensor's offset in the data section, in file order (checked:
    /// each starts where the one before ends, padded to the alignment).
    pub fn tensor_offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The byte at which the data section starts.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }
}

/// `general.alignment`: a u32 power of two, 32 where absent (gguf.cpp).
fn alignment<R: Read>(metadata: &GgufMetadata, input: &Input<'_, R>) -> Result<u64, KvError> {
    match metadata.get("general.alignment") {
        None => Ok(DEFAULT_ALIGNMENT),
        Some(GgufValue::U32(a)) if a.is_power_of_two() => Ok(u64::from(*a)),
        Some(GgufValue::U32(a)) => Err(input.error(format!(
            "`general.alignment` is {a}; llama.cpp refuses: alignment {a} is not a power of 2"
        ))),
        Some(other) => Err(input.error(format!(
            "`general.alignment` is a {0}; llama.cpp refuses: key 'general.alignment' must be \
             of type u32 but is {0}",
            other.type_name()
        ))),
    }
}

/// `GGML_PAD(x, n)`: `x` rounded up to a multiple of `n`, a power of two.
fn pad(x: u64, n: u64) -> Option<u64> {
    Some(x.checked_add(n - 1)? & !(n - 1))
}

impl<R: Read> Input<'_, R> {
    /// Tensor info `i`: its tensor and its offset in the data section.
    fn tensor_info(&mut self, i: u64) -> Result<(StoredTensor, u64), KvError> {
        let what = format!("the name of tensor {i}");
        let len = self.u64(&what)?;
        if len >= MAX_TENSOR_NAME_BYTES {
            return Err(self.error(format!(
                "{what} is {len} bytes long; llama.cpp refuses: tensor name {i} is too long: \
                 {len} >= {MAX_TENSOR_NAME_BYTES}"
            )));
        }
        let name = self.string_of(len, &what)?;
        let n_dims = self.u32(&format!("the dimensions of `{name}`"))?;
        if n_dims > MAX_DIMS {
            return Err(self.error(format!(
                "tensor `{name}` has {n_dims} dimensions; llama.cpp refuses: invalid number of \
                 dimensions: {n_dims} > {MAX_DIMS}"
            )));
        }
        let mut shape = Vec::new();
        for j in 0..n_dims {
            let raw = self.u64(&format!("dimension {j} of `{name}`"))?;
            if i64::try_from(raw).is_err() {
                return Err(self.error(format!(
                    "tensor `{name}` dimension {j} is {}; llama.cpp refuses: invalid number of \
                     elements: {} < 0",
                    i64::from_le_bytes(raw.to_le_bytes()),
                    i64::from_le_bytes(raw.to_le_bytes())
                )));
            }
            shape.push(raw);
        }
        // gguf.cpp: the element count must stay below INT64_MAX.
        let elements = shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .filter(|&n| i64::try_from(n).is_ok_and(|n| n < i64::MAX));
        let Some(elements) = elements else {
            return Err(self.error(format!(
                "tensor `{name}` of shape {shape:?} has too many elements; llama.cpp refuses: \
                 total number of elements is >= {}",
                i64::MAX
            )));
        };
        let id = self.u32(&format!("the type of `{name}`"))?;
        let Some(kind) = ggml_tensor_type(id) else {
            return Err(self.error(if id >= GGML_TYPE_COUNT {
                format!(
                    "tensor `{name}` has ggml type {id}; llama.cpp refuses: invalid ggml type \
                     {id}. should be in [0, {GGML_TYPE_COUNT})"
                )
            } else {
                format!(
                    "tensor `{name}` has ggml type {id}, which ggml removed; llama.cpp refuses: \
                     not a multiple of block size (0)"
                )
            }));
        };
        let row = shape.first().copied().unwrap_or(1);
        if row % kind.block_elements != 0 {
            return Err(self.error(format!(
                "tensor `{name}` of type {} has {row} elements per row; llama.cpp refuses: not \
                 a multiple of block size ({})",
                kind.name, kind.block_elements
            )));
        }
        let bytes = (elements / kind.block_elements)
            .checked_mul(kind.block_bytes)
            .ok_or_else(|| {
                self.error(format!(
                    "tensor `{name}` of shape {shape:?}: its size in bytes overflows"
                ))
            })?;
        let offset = self.u64(&format!("the offset of `{name}`"))?;
        Ok((
            StoredTensor::new(name, kind.name.to_owned(), shape, bytes),
            offset,
        ))
    }
}
