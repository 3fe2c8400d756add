#![recursion_limit = "256"]
//! For model authors, and for engines that integrate the derive: declare, at
//! the type level, the attention KV caches a model holds outside an
//! inference engine's paged KV manager, so that their memory is computed,
//! checked, logged and documented instead of guessed. To size a checkpoint
//! as vLLM, SGLang or llama.cpp would (the `kv` command's estimates, a GGUF
//! header), use the kv-engines crate, built on this one's public API.
//!
//! The root holds what a model author and an engine call:
//!
//! - Declare: `#[derive(ModelLocalKv)]` (every attribute is documented on
//!   [the derive](derive@ModelLocalKv)), or implement [`ModelLocalKv`] by hand.
//!   A declaration is a [`KvSpec`]: a [`Geometry`] (or a [`Latent`], or a
//!   [`RecurrentState`] of [`StatePart`]s) stored as a [`DType`] or a
//!   [`Storage`] ([`BlockFormat`]), [`Positions`] with the reason for their
//!   bound ([`PositionPolicy`]), [`Rows`] with their driver, [`Scope`] (never
//!   a multiplier), and how tensor and pipeline parallelism split it
//!   ([`Placement`], [`Sharding`], over a [`LayerPattern`]). All byte math is
//!   checked `const fn`; an error is a [`KvError`] (an [`Overflow`] in const
//!   code).
//! - Read geometry after load: [`HfConfig`] (feature `json`).
//! - Collect and report at start-up: [`log_model_local_kv`], [`collect`],
//!   [`Collection`] (per rank of a [`Parallel`] layout); document with
//!   [`Table`].
//!
//! The rest is in modules: [`declare`] (the traits behind the derive, the
//! tree the collector walks, the types a value read after load may have),
//! [`spec`] (a spec's layout and its parts), [`collection`] (what was
//! collected, skipped and totalled; the start-up report), [`pattern`] (kinds
//! of layer), [`budget`] (compile-time ceilings, [`assert_kv_budget!`]),
//! [`planner`] (how many sequences fit a device), [`units`], and with
//! feature `json` [`config`] and [`export`] (reports as JSON, merged across
//! ranks); with features: `registry`, `fresh` and `page`, `chart`.
//!
//! ```
//! use kv_core::{log_model_local_kv, ModelLocalKv};
//!
//! #[derive(ModelLocalKv)]
//! #[kv(
//!     name = "retained",
//!     cache = "sliding DynamicCache",
//!     layers = 8, kv_heads = 16, head_dim = 64, dtype = f32,
//!     positions = bounded(71, because = "sliding_window(72) - 1"),
//!     scope = request,
//!     rows = max_num_seqs,
//!     only_when = "async_chunk",
//! )]
//! struct CodecDecoder {
//!     async_chunk: bool,
//! }
//!
//! let collection = log_model_local_kv(&CodecDecoder { async_chunk: true }, 256);
//! assert_eq!(collection.totals(256)?.total, 256 * 4_653_056);
//! # Ok::<(), kv_core::KvError>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod budget;
#[cfg(feature = "chart")]
pub mod chart;
pub mod collection;
#[cfg(feature = "json")]
pub mod config;
pub mod declare;
mod error;
#[cfg(feature = "json")]
pub mod export;
#[cfg(feature = "fresh")]
pub mod fresh;
#[cfg(feature = "fresh")]
pub mod page;
mod parallel;
pub mod pattern;
pub mod planner;
#[cfg(feature = "registry")]
pub mod registry;
pub mod spec;
pub mod units;

#[doc(hidden)]
#[path = "private/mod.rs"]
pub mod __private_v0_1;

// The root: what a model author and an engine call.
pub use collection::collect::{collect, Collection};
pub use collection::report::log_model_local_kv;
pub use collection::table::Table;
#[cfg(feature = "json")]
#[doc(inline)]
pub use config::HfConfig;
#[doc(inline)]
pub use declare::ModelLocalKv;
pub use error::{KvError, Overflow};
pub use parallel::Parallel;
#[doc(inline)]
pub use pattern::LayerPattern;
pub use spec::dtype::DType;
pub use spec::layout::{Geometry, Latent, RecurrentState, StatePart};
pub use spec::placement::{Placement, Sharding};
pub use spec::positions::{PositionPolicy, Positions};
pub use spec::storage::{BlockFormat, Storage};
pub use spec::tensors::{TensorPart, Tensors};
#[doc(inline)]
pub use spec::{KvSpec, Rows, Scope};

/// Derives [`ModelLocalKv`] and [`DeclaredKv`](declare::DeclaredKv) from `#[kv(...)]` attributes.
///
/// # Declarations
///
/// A `#[kv(...)]` on the struct declares one allocation (repeat it for
/// several, e.g. a retained cache and its working copy); on a field it
/// declares one whose name defaults to the field's.
///
/// On an enum, a `#[kv(...)]` on the enum declares whatever variant is live;
/// one on a variant, or on a variant's field, declares only while that
/// variant is live (its `only_when` text reads `Type::Variant`). A variant's
/// values read after load may name its fields, bound by reference
/// (`positions = bounded(window, because = "...")` in
/// `Rotating { window: usize }`), and its `only_when = "field"` names a
/// `bool` field of the variant. `#[kv(child)]` and `skip` work on variant
/// fields as on a struct's; a child's path is `Variant.field`, or `Variant`
/// for a tuple variant's single field (`layers.3.Rotating`).
///
/// | key | value | required |
/// |---|---|---|
/// | `name` | `"retained"` | on the struct and on tuple fields |
/// | `cache` | `"sliding DynamicCache"`: what kind of cache holds it | yes |
/// | `layers`, `kv_heads`, `head_dim` | a count | yes, or `geometry`, `latent`, `state` or `tensors` |
/// | `v_head_dim` | a count, where values differ from keys | no |
/// | `dtype` | `f64`, `f32`, `f16`, `bf16`, `f8e4m3`, `f8e5m2`, `i8`, `u8`, `i4`, `i2`, `f4e2m1`, or an expression of type [`DType`] or, read after load, `Result<DType, E>` with `E` any error that displays itself (a lower-case word close to a dtype name, like `bf61`, is taken for a misspelling; write such a const by its path) | yes, or `kv_format`, `geometry`, `latent`, `state` or `tensors` |
/// | `kv_format`, `v_format` | how keys (and values) are stored, where it is not `dtype`: a dtype name, a block format (`q8_0`, `q4_0`, `q4_1`, `q5_0`, `q5_1`, `nvfp4`), vLLM's `--kv-cache-dtype` name (`fp8`, `fp8_e5m2`, `int8_per_token_head`, ..., [`Storage::VLLM_NAMES`]), or an expression of type [`Storage`] | no |
/// | `geometry` | an expression of type [`Geometry`] or, read after load, `Result<Geometry, E>` with `E` any error that displays itself (a [`KvError`] is kept whole) | instead of the parts above |
/// | `latent` | an MLA latent: an expression of type [`Latent`] (or, read after load, a `Result` of one whose error displays itself) | instead of the attention parts |
/// | `state` | recurrent state: an expression of type [`RecurrentState`] (or, read after load, a `Result` of one whose error displays itself); it has no `positions` | instead of the attention parts and `positions` |
/// | `tensors` | tensors kept beside the caches (rotary cos/sin tables, a memo of masks by prompt length, codebooks): an expression of type [`Tensors`] of named [`TensorPart`]s (or, read after load, a `Result` of one whose error displays itself); it has no `positions`, and a memo's range carries its reason | instead of the attention parts and `positions` |
/// | `positions` | `bounded(COUNT, because = "...")`, or a policy that writes its own reason: `window(W)`, `window_minus_one(W)`, `window_capped(W, max_cache_len = N)`, `window_plus_chunk(W, chunk = N)`, `vllm_sliding_window(W, max_num_batched_tokens = N, max_model_len = N, block_size = N)`, `vllm_chunked_local(CHUNK, ..the same..)`, `padded(COUNT, multiple = N)`, `grows_by(COUNT, step = N)` ([`PositionPolicy`]); each input a count | yes, except with `state` or `tensors` |
/// | `scope` | `invocation`, `request`, `session` or `model` (diagnostic only, never a multiplier) | yes |
/// | `rows` | `max_num_seqs`, or `fixed(COUNT, because = "...")` | yes: never defaults to 1 |
/// | `only_when` | `"async_chunk"`: a `bool` field; or `"is_streaming()"`: a `fn(&self) -> bool`; when false the declaration yields nothing | no |
/// | `assumes` | prose: a condition the model cannot observe | no |
/// | `note` | prose: the object layout | no |
/// | `on_host` | prose: why it lives in host memory (device is the default) | no |
/// | `whole_on_every_rank` | prose: why tensor and pipeline parallelism do not divide it | no |
///
/// A count is an integer literal (checked positive by the macro), a const
/// expression (checked positive and, with the rest of the declaration, free
/// of `u64` overflow at compile time), or an expression mentioning `self`,
/// read after load (any integer type, or a `Result` of one whose error
/// displays itself, as a config lookup returns; an error, a negative and an
/// overflow are run-time errors naming the declaration as `Type.name`, and under
/// [`collect`](crate::collect()) skip that declaration alone; a zero makes
/// the declaration yield nothing, listed with the expression it came from in
/// [`Collection::empty_declarations`](crate::Collection::empty_declarations)
/// and the report, its siblings unaffected). A value containing a comma
/// outside brackets (`f::<A, B>()`) must be wrapped in parentheses. Const
/// expressions in a generic type are checked when the type is used (a type
/// generic only over lifetimes is checked like a concrete one).
///
/// Each key may be given once per `#[kv(...)]`, `child` once per field and
/// `crate` once per struct. Names and paths drop the `r#` of raw identifiers
/// (a field `r#type` declares `type`).
///
/// # Children and options
///
/// - `#[kv(child)]` on a field: the collector visits it. It may be an owner
///   (a trait object whose trait has `ModelLocalKv` as a supertrait
///   included: `Box<dyn NormalModel>`, `Arc<Mutex<dyn Pipeline>>`), or
///   owners in `Option`, `Vec`, `VecDeque`, `LinkedList`, arrays, slices,
///   map values (`HashMap`, `BTreeMap`: a key is its `Debug` text in the
///   path, a string's without quotes), tuples, `Cow`, `Box`/`Rc`/`Arc` and
///   references, behind `Mutex`, `RwLock`, `RefCell`, `OnceLock` or
///   `OnceCell`, nested in any of these; with kv-core's features, in
///   `smallvec`'s `SmallVec` (`smallvec`), `parking_lot`'s locks (any
///   `lock_api` lock; `parking_lot`) and `tokio::sync`'s `Mutex`, `RwLock`
///   and `OnceCell` (`tokio`). A tuple may also hold things that declare
///   nothing, as Whisper's decoder keeps `Option<(MultiHeadAttention,
///   LayerNorm)>`: only its elements that declare are visited (each under
///   its index, `cross_attn.0`), where the tuple's type names no type
///   parameter. Locks and cells are read without waiting (a tokio lock is
///   tried, never awaited): one held elsewhere is [`Collection::skipped`]
///   with [`KvError::Unreachable`] naming its path, never waited for; a
///   poisoned lock is read and listed in [`Collection::poisoned`]. In a
///   generic type the `KvChild` bound of such a field is inferred (a
///   parameter declared `?Sized` may be a trait object).
/// - `#[kv(child(with = path))]` on a field of another crate's container:
///   `path` names a function `fn(&FieldType) -> impl IntoIterator<Item =
///   &Owner>` (as serde's `with`), whose items are visited under their
///   index (`slots.0`, `slots.1`); a string literal holding the path works
///   too.
/// - `#[kv(skip, because = "...")]` on a field: its model-local KV is left out
///   on purpose (a draft model reported by its own engine, a view of another
///   field, a trait object of weights), and the reason says why; a blank
///   reason is an error.
/// - A field marked neither way must not hold KV; where it may, it is a
///   compile error under the field, naming its type and both ways out, so
///   that a forgotten `child` cannot silently drop a child's declarations
///   from every report:
///   - a type that declares (an owner, or any container above of owners);
///   - a type kv does not walk that holds one (another crate's
///     `Queue<Cache>`, a `HashSet<Cache>`, a `Cell<Cache>`): each type
///     argument is asked in turn, and the error names the owner inside;
///   - any trait object (`Box<dyn Trait>`, `Arc<dyn Trait>`, `&dyn Trait`,
///     in any container), whatever its trait: kv cannot tell what it holds.
///     The error says whether the trait declares (mark the field `child`) or
///     hides what it holds (add `ModelLocalKv` as a supertrait, and gives
///     the line to write).
///
///   What is not checked: a field whose type names a type or const
///   parameter of the struct, or `Self` (resolved where the struct is
///   defined, where the parameter is unknown; a trait object among them is
///   still an error); a type written with primitives and standard
///   containers alone (`u32`, `String`, `Vec<f32>`, `Mutex<u64>`, `&'a
///   [u8]`); what holds nothing (`PhantomData`, `Weak`, fn and raw
///   pointers); a trait object hidden behind a type alias; and an owner
///   behind a struct of your own that does not derive.
/// - A struct without the derive between the roots and an annotated type
///   hides that type from the compiler's check (nothing checks the fields
///   of a struct that does not derive). With the `registry` feature,
///   [`registry::unreached`] finds such types at start-up, in any module of
///   the roots' crate; what no check can see, a census measures
///   (`kv_candle::census`).
/// - `#[kv(transparent)]` on the struct: its one `#[kv(child)]` field is
///   visited at the wrapper's own path, for wrappers that forward to their
///   inner model (a second child would give two declarations one full name).
///   The wrapper may still declare its own caches.
/// - `#[kv(crate = "path")]` on the struct: where kv-core is, when it is
///   renamed or re-exported.
///
/// ```
/// use kv_core::ModelLocalKv;
///
/// #[derive(ModelLocalKv)]
/// struct Talker {
///     #[kv(
///         cache = "StaticCache",
///         geometry = self.geometry,
///         positions = bounded(2048, because = "hardcoded max_cache_len"),
///         scope = invocation,
///         rows = fixed(1, because = "calls are serialized"),
///     )]
///     cache: Option<Vec<f32>>,
///     geometry: kv_core::Geometry,
/// }
///
/// let talker = Talker {
///     cache: None,
///     geometry: kv_core::Geometry::new(24, 2, 64, kv_core::DType::BF16),
/// };
/// let mut declared = Vec::new();
/// talker.kv_declare(&mut declared).unwrap();
/// assert_eq!(declared[0].peak_bytes(256), Ok(25_165_824)); // fixed rows ignore max_num_seqs
/// ```
#[cfg(feature = "derive")]
pub use kv_derive::ModelLocalKv;

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
