//! candle-transformers' Mamba and Mamba2 `State`: what they hold, measured
//! ([`Measure`]) and declared ([`candle_mamba_state`], [`candle_mamba2_state`]).

use candle_core::{bail, Result};
use candle_transformers::models::{mamba, mamba2};
use kv_core::config::{MambaConfig, MambaVersion};
use kv_core::{KvSpec, RecurrentState, Rows, Scope, StatePart};

use crate::caches::kv_dtype;
use crate::measure::{Measure, Meter};

/// The conv window candle-transformers' `mamba` and `mamba2` hard-code
/// (their private `D_CONV`); a config's `conv_kernel` / `d_conv` is not read.
pub const CANDLE_MAMBA_D_CONV: u64 = 4;

/// The SSM state size candle-transformers' `mamba` (Mamba1) hard-codes (its
/// private `D_STATE`); a config's `state_size` is not read.
pub const CANDLE_MAMBA_D_STATE: u64 = 16;

/// The expansion candle-transformers' `mamba` hard-codes: `d_inner = 2 x d_model`.
pub const CANDLE_MAMBA_EXPAND: u64 = 2;

/// `hs` (one `(batch, d_inner, 16)` tensor per layer) and `prev_xs` (four
/// tensors per layer). `State::new` fills the four slots with clones of one
/// zeros tensor, one allocation; each `forward` step then stores a view of
/// that step's `in_proj` output, whose storage is `(batch, 2 x d_inner)`.
/// `pos` is a counter, not memory.
impl Measure for mamba::State {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.hs.measure(meter)?;
        self.prev_xs.measure(meter)
    }
}

/// `hs` (one `(batch, heads, head_dim, d_state)` tensor per layer) and
/// `conv_states` (one `(batch, d_inner + 2 x n_groups x d_state, 4)` tensor
/// per layer). `pos` is a counter, not memory.
impl Measure for mamba2::State {
    fn measure(&self, meter: &mut Meter) -> Result<()> {
        self.hs.measure(meter)?;
        self.conv_states.measure(meter)
    }
}

fn positive(value: usize, what: &str) -> Result<u64> {
    if value == 0 {
        bail!("kv-candle: {what} is 0; a state needs at least one")
    }
    Ok(value as u64)
}

fn hard_coded(what: &str, config: u64, candle: u64) -> Result<()> {
    if config != candle {
        bail!(
            "kv-candle: the config's {what} is {config}, but candle-transformers hard-codes \
             {candle} and would run with {candle}; the declaration would describe a model \
             candle does not build"
        )
    }
    Ok(())
}

/// What a candle-transformers `mamba::State::new(batch, ..)` (Mamba1) holds
/// at its peak, from the 4th decode step on:
///
/// - `ssm`: `(d_inner, 16)` per layer, as transformers' `MambaCache`.
/// - `conv`: four slots per layer, each a view of one step's `in_proj`
///   output, which is `2 x d_inner` wide (the conv input and the gate): so
///   `(2 x d_inner) x 4`, twice transformers' `(d_inner, d_conv)`.
///
/// Before the 4th step candle holds less (the slots start as one shared
/// zeros tensor); the declaration is the peak. `config` must agree with what
/// candle hard-codes (`d_conv` 4, `d_state` 16, `d_inner = 2 x hidden`);
/// anything else is an error, not a declaration of a model candle would not
/// build.
pub fn candle_mamba_state(
    config: &MambaConfig,
    dtype: candle_core::DType,
    batch: usize,
) -> Result<KvSpec> {
    if config.version != MambaVersion::Mamba1 {
        bail!("kv-candle: candle_mamba_state is for Mamba1; the config is Mamba2")
    }
    hard_coded("d_conv", config.d_conv, CANDLE_MAMBA_D_CONV)?;
    hard_coded("d_state", config.d_state, CANDLE_MAMBA_D_STATE)?;
    hard_coded(
        "d_inner",
        config.d_inner,
        config.hidden.saturating_mul(CANDLE_MAMBA_EXPAND),
    )?;
    let dt = kv_dtype(dtype)?;
    let parts = vec![
        StatePart::mamba_conv_transformers(
            config.d_inner.saturating_mul(2),
            CANDLE_MAMBA_D_CONV,
            dt,
        ),
        StatePart::mamba_ssm(config.d_inner, CANDLE_MAMBA_D_STATE, dt),
    ];
    Ok(KvSpec::recurrent(
        "state",
        "candle-transformers mamba::State",
        RecurrentState::from_parts(config.layers, parts),
        Scope::Request,
        Rows::fixed(positive(batch, "batch")?, "batch of the State tensors"),
    )
    .note("conv: 4 slots per layer, each a view of an in_proj output 2 x d_inner wide"))
}

/// What a candle-transformers `mamba2::State::new(batch, ..)` holds, from
/// `State::new` on and after every decode `forward` step:
///
/// - `ssm`: `(heads, head_dim, d_state)` per layer, as vLLM's.
/// - `conv`: `4 x (d_inner + 2 x n_groups x d_state)` per layer: candle
///   keeps `d_conv` positions (the newest included), one more than vLLM's
///   and llama.cpp's `d_conv - 1`.
///
/// After `forward_prefill` the ssm state is a view of the chunked scan's
/// output and keeps `n_chunks + 1` states alive until the next step (see the
/// crate docs). `config.d_conv` must be candle's hard-coded 4.
pub fn candle_mamba2_state(
    config: &MambaConfig,
    dtype: candle_core::DType,
    batch: usize,
) -> Result<KvSpec> {
    let (Some(n_groups), Some(heads), Some(head_dim)) =
        (config.n_groups, config.heads, config.head_dim)
    else {
        bail!("kv-candle: candle_mamba2_state is for Mamba2; the config is Mamba1")
    };
    hard_coded("d_conv", config.d_conv, CANDLE_MAMBA_D_CONV)?;
    let dt = kv_dtype(dtype)?;
    // kv's Mamba2 channel count, over candle's d_conv positions.
    let vllm_conv =
        StatePart::mamba2_conv_vllm(config.d_inner, n_groups, config.d_state, config.d_conv, dt)
            .map_err(|o| candle_core::Error::Msg(format!("kv-candle: {}", o.step)))?;
    let parts = vec![
        StatePart::new("conv", [CANDLE_MAMBA_D_CONV, vllm_conv.shape[1], 1], dt),
        StatePart::mamba2_ssm(heads, head_dim, config.d_state, dt),
    ];
    Ok(KvSpec::recurrent(
        "state",
        "candle-transformers mamba2::State",
        RecurrentState::from_parts(config.layers, parts),
        Scope::Request,
        Rows::fixed(positive(batch, "batch")?, "batch of the State tensors"),
    )
    .note("conv keeps d_conv (4) positions, not d_conv - 1"))
}
