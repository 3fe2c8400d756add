//! candle-transformers' Mamba and Mamba2 `State`, built from small configs and
//! stepped through the real models (zero weights, CPU), hold exactly the
//! bytes a `KvSpec::recurrent` declares. Where candle holds something the
//! peers' formulas do not, `mismatches.rs` asserts the difference.

use candle_core::{DType, Device, Result, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::{mamba, mamba2};
use kv_candle::{assert_spec_bytes, candle_mamba2_state, candle_mamba_state, measured_bytes};
use kv_core::config::MambaVersion;
use kv_core::{HfConfig, KvSpec, RecurrentState, Rows, Scope, StatePart};

/// A tiny Mamba1 in transformers' spelling (`hidden_size`, `state_size`, ...)
/// plus the state-spaces keys candle-transformers' `mamba::Config` reads
/// (`d_model`, `n_layer`, `pad_vocab_size_multiple`; it has no aliases).
const MAMBA: &str = r#"{
    "model_type": "mamba", "hidden_size": 16, "num_hidden_layers": 2, "expand": 2,
    "state_size": 16, "conv_kernel": 4, "vocab_size": 40,
    "d_model": 16, "n_layer": 2, "pad_vocab_size_multiple": 8
}"#;

/// A tiny Mamba2; candle-transformers' `mamba2::Config` reads the HF keys
/// through serde aliases (`hidden_size`, `num_hidden_layers`, `state_size`,
/// `head_dim`, `n_groups`). d_inner = 2 x 32 = 64 = 4 heads x 16.
const MAMBA2: &str = r#"{
    "model_type": "mamba2", "hidden_size": 32, "num_hidden_layers": 2, "expand": 2,
    "state_size": 16, "conv_kernel": 4, "n_groups": 2, "num_heads": 4, "head_dim": 16,
    "vocab_size": 40, "pad_vocab_size_multiple": 8
}"#;

const BATCHES: [usize; 3] = [1, 2, 3];

fn ids(batch: usize, step: u32) -> Result<Tensor> {
    let ids: Vec<u32> = (0..batch as u32).map(|b| (b + step) % 40).collect();
    Tensor::new(ids.as_slice(), &Device::Cpu)
}

fn recurrent(cache: &'static str, layers: u64, parts: Vec<StatePart>, batch: usize) -> KvSpec {
    KvSpec::recurrent(
        "state",
        cache,
        RecurrentState::from_parts(layers, parts),
        Scope::Request,
        Rows::fixed(batch as u64, "batch of the State tensors"),
    )
}

#[test]
fn the_configs_read_the_same_dims_in_kv_and_candle() -> Result<()> {
    let kv = HfConfig::from_value(serde_json::from_str(MAMBA).unwrap())
        .mamba()
        .unwrap();
    assert_eq!(kv.version, MambaVersion::Mamba1);
    assert_eq!(
        (kv.layers, kv.hidden, kv.d_inner, kv.d_state, kv.d_conv),
        (2, 16, 32, 16, 4)
    );
    let candle: mamba::Config = serde_json::from_str(MAMBA).unwrap();
    assert_eq!((candle.d_model, candle.n_layer), (16, 2));

    let kv2 = HfConfig::from_value(serde_json::from_str(MAMBA2).unwrap())
        .mamba()
        .unwrap();
    assert_eq!(kv2.version, MambaVersion::Mamba2);
    assert_eq!(
        (kv2.layers, kv2.d_inner, kv2.d_state, kv2.d_conv),
        (2, 64, 16, 4)
    );
    assert_eq!(
        (kv2.n_groups, kv2.heads, kv2.head_dim),
        (Some(2), Some(4), Some(16))
    );
    let candle2: mamba2::Config = serde_json::from_str(MAMBA2).unwrap();
    assert_eq!(
        (
            candle2.d_model,
            candle2.n_layer,
            candle2.d_state,
            candle2.expand,
            candle2.headdim,
            candle2.ngroups
        ),
        (32, 2, 16, 2, 16, 2)
    );
    Ok(())
}

/// The Mamba1 ssm state is transformers' `(d_inner, d_state)` exactly, from
/// `State::new` through every step; with the conv slots at their peak (from
/// the 4th step) the whole State is `candle_mamba_state`, byte for byte.
/// candle's Mamba1 steps at batch 1 only (asserted); larger batches are
/// checked as `State::new` builds them.
#[test]
fn mamba_state_holds_its_declaration_from_the_fourth_step() -> Result<()> {
    let kv = HfConfig::from_value(serde_json::from_str(MAMBA).unwrap())
        .mamba()
        .unwrap();
    let cfg: mamba::Config = serde_json::from_str(MAMBA).unwrap();
    for dtype in [DType::F32, DType::BF16] {
        let model = mamba::Model::new(&cfg, VarBuilder::zeros(dtype, &Device::Cpu))?;
        let ds = dtype.size_in_bytes() as u64;
        for batch in BATCHES {
            let b = batch as u64;
            let mut state = mamba::State::new(batch, &cfg, dtype, &Device::Cpu)?;
            // transformers' MambaCache ssm: (batch, d_inner 32, d_state 16) per layer, 2 layers.
            let ssm = recurrent(
                "ssm of candle-transformers mamba::State",
                kv.layers,
                vec![StatePart::mamba_ssm(
                    kv.d_inner,
                    kv.d_state,
                    kv_dtype(dtype),
                )],
                batch,
            );
            assert_eq!(ssm.peak_bytes(1).unwrap(), 2 * b * 32 * 16 * ds);
            assert_spec_bytes(&ssm, 1, measured_bytes(&state.hs)?);

            let spec = candle_mamba_state(&kv, dtype, batch)?;
            // 2 layers x batch x (conv 4 slots x 2 x 32 + ssm 32 x 16) x bytes.
            let peak = 2 * b * (4 * 2 * 32 + 32 * 16) * ds;
            assert_eq!(spec.peak_bytes(1).unwrap(), peak);
            if batch > 1 {
                // candle-transformers 0.11.1's Mamba1 `forward` broadcasts B,
                // `(batch, d_state)`, to `(batch, d_inner, d_state)`: it runs
                // at batch 1 only. Such a State is only ever what `new` built.
                let err = model.forward(&ids(batch, 0)?, &mut state).unwrap_err();
                let want = format!("cannot broadcast [{batch}, 16] to [{batch}, 32, 16]");
                assert!(err.to_string().contains(&want), "{err}");
                continue;
            }
            for step in 0..6 {
                model.forward(&ids(batch, step)?, &mut state)?;
                assert_spec_bytes(&ssm, 1, measured_bytes(&state.hs)?);
                let measured = measured_bytes(&state)?;
                if step >= 3 {
                    assert_spec_bytes(&spec, 1, measured);
                } else {
                    assert!(measured < peak, "step {step}: {measured} B");
                }
            }
            assert_eq!(state.pos, 6);
        }
    }
    Ok(())
}

/// Mamba2: ssm `(heads, head_dim, d_state)` and conv `(d_xbc, 4)` per layer,
/// from `State::new` on and after every decode step.
#[test]
fn mamba2_state_holds_its_declaration_at_every_decode_step() -> Result<()> {
    let kv = HfConfig::from_value(serde_json::from_str(MAMBA2).unwrap())
        .mamba()
        .unwrap();
    let cfg: mamba2::Config = serde_json::from_str(MAMBA2).unwrap();
    for dtype in [DType::F32, DType::BF16] {
        let model = mamba2::Model::new(&cfg, VarBuilder::zeros(dtype, &Device::Cpu))?;
        let ds = dtype.size_in_bytes() as u64;
        for batch in BATCHES {
            let b = batch as u64;
            let spec = candle_mamba2_state(&kv, dtype, batch)?;
            // 2 layers x batch x (conv 4 x (64 + 2 x 2 x 16) + ssm 4 x 16 x 16) x bytes
            //   = 2 x batch x (4 x 128 + 1024) x bytes.
            let peak = 2 * b * (4 * 128 + 4 * 16 * 16) * ds;
            assert_eq!(spec.peak_bytes(1).unwrap(), peak);
            // The same, written with kv's Mamba2 constructors: the ssm part is
            // vLLM's; the conv part is kv's channel count over 4 positions.
            let dt = kv_dtype(dtype);
            let vllm_conv = StatePart::mamba2_conv_vllm(64, 2, 16, 4, dt).unwrap();
            assert_eq!(vllm_conv.shape, [3, 128, 1]);
            let by_hand = recurrent(
                "candle-transformers mamba2::State",
                2,
                vec![
                    StatePart::new("conv", [4, vllm_conv.shape[1], 1], dt),
                    StatePart::mamba2_ssm(4, 16, 16, dt),
                ],
                batch,
            );
            assert_eq!(by_hand.peak_bytes(1), spec.peak_bytes(1));

            let mut state = mamba2::State::new(batch, &cfg, dtype, &Device::Cpu)?;
            assert_spec_bytes(&spec, 1, measured_bytes(&state)?);
            for step in 0..6 {
                model.forward(&ids(batch, step)?, &mut state)?;
                assert_spec_bytes(&spec, 1, measured_bytes(&state)?);
            }
        }
    }
    Ok(())
}

/// candle hard-codes what a config may say otherwise; the helpers refuse to
/// declare a model candle would not build.
#[test]
fn a_config_candle_ignores_is_an_error_not_a_declaration() {
    let wide_conv = HfConfig::from_value(serde_json::from_str(MAMBA).unwrap())
        .with_value("conv_kernel", 3)
        .mamba()
        .unwrap();
    let err = candle_mamba_state(&wide_conv, DType::F32, 1).unwrap_err();
    assert!(
        err.to_string()
            .contains("d_conv is 3, but candle-transformers hard-codes 4"),
        "{err}"
    );
    let big_state = HfConfig::from_value(serde_json::from_str(MAMBA).unwrap())
        .with_value("state_size", 64)
        .mamba()
        .unwrap();
    assert!(candle_mamba_state(&big_state, DType::F32, 1).is_err());
    let mamba2 = HfConfig::from_value(serde_json::from_str(MAMBA2).unwrap())
        .mamba()
        .unwrap();
    assert!(candle_mamba_state(&mamba2, DType::F32, 1).is_err());
    let mamba1 = HfConfig::from_value(serde_json::from_str(MAMBA).unwrap())
        .mamba()
        .unwrap();
    assert!(candle_mamba2_state(&mamba1, DType::F32, 1).is_err());
    assert!(candle_mamba2_state(&mamba2, DType::F32, 0).is_err());
}

fn kv_dtype(dtype: DType) -> kv_core::DType {
    kv_candle::kv_dtype(dtype).unwrap()
}
