//! The census on real candle-transformers models whose caches are private,
//! declared from outside, and on the worked examples.
//!
//! - `llama::Llama` and its `Cache` (candle-transformers 0.11.1): the
//!   per-layer K/V concat caches, the cos/sin tables and the mask memo are
//!   private fields, so no `Measure` can reach them. A wrapper declares them
//!   from the config; the census shows the declarations hold to the byte,
//!   and that leaving the tables or the masks out leaves exactly their bytes
//!   unaccounted.
//! - mimi's `StreamableConv1d`: its streaming state is a private
//!   `StreamTensor`, a view that keeps the whole last input alive.
//! - The four worked examples (`examples/worked_models`) at their
//!   documented sizes: held equals declared exactly, with candle's
//!   bookkeeping and each model's own `Vec` of layers shown apart.

// Each test binary uses part of the worked examples' module.
#[allow(dead_code)]
#[path = "../examples/worked_models/models.rs"]
mod models;

use candle_core::{DType, Device, Module, Result, StreamTensor, StreamingModule, Tensor};
use candle_transformers::models::llama;
use candle_transformers::models::mimi::conv::{PadMode, StreamableConv1d};
use kv_candle::census::{zero_weights, Census, Counted, CountingAlloc, Held, Phase, Tolerance};
use kv_core::{ModelLocalKv, RecurrentState, StatePart, TensorPart, Tensors};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

fn cpu() -> Device {
    Device::Cpu
}

/// A tiny Llama: 2 layers, 4 query heads and 2 KV heads of 32 / 4 = 8
/// dims, 64 positions.
fn tiny_llama() -> llama::Config {
    llama::Config {
        hidden_size: 32,
        intermediate_size: 64,
        vocab_size: 16,
        num_hidden_layers: 2,
        num_attention_heads: 4,
        num_key_value_heads: 2,
        use_flash_attn: false,
        rms_norm_eps: 1e-5,
        rope_theta: 10_000.0,
        bos_token_id: None,
        eos_token_id: None,
        rope_scaling: None,
        max_position_embeddings: 64,
        tie_word_embeddings: false,
    }
}

/// The forwards the drive makes, as `(tokens, index_pos)`: a 20-token
/// prompt, a 24-token chunk after it, then 4 tokens one at a time (48
/// positions in all).
const FORWARDS: [(usize, usize); 6] = [(20, 0), (24, 20), (1, 44), (1, 45), (1, 46), (1, 47)];
const POSITIONS: usize = 48;

/// Bytes of the masks llama's `Cache::mask` builds and memoises for
/// `forwards`: one `(seq_len, index_pos + seq_len)` u8 mask per distinct
/// key for every forward of more than one token, never evicted.
fn mask_bytes(forwards: &[(usize, usize)]) -> u64 {
    mask_shapes(forwards)
        .iter()
        .map(|&(s, k)| (s * k) as u64)
        .sum()
}

/// The distinct `(seq_len, kv_len)` masks `forwards` build.
fn mask_shapes(forwards: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut keys: Vec<(usize, usize)> = forwards
        .iter()
        .filter(|&&(seq_len, _)| seq_len > 1)
        .map(|&(seq_len, index_pos)| (seq_len, index_pos + seq_len))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// The worst case of the memo for prompts at position 0 only: one `(t, t)`
/// mask for every length `t` from 2 to `max_position_embeddings`.
fn worst_case_prompt_masks(max_position_embeddings: u64) -> u64 {
    (2..=max_position_embeddings).map(|t| t * t).sum()
}

/// candle-transformers' `Llama` with its `Cache`, declared from outside:
/// the cache's fields are private, so each declaration is read from the
/// config and the drive's plan.
#[derive(ModelLocalKv)]
#[kv(name = "rope", cache = "llama Cache: cos and sin, (max_position_embeddings, head_dim / 2) each",
     tensors = self.rope(), scope = request,
     rows = fixed(1, because = "one pair of tables per Cache, whatever the batch"),
     only_when = "declares_rope")]
#[kv(name = "masks", cache = "llama Cache: mask memo, a (seq_len, kv_len) u8 mask per multi-token forward shape, never evicted",
     tensors = self.masks(), scope = request,
     rows = fixed(1, because = "one memo per Cache; masks do not depend on the batch"),
     only_when = "declares_masks")]
struct DeclaredLlama {
    model: llama::Llama,
    #[kv(cache = "llama Cache kvs: concat (Tensor, Tensor) per layer",
         geometry = kv_candle::kv_geometry(self.config.num_hidden_layers, self.config.num_key_value_heads,
                                           self.head_dim(), self.dtype),
         positions = bounded(self.positions, because = "the longest sequence the drive runs"),
         scope = request,
         rows = fixed(1, because = "the drive feeds one sequence"))]
    cache: llama::Cache,
    config: llama::Config,
    dtype: DType,
    positions: usize,
    /// The drive's forwards, `(tokens, index_pos)`: the masks' bound.
    forwards: Vec<(usize, usize)>,
    declares_rope: bool,
    declares_masks: bool,
}

impl DeclaredLlama {
    fn head_dim(&self) -> usize {
        self.config.hidden_size / self.config.num_attention_heads
    }

    fn dtype(&self) -> kv_core::DType {
        kv_candle::kv_dtype(self.dtype).unwrap_or(kv_core::DType::F32)
    }

    /// `Cache::new` builds cos and sin of `(max_position_embeddings,
    /// head_dim / 2)` in f32 and converts them to the cache's dtype.
    fn rope(&self) -> Tensors {
        let table = |name| {
            TensorPart::new(
                name,
                [
                    self.config.max_position_embeddings as u64,
                    self.head_dim() as u64 / 2,
                    1,
                ],
                self.dtype(),
            )
        };
        Tensors::from_parts(vec![table("cos"), table("sin")])
    }

    /// The masks of the drive's multi-token forwards, one u8 per element.
    /// The honest bound in general is every shape a caller may use: for
    /// prompts at position 0 only, `sum of t^2 for t = 2..=L`
    /// ([`worst_case_prompt_masks`]); this declares the drive's own set.
    fn masks(&self) -> Tensors {
        Tensors::from_parts(
            mask_shapes(&self.forwards)
                .into_iter()
                .map(|(seq_len, kv_len)| {
                    TensorPart::new(
                        "mask",
                        [seq_len as u64, kv_len as u64, 1],
                        kv_core::DType::U8,
                    )
                })
                .collect(),
        )
    }
}

/// Loads the tiny Llama in `dtype` (weights phase: `Llama::load` over zero
/// weights), builds its `Cache` (build phase), runs `FORWARDS` (drive).
fn llama_census(dtype: DType) -> Result<Counted<DeclaredLlama>> {
    let config = tiny_llama();
    let counted = Census::new().run(
        || {
            let weights = zero_weights(dtype, &cpu(), |vb| llama::Llama::load(vb, &config))?;
            llama::Llama::load(weights, &config)
        },
        |model| {
            Ok(DeclaredLlama {
                model,
                cache: llama::Cache::new(true, dtype, &config, &cpu())?,
                config: config.clone(),
                dtype,
                positions: POSITIONS,
                forwards: FORWARDS.to_vec(),
                declares_rope: true,
                declares_masks: true,
            })
        },
        |llama| {
            for (tokens, index_pos) in FORWARDS {
                let ids = Tensor::zeros((1, tokens), DType::U32, &cpu())?;
                llama.model.forward(&ids, index_pos, &mut llama.cache)?;
            }
            Ok(())
        },
    )?;
    Ok(counted)
}

#[test]
fn llama_holds_what_its_declarations_from_outside_state() -> Result<()> {
    let counted = llama_census(DType::F32)?;
    println!(
        "{}",
        counted.report.compare(&counted.model, 1).expect("compare")
    );
    // K and V per layer: (1, 2 KV heads, 48 positions, 8 dims) f32 = 3,072 B
    // each; 2 layers: 4 x 3,072 = 12,288 B.
    // cos and sin: (64, 4) f32 = 1,024 B each: 2,048 B, made in the build.
    // Masks: the 20-token prompt's (20, 20) and the 24-token chunk's
    // (24, 44), u8: 400 + 1,056 = 1,456 B. The 1-token steps build none.
    // 12,288 + 2,048 + 1,456 = 15,792 B.
    assert_eq!(mask_bytes(&FORWARDS), 1456);
    let accounting = counted.report.compare(&counted.model, 1).expect("compare");
    assert_eq!(
        (accounting.declared, accounting.held, accounting.unaccounted),
        (15_792, 15_792, 0)
    );
    counted
        .report
        .assert_accounted(&counted.model, 1, Tolerance::EXACT);
    let sizes: Vec<(u64, Phase)> = counted
        .report
        .allocations()
        .iter()
        .filter(|a| a.phase != Phase::Weights && a.bytes >= 256)
        .map(|a| (a.bytes, a.phase))
        .collect();
    assert_eq!(
        sizes,
        [
            (3072, Phase::Drive),
            (3072, Phase::Drive),
            (3072, Phase::Drive),
            (3072, Phase::Drive),
            (1056, Phase::Drive),
            (1024, Phase::Build),
            (1024, Phase::Build),
            (400, Phase::Drive),
        ]
    );
    // Loading is measured apart: every weight, and the model's structure.
    assert!(counted.report.weights().bytes > 0);
    Ok(())
}

#[test]
fn leaving_out_llamas_tables_or_masks_leaves_exactly_their_bytes_unaccounted() -> Result<()> {
    let mut counted = llama_census(DType::F32)?;
    counted.model.declares_rope = false;
    let without_rope = counted.report.compare(&counted.model, 1).expect("compare");
    println!("{without_rope}");
    // cos and sin: 2 x 1,024 B.
    assert_eq!(without_rope.unaccounted, 2048);
    counted.model.declares_rope = true;
    counted.model.declares_masks = false;
    let without_masks = counted.report.compare(&counted.model, 1).expect("compare");
    // 400 + 1,056 B.
    assert_eq!(without_masks.unaccounted, 1456);
    assert!(!without_masks.within(Tolerance::bytes(1455)));
    Ok(())
}

#[test]
fn llama_in_f16_keeps_f16_tables_and_caches_and_u8_masks() -> Result<()> {
    let counted = llama_census(DType::F16)?;
    // K and V: 4 x (2 x 48 x 8 x 2 B) = 6,144 B; cos and sin: 2 x (64 x 4 x
    // 2 B) = 1,024 B (built in f32, converted); masks still u8: 1,456 B.
    let accounting = counted.report.compare(&counted.model, 1).expect("compare");
    assert_eq!(
        (accounting.declared, accounting.held),
        (6_144 + 1_024 + 1_456, 6_144 + 1_024 + 1_456)
    );
    assert_eq!(counted.report.phase(Phase::Build).held, Held::new(1024, 2));
    Ok(())
}

#[test]
fn the_mask_memos_worst_case_grows_with_the_cube_of_the_length() {
    // sum of t^2 for t = 1..=L is L(L + 1)(2L + 1) / 6; less the 1 of t = 1.
    // L = 64: 64 x 65 x 129 / 6 - 1 = 89,439 B.
    assert_eq!(worst_case_prompt_masks(64), 89_439);
    // L = 4,096 (Llama 2): 4096 x 4097 x 8193 / 6 - 1 = 22,914,881,535 B,
    // 21.3 GiB, should one Cache see every prompt length.
    assert_eq!(worst_case_prompt_masks(4096), 22_914_881_535);
}

/// mimi's causal streaming convolution, its state declared from outside:
/// the frames it keeps between steps.
#[derive(ModelLocalKv)]
#[kv(name = "prev_xs", cache = "mimi StreamableConv1d state_prev_xs (StreamTensor)",
     state = RecurrentState::from_parts(1, vec![StatePart::conv(self.channels, self.kept_frames, kv_core::DType::F32)]),
     scope = request, rows = fixed(1, because = "batch 1"))]
struct DeclaredConv {
    conv: StreamableConv1d,
    channels: u64,
    kept_frames: u64,
}

const CHANNELS: usize = 16;
const KERNEL: usize = 5;
const STRIDE: usize = 2;
const CHUNK: usize = 32;

fn conv_census(kept_frames: u64) -> Result<Counted<DeclaredConv>> {
    let conv = |vb| {
        StreamableConv1d::new(
            CHANNELS,
            CHANNELS,
            KERNEL,
            STRIDE,
            1,
            1,
            true,
            true,
            None,
            PadMode::Constant,
            vb,
        )
    };
    Census::new().run(
        || zero_weights(DType::F32, &cpu(), conv),
        |weights| {
            Ok(DeclaredConv {
                conv: conv(weights)?,
                channels: CHANNELS as u64,
                kept_frames,
            })
        },
        |model| {
            for _ in 0..3 {
                let chunk = Tensor::zeros((1, CHANNELS, CHUNK), DType::F32, &cpu())?;
                model.conv.step(&StreamTensor::from_tensor(chunk))?;
            }
            Ok(())
        },
    )
}

#[test]
fn mimis_streaming_conv_keeps_its_whole_last_input_not_kernel_minus_stride_frames() -> Result<()> {
    // The conv needs kernel - stride = 3 frames of the past: 16 channels x
    // 3 x 4 B = 192 B. Its state is `narrow`ed from the last input (those 3
    // frames and the 32-frame chunk, concatenated): a view that keeps all
    // 35 frames, 16 x 35 x 4 B = 2,240 B.
    let logical = conv_census((KERNEL - STRIDE) as u64)?;
    let accounting = logical.report.compare(&logical.model, 1).expect("compare");
    println!("{accounting}");
    assert_eq!(
        (accounting.declared, accounting.held, accounting.unaccounted),
        (192, 2240, 2048)
    );
    let held = conv_census((CHUNK + KERNEL - STRIDE) as u64)?;
    held.report
        .assert_accounted(&held.model, 1, Tolerance::EXACT);
    // The module still computes as before: the census changes nothing.
    let x = Tensor::zeros((1, CHANNELS, CHUNK), DType::F32, &cpu())?;
    assert_eq!(
        held.model.conv.forward(&x)?.dims(),
        &[1, CHANNELS, CHUNK / STRIDE]
    );
    Ok(())
}

mod worked {
    //! The worked examples under the census, at their documented sizes
    //! and with their own drives. The default threshold (256 B) sits above
    //! candle's per-tensor bookkeeping; each model's own `Vec` of layers
    //! (built in the build phase, 352 to 1,600 B) is set apart by name.

    use super::models::peak;
    use super::*;

    /// The census of a worked example: zero weights in `dtype`, built by
    /// `new`, driven by `drive`; its `Vec` of layers (`layers`) set apart,
    /// all `capacity x size_of` of it; printed, and held = declared exactly.
    fn exact<M: ModelLocalKv, T>(
        dtype: DType,
        new: fn(candle_nn::VarBuilder<'static>) -> Result<M>,
        drive: fn(&mut M) -> Result<()>,
        layers: fn(&M) -> &Vec<T>,
        max_num_seqs: u64,
    ) -> Result<Counted<M>> {
        let mut counted = Census::new().run(|| zero_weights(dtype, &cpu(), new), new, drive)?;
        let structure = layers(&counted.model);
        let bytes = (structure.capacity() * size_of::<T>()) as u64;
        let set_apart = counted.report.set_apart("layers", structure)?;
        assert_eq!(set_apart, Held::new(bytes, 1));
        let accounting = counted
            .report
            .compare(&counted.model, max_num_seqs)
            .expect("compare");
        println!("{accounting}");
        counted
            .report
            .assert_accounted(&counted.model, max_num_seqs, Tolerance::EXACT);
        Ok(counted)
    }

    #[test]
    fn the_concat_model_holds_its_declaration_exactly() -> Result<()> {
        let counted = exact(
            DType::F16,
            peak::new_concat,
            peak::drive_concat,
            |model| &model.model.layers,
            1,
        )?;
        // 3 layers x K and V of (1, 2, 12, 16) f16 = 768 B: 4,608 B.
        assert_eq!(counted.report.held(), Held::new(4608, 6));
        // Per tensor: 152 + 56 + 32 + 32 B.
        assert_eq!(counted.report.bookkeeping(), Held::new(6 * 272, 24));
        Ok(())
    }

    #[test]
    fn weights_from_a_varmap_make_the_cache_keep_the_whole_graph() -> Result<()> {
        // A `VarMap`'s weights are trainable `Var`s: each tensor computed
        // from one records its inputs for backprop, so the cache's last
        // K and V keep every step's intermediate tensors alive.
        let counted = Census::new().run(
            || {
                let map = candle_nn::VarMap::new();
                let vb = candle_nn::VarBuilder::from_varmap(&map, DType::F16, &cpu());
                peak::new_concat(vb.clone())?;
                Ok(vb)
            },
            peak::new_concat,
            peak::drive_concat,
        )?;
        let accounting = counted.report.compare(&counted.model, 1).expect("compare");
        // Declared 4,608 B, as with plain weights; held: ten times more.
        assert_eq!(accounting.declared, 4608);
        assert!(accounting.held > 10 * 4608, "{accounting}");
        Ok(())
    }

    #[test]
    fn the_sliding_model_holds_its_declaration_exactly() -> Result<()> {
        let counted = exact(
            DType::BF16,
            peak::new_sliding,
            peak::drive_sliding,
            |model| &model.layers,
            1,
        )?;
        // 5 sliding layers x K and V of (1, 1, 4, 32) bf16 = 256 B, and the
        // global layer's (1, 1, 10, 32) bf16 = 640 B: 2,560 + 1,280 = 3,840 B.
        assert_eq!(counted.report.held(), Held::new(3840, 12));
        Ok(())
    }

    #[test]
    fn the_cross_attention_model_holds_its_declaration_exactly() -> Result<()> {
        let counted = exact(
            DType::F32,
            peak::new_cross,
            peak::drive_cross,
            |decoder| &decoder.blocks,
            1,
        )?;
        // 2 blocks x K and V of (1, 2, 30, 16) f32 = 3,840 B: 15,360 B.
        assert_eq!(counted.report.held(), Held::new(15_360, 4));
        Ok(())
    }

    #[test]
    fn the_shared_cache_model_holds_its_declaration_exactly() -> Result<()> {
        let counted = exact(
            DType::F32,
            peak::new_shared,
            |model| peak::drive_shared(model),
            |model| &model.layers,
            peak::SHARED_BATCH as u64,
        )?;
        // 2 layers x K and V of (2, 2, 24, 8) f32 = 3,072 B: 12,288 B at
        // max_num_seqs 2 (24 positions: 20 held, grown 8 at a time).
        assert_eq!(counted.report.held(), Held::new(12_288, 4));
        Ok(())
    }
}
