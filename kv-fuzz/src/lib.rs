//! Fuzzing of the readers `kv` runs on untrusted bytes, on the stable
//! toolchain: each case is a seed input (a GGUF header per kind of memory,
//! each shipped `config.json`, rank reports of their estimates) mutated by a
//! generator seeded from the run's seed and the case's index, so a case a
//! run names is made again alone (`--start N --cases 1 --out DIR`).
//!
//! Each case is checked for the properties issue 35 asks:
//! - **no panic** (`catch_unwind`; the panic's message is kept);
//! - **no hang** (a watchdog ends the run naming a case past
//!   [`run::HANG_AFTER`]);
//! - **bounded memory** ([`alloc::BoundedAlloc`], installed by the binary
//!   and the test, refuses to let one case hold past
//!   [`alloc::LIMIT_BYTES`], which aborts the run naming the case);
//! - **no silent 0-byte figure** for a model with layers.
//!
//! `cargo test -p kv-fuzz` runs a fixed-seed slice of each target (CI);
//! `cargo run --release -p kv-fuzz -- TARGET --cases N --seed S` runs long
//! (the figures are in the README's "Hostile input" section).

pub mod alloc;
mod bytes;
mod config;
mod gguf;
mod interesting;
mod report;
mod rng;
pub mod run;
mod targets;

pub use run::{run, Inputs, Plan, Summary};
pub use targets::{Flags, Outcome, Target};
