//! The new kinds, formats and position policies against a reference written
//! here from the published formulas, in u128 so it cannot overflow: a mutant
//! in kv's shared byte math cannot pass both sides.

use kv_core::pattern::LayerKind;
use kv_core::{
    BlockFormat, DType, Geometry, Latent, LayerPattern, PositionPolicy, RecurrentState, StatePart,
    Storage,
};
use proptest::prelude::*;

/// A storage format and its reference bytes for `n` elements.
#[derive(Clone, Copy, Debug)]
enum Format {
    Dense(DType, u128),
    Blocks(BlockFormat, u128, u128),
    Scaled(DType, u128, u128),
}

impl Format {
    fn storage(self) -> Storage {
        match self {
            Format::Dense(dtype, _) => Storage::Dense(dtype),
            Format::Blocks(format, _, _) => Storage::Blocks(format),
            Format::Scaled(dtype, _, scale) => Storage::Scaled {
                dtype,
                scale_bytes: scale as u64,
            },
        }
    }

    /// Bytes of a vector of `n` elements: bits rounded up to bytes, or
    /// whole blocks, plus a scale.
    fn bytes(self, n: u128) -> u128 {
        match self {
            Format::Dense(_, bits) => (n * bits).div_ceil(8),
            Format::Blocks(_, elems, bytes) => n.div_ceil(elems) * bytes,
            Format::Scaled(_, bits, scale) => (n * bits).div_ceil(8) + scale,
        }
    }
}

fn format() -> impl Strategy<Value = Format> {
    prop_oneof![
        Just(Format::Dense(DType::F32, 32)),
        Just(Format::Dense(DType::BF16, 16)),
        Just(Format::Dense(DType::F8E4M3, 8)),
        Just(Format::Dense(DType::I4, 4)),
        Just(Format::Dense(DType::I2, 2)),
        Just(Format::Dense(DType::F4E2M1, 4)),
        Just(Format::Blocks(BlockFormat::Q8_0, 32, 34)),
        Just(Format::Blocks(BlockFormat::Q4_0, 32, 18)),
        Just(Format::Blocks(BlockFormat::Q4_1, 32, 20)),
        Just(Format::Blocks(BlockFormat::Q5_0, 32, 22)),
        Just(Format::Blocks(BlockFormat::Q5_1, 32, 24)),
        Just(Format::Blocks(BlockFormat::NVFP4, 16, 9)),
        Just(Format::Scaled(DType::I8, 8, 4)),
        Just(Format::Scaled(DType::F8E5M2, 8, 4)),
    ]
}

/// A positive u64: small (so that rules repeat within a range), near the
/// top (where `+ 1` would wrap), or anywhere.
fn small_or_any() -> impl Strategy<Value = u64> {
    prop_oneof![1..100u64, (u64::MAX - 100)..=u64::MAX, 1..=u64::MAX]
}

fn any_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        0..1_000u64,
        (u64::MAX - 1_000)..=u64::MAX,
        any::<u64>()
    ]
}

/// `Ok(x)` when the reference fits in u64, else an error is expected.
fn expect(reference: u128) -> Option<u64> {
    u64::try_from(reference).ok()
}

proptest! {
    #[test]
    fn attention_bytes_per_row(
        layers in 1..200u64, heads in 1..64u64, head_dim in 1..600u64,
        v_head_dim in prop::option::of(1..600u64), k in format(), v in prop::option::of(format()),
        positions in 0..1_000_000u64,
    ) {
        let mut geometry = Geometry::new(layers, heads, head_dim, DType::BF16).with_storage(k.storage());
        if let Some(dim) = v_head_dim {
            geometry = geometry.with_v_head_dim(dim);
        }
        if let Some(v) = v {
            geometry = geometry.with_v_storage(v.storage());
        }
        let vd = v_head_dim.unwrap_or(head_dim);
        let per_head = k.bytes(head_dim.into()) + v.unwrap_or(k).bytes(vd.into());
        let reference = u128::from(layers) * u128::from(heads) * per_head * u128::from(positions);
        prop_assert_eq!(geometry.bytes_per_row(positions).ok(), expect(reference));
    }

    #[test]
    fn huge_attention_overflows_to_an_error(
        layers in 1u64..u64::MAX, heads in 1u64..u64::MAX, positions in 1u64..u64::MAX,
    ) {
        let geometry = Geometry::new(layers, heads, 128, DType::F32);
        // K and V of 128 f32 elements: 1024 B per head.
        let reference = (u128::from(layers) * u128::from(heads))
            .checked_mul(1024)
            .and_then(|r| r.checked_mul(u128::from(positions)));
        let expected = reference.and_then(|r| u64::try_from(r).ok());
        prop_assert_eq!(geometry.bytes_per_row(positions).ok(), expected);
    }

    #[test]
    fn residual_window_bytes_per_row(
        head_dim in 1..300u64, q in format(), r in format(),
        residual in 0..500u64, positions in 0..5000u64,
    ) {
        let geometry = Geometry::new(2, 3, head_dim, DType::BF16)
            .with_storage(q.storage())
            .with_residual(residual, r.storage());
        let kept = u128::from(residual.min(positions));
        let rest = u128::from(positions) - kept;
        let per_head = |f: Format| 2 * f.bytes(head_dim.into());
        let reference = 2 * 3 * (kept * per_head(r) + rest * per_head(q));
        prop_assert_eq!(geometry.bytes_per_row(positions).ok(), expect(reference));
    }

    #[test]
    fn mla_latent_bytes_per_row(
        layers in 1..100u64, rank in 1..1024u64, rope in 1..128u64,
        latent in format(), rope_format in prop::option::of(format()), positions in 0..100_000u64,
    ) {
        let mut l = Latent::new(layers, rank, rope, DType::BF16).with_storage(latent.storage());
        let per_layer = match rope_format {
            // One vector when stored alike.
            None => latent.bytes(u128::from(rank + rope)),
            Some(r) => {
                l = l.with_rope_storage(r.storage());
                latent.bytes(rank.into()) + r.bytes(rope.into())
            }
        };
        let reference = u128::from(layers) * per_layer * u128::from(positions);
        prop_assert_eq!(l.bytes_per_row(positions).ok(), expect(reference));
    }

    #[test]
    fn recurrent_state_bytes_per_row(
        layers in 1..100u64, slots in 1..4u64,
        d_inner in 1..9000u64, d_conv in 1..8u64, d_state in 1..256u64, groups in 1..16u64,
        heads in 1..128u64, head_dim in 1..256u64,
    ) {
        let parts = vec![
            StatePart::mamba_conv_transformers(d_inner, d_conv, DType::BF16),
            StatePart::mamba_ssm(d_inner, d_state, DType::F32),
            StatePart::mamba2_conv_vllm(d_inner, groups, d_state, d_conv, DType::BF16).unwrap(),
            StatePart::mamba2_ssm(heads, head_dim, d_state, DType::F16),
            StatePart::gated_delta_conv(heads, head_dim, groups, d_state, d_conv, DType::BF16).unwrap(),
            StatePart::gated_delta_ssm(groups, d_state, head_dim),
        ];
        let state = RecurrentState::from_parts(layers, parts).with_slots(slots);
        let (d_inner, d_conv, d_state, groups, heads, head_dim) = (
            u128::from(d_inner), u128::from(d_conv), u128::from(d_state),
            u128::from(groups), u128::from(heads), u128::from(head_dim),
        );
        let per_layer = d_inner * d_conv * 2
            + d_inner * d_state * 4
            + (d_conv - 1) * (d_inner + 2 * groups * d_state) * 2
            + heads * head_dim * d_state * 2
            + (2 * heads * head_dim + groups * d_state) * d_conv * 2
            + groups * d_state * head_dim * 4;
        let reference = u128::from(layers) * u128::from(slots) * per_layer;
        prop_assert_eq!(state.bytes_per_row().ok(), expect(reference));
    }

    #[test]
    fn position_policies(
        window in 0..100_000u64, other in 0..100_000u64, batched in 0..20_000u64,
        max_model_len in 0..200_000u64, block in 0..64u64,
    ) {
        let cdiv = |a: u64, b: u64| a.div_ceil(b);
        let count = |p: PositionPolicy| p.count().unwrap();
        prop_assert_eq!(count(PositionPolicy::WindowMinusOne { window }), window.saturating_sub(1));
        prop_assert_eq!(count(PositionPolicy::Window { window }), window);
        prop_assert_eq!(
            count(PositionPolicy::WindowCapped { window, max_cache_len: other }),
            window.min(other)
        );
        prop_assert_eq!(count(PositionPolicy::WindowPlusChunk { window, chunk: other }), window + other);
        let sliding = PositionPolicy::VllmSlidingWindow {
            window, max_num_batched_tokens: batched, max_model_len, block_size: block,
        };
        let chunked = PositionPolicy::VllmChunkedLocal {
            chunk: window, max_num_batched_tokens: batched, max_model_len, block_size: block,
        };
        let padded = PositionPolicy::PaddedTo { count: window, multiple: block };
        let grows = PositionPolicy::GrowsBy { count: window, step: block };
        if block == 0 {
            for p in [sliding, chunked, padded, grows] {
                prop_assert_eq!(count(p), 0);
                prop_assert!(p.zero_input().is_some());
            }
        } else {
            let tokens = (window.saturating_sub(1) + batched).min(max_model_len);
            prop_assert_eq!(count(sliding), (cdiv(tokens, block) + 1) * block);
            let tokens = (window + batched).min(max_model_len);
            prop_assert_eq!(count(chunked), cdiv(tokens, block) * block);
            prop_assert_eq!(count(padded), cdiv(window, block) * block);
            prop_assert_eq!(count(grows), cdiv(window, block) * block);
        }
    }

    /// Small models: the layer list built as transformers' configs build it
    /// (`Gemma3TextConfig`, `Qwen3NextConfig`, `JambaConfig`), then counted.
    #[test]
    fn hybrid_patterns_count_as_the_configs_list_them(
        layers in 1..300u64, every in 1..40u64, period in 1..40u64, offset in 0..40u64,
        start in 0..320u64, len in 0..320u64,
    ) {
        let offset = offset % period;
        let (a, b) = (LayerKind::FullAttention, LayerKind::SlidingAttention);
        let every_nth: Vec<LayerKind> =
            (0..layers).map(|i| if (i + 1) % every != 0 { b } else { a }).collect();
        let period_offset: Vec<LayerKind> =
            (0..layers).map(|i| if i % period == offset { a } else { b }).collect();
        let rules = [
            (LayerPattern::every_nth(layers, every, a, b, "k").unwrap(), every_nth),
            (LayerPattern::period_offset(layers, period, offset, a, b, ("p", "o")).unwrap(), period_offset),
        ];
        let end = start.saturating_add(len);
        let lo = start.min(layers) as usize;
        let hi = (end.min(layers) as usize).max(lo);
        for (pattern, list) in rules {
            prop_assert_eq!(pattern.kinds().collect::<Vec<_>>(), list.clone());
            let listed = LayerPattern::from_kinds(list.clone(), "layer_types").unwrap();
            for kind in [a, b, LayerKind::Mamba] {
                let whole = list.iter().filter(|k| **k == kind).count() as u64;
                let part = list[lo..hi].iter().filter(|k| **k == kind).count() as u64;
                let at: Vec<u64> = (0..layers).filter(|i| list[*i as usize] == kind).collect();
                for p in [&pattern, &listed] {
                    prop_assert_eq!(p.indices(kind).collect::<Vec<_>>(), at.clone());
                    prop_assert_eq!(p.count(kind), whole);
                    prop_assert_eq!(p.count_in(kind, start, end), part);
                }
            }
        }
    }

    /// Any size, up to u64::MAX layers: counted in u128 by closed forms
    /// (multiples of `every` among 1..=x; `i < x` with `i % period == offset`).
    #[test]
    fn hybrid_pattern_counts_at_any_size(
        layers in small_or_any(), every in small_or_any(), period in 1..1_000u64,
        offset in 0..1_000u64, start in any_u64(), end in any_u64(),
    ) {
        let offset = offset % period;
        let (a, b) = (LayerKind::FullAttention, LayerKind::Mamba);
        let (lo, hi) = (u128::from(start.min(layers)), u128::from(end.min(layers)));
        let hi = hi.max(lo);
        let nth_below = |x: u128| x / u128::from(every);
        let at_below = |x: u128| {
            let (p, o) = (u128::from(period), u128::from(offset));
            x / p + u128::from(x % p > o)
        };
        let every_nth = LayerPattern::every_nth(layers, every, a, b, "k").unwrap();
        let nth = nth_below(hi) - nth_below(lo);
        prop_assert_eq!(u128::from(every_nth.count_in(a, start, end)), nth);
        prop_assert_eq!(u128::from(every_nth.count_in(b, start, end)), hi - lo - nth);
        prop_assert_eq!(u128::from(every_nth.count(a)), nth_below(u128::from(layers)));
        let period_offset = LayerPattern::period_offset(layers, period, offset, a, b, ("p", "o")).unwrap();
        let at = at_below(hi) - at_below(lo);
        prop_assert_eq!(u128::from(period_offset.count_in(a, start, end)), at);
        prop_assert_eq!(u128::from(period_offset.count_in(b, start, end)), hi - lo - at);
        prop_assert_eq!(
            u128::from(period_offset.count(b)),
            u128::from(layers) - at_below(u128::from(layers))
        );
    }
}
