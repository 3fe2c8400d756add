//! What both engines' `kv fit` share: the weights it sizes (the
//! checkpoint's own headers beside the config, or, with
//! `--weights-from-config`, the tensors its class stores, computed from the
//! config and said so), and the TP sizes it tries.

use std::path::Path;

use kv_core::KvError;
use kv_engines::fit::{tensors_from_config, FROM_CONFIG_ARCHITECTURES};
use kv_engines::weights::{CheckpointWeights, FileData};
use serde_json::Value;

use crate::input::Problem;

/// The TP sizes tried for the smallest that fits: one node's.
pub(crate) const TP_SIZES: [u64; 4] = [1, 2, 4, 8];

/// The weights for the config at `file`.
pub(crate) fn weights(
    file: &Path,
    config: &Value,
    from_config: bool,
    data: FileData,
) -> Result<CheckpointWeights, Problem> {
    if from_config {
        let tensors = tensors_from_config(config).map_err(|e| Problem::new(file, e))?;
        return Ok(CheckpointWeights::computed(tensors));
    }
    let folder = folder_of(file);
    let hint = format!(
        "; give --weights-from-config to compute them from the config ({})",
        FROM_CONFIG_ARCHITECTURES.join(", ")
    );
    CheckpointWeights::from_path_as(folder, data).map_err(|e| {
        // Files that end after their headers are read when asked: say so,
        // where that is what they are.
        let cut = data == FileData::Whole
            && CheckpointWeights::from_path_as(folder, FileData::MayEndAfterHeader).is_ok();
        let hint = if cut {
            "; the files hold their headers whole: give --headers-only if they were fetched \
             without their data"
                .to_owned()
        } else {
            hint
        };
        match e {
            // The readers' errors name the file; the weights are no config.
            KvError::ConfigFile { path, problem } => {
                Problem::new(Path::new(&path), problem + &hint)
            }
            other => Problem::new(folder, other.to_string() + &hint),
        }
    })
}

/// The folder holding the config at `file`: `.` for a bare `config.json`
/// (whose parent is the empty path).
pub(crate) fn folder_of(file: &Path) -> &Path {
    match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// How the weights line names where they came from.
pub(crate) fn source(weights: &CheckpointWeights) -> String {
    let files = weights.files().len();
    match weights.cut_files().len() {
        _ if files == 0 => {
            "computed from the config (--weights-from-config: no checkpoint read)".to_owned()
        }
        0 => format!("stored in {files} file(s)"),
        cut => format!(
            "stored in {files} file(s), as their headers give them (--headers-only: {cut} of \
             them end before their data, which is not read)"
        ),
    }
}
