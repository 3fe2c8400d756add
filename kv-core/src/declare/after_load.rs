//! The types a `#[kv(...)]` value read after load may have: a count is any
//! integer, a geometry a `Geometry` or a `Result` of one, and so on. The
//! derive converts each value through these traits, so a value of the wrong
//! type is an error that names the trait and says what to write.

use std::any::Any;
use std::fmt;

use crate::error::{KvError, Overflow};
use crate::spec::dtype::DType;
use crate::spec::layout::{Geometry, Latent, RecurrentState};
use crate::spec::storage::Storage;
use crate::spec::tensors::Tensors;

/// An integer read after load, converted to `u64` without wrapping.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a count: a count read after load must be an integer",
    label = "expected an integer (`u8`..`u128`, `i8`..`i128`, `usize`, `isize`), a reference to one, or a `Result` of one whose error displays itself",
    note = "`layers`, `kv_heads`, `head_dim`, `v_head_dim` and the counts in `bounded(..)` and `fixed(..)` are integers; convert this value to one"
)]
pub trait IntoCount {
    /// `Err` holds the problem, e.g. "is -3".
    fn count_problem(self) -> Result<u64, String>;

    /// Converts a count read after load; a zero is judged with the whole
    /// declaration, which then yields nothing (see
    /// [`EmptyDeclaration`](crate::collection::EmptyDeclaration)).
    fn into_count(self, field: &'static str) -> Result<u64, KvError>
    where
        Self: Sized,
    {
        self.count_problem()
            .map_err(|problem| KvError::InvalidValue {
                declaration: String::new(),
                field,
                problem,
            })
    }
}

macro_rules! unsigned_count {
    ($($t:ty),*) => {$(
        impl IntoCount for $t {
            fn count_problem(self) -> Result<u64, String> {
                u64::try_from(self).map_err(|_| format!("is {self}, more than u64 can hold"))
            }
        }
    )*};
}
macro_rules! signed_count {
    ($($t:ty),*) => {$(
        impl IntoCount for $t {
            fn count_problem(self) -> Result<u64, String> {
                u64::try_from(self).map_err(|_| {
                    if self < 0 {
                        format!("is {self}; a count cannot be negative")
                    } else {
                        format!("is {self}, more than u64 can hold")
                    }
                })
            }
        }
    )*};
}
unsigned_count!(u8, u16, u32, u64, u128, usize);
signed_count!(i8, i16, i32, i64, i128, isize);

impl<T: IntoCount + Copy> IntoCount for &T {
    fn count_problem(self) -> Result<u64, String> {
        (*self).count_problem()
    }
}

/// A count read by a fallible helper (a config lookup): its error, which
/// any type that displays itself may be, is the problem (`layers` could not
/// be read: ...`); an `Ok` count is judged as the count itself.
impl<T: IntoCount, E: fmt::Display> IntoCount for Result<T, E> {
    fn count_problem(self) -> Result<u64, String> {
        self.map_err(|error| format!("could not be read: {error}"))?
            .count_problem()
    }
}

/// A geometry read after load: a `Geometry`, or a `Result` of one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a geometry: `geometry = ...` takes a `kv_core::Geometry` or a `Result<Geometry, E>` whose error displays itself",
    label = "expected a `Geometry` or a `Result<Geometry, E>`",
    note = "or give the geometry's parts: `layers`, `kv_heads`, `head_dim` and `dtype`"
)]
pub trait IntoGeometry {
    /// The geometry or the error reading it.
    fn into_geometry(self) -> Result<Geometry, KvError>;
}

impl IntoGeometry for Geometry {
    fn into_geometry(self) -> Result<Geometry, KvError> {
        Ok(self)
    }
}

impl IntoGeometry for &Geometry {
    fn into_geometry(self) -> Result<Geometry, KvError> {
        Ok(*self)
    }
}

impl<E: fmt::Display + 'static> IntoGeometry for Result<Geometry, E> {
    fn into_geometry(self) -> Result<Geometry, KvError> {
        self.map_err(|error| read_error(error, "geometry"))
    }
}

/// A dtype read after load: a `DType`, or a `Result` of one (a loader's
/// dtype converted by a fallible helper, such as `kv_candle::kv_dtype`).
///
/// The error of a `Result` may be any type that displays itself: a
/// [`KvError`] is kept as it is; any other error becomes
/// [`KvError::InvalidValue`] for `dtype`, with the error's message (`kv:
/// `Attention.cache`: `dtype` could not be read: ...`). Under
/// [`collect`](crate::collect()) that declaration is skipped with the error;
/// its siblings are still collected.
///
/// ```
/// use kv_core::{DType, KvError, ModelLocalKv};
///
/// #[derive(ModelLocalKv)]
/// #[kv(
///     name = "cache",
///     cache = "KvCache",
///     layers = 2, kv_heads = 2, head_dim = 8,
///     dtype = dtype_of(self.loaded),
///     positions = bounded(16, because = "max_seq_len"),
///     scope = request,
///     rows = max_num_seqs,
/// )]
/// struct Attention {
///     loaded: &'static str,
/// }
///
/// /// A loader's dtype, as a fallible helper converts it.
/// fn dtype_of(name: &str) -> Result<DType, String> {
///     match name {
///         "bf16" => Ok(DType::BF16),
///         other => Err(format!("dtype {other} has no kv dtype")),
///     }
/// }
///
/// let mut declared = Vec::new();
/// Attention { loaded: "bf16" }.kv_declare(&mut declared)?;
/// // 2 layers x 2 heads x (8 + 8) dims x 2 bytes x 16 positions
/// assert_eq!(declared[0].bytes_per_row(), Ok(2 * 2 * 16 * 2 * 16));
///
/// let err = Attention { loaded: "u32" }.kv_declare(&mut Vec::new()).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "kv: `Attention.cache`: `dtype` could not be read: dtype u32 has no kv dtype"
/// );
/// # Ok::<(), KvError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a dtype: `dtype = ...` takes a name like `bf16`, an expression of type `kv_core::DType`, or a `Result<DType, E>` whose error displays itself",
    label = "expected a `kv_core::DType` or a `Result<DType, E>`"
)]
pub trait IntoDType {
    /// The dtype or the error reading it.
    fn into_dtype(self) -> Result<DType, KvError>;
}

impl IntoDType for DType {
    fn into_dtype(self) -> Result<DType, KvError> {
        Ok(self)
    }
}

impl IntoDType for &DType {
    fn into_dtype(self) -> Result<DType, KvError> {
        Ok(*self)
    }
}

impl<E: fmt::Display + 'static> IntoDType for Result<DType, E> {
    fn into_dtype(self) -> Result<DType, KvError> {
        self.map_err(|error| read_error(error, "dtype"))
    }
}

/// The error of a value read after load by a fallible helper, for `key`: a
/// [`KvError`] is kept whole (it already names what failed), an
/// [`Overflow`] becomes [`KvError::Overflow`], and any other error that
/// displays itself (a candle error, a `String`) becomes
/// [`KvError::InvalidValue`] for `key` with its message (`` `geometry`
/// could not be read: ...``).
fn read_error<E: fmt::Display + 'static>(error: E, key: &'static str) -> KvError {
    let any = &error as &dyn Any;
    if let Some(kv) = any.downcast_ref::<KvError>() {
        return kv.clone();
    }
    if let Some(overflow) = any.downcast_ref::<Overflow>() {
        return KvError::from(*overflow);
    }
    KvError::InvalidValue {
        declaration: String::new(),
        field: key,
        problem: format!("could not be read: {error}"),
    }
}

/// A storage format read after load.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a storage format: `kv_format = ...` takes a name like `q8_0` or an expression of type `kv_core::Storage`",
    label = "expected a `kv_core::Storage` (or a `DType`)"
)]
pub trait IntoStorage {
    /// The storage.
    fn into_storage(self) -> Storage;
}

impl IntoStorage for Storage {
    fn into_storage(self) -> Storage {
        self
    }
}

impl IntoStorage for &Storage {
    fn into_storage(self) -> Storage {
        *self
    }
}

impl IntoStorage for DType {
    fn into_storage(self) -> Storage {
        Storage::Dense(self)
    }
}

/// A recurrent state read after load: a `RecurrentState`, or a `Result` of one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a recurrent state: `state = ...` takes a `kv_core::RecurrentState` or a `Result<RecurrentState, E>` whose error displays itself",
    label = "expected a `RecurrentState` or a `Result<RecurrentState, E>`"
)]
pub trait IntoState {
    /// The state or the error reading it.
    fn into_state(self) -> Result<RecurrentState, KvError>;
}

impl IntoState for RecurrentState {
    fn into_state(self) -> Result<RecurrentState, KvError> {
        Ok(self)
    }
}

impl IntoState for &RecurrentState {
    fn into_state(self) -> Result<RecurrentState, KvError> {
        Ok(self.clone())
    }
}

impl<E: fmt::Display + 'static> IntoState for Result<RecurrentState, E> {
    fn into_state(self) -> Result<RecurrentState, KvError> {
        self.map_err(|error| read_error(error, "state"))
    }
}

/// An MLA latent read after load: a `Latent`, or a `Result` of one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an MLA latent: `latent = ...` takes a `kv_core::Latent` or a `Result<Latent, E>` whose error displays itself",
    label = "expected a `Latent` or a `Result<Latent, E>`"
)]
pub trait IntoLatent {
    /// The latent or the error reading it.
    fn into_latent(self) -> Result<Latent, KvError>;
}

impl IntoLatent for Latent {
    fn into_latent(self) -> Result<Latent, KvError> {
        Ok(self)
    }
}

impl IntoLatent for &Latent {
    fn into_latent(self) -> Result<Latent, KvError> {
        Ok(*self)
    }
}

impl<E: fmt::Display + 'static> IntoLatent for Result<Latent, E> {
    fn into_latent(self) -> Result<Latent, KvError> {
        self.map_err(|error| read_error(error, "latent"))
    }
}

/// Tensors kept beside the caches, read after load: a `Tensors`, or a
/// `Result` of one.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a set of tensors: `tensors = ...` takes a `kv_core::Tensors` or a `Result<Tensors, E>` whose error displays itself",
    label = "expected a `Tensors` or a `Result<Tensors, E>`"
)]
pub trait IntoTensors {
    /// The tensors or the error reading them.
    fn into_tensors(self) -> Result<Tensors, KvError>;
}

impl IntoTensors for Tensors {
    fn into_tensors(self) -> Result<Tensors, KvError> {
        Ok(self)
    }
}

impl IntoTensors for &Tensors {
    fn into_tensors(self) -> Result<Tensors, KvError> {
        Ok(self.clone())
    }
}

impl<E: fmt::Display + 'static> IntoTensors for Result<Tensors, E> {
    fn into_tensors(self) -> Result<Tensors, KvError> {
        self.map_err(|error| read_error(error, "tensors"))
    }
}
