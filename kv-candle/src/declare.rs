//! Helpers that declare candle caches without hand arithmetic: values for
//! `#[kv(geometry = ..., positions = bounded(..))]` read after load.

use candle_core::Tensor;
use candle_nn::kv_cache::{
    ConcatKvCache, KvCache, RotatingCache, RotatingKvCache, ScatteredKvCache,
};
use kv_core::declare::after_load::IntoCount;
use kv_core::{Geometry, KvError};

use crate::caches::{StaticKvCache, SEQ_DIM};

fn invalid(field: &'static str, problem: String) -> KvError {
    KvError::InvalidValue {
        declaration: String::new(),
        field,
        problem,
    }
}

/// A count given as a `usize`, as `u64`; zero is an error.
fn count(value: usize, field: &'static str) -> Result<u64, KvError> {
    match value.into_count(field)? {
        0 => Err(invalid(
            field,
            "is 0; a cache with no extent declares nothing".to_owned(),
        )),
        n => Ok(n),
    }
}

/// kv's dtype for candle's; `whose` says where it was found (`""`, or
/// `" in layer 2's V"`).
fn kv_dtype_of(
    dtype: candle_core::DType,
    field: &'static str,
    whose: &str,
) -> Result<kv_core::DType, KvError> {
    crate::caches::kv_dtype(dtype).map_err(|_| {
        invalid(
            field,
            format!("is candle's {dtype:?}{whose}, which has no kv dtype"),
        )
    })
}

/// `4 heads x 32 dims of f16`, and V's where they differ.
fn describe(geometry: &Geometry) -> String {
    let mut text = format!(
        "{} heads x {} dims of {}",
        geometry.kv_heads, geometry.head_dim, geometry.storage
    );
    if let Some(dim) = geometry.v_head_dim {
        text += &format!(", V {dim} dims");
    }
    if let Some(storage) = geometry.v_storage {
        text += &format!(", V of {storage}");
    }
    text
}

/// kv's [`Geometry`] for `layers` layers of candle K and V tensors of
/// `kv_heads` heads of `head_dim` elements of `dtype`: the arguments a model
/// gives candle (`KvCache::new` takes none of them; its appended tensors
/// have them), without conversions. Usable as `#[kv(geometry = ...)]`.
///
/// An error, never a panic, when a count is 0 or `dtype` has no kv dtype
/// (`u32`, `i16`, `i32`, `i64`, the sub-byte floats). The error names the
/// argument; in a derived declaration it also names the declaration.
///
/// ```
/// use candle_nn::kv_cache::KvCache;
/// use kv_core::ModelLocalKv;
///
/// #[derive(ModelLocalKv)]
/// struct Model {
///     #[kv(cache = "candle KvCache",
///          geometry = kv_candle::kv_geometry(self.caches.len(), self.kv_heads, self.head_dim, self.dtype),
///          positions = bounded(self.max_seq_len, because = "max_seq_len given to KvCache::new"),
///          scope = request,
///          rows = fixed(1, because = "batch 1"))]
///     caches: Vec<KvCache>,
///     kv_heads: usize,
///     head_dim: usize,
///     dtype: candle_core::DType,
///     max_seq_len: usize,
/// }
///
/// let model = Model {
///     caches: (0..4).map(|_| KvCache::new(2, 128)).collect(),
///     kv_heads: 2, head_dim: 64, dtype: candle_core::DType::BF16, max_seq_len: 128,
/// };
/// // 2 (K, V) x 4 layers x 2 heads x 64 dims x 2 bytes x 128 positions
/// kv_candle::assert_declared_bytes(&model, 1, 2 * 4 * 2 * 64 * 2 * 128);
///
/// let err = kv_candle::kv_geometry(4, 2, 64, candle_core::DType::I64).unwrap_err();
/// assert!(err.to_string().ends_with("`dtype` is candle's I64, which has no kv dtype"));
/// ```
pub fn kv_geometry(
    layers: usize,
    kv_heads: usize,
    head_dim: usize,
    dtype: candle_core::DType,
) -> Result<Geometry, KvError> {
    Ok(Geometry::new(
        count(layers, "layers")?,
        count(kv_heads, "kv_heads")?,
        count(head_dim, "head_dim")?,
        kv_dtype_of(dtype, "dtype", "")?,
    ))
}

/// A cache's K and V tensors as allocated, and the dim positions run along.
///
/// Implemented for candle-nn's `KvCache`, `RotatingKvCache`, `ConcatKvCache`
/// and `ScatteredKvCache`, and for [`StaticKvCache`]: what [`held_geometry`]
/// reads.
pub trait HeldKv {
    /// `(k, v, seq_dim)` of the allocations, or `None` before anything is
    /// allocated (candle's `KvCache`, `RotatingKvCache` and `ConcatKvCache`
    /// allocate on their first append).
    fn held_kv(&self) -> Option<(&Tensor, &Tensor, usize)>;
}

impl HeldKv for KvCache {
    fn held_kv(&self) -> Option<(&Tensor, &Tensor, usize)> {
        let k = self.k_cache().all_data().as_ref()?;
        let v = self.v_cache().all_data().as_ref()?;
        Some((k, v, self.k_cache().dim()))
    }
}

impl HeldKv for RotatingKvCache {
    fn held_kv(&self) -> Option<(&Tensor, &Tensor, usize)> {
        let k = self.k_cache().all_data().as_ref()?;
        let v = self.v_cache().all_data().as_ref()?;
        Some((k, v, self.k_cache().dim()))
    }
}

impl HeldKv for ConcatKvCache {
    fn held_kv(&self) -> Option<(&Tensor, &Tensor, usize)> {
        Some((self.k()?, self.v()?, self.dim()))
    }
}

/// Positions run along dim 2: `ScatteredKvCache::append` scatters there.
impl HeldKv for ScatteredKvCache {
    fn held_kv(&self) -> Option<(&Tensor, &Tensor, usize)> {
        Some((self.k(), self.v(), SEQ_DIM))
    }
}

impl HeldKv for StaticKvCache {
    fn held_kv(&self) -> Option<(&Tensor, &Tensor, usize)> {
        Some((self.k_all(), self.v_all(), SEQ_DIM))
    }
}

/// `(kv_heads, head_dim)` of a `(batch, heads, seq, dim)` or
/// `(batch, seq, heads, dim)` tensor whose positions run along `seq_dim`;
/// `what` names the tensor in errors (`layer 2's V`).
fn heads_and_dim(tensor: &Tensor, seq_dim: usize, what: &str) -> Result<(u64, u64), KvError> {
    let (heads, dim) = match (tensor.dims(), seq_dim) {
        (&[_, heads, _, dim], 2) | (&[_, _, heads, dim], 1) => (heads, dim),
        (dims, _) => {
            return Err(invalid(
                "geometry",
                format!(
                    "cannot be read: {what} has shape {dims:?} with positions along dim {seq_dim}; expected \
                     (batch, heads, seq, head_dim) along dim 2 or (batch, seq, heads, head_dim) along dim 1"
                ),
            ))
        }
    };
    let nonzero = |value: usize, field| {
        count(value, field)
            .map_err(|_| invalid(field, format!("is 0 in {what}'s shape {:?}", tensor.dims())))
    };
    Ok((nonzero(heads, "kv_heads")?, nonzero(dim, "head_dim")?))
}

/// The geometry of one layer's allocated K and V, one layer counted.
fn layer_geometry(
    k: &Tensor,
    v: &Tensor,
    seq_dim: usize,
    index: usize,
) -> Result<Geometry, KvError> {
    let (k_heads, k_dim) = heads_and_dim(k, seq_dim, &format!("layer {index}'s K"))?;
    let (v_heads, v_dim) = heads_and_dim(v, seq_dim, &format!("layer {index}'s V"))?;
    if k_heads != v_heads {
        return Err(invalid(
            "kv_heads",
            format!("differs between K ({k_heads}) and V ({v_heads}) in layer {index}; kv declares one head count"),
        ));
    }
    let k_dtype = kv_dtype_of(k.dtype(), "dtype", &format!(" in layer {index}'s K"))?;
    let v_dtype = kv_dtype_of(v.dtype(), "v_format", &format!(" in layer {index}'s V"))?;
    let mut geometry = Geometry::new(1, k_heads, k_dim, k_dtype);
    if v_dim != k_dim {
        geometry = geometry.with_v_head_dim(v_dim);
    }
    if v_dtype != k_dtype {
        geometry = geometry.with_v_storage(v_dtype.into());
    }
    Ok(geometry)
}

/// kv's [`Geometry`] read from the K and V tensors the caches hold, one
/// cache per layer (`layers` counts them): heads, head dims and dtypes of K
/// and V, as allocated. Usable as `#[kv(geometry = ...)]`.
///
/// For caches allocated when built ([`StaticKvCache`], candle-nn's
/// `ScatteredKvCache`) this holds from load. candle-nn's `KvCache`,
/// `RotatingKvCache` and `ConcatKvCache` allocate on their first append, so
/// before it this is an error (a start-up report would log the declaration
/// as skipped): declare them with [`kv_geometry`] from the model's config
/// instead, and use this in tests, after the caches are filled.
///
/// An error, never a panic, when there are no layers, a layer holds nothing
/// yet, a tensor is not 4-D with positions along dim 1 or 2, K and V
/// differ in heads, or layers differ from the first (each named by index).
///
/// ```
/// use candle_core::{DType, Device};
/// use candle_nn::kv_cache::{ScatteredCacheBuilder, ScatteredKvCache};
/// use kv_core::ModelLocalKv;
///
/// #[derive(ModelLocalKv)]
/// struct Model {
///     #[kv(cache = "candle ScatteredKvCache",
///          geometry = kv_candle::held_geometry(&self.caches),
///          positions = bounded(kv_candle::fixed_positions(&self.caches), because = "context given to ScatteredCacheBuilder::new"),
///          scope = request,
///          rows = fixed(2, because = "batch given to ScatteredCacheBuilder::new"))]
///     caches: Vec<ScatteredKvCache>,
/// }
///
/// let builder = ScatteredCacheBuilder::new(2, 16, DType::F16, &Device::Cpu)?;
/// let model = Model { caches: (0..3).map(|_| builder.make_cache(4, 32)).collect::<Result<_, _>>()? };
/// // 3 layers x 4 heads x 32 dims, f16
/// assert_eq!(kv_candle::held_geometry(&model.caches)?, kv_core::Geometry::new(3, 4, 32, kv_core::DType::F16));
/// // 2 (K, V) x 3 layers x 4 heads x 32 dims x 2 bytes x 16 positions x batch 2
/// kv_candle::assert_declared_bytes(&model, 1, 2 * 3 * 4 * 32 * 2 * 16 * 2);
/// kv_candle::assert_declared_bytes(&model, 1, kv_candle::measured_bytes(&model.caches)?);
///
/// let none: [&ScatteredKvCache; 0] = [];
/// assert!(kv_candle::held_geometry(none).unwrap_err().to_string()
///     .ends_with("`layers` is 0; no caches were given"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn held_geometry<'a, C, I>(layers: I) -> Result<Geometry, KvError>
where
    C: HeldKv + ?Sized + 'a,
    I: IntoIterator<Item = &'a C>,
{
    let mut first: Option<Geometry> = None;
    let mut held: u64 = 0;
    for (index, cache) in layers.into_iter().enumerate() {
        let Some((k, v, seq_dim)) = cache.held_kv() else {
            return Err(invalid(
                "geometry",
                format!(
                    "cannot be read: layer {index}'s cache holds no tensors yet (candle allocates on the first append); \
                     declare it with kv_candle::kv_geometry from the model's config"
                ),
            ));
        };
        let geometry = layer_geometry(k, v, seq_dim, index)?;
        match first {
            None => first = Some(geometry),
            Some(expected) if expected != geometry => {
                return Err(invalid(
                    "geometry",
                    format!(
                        "differs across layers: layer {index} holds {} where layer 0 holds {}; \
                         declare each kind of layer separately",
                        describe(&geometry),
                        describe(&expected),
                    ),
                ));
            }
            Some(_) => {}
        }
        held += 1;
    }
    match first {
        Some(geometry) => Ok(geometry.with_layers(held)),
        None => Err(invalid("layers", "is 0; no caches were given".to_owned())),
    }
}

/// A cache whose allocation along its positions is fixed when it is built
/// and never grows: what it holds at peak is known before the first append.
///
/// Implemented for candle-nn's `RotatingKvCache` (and its `RotatingCache`
/// halves: the window), `ScatteredKvCache` (its context) and
/// [`StaticKvCache`] (its `max_seq_len`). Not for candle-nn's `KvCache`:
/// candle raises its `max_seq_len` when an append overflows, so a bound
/// read from it would follow the growth and hide it; declare the
/// `max_seq_len` given to `KvCache::new`. Not for `ConcatKvCache`: it holds
/// what was appended, with no bound of its own.
pub trait FixedPositions {
    /// Positions allocated, or why they cannot be read.
    fn fixed_positions(&self) -> Result<u64, String>;
}

impl FixedPositions for RotatingCache {
    fn fixed_positions(&self) -> Result<u64, String> {
        self.max_seq_len().count_problem()
    }
}

impl FixedPositions for RotatingKvCache {
    fn fixed_positions(&self) -> Result<u64, String> {
        self.k_cache().fixed_positions()
    }
}

impl FixedPositions for ScatteredKvCache {
    fn fixed_positions(&self) -> Result<u64, String> {
        let context = self.k().dim(SEQ_DIM).map_err(|e| e.to_string())?;
        context.count_problem()
    }
}

impl FixedPositions for StaticKvCache {
    fn fixed_positions(&self) -> Result<u64, String> {
        self.max_seq_len().count_problem()
    }
}

/// The positions every layer's cache holds, for
/// `positions = bounded(kv_candle::fixed_positions(..), because = "...")`;
/// returned by [`fixed_positions`].
///
/// It is a count for the derive (it implements kv's `IntoCount`), and
/// carries the problem when the layers cannot be declared with one bound:
/// no layers, or layers holding different positions. The declaration then
/// fails with that problem and its name, rather than a panic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerPositions(Result<u64, String>);

impl LayerPositions {
    /// The positions, or the problem.
    pub fn get(&self) -> Result<u64, &str> {
        self.0.as_ref().copied().map_err(String::as_str)
    }
}

impl IntoCount for LayerPositions {
    fn count_problem(self) -> Result<u64, String> {
        self.0
    }
}

impl IntoCount for &LayerPositions {
    fn count_problem(self) -> Result<u64, String> {
        self.0.clone()
    }
}

/// The positions each of `layers` (one cache per layer) allocates, when they
/// all allocate the same: a `RotatingKvCache`'s window, a
/// `ScatteredKvCache`'s context, a [`StaticKvCache`]'s `max_seq_len`. See
/// [`FixedPositions`] for why candle-nn's `KvCache` is not among them.
///
/// ```
/// use candle_nn::kv_cache::RotatingKvCache;
///
/// let caches: Vec<RotatingKvCache> = (0..3).map(|_| RotatingKvCache::new(2, 72)).collect();
/// assert_eq!(kv_candle::fixed_positions(&caches).get(), Ok(72));
///
/// let mixed = [RotatingKvCache::new(2, 72), RotatingKvCache::new(2, 64)];
/// assert_eq!(
///     kv_candle::fixed_positions(&mixed).get(),
///     Err("differ across layers: layer 1 holds 64 where layer 0 holds 72; declare each kind of layer separately")
/// );
/// ```
pub fn fixed_positions<'a, C, I>(layers: I) -> LayerPositions
where
    C: FixedPositions + ?Sized + 'a,
    I: IntoIterator<Item = &'a C>,
{
    let mut first: Option<u64> = None;
    for (index, cache) in layers.into_iter().enumerate() {
        let positions = match cache.fixed_positions() {
            Ok(positions) => positions,
            Err(problem) => {
                return LayerPositions(Err(format!("cannot be read from layer {index}: {problem}")))
            }
        };
        match first {
            None => first = Some(positions),
            Some(expected) if expected != positions => {
                return LayerPositions(Err(format!(
                    "differ across layers: layer {index} holds {positions} where layer 0 holds {expected}; \
                     declare each kind of layer separately"
                )))
            }
            Some(_) => {}
        }
    }
    LayerPositions(first.ok_or_else(|| "cannot be read: no caches were given".to_owned()))
}
