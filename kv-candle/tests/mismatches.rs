//! Where a declaration and candle's real allocation part ways, with the
//! actual (mismatching) numbers asserted rather than hidden.

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::kv_cache::{ConcatKvCache, RotatingKvCache};
use kv_candle::{compare_declared, compare_spec, measured_bytes, FullAttentionCaches};
use kv_core::{Geometry, KvSpec, Positions, Rows, Scope};

const QWEN3: &str = include_str!("fixtures/qwen3-tiny.json");

fn token(batch: usize, heads: usize, seq: usize, dim: usize) -> Result<Tensor> {
    Tensor::ones((batch, heads, seq, dim), DType::F32, &Device::Cpu)
}

/// One layer, f32, bounded by `positions`, one row per batch entry.
fn one_layer(cache: &'static str, heads: u64, dim: u64, positions: u64, batch: u64) -> KvSpec {
    KvSpec::attention(
        "cache",
        cache,
        Geometry::new(1, heads, dim, kv_core::DType::F32),
        Positions::bounded(positions, "test bound"),
        Scope::Request,
        Rows::fixed(batch, "batch of the cache tensors"),
    )
}

/// candle's `Cache::append` grows `all_data` by the original `max_seq_len`
/// whenever an append does not fit: the declaration (bounded by max) holds
/// until the first overflow append, which doubles the allocation; each later
/// overflow adds one more max (2x, 3x, ...: linear, not doubling again).
#[test]
fn kv_cache_grows_by_its_max_when_an_append_overflows() -> Result<()> {
    const MAX: usize = 16;
    let (batch, heads, dim) = (2, 1, 24); // qwen3-tiny: 1 kv head, head_dim 24
    let mut full = FullAttentionCaches::from_config(QWEN3, batch, MAX, Some(DType::F32))?;
    let declared = compare_declared(&full, 1, 0).unwrap().declared;
    assert_eq!(declared, 2 * 3 * 24 * 16 * 4 * 2); // K+V x 3 layers x 24 dims x 16 pos x f32 x batch 2

    let append_all = |full: &mut FullAttentionCaches, seq: usize| -> Result<()> {
        for cache in &mut full.caches {
            let t = token(batch, heads, seq, dim)?;
            cache.append(&t, &t)?;
        }
        Ok(())
    };
    append_all(&mut full, MAX)?;
    assert!(compare_declared(&full, 1, measured_bytes(&full.caches)?)
        .unwrap()
        .matches());

    // One position past max: every tensor grows by another MAX positions.
    append_all(&mut full, 1)?;
    let measured = measured_bytes(&full.caches)?;
    assert_eq!(measured, 2 * declared);
    assert_eq!(full.caches[0].k_cache().max_seq_len(), 2 * MAX);
    assert_eq!(full.caches[0].current_seq_len(), MAX + 1);
    let diff = compare_declared(&full, 1, measured).unwrap();
    assert!(!diff.matches());
    assert!(
        diff.to_string().contains(&format!(
            "measured - declared: +{declared} B (2.0000x declared)"
        )),
        "{diff}"
    );

    // Up to 2 x MAX nothing more is allocated; one past it adds MAX again.
    append_all(&mut full, MAX - 1)?;
    assert_eq!(measured_bytes(&full.caches)?, 2 * declared);
    append_all(&mut full, 1)?;
    assert_eq!(measured_bytes(&full.caches)?, 3 * declared);
    assert_eq!(full.caches[2].v_cache().max_seq_len(), 3 * MAX);

    // One append longer than several maxes grows several times in one call.
    full.caches[0].reset();
    let t = token(batch, heads, 3 * MAX + 1, dim)?;
    full.caches[0].append(&t, &t)?;
    assert_eq!(
        measured_bytes(&full.caches[0])?,
        4 * declared / 3,
        "4 x MAX positions in layer 0"
    );
    Ok(())
}

/// `ConcatKvCache` holds exactly what was appended: a declaration bounded by
/// the longest sequence matches only when the cache is full, overstates
/// before, and is exceeded by every append after.
#[test]
fn concat_cache_matches_only_when_full_and_grows_with_each_append() -> Result<()> {
    const MAX: u64 = 16;
    let (batch, heads, dim) = (3, 2, 8);
    let spec = one_layer("candle ConcatKvCache", 2, 8, MAX, 3);
    let declared = spec.peak_bytes(1).unwrap();
    let per_position = declared / MAX;
    let mut cache = ConcatKvCache::new(2);
    for held in 1..=(MAX + 4) {
        let (k, v) = (token(batch, heads, 1, dim)?, token(batch, heads, 1, dim)?);
        cache.append(&k, &v)?;
        let measured = measured_bytes(&cache)?;
        assert_eq!(
            measured,
            held * per_position,
            "grows by one position per append"
        );
        let matches = compare_spec(&spec, 1, measured).unwrap().matches();
        assert_eq!(matches, held == MAX, "matches only when full (held {held})");
    }
    assert_eq!(measured_bytes(&cache)?, declared + 4 * per_position);

    // The first append keeps the caller's tensors rather than copying them:
    // one tensor given as both K and V is one allocation.
    let mut shared = ConcatKvCache::new(2);
    let t = token(batch, heads, MAX as usize, dim)?;
    shared.append(&t, &t)?;
    assert_eq!(measured_bytes(&shared)?, declared / 2);
    Ok(())
}

/// transformers' dynamic sliding layer keeps `window - 1` positions; candle's
/// `RotatingKvCache::new(dim, window)` keeps `window`. A bound copied from the
/// Python model understates the candle port by one position per row.
#[test]
fn a_window_minus_one_bound_understates_a_rotating_cache_by_one_position() -> Result<()> {
    let window = 72;
    let (batch, heads, dim) = (1, 16, 64); // Qwen3-TTS codec decoder, one layer
    let python_bound = one_layer("sliding DynamicCache", 16, 64, window - 1, 1);
    let mut cache = RotatingKvCache::new(2, window as usize);
    for _ in 0..100 {
        let t = token(batch, heads, 1, dim)?;
        cache.append(&t, &t)?;
    }
    let measured = measured_bytes(&cache)?;
    assert_eq!(measured, 2 * 16 * 64 * 72 * 4);
    let diff = compare_spec(&python_bound, 1, measured).unwrap();
    assert_eq!(diff.declared, 2 * 16 * 64 * 71 * 4);
    assert_eq!(
        diff.measured - diff.declared,
        2 * 16 * 64 * 4,
        "one position of K and V"
    );
    Ok(())
}

mod recurrent {
    //! candle-transformers' Mamba and Mamba2 `State` against the peers'
    //! formulas in PEERS.md, with the differences asserted.

    use candle_core::{DType, Device, Result, Tensor};
    use candle_nn::VarBuilder;
    use candle_transformers::models::{mamba, mamba2};
    use kv_candle::{compare_spec, measured_bytes};
    use kv_core::{KvSpec, RecurrentState, Rows, Scope, StatePart};

    /// d_model 16 (d_inner 32), 2 layers; candle hard-codes d_conv 4, d_state 16.
    const MAMBA: &str =
        r#"{"d_model": 16, "n_layer": 2, "vocab_size": 40, "pad_vocab_size_multiple": 8}"#;
    /// d_inner 64 = 4 heads x 16, 2 groups, d_state 16: d_xbc = 64 + 2 x 2 x 16 = 128.
    const MAMBA2: &str = r#"{"hidden_size": 32, "num_hidden_layers": 2, "vocab_size": 40,
        "state_size": 16, "expand": 2, "head_dim": 16, "n_groups": 2,
        "pad_vocab_size_multiple": 8}"#;

    fn state(cache: &'static str, parts: Vec<StatePart>, batch: u64) -> KvSpec {
        KvSpec::recurrent(
            "state",
            cache,
            RecurrentState::from_parts(2, parts),
            Scope::Request,
            Rows::fixed(batch, "batch of the State tensors"),
        )
    }

    /// transformers' `MambaCache`: conv `(d_inner, d_conv)`, ssm `(d_inner, d_state)`.
    fn transformers_mamba(batch: u64) -> KvSpec {
        let f32 = kv_core::DType::F32;
        state(
            "transformers MambaCache",
            vec![
                StatePart::mamba_conv_transformers(32, 4, f32),
                StatePart::mamba_ssm(32, 16, f32),
            ],
            batch,
        )
    }

    /// `State::new` fills the four conv slots with clones of one zeros
    /// tensor: one allocation where transformers' formula counts four.
    #[test]
    fn a_new_mamba_state_shares_one_conv_slot_four_ways() -> Result<()> {
        let cfg: mamba::Config = serde_json::from_str(MAMBA).unwrap();
        for batch in [1u64, 2, 3] {
            let state = mamba::State::new(batch as usize, &cfg, DType::F32, &Device::Cpu)?;
            let measured = measured_bytes(&state)?;
            // 2 layers x batch x (one conv slot 32 + ssm 32 x 16) x 4 bytes.
            assert_eq!(measured, 2 * batch * (32 + 32 * 16) * 4);
            let diff = compare_spec(&transformers_mamba(batch), 1, measured).unwrap();
            // transformers: 2 layers x batch x (32 x 4 + 32 x 16) x 4 bytes.
            assert_eq!(diff.declared, 2 * batch * (32 * 4 + 32 * 16) * 4);
            assert_eq!(
                diff.declared - diff.measured,
                2 * batch * 3 * 32 * 4,
                "three of the four slots are the same allocation"
            );
        }
        Ok(())
    }

    /// Each step stores a view of its `in_proj` output as a conv slot: that
    /// storage is `2 x d_inner` wide (conv input and gate), so from the 4th
    /// step candle holds twice transformers' conv state.
    #[test]
    fn a_stepped_mamba_state_holds_twice_transformers_conv() -> Result<()> {
        let cfg: mamba::Config = serde_json::from_str(MAMBA).unwrap();
        let model = mamba::Model::new(&cfg, VarBuilder::zeros(DType::F32, &Device::Cpu))?;
        let mut state = mamba::State::new(1, &cfg, DType::F32, &Device::Cpu)?;
        for step in 0..4u32 {
            model.forward(&Tensor::new(&[step], &Device::Cpu)?, &mut state)?;
        }
        let measured = measured_bytes(&state)?;
        // 2 layers x (4 slots x 2 x 32 + 32 x 16) x 4 bytes.
        assert_eq!(measured, 2 * (4 * 2 * 32 + 32 * 16) * 4);
        let diff = compare_spec(&transformers_mamba(1), 1, measured).unwrap();
        assert_eq!(
            diff.measured - diff.declared,
            2 * 4 * 32 * 4,
            "the gate half of in_proj, kept by each of the 4 slots"
        );
        Ok(())
    }

    fn mamba2_ssm() -> StatePart {
        StatePart::mamba2_ssm(4, 16, 16, kv_core::DType::F32)
    }

    /// vLLM and llama.cpp keep `d_conv - 1` conv positions; candle keeps
    /// `d_conv` (it shifts the newest input in before convolving).
    #[test]
    fn mamba2_conv_keeps_one_position_more_than_vllms() -> Result<()> {
        let cfg: mamba2::Config = serde_json::from_str(MAMBA2).unwrap();
        let model = mamba2::Model::new(&cfg, VarBuilder::zeros(DType::F32, &Device::Cpu))?;
        for batch in [1u64, 2, 3] {
            let vllm = state(
                "vLLM MambaSpec",
                vec![
                    StatePart::mamba2_conv_vllm(64, 2, 16, 4, kv_core::DType::F32).unwrap(),
                    mamba2_ssm(),
                ],
                batch,
            );
            // vLLM: 2 layers x batch x ((4 - 1) x 128 + 4 x 16 x 16) x 4 bytes.
            assert_eq!(
                vllm.peak_bytes(1).unwrap(),
                2 * batch * (3 * 128 + 1024) * 4
            );
            let mut st = mamba2::State::new(batch as usize, &cfg, DType::F32, &Device::Cpu)?;
            let ids: Vec<u32> = (0..batch as u32).collect();
            model.forward(&Tensor::new(ids.as_slice(), &Device::Cpu)?, &mut st)?;
            let diff = compare_spec(&vllm, 1, measured_bytes(&st)?).unwrap();
            assert_eq!(
                diff.measured - diff.declared,
                2 * batch * 128 * 4,
                "one position of d_xbc channels per layer"
            );
        }
        Ok(())
    }

    /// `forward_prefill`'s chunked scan leaves the ssm state as a view of
    /// its `(batch, heads, n_chunks + 1, head_dim, d_state)` output: until
    /// the next decode step, every chunk's state stays allocated.
    #[test]
    fn mamba2_prefill_keeps_every_chunks_state_until_the_next_step() -> Result<()> {
        let cfg: mamba2::Config = serde_json::from_str(MAMBA2).unwrap();
        let model = mamba2::Model::new(&cfg, VarBuilder::zeros(DType::F32, &Device::Cpu))?;
        let batch = 2u64;
        let candle = state(
            "candle-transformers mamba2::State",
            vec![
                StatePart::new("conv", [4, 128, 1], kv_core::DType::F32),
                mamba2_ssm(),
            ],
            batch,
        );
        let mut st = mamba2::State::new(2, &cfg, DType::F32, &Device::Cpu)?;
        // 5 tokens in chunks of 4: padded to 8, 2 chunks.
        let prompt = Tensor::new(&[[1u32, 2, 3, 4, 5], [6, 7, 8, 9, 10]], &Device::Cpu)?;
        model.forward_prefill(&prompt, &mut st, 4)?;
        let diff = compare_spec(&candle, 1, measured_bytes(&st)?).unwrap();
        // Declared: 2 layers x 2 rows x (4 x 128 + 4 x 16 x 16) x 4 bytes.
        assert_eq!(diff.declared, 2 * 2 * (512 + 1024) * 4);
        assert_eq!(
            diff.measured - diff.declared,
            2 * 2 * 2 * 1024 * 4,
            "2 chunks' states beside the final one, per layer and row"
        );
        model.forward(&Tensor::new(&[11u32, 12], &Device::Cpu)?, &mut st)?;
        assert!(compare_spec(&candle, 1, measured_bytes(&st)?)
            .unwrap()
            .matches());
        Ok(())
    }
}

mod quantized {
    //! A head dim that is not whole blocks: candle quantizes it only across
    //! heads, so its blocks straddle heads, while kv rounds each head up.

    use candle_core::quantized::{GgmlDType, QTensor};
    use candle_core::{Device, Result, Tensor};
    use kv_candle::{compare_spec, measured_bytes};
    use kv_core::{BlockFormat, Geometry, KvSpec, Positions, Rows, Scope, Storage};

    #[test]
    fn blocks_across_heads_undercut_kvs_per_head_rounding() -> Result<()> {
        // 1 row, 2 heads, 16 positions, head_dim 80 = 2.5 blocks of 32.
        for (ggml, format, bytes) in [
            (GgmlDType::Q8_0, BlockFormat::Q8_0, 34u64),
            (GgmlDType::Q4_0, BlockFormat::Q4_0, 18),
        ] {
            let k = Tensor::randn(0f32, 1.0, (1, 2, 16, 80), &Device::Cpu)?;
            assert!(
                QTensor::quantize(&k, ggml).is_err(),
                "80 is not whole blocks"
            );
            // Flattened, 2 x 16 x 80 = 2560 values are 80 whole blocks.
            let flat = [
                QTensor::quantize(&k.flatten_all()?, ggml)?,
                QTensor::quantize(&k.flatten_all()?, ggml)?,
            ];
            let measured = measured_bytes(&flat)?;
            // K and V: 2 x 2 heads x 16 positions x 2.5 blocks x bytes.
            assert_eq!(measured, 2 * 2 * 16 * 5 * bytes / 2);
            let spec = KvSpec::attention(
                "cache",
                "candle QTensor K/V",
                Geometry::new(1, 2, 80, kv_core::DType::F32).with_storage(Storage::Blocks(format)),
                Positions::bounded(16, "positions quantized"),
                Scope::Request,
                Rows::fixed(1, "one row"),
            );
            let diff = compare_spec(&spec, 1, measured).unwrap();
            // kv: 2 x 2 heads x 16 positions x 3 blocks x bytes.
            assert_eq!(diff.declared, 2 * 2 * 16 * 3 * bytes);
            assert_eq!(
                diff.declared - diff.measured,
                2 * 2 * 16 * bytes / 2,
                "half a block per head and position, which kv rounds up"
            );
        }
        Ok(())
    }
}

/// One layer, 1 head of 4 f32 dims for K and V, 2 positions, 1 row: 64 bytes.
#[test]
fn the_spec_assertion_holds_on_a_match() {
    kv_candle::assert_spec_bytes(&one_layer("c", 1, 4, 2, 1), 1, 64);
}

#[test]
#[should_panic(expected = "declaration does not match measurement: declared 64 B != measured 63 B")]
fn the_spec_assertion_panics_on_a_mismatch() {
    kv_candle::assert_spec_bytes(&one_layer("c", 1, 4, 2, 1), 1, 63);
}
