//! Byte arithmetic at the extremes. Const declarations whose bytes overflow u64
//! do not compile (tests/ui/overflow-*.rs, run by tests/ui.rs); values read after load that overflow, or do not fit in u64, are a
//! clear `KvError` from `kv_declare`, never a panic or a wrapped number.

use std::panic::{catch_unwind, AssertUnwindSafe};

use kv_core::{KvError, KvSpec, ModelLocalKv};

/// Stands in for a checkpoint's config, known after load, with the integer
/// types configs come in.
struct Config {
    layers: u64,
    kv_heads: u128,
    head_dim: i64,
    positions: usize,
    sessions: u32,
}

const SANE: Config = Config {
    layers: 28,
    kv_heads: 8,
    head_dim: 128,
    positions: 4096,
    sessions: 4,
};

#[derive(kv_core::ModelLocalKv)]
#[kv(
    name = "cache",
    cache = "StaticCache",
    layers = self.config.layers,
    kv_heads = self.config.kv_heads,
    head_dim = self.config.head_dim,
    dtype = bf16,
    positions = bounded(self.config.positions, because = "max_cache_len"),
    scope = invocation,
    rows = max_num_seqs,
)]
struct Talker {
    config: Config,
}

#[derive(kv_core::ModelLocalKv)]
#[kv(
    name = "sessions",
    cache = "EncoderDecoderCache",
    layers = self.config.layers,
    kv_heads = 8,
    head_dim = 128,
    dtype = bf16,
    positions = bounded(self.config.positions, because = "max_position_embeddings"),
    scope = session,
    rows = fixed(self.config.sessions, because = "one cache per session"),
)]
struct Pool {
    config: Config,
}

fn talker(config: Config) -> Talker {
    Talker { config }
}

fn pool(config: Config) -> Pool {
    Pool { config }
}

/// `kv_declare`, asserting it returns rather than panics.
fn declare(model: &dyn ModelLocalKv) -> Result<Vec<KvSpec>, KvError> {
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut out = Vec::new();
        model.kv_declare(&mut out).map(|()| out)
    }));
    result.expect("kv_declare panicked; it must return an error instead")
}

fn error(model: &dyn ModelLocalKv) -> KvError {
    match declare(model) {
        Ok(specs) => panic!("expected an error, got {specs:?}"),
        Err(error) => error,
    }
}

#[test]
fn sane_values_read_after_load_declare() {
    let specs = declare(&talker(SANE)).unwrap();
    assert_eq!(
        specs[0].bytes_per_row(),
        Ok(28 * 8 * (128 + 128) * 2 * 4096)
    );
    let specs = declare(&pool(SANE)).unwrap();
    assert_eq!(
        specs[0].peak_bytes(0),
        Ok(4 * 28 * 8 * (128 + 128) * 2 * 4096)
    );
}

#[test]
fn bytes_per_position_that_overflow_are_an_overflow_error() {
    let error = error(&talker(Config {
        layers: u64::MAX / 2,
        ..SANE
    }));
    assert!(matches!(error, KvError::Overflow { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "kv: `Talker.cache`: bytes per position (layers x kv_heads x (head_dim + v_head_dim) \
         x dtype) overflows u64; check the geometry"
    );
}

#[test]
fn bytes_per_row_overflow_exactly_past_u64_max() {
    // One layer, head, dim: 2 x 2 bytes a position, so u64::MAX / 4 positions fit...
    let edge = |positions: usize| {
        talker(Config {
            layers: 1,
            kv_heads: 1,
            head_dim: 1,
            positions,
            ..SANE
        })
    };
    let max_positions = usize::try_from(u64::MAX / 4).unwrap();
    let specs = declare(&edge(max_positions)).unwrap();
    assert_eq!(specs[0].bytes_per_row(), Ok(u64::MAX - 3));
    // ...and one more does not.
    let error = error(&edge(max_positions + 1));
    assert_eq!(
        error.to_string(),
        "kv: `Talker.cache`: bytes per row (bytes per position x positions) overflows u64; \
         check the geometry"
    );
}

#[test]
fn a_fixed_row_count_whose_peak_overflows_is_an_overflow_error() {
    // 2^20 layers x 8 heads x 256 dims x 2 bytes x 2^20 positions = 2^52 a row.
    let config = Config {
        layers: 1 << 20,
        positions: 1 << 20,
        ..SANE
    };
    let fits = Config {
        sessions: 1 << 11,
        ..config
    };
    assert_eq!(declare(&pool(fits)).unwrap()[0].peak_bytes(0), Ok(1 << 63));
    let error = error(&pool(Config {
        sessions: 1 << 12,
        ..config
    }));
    assert!(matches!(error, KvError::Overflow { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "kv: `Pool.sessions`: peak bytes (rows x bytes per row) overflows u64; check the geometry"
    );
}

#[test]
fn a_value_too_large_for_u64_is_an_invalid_value_not_a_wrapped_one() {
    for (kv_heads, shown) in [
        (u128::from(u64::MAX) + 1, "18446744073709551616"),
        (u128::MAX, "340282366920938463463374607431768211455"),
    ] {
        let error = error(&talker(Config { kv_heads, ..SANE }));
        assert!(matches!(
            error,
            KvError::InvalidValue {
                field: "kv_heads",
                ..
            }
        ));
        assert_eq!(
            error.to_string(),
            format!("kv: `Talker.cache`: `kv_heads` is {shown}, more than u64 can hold")
        );
    }
    // u64::MAX itself is a count; the bytes then overflow.
    let error = error(&talker(Config {
        kv_heads: u128::from(u64::MAX),
        ..SANE
    }));
    assert!(matches!(error, KvError::Overflow { .. }), "{error:?}");
}

#[test]
fn a_negative_value_is_an_invalid_value() {
    for (head_dim, shown) in [(-64, "-64"), (i64::MIN, "-9223372036854775808")] {
        let error = error(&talker(Config { head_dim, ..SANE }));
        assert!(matches!(
            error,
            KvError::InvalidValue {
                field: "head_dim",
                ..
            }
        ));
        assert_eq!(
            error.to_string(),
            format!("kv: `Talker.cache`: `head_dim` is {shown}; a count cannot be negative")
        );
    }
}
