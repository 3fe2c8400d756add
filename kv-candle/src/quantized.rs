//! candle's quantized tensors (`candle_core::quantized::QTensor`): kv's name
//! for each GGML type candle stores, and the bytes a `QTensor` holds.

use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{bail, Device, Result};
use kv_core::{BlockFormat, Storage};

use crate::measure::{Measure, Meter};

/// kv's [`Storage`] for a candle GGML type: `f32`, `f16`, `bf16` dense, and
/// the llama.cpp block formats `q8_0`, `q4_0`, `q4_1`, `q5_0`, `q5_1`. An
/// error for the types kv has no format for (`q8_1` and the k-quants, whose
/// 256-element super-blocks no KV cache uses).
///
/// The block formats are kv's own constants; the tests check each against
/// candle's `GgmlDType::block_size()` and `type_size()` and llama.cpp's
/// published bytes per block.
///
/// ```
/// use candle_core::quantized::GgmlDType;
/// use kv_core::{BlockFormat, Storage};
///
/// assert_eq!(kv_candle::kv_storage(GgmlDType::Q8_0)?, Storage::Blocks(BlockFormat::Q8_0));
/// assert!(kv_candle::kv_storage(GgmlDType::Q4K).is_err());
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn kv_storage(dtype: GgmlDType) -> Result<Storage> {
    use kv_core::DType as K;
    Ok(match dtype {
        GgmlDType::F32 => Storage::Dense(K::F32),
        GgmlDType::F16 => Storage::Dense(K::F16),
        GgmlDType::BF16 => Storage::Dense(K::BF16),
        GgmlDType::Q8_0 => Storage::Blocks(BlockFormat::Q8_0),
        GgmlDType::Q4_0 => Storage::Blocks(BlockFormat::Q4_0),
        GgmlDType::Q4_1 => Storage::Blocks(BlockFormat::Q4_1),
        GgmlDType::Q5_0 => Storage::Blocks(BlockFormat::Q5_0),
        GgmlDType::Q5_1 => Storage::Blocks(BlockFormat::Q5_1),
        other => bail!("kv-candle: GGML type {other:?} has no kv storage format"),
    })
}

/// The blocks a CPU `QTensor` stores: `QTensor::storage_size_in_bytes()`
/// (blocks x `type_size()`), counted once per `QTensor` (a `QTensor` shares
/// its storage with no other, but one behind an `Arc` reached twice is one).
/// Other devices are an error: candle's dummy CUDA/Metal storages report 0.
impl Measure for QTensor {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        if !matches!(self.device(), Device::Cpu) {
            bail!(
                "kv-candle: cannot measure a QTensor on {:?}; only CPU storage is measured",
                self.device().location()
            )
        }
        let key = self as *const QTensor as usize;
        meter
            .add_allocation(key, self.storage_size_in_bytes())
            .map(drop)
    }
}
