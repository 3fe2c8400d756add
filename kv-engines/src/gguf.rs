//! A GGUF file's header, read without its tensors: the metadata that sizes
//! llama.cpp's caches (`{arch}.block_count`, `{arch}.attention.head_count_kv`
//! as a number or one per layer, `{arch}.attention.key_length`,
//! `{arch}.attention.sliding_window`, `{arch}.ssm.*`, `{arch}.context_length`).
//!
//! The layout is ggml's `gguf.c` (versions 2 and 3, either byte order): the
//! magic `GGUF`, the version, the tensor count, the metadata count, then each
//! entry as a key string, a value type and the value. Reading stops at the
//! end of the metadata; [`GgufFile`] goes on through the tensor infos (each
//! tensor's name, shape, ggml type and bytes). The data is never read. A file
//! that is not GGUF, or ends inside its header, is a
//! [`KvError::ConfigFile`](kv_core::KvError::ConfigFile) that says where it stopped.
//!
//! What gguf.cpp's `gguf_init_from_reader` refuses is refused here too, in
//! its words: a tensor or metadata count above `INT64_MAX`, an empty or
//! duplicated key, an array of arrays, a string or array longer than the
//! bytes left in the file. Nothing is allocated from a length the file
//! gives before that length is checked: arrays are kept as their element
//! type and length, and their elements only where a cache rule may read
//! them (numbers and flags, at most [`KEPT_ELEMENTS`]).
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

mod ggml_types;
mod metadata;
mod tensors;

pub use ggml_types::{ggml_tensor_type, ggml_tensor_type_named, GgmlTensorType, GGML_TENSOR_TYPES};
pub use metadata::{
    GgufArray, GgufMetadata, GgufValue, KEPT_ELEMENTS, KEPT_STRING_BYTES, MAX_ENTRIES,
    MAX_KEY_BYTES,
};
pub use tensors::GgufFile;
