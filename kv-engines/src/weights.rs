//! A checkpoint's weights from its own headers, never its tensors: what
//! each tensor takes as stored (fp8, packed int4, MXFP4, NVFP4 and GGUF
//! block types included), read from safetensors headers (one file, or the
//! shards `model.safetensors.index.json` names) or a GGUF file's tensor
//! infos.
//!
//! ```no_run
//! use kv_engines::weights::CheckpointWeights;
//!
//! let weights = CheckpointWeights::from_path("Llama-3.1-8B-Instruct")?;
//! println!("{} tensors, {} bytes", weights.tensors().len(), weights.total_bytes()?);
//! # Ok::<(), kv_core::KvError>(())
//! ```

pub mod safetensors;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use kv_core::KvError;
use serde::Deserialize;

use crate::gguf::GgufFile;
pub use crate::stored_tensor::{FileData, StoredTensor};
use safetensors::SafetensorsHeader;

/// The index of a sharded safetensors checkpoint (transformers' name).
pub const SHARD_INDEX: &str = "model.safetensors.index.json";

/// An index larger than this is refused unread (published ones are a few
/// hundred KiB: one line per tensor).
pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// Every tensor of a checkpoint, from its headers, and the files read.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointWeights {
    files: Vec<PathBuf>,
    /// The files that hold less data than their headers give.
    cut: Vec<PathBuf>,
    tensors: Vec<StoredTensor>,
}

impl CheckpointWeights {
    /// The weights at `path`: a `.gguf` file, a `.safetensors` file, or a
    /// folder holding `model.safetensors.index.json` and its shards, or
    /// `.safetensors` files without an index (all of them, as vLLM loads
    /// them). Every file must hold its data whole.
    pub fn from_path(path: impl AsRef<Path>) -> Result<CheckpointWeights, KvError> {
        CheckpointWeights::from_path_as(path, FileData::Whole)
    }

    /// The weights at `path`, as `from_path` reads them, each file holding
    /// its data as `data` says.
    pub fn from_path_as(
        path: impl AsRef<Path>,
        data: FileData,
    ) -> Result<CheckpointWeights, KvError> {
        let path = path.as_ref();
        if path.is_dir() {
            return CheckpointWeights::from_folder(path, data);
        }
        let is = |ext: &str| path.extension().is_some_and(|e| e == ext);
        if is("gguf") {
            let file = GgufFile::from_path_as(path, data)?;
            return Ok(CheckpointWeights {
                files: vec![path.to_owned()],
                cut: cut_unless(file.is_whole(), path).into_iter().collect(),
                tensors: file.tensors().to_vec(),
            });
        }
        if is("safetensors") {
            let header = SafetensorsHeader::from_path_as(path, data)?;
            return Ok(CheckpointWeights {
                files: vec![path.to_owned()],
                cut: cut_unless(header.held_bytes() == header.data_bytes(), path)
                    .into_iter()
                    .collect(),
                tensors: header.tensors().to_vec(),
            });
        }
        Err(error(
            path,
            "not a checkpoint: give a folder of safetensors files, a .safetensors file or a \
             .gguf file"
                .to_owned(),
        ))
    }

    /// Tensors known another way than from files (computed from a config:
    /// `kv_engines::fit::tensors_from_config`); no file is read.
    pub fn computed(tensors: Vec<StoredTensor>) -> CheckpointWeights {
        CheckpointWeights {
            files: Vec::new(),
            cut: Vec::new(),
            tensors,
        }
    }

    fn from_folder(folder: &Path, data: FileData) -> Result<CheckpointWeights, KvError> {
        let index = folder.join(SHARD_INDEX);
        if index.is_file() {
            return CheckpointWeights::from_index(&index, data);
        }
        let listing = fs::read_dir(folder).map_err(|e| error(folder, e.to_string()))?;
        let mut files = Vec::new();
        for entry in listing {
            let entry = entry.map_err(|e| error(folder, e.to_string()))?;
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "safetensors") && path.is_file() {
                files.push(path);
            }
        }
        if files.is_empty() {
            return Err(error(
                folder,
                format!(
                    "no weights: the folder has no `{SHARD_INDEX}` and no .safetensors file \
                     (kv reads weights from safetensors or GGUF headers, not from .bin or .pt \
                     pickles)"
                ),
            ));
        }
        files.sort();
        let mut tensors = Vec::new();
        let mut cut = Vec::new();
        for file in &files {
            let header = SafetensorsHeader::from_path_as(file, data)?;
            cut.extend(cut_unless(header.held_bytes() == header.data_bytes(), file));
            tensors.extend(header.tensors().iter().cloned());
        }
        refuse_duplicates(&tensors, folder)?;
        Ok(CheckpointWeights {
            files,
            cut,
            tensors,
        })
    }

    /// A sharded checkpoint: each file the index's `weight_map` names, read
    /// once; every tensor the index names must be in the file it names.
    fn from_index(index: &Path, data: FileData) -> Result<CheckpointWeights, KvError> {
        let size = fs::metadata(index)
            .map_err(|e| error(index, e.to_string()))?
            .len();
        if size > MAX_INDEX_BYTES {
            return Err(error(
                index,
                format!("the index is {size} bytes; kv reads at most {MAX_INDEX_BYTES}"),
            ));
        }
        let text = fs::read_to_string(index).map_err(|e| error(index, e.to_string()))?;
        #[derive(Deserialize)]
        struct Index {
            weight_map: HashMap<String, String>,
        }
        let parsed: Index = serde_json::from_str(&text)
            .map_err(|e| error(index, format!("not a safetensors index: {e}")))?;
        let folder = index.parent().unwrap_or(Path::new("."));
        let mut shard_names: Vec<&String> = parsed
            .weight_map
            .values()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        shard_names.sort();
        let mut files = Vec::new();
        let mut tensors = Vec::new();
        let mut found: HashMap<&str, &str> = HashMap::new();
        let mut headers = Vec::new();
        for name in &shard_names {
            if !is_plain_file_name(name) {
                return Err(error(
                    index,
                    format!(
                        "`weight_map` names the file `{name}`, which is not a file name in the \
                         checkpoint's folder"
                    ),
                ));
            }
            let file = folder.join(name.as_str());
            headers.push((name.as_str(), SafetensorsHeader::from_path_as(&file, data)?));
            files.push(file);
        }
        for (shard, header) in &headers {
            for tensor in header.tensors() {
                found.insert(tensor.name.as_str(), shard);
            }
        }
        let mut named: Vec<(&String, &String)> = parsed.weight_map.iter().collect();
        named.sort();
        for (tensor, shard) in named {
            if found.get(tensor.as_str()) != Some(&shard.as_str()) {
                return Err(error(
                    index,
                    format!("`weight_map` puts `{tensor}` in `{shard}`, which does not hold it"),
                ));
            }
        }
        let mut cut = Vec::new();
        for (file, (_, header)) in files.iter().zip(headers) {
            cut.extend(cut_unless(header.held_bytes() == header.data_bytes(), file));
            tensors.extend(header.tensors().iter().cloned());
        }
        refuse_duplicates(&tensors, index)?;
        Ok(CheckpointWeights {
            files,
            cut,
            tensors,
        })
    }

    /// The files whose headers were read.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The files read that hold less data than their headers give (none
    /// unless read as `FileData::MayEndAfterHeader`): the weights are their
    /// headers' all the same.
    pub fn cut_files(&self) -> &[PathBuf] {
        &self.cut
    }

    /// Every tensor, file by file in the order of their data.
    pub fn tensors(&self) -> &[StoredTensor] {
        &self.tensors
    }

    /// The bytes of all tensors; an overflow is an error, never a wrap.
    pub fn total_bytes(&self) -> Result<u64, KvError> {
        sum(self.tensors.iter().map(|t| t.bytes))
    }

    /// The bytes of each dtype as stored, by the file's name for it.
    pub fn bytes_by_dtype(&self) -> Result<BTreeMap<&str, u64>, KvError> {
        let mut by = BTreeMap::new();
        for tensor in &self.tensors {
            let slot: &mut u64 = by.entry(tensor.dtype.as_str()).or_default();
            *slot = slot.checked_add(tensor.bytes).ok_or_else(overflow)?;
        }
        Ok(by)
    }
}

fn sum(mut bytes: impl Iterator<Item = u64>) -> Result<u64, KvError> {
    bytes.try_fold(0u64, |total, b| total.checked_add(b).ok_or_else(overflow))
}

fn overflow() -> KvError {
    KvError::Overflow {
        declaration: "the checkpoint's weights".into(),
        step: "the sum of the tensors' bytes",
    }
}

/// `path`, unless its file holds its data whole.
fn cut_unless(whole: bool, path: &Path) -> Option<PathBuf> {
    (!whole).then(|| path.to_owned())
}

/// A name that stays in the folder: no separator, not `.` or `..`.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Two files holding one tensor would load it twice, or one over the other.
fn refuse_duplicates(tensors: &[StoredTensor], place: &Path) -> Result<(), KvError> {
    let mut seen = HashSet::new();
    for tensor in tensors {
        if !seen.insert(tensor.name.as_str()) {
            return Err(error(
                place,
                format!("`{}` is held by two of the files", tensor.name),
            ));
        }
    }
    Ok(())
}

fn error(path: &Path, problem: String) -> KvError {
    KvError::ConfigFile {
        path: path.display().to_string(),
        problem,
    }
}
