//! Packed formats: K/V caches quantized by `candle_core::quantized` into each
//! llama.cpp block format, and 4-bit floats (`F4`) as candle loads them from
//! safetensors, hold exactly the bytes kv declares. Where candle refuses a
//! shape kv declares (a head dim that is not whole blocks, an odd count of
//! 4-bit values), the refusal and kv's rounding are asserted here;
//! `mismatches.rs` has the bytes when candle packs such a head anyway.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Result, Tensor};
use kv_candle::{assert_spec_bytes, kv_storage, measured_bytes};
use kv_core::{BlockFormat, Geometry, KvSpec, Positions, Rows, Scope, Storage};

/// candle's type, kv's format, and llama.cpp's published bytes per block of
/// 32 (PEERS.md: q8_0 34, q4_0 18, q4_1 20, q5_0 22, q5_1 24).
const FORMATS: [(GgmlDType, BlockFormat, u64); 5] = [
    (GgmlDType::Q8_0, BlockFormat::Q8_0, 34),
    (GgmlDType::Q4_0, BlockFormat::Q4_0, 18),
    (GgmlDType::Q4_1, BlockFormat::Q4_1, 20),
    (GgmlDType::Q5_0, BlockFormat::Q5_0, 22),
    (GgmlDType::Q5_1, BlockFormat::Q5_1, 24),
];

const KV_HEADS: usize = 2;
const POSITIONS: usize = 16;

/// One layer of K and V, `head_dim` wide, stored as `storage`.
fn cache(head_dim: u64, storage: Storage, batch: usize) -> KvSpec {
    KvSpec::attention(
        "cache",
        "candle QTensor K/V",
        Geometry::new(1, KV_HEADS as u64, head_dim, kv_core::DType::F32).with_storage(storage),
        Positions::bounded(POSITIONS as u64, "positions quantized"),
        Scope::Request,
        Rows::fixed(batch as u64, "batch of the cache tensors"),
    )
}

fn k_cache_shape(batch: usize, head_dim: usize) -> (usize, usize, usize, usize) {
    (batch, KV_HEADS, POSITIONS, head_dim)
}

#[test]
fn candle_block_sizes_are_llama_cpps_and_kvs() -> Result<()> {
    for (ggml, format, published) in FORMATS {
        assert_eq!(ggml.block_size(), 32, "{ggml:?}");
        assert_eq!(ggml.type_size() as u64, published, "{ggml:?}");
        assert_eq!(
            (format.block_elems(), format.block_bytes()),
            (32, published)
        );
        assert_eq!(kv_storage(ggml)?, Storage::Blocks(format));
    }
    assert_eq!(
        kv_storage(GgmlDType::BF16)?,
        Storage::Dense(kv_core::DType::BF16)
    );
    for unknown in [GgmlDType::Q8_1, GgmlDType::Q4K, GgmlDType::Q6K] {
        assert!(kv_storage(unknown).is_err(), "{unknown:?}");
    }
    Ok(())
}

/// A K/V cache of whole blocks per head: candle stores exactly kv's blocks.
#[test]
fn quantized_kv_caches_hold_their_declared_blocks() -> Result<()> {
    for (ggml, format, published) in FORMATS {
        for head_dim in [32usize, 64, 128] {
            for batch in [1usize, 2, 3] {
                let shape = k_cache_shape(batch, head_dim);
                let k = Tensor::randn(0f32, 1.0, shape, &Device::Cpu)?;
                let v = Tensor::randn(0f32, 1.0, shape, &Device::Cpu)?;
                let kv = [QTensor::quantize(&k, ggml)?, QTensor::quantize(&v, ggml)?];
                let measured = measured_bytes(&kv)?;
                // 2 (K, V) x batch x 2 heads x 16 positions x head_dim / 32 blocks x bytes per block.
                let by_hand = 2 * batch as u64 * 2 * 16 * (head_dim as u64 / 32) * published;
                assert_eq!(measured, by_hand, "{ggml:?} head_dim {head_dim}");
                assert_eq!(
                    kv[0].storage_size_in_bytes() as u64 * 2,
                    by_hand,
                    "the Meter reads candle's own figure"
                );
                let spec = cache(head_dim as u64, Storage::Blocks(format), batch);
                assert!(!spec.geometry().unwrap().storage.rounds_up(head_dim as u64));
                assert_spec_bytes(&spec, 1, measured);
            }
        }
    }
    Ok(())
}

/// candle refuses a last dim that is not whole blocks; kv declares it by
/// rounding each head up to whole blocks, and says so.
#[test]
fn a_head_dim_of_partial_blocks_is_refused_by_candle_and_rounded_up_by_kv() -> Result<()> {
    let head_dim = 80; // 2.5 blocks of 32
    for (ggml, format, published) in FORMATS {
        let k = Tensor::randn(0f32, 1.0, k_cache_shape(1, head_dim), &Device::Cpu)?;
        let err = QTensor::quantize(&k, ggml).unwrap_err().to_string();
        assert!(
            err.contains("last dim divisible by block size"),
            "{ggml:?}: {err}"
        );
        let storage = Storage::Blocks(format);
        assert_eq!(
            storage.rounding(80).unwrap(),
            format!(
                "80 elements in {} round up to 3 blocks of 32",
                format.name()
            )
        );
        // 2 (K, V) x 2 heads x 16 positions x 3 blocks x bytes per block.
        assert_eq!(
            cache(80, storage, 1).peak_bytes(1).unwrap(),
            2 * 2 * 16 * 3 * published
        );
    }
    Ok(())
}

/// A safetensors file of `(name, shape, dtype, bytes)` tensors, written by
/// hand: 8-byte header length, JSON header, data.
fn safetensors(tensors: &[(&str, &[usize], &str, usize)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    let mut offset = 0;
    for (name, shape, dtype, bytes) in tensors {
        header.insert(
            (*name).to_owned(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + bytes]}),
        );
        offset += bytes;
    }
    let mut json = serde_json::Value::Object(header).to_string();
    while !json.len().is_multiple_of(8) {
        json.push(' ');
    }
    let mut file = (json.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(json.as_bytes());
    file.resize(file.len() + offset, 0x22);
    file
}

/// candle's `F4` is a dummy dtype (`size_in_bytes()` 0; `zeros` refuses it),
/// but loaded from safetensors it keeps the packed bytes, two values per
/// byte: kv's `f4e2m1`, byte for byte.
#[test]
fn f4_loaded_from_safetensors_holds_packed_bytes_as_kv_declares() -> Result<()> {
    assert_eq!(DType::F4.size_in_bytes(), 0);
    assert!(Tensor::zeros(4, DType::F4, &Device::Cpu).is_err());
    for head_dim in [16usize, 64, 128] {
        for batch in [1usize, 2] {
            let shape = [batch, KV_HEADS, POSITIONS, head_dim];
            // batch x 2 heads x 16 positions x head_dim values / 2 per byte.
            let bytes = batch * 2 * 16 * head_dim / 2;
            let file = safetensors(&[("k", &shape, "F4", bytes), ("v", &shape, "F4", bytes)]);
            let tensors = candle_core::safetensors::load_buffer(&file, &Device::Cpu)?;
            let (k, v) = (&tensors["k"], &tensors["v"]);
            assert_eq!((k.dtype(), k.dims()), (DType::F4, &shape[..]));
            let measured = measured_bytes(&[k, v])?;
            assert_eq!(measured, 2 * bytes as u64);
            let spec = cache(
                head_dim as u64,
                Storage::Dense(kv_core::DType::F4E2M1),
                batch,
            );
            assert_spec_bytes(&spec, 1, measured);
        }
    }
    // An odd count of 4-bit values ends mid-byte: safetensors refuses it;
    // kv rounds each vector's partial byte up, and says so.
    let file = safetensors(&[("k", &[1, 1, 1, 5], "F4", 3)]);
    assert!(candle_core::safetensors::load_buffer(&file, &Device::Cpu).is_err());
    let f4 = Storage::Dense(kv_core::DType::F4E2M1);
    assert_eq!(f4.bytes_for(5), Ok(3));
    assert_eq!(
        f4.rounding(5).unwrap(),
        "5 f4e2m1 elements (4 bits each) round up to whole bytes"
    );
    Ok(())
}
