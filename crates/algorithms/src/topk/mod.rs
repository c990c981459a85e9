//! Single-problem top-k: the `k` largest ([`max_keys`]) or smallest ([`min_keys`]) keys of one
//! array, alone, with a value each ([`max_pairs`]) or with their source indices
//! ([`max_indices`]), on every backend.
//!
//! # Contract
//!
//! What is selected and how it is laid out follow the environment's requirements (the seeds'
//! model, see [`oxicub_env`]):
//!
//! * **Which items.** Determinism with a tie-break pins the set: among the keys equal to the
//!   `k`-th key, `PreferSmallerIndex` keeps those with the smaller source indices,
//!   `PreferLargerIndex` those with the larger ones. Without a tie-break (`NotGuaranteed`, or
//!   a determinism with `Unspecified`), any `k` items with the top keys may be returned
//!   (today both backends prefer smaller indices; do not rely on it).
//! * **In what order.** `Unsorted`: any order. `Sorted`: by key, descending for max and
//!   ascending for min, equal keys in any order. `StableSorted`: by key, equal keys by source
//!   index, smallest first.
//! * **Default** (nothing required): `gpu_to_gpu`, `prefer_smaller_index`, `stable_sorted`:
//!   the output is fully determined, and every backend gives the same bits.
//!
//! Keys are ordered by their radix transform ([`crate::radix`]): `-0.0` ranks just below
//! `+0.0`, and **every NaN ranks above `+inf`**, so [`max_keys`] selects NaNs first and
//! [`min_keys`] last; all NaNs tie with each other (ties are broken by index as above). The
//! keys written are the input keys, bit for bit (NaN payloads and the sign of zero are kept).
//!
//! # `k`
//!
//! `k` is a parameter of the `k` role: `k::Static::<N>`, `k::uniform(n)?` / `k::Uniform`, or
//! `k::Deferred` (a value the host does not read before the launch: on the host backend a
//! `&i64`, on [`Cuda`] a one-element `CudaView<i64>`). Every entry point first runs
//! the one front check [`contract::topk`] against the environment's
//! guarantees.
//!
//! * `k = 0` is valid: nothing is written.
//! * `k > keys.len()` is an error ([`Error::Param`] naming `k`) when the host knows `k`. A
//!   deferred `k` read on the device is clamped to `[bounds.min, min(bounds.max, keys.len())]`
//!   (its runtime bounds); the output buffers must then hold `min(bounds.max, keys.len())`
//!   items, and the slots past `k` are left untouched.
//! * Output buffers may be longer than the number of items written; the rest is untouched.
//!   Shorter is [`Error::BufferTooSmall`]. `values` must have `keys.len()` elements
//!   ([`Error::LengthMismatch`]).
//!
//! ```
//! use oxicub_algorithms::{topk, Host};
//! use oxicub_env::Env;
//! use oxicub_params::k;
//!
//! // The seeds' worked example: K = 3 on `10 8 8 8 6 5`, default contract.
//! let keys = [10u32, 8, 8, 8, 6, 5];
//! let mut top = [0u32; 3];
//! let mut index = [0u32; 3];
//! topk::max_indices(&Host::new(), &keys[..], &mut top[..], &mut index[..], &k::Static::<3>::new(), &Env::new())?;
//! assert_eq!((top, index), ([10, 8, 8], [0, 1, 2]));
//! # Ok::<(), oxicub_algorithms::Error>(())
//! ```

mod cuda;
mod host;

pub use cuda::DeviceValues;

use oxicub_env::{Environment, Resolved};
use oxicub_params::{
    role, Deferred, DiscreteParam, DiscreteParamFor, HostValue, Param, ParamError, ParamFor,
    SelectDirection, SingleValue, Static, Uniform,
};

use cudarc::driver::CudaView;

use crate::backend::{AnyBackend, Backend, Buffer, Cuda, Host};
use crate::radix::RadixKey;
use crate::{contract, Error};

mod sealed {
    pub trait SourceIndex {}
    impl SourceIndex for u32 {}
    impl SourceIndex for u64 {}
    impl SourceIndex for i64 {}
}

/// The type of a source index written by [`max_indices`] / [`min_indices`]: `u32`, `u64` or
/// `i64` (PyTorch's index type). With `u32`, `keys` must have at most `2^32` elements.
///
/// ```
/// use oxicub_algorithms::topk::SourceIndex;
/// assert_eq!(<u32 as SourceIndex>::MAX_ITEMS, 1 << 32);
/// assert_eq!(i64::from_index(7), 7);
/// ```
pub trait SourceIndex: sealed::SourceIndex + Copy + Send + Sync + 'static {
    /// The largest number of items whose indices this type can hold.
    const MAX_ITEMS: u64;
    /// The index `index` as this type (`index < MAX_ITEMS`).
    fn from_index(index: u64) -> Self;
}

impl SourceIndex for u32 {
    const MAX_ITEMS: u64 = 1 << 32;
    fn from_index(index: u64) -> u32 {
        index as u32
    }
}

impl SourceIndex for u64 {
    const MAX_ITEMS: u64 = u64::MAX;
    fn from_index(index: u64) -> u64 {
        index
    }
}

impl SourceIndex for i64 {
    const MAX_ITEMS: u64 = i64::MAX as u64;
    fn from_index(index: u64) -> i64 {
        index as i64
    }
}

/// Where the value of `k` is, once the front check has passed.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum KArg<'a> {
    /// Known on the host.
    Host(u64),
    /// A deferred value in host memory (the host backend's "device").
    HostRef(&'a i64),
    /// A deferred value on the device: a one-element view.
    Device(&'a CudaView<'a, i64>),
}

/// A `k` parameter that a backend can read: static and uniform values on every backend, a
/// deferred value where that backend keeps it (`&i64` on [`Host`] and [`AnyBackend`], a
/// one-element `CudaView<i64>` on [`Cuda`]).
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_env::Env;
/// use oxicub_params::k;
///
/// // A deferred k on the host backend: read when the call runs, within its bounds.
/// let produced_earlier = 2i64;
/// let k = k::Deferred::<_, 0, 8>::new(&produced_earlier);
/// let mut top = [0i8; 8];
/// topk::min_keys(&Host::new(), &[3i8, -1, 2][..], &mut top[..3], &k, &Env::new())?;
/// assert_eq!(&top[..2], &[-1, 2]);
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub trait KParam<B: ?Sized>: ParamFor<role::K> + SingleValue {
    /// Where the value is.
    #[doc(hidden)]
    fn k_arg(&self) -> KArg<'_>;
}

impl<B: TopKBackend, const V: i64> KParam<B> for Static<role::K, V> {
    fn k_arg(&self) -> KArg<'_> {
        KArg::Host(self.value() as u64)
    }
}

impl<B: TopKBackend, const MIN: i64, const MAX: i64> KParam<B> for Uniform<role::K, MIN, MAX> {
    fn k_arg(&self) -> KArg<'_> {
        KArg::Host(self.value() as u64)
    }
}

impl<const MIN: i64, const MAX: i64> KParam<Host> for Deferred<role::K, &i64, MIN, MAX> {
    fn k_arg(&self) -> KArg<'_> {
        KArg::HostRef(self.source())
    }
}

impl<const MIN: i64, const MAX: i64> KParam<AnyBackend> for Deferred<role::K, &i64, MIN, MAX> {
    fn k_arg(&self) -> KArg<'_> {
        KArg::HostRef(self.source())
    }
}

impl<'a, const MIN: i64, const MAX: i64> KParam<Cuda>
    for Deferred<role::K, CudaView<'a, i64>, MIN, MAX>
{
    fn k_arg(&self) -> KArg<'_> {
        KArg::Device(self.source())
    }
}

/// The values carried with the keys: read from a buffer, or the source indices.
#[doc(hidden)]
pub enum ValuesIn<S, V> {
    /// Keys only.
    None,
    /// `values[i]` goes with `keys[i]`.
    Copy(S),
    /// `index(i)` goes with `keys[i]`.
    Index(fn(u64) -> V),
}

/// One checked top-k call, as the backends receive it.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Request {
    /// Max or min.
    pub direction: SelectDirection,
    /// The requirements, defaults applied.
    pub requirements: Resolved,
    /// `keys.len()`.
    pub num_items: u64,
    /// The runtime bounds of `k` (a deferred `k` is clamped into them).
    pub k_bounds: (u64, u64),
    /// The most items the call may write: `min(k_bounds.1, num_items)`.
    pub max_written: u64,
}

/// A backend that runs top-k (all of them). Use the functions of this module: they check the
/// arguments once and then call these methods.
pub trait TopKBackend: Backend {
    /// Keys returned by the `*_owned` functions (`Vec<K>` on the host).
    type OwnedKeys<K: RadixKey>;
    /// Values returned by the `*_owned` functions (`Vec<V>` on the host).
    type OwnedValues<V: Copy + Send + Sync + 'static>;

    /// Top-k into caller buffers, after the argument checks.
    #[doc(hidden)]
    fn topk_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: Request,
        k: KArg<'_>,
        keys: Self::Slice<'_, K>,
        values: ValuesIn<Self::Slice<'_, V>, V>,
        out_keys: Self::SliceMut<'_, K>,
        out_values: Option<Self::SliceMut<'_, V>>,
    ) -> Result<(), Error>;

    /// Top-k into new buffers of `min(k, keys.len())` items, after the argument checks.
    #[doc(hidden)]
    #[allow(clippy::type_complexity)]
    fn topk_owned_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: Request,
        k: KArg<'_>,
        keys: Self::Slice<'_, K>,
        values: ValuesIn<Self::Slice<'_, V>, V>,
    ) -> Result<(Self::OwnedKeys<K>, Option<Self::OwnedValues<V>>), Error>;
}

/// The size check of a value type: 4 or 8 bytes, as the kernels move values as raw words.
const fn check_value_size<V>() {
    const {
        assert!(
            std::mem::size_of::<V>() == 4 || std::mem::size_of::<V>() == 8,
            "oxicub: top-k values must be 4 or 8 bytes (u32, f32, u64, i64, (u32, u32), ...)"
        )
    }
}

/// The front check of every entry point: `contract::topk`, then `k` against `num_items`, the
/// index type and the buffer lengths. Returns the request.
fn front_check<B, Kp, E>(
    num_items: usize,
    k: &Kp,
    env: &E,
    direction: SelectDirection,
) -> Result<Request, Error>
where
    B: TopKBackend,
    Kp: KParam<B>,
    E: Environment,
{
    let n = i64::try_from(num_items).map_err(|_| Error::TooLarge {
        arg: "keys",
        len: num_items as u64,
        max: i64::MAX as u64,
        reason: "item counts are 64-bit signed",
    })?;
    let checked = contract::topk(n, k, env)?;
    let not_above_n = |value: i64| {
        if value > n {
            Err(ParamError::OutOfBounds {
                param: <Kp as Param>::NAME,
                value,
                bounds: oxicub_params::Bounds::new(0, n),
                origin: oxicub_params::BoundOrigin::Runtime,
            })
        } else {
            Ok(())
        }
    };
    match k.host_value() {
        Some(value) => not_above_n(value)?,
        None => not_above_n(checked.k.min)?,
    }
    let k_bounds = (checked.k.min as u64, checked.k.max as u64);
    Ok(Request {
        direction,
        requirements: checked.requirements,
        num_items: num_items as u64,
        k_bounds,
        max_written: k_bounds.1.min(num_items as u64),
    })
}

fn check_out(arg: &'static str, len: usize, request: &Request) -> Result<(), Error> {
    if (len as u64) < request.max_written {
        return Err(Error::BufferTooSmall {
            arg,
            len,
            required: request.max_written as usize,
            required_from: "min(k, keys.len())",
        });
    }
    Ok(())
}

fn check_index_type<I: SourceIndex>(request: &Request) -> Result<(), Error> {
    if request.num_items > I::MAX_ITEMS {
        return Err(Error::TooLarge {
            arg: "keys",
            len: request.num_items,
            max: I::MAX_ITEMS,
            reason: "the index type cannot hold every source index; use u64 or i64 indices",
        });
    }
    Ok(())
}

fn direction_of<Dir: DiscreteParam<Option = SelectDirection>>(
    direction: &Dir,
) -> Result<SelectDirection, Error> {
    direction.host_value().ok_or(Error::InvalidArgument {
        arg: "direction",
        reason: "single-problem top-k takes one direction known on the host \
                 (direction::Max, direction::Min or direction::Choice)"
            .to_owned(),
    })
}

fn keys_into<B, K, Kp, E>(
    backend: &B,
    direction: SelectDirection,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    K: RadixKey,
    Kp: KParam<B>,
    E: Environment,
{
    let request = front_check::<B, Kp, E>(keys.len(), k, env, direction)?;
    check_out("out_keys", out_keys.len(), &request)?;
    backend.topk_checked::<K, u32>(request, k.k_arg(), keys, ValuesIn::None, out_keys, None)
}

#[allow(clippy::too_many_arguments)]
fn pairs_into<B, K, V, Kp, E>(
    backend: &B,
    direction: SelectDirection,
    keys: B::Slice<'_, K>,
    values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    K: RadixKey,
    V: Copy + Send + Sync + 'static,
    Kp: KParam<B>,
    E: Environment,
{
    check_value_size::<V>();
    let request = front_check::<B, Kp, E>(keys.len(), k, env, direction)?;
    Error::check_len("values", values.len(), keys.len(), "keys.len()")?;
    check_out("out_keys", out_keys.len(), &request)?;
    check_out("out_values", out_values.len(), &request)?;
    backend.topk_checked(
        request,
        k.k_arg(),
        keys,
        ValuesIn::Copy(values),
        out_keys,
        Some(out_values),
    )
}

fn indices_into<B, K, I, Kp, E>(
    backend: &B,
    direction: SelectDirection,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    K: RadixKey,
    I: SourceIndex,
    Kp: KParam<B>,
    E: Environment,
{
    let request = front_check::<B, Kp, E>(keys.len(), k, env, direction)?;
    check_index_type::<I>(&request)?;
    check_out("out_keys", out_keys.len(), &request)?;
    check_out("out_indices", out_indices.len(), &request)?;
    backend.topk_checked(
        request,
        k.k_arg(),
        keys,
        ValuesIn::Index(I::from_index),
        out_keys,
        Some(out_indices),
    )
}

/// The `k` largest keys (NaN above `+inf`), written to `out_keys` in the environment's order.
///
/// `out_keys` needs at least `k` elements (see the [module docs](self) for deferred `k`); the
/// rest is untouched. Errors: `k > keys.len()` ([`Error::Param`]), `out_keys` too short
/// ([`Error::BufferTooSmall`]), a `k` outside the environment's guarantees.
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_env::{require, determinism, output_ordering};
/// use oxicub_params::k;
///
/// let keys = [0.5f32, f32::NAN, 2.0, -1.0];
/// let mut top = [0f32; 2];
/// topk::max_keys(&Host::new(), &keys[..], &mut top[..], &k::uniform(2)?, &oxicub_env::Env::new())?;
/// assert!(top[0].is_nan() && top[1] == 2.0);
///
/// // Opting out of determinism and order allows faster paths; the set is still the top 2.
/// let env = require!(determinism::NotGuaranteed, output_ordering::Unsorted);
/// topk::max_keys(&Host::new(), &[1u8, 9, 4][..], &mut [0u8; 2][..], &k::Static::<2>::new(), &env)?;
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn max_keys<B, K, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    K: RadixKey,
    Kp: KParam<B>,
    E: Environment,
{
    keys_into(backend, SelectDirection::Max, keys, out_keys, k, env)
}

/// The `k` smallest keys (NaN last), written to `out_keys` in the environment's order; as
/// [`max_keys`] otherwise.
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_params::k;
///
/// let mut low = [0i64; 2];
/// topk::min_keys(&Host::new(), &[4i64, -7, 0, -7][..], &mut low[..], &k::uniform(2)?, &oxicub_env::Env::new())?;
/// assert_eq!(low, [-7, -7]);
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn min_keys<B, K, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    K: RadixKey,
    Kp: KParam<B>,
    E: Environment,
{
    keys_into(backend, SelectDirection::Min, keys, out_keys, k, env)
}

/// [`max_keys`] or [`min_keys`], the direction given as a parameter (`direction::Max`,
/// `direction::Min`, or `direction::Choice` for a run-time choice).
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_params::{direction, k, SelectDirection};
///
/// let dir = direction::Choice::<direction::Either>::new(SelectDirection::Min)?;
/// let mut out = [0u16; 1];
/// topk::select_keys(&Host::new(), &dir, &[5u16, 3, 8][..], &mut out[..], &k::Static::<1>::new(), &oxicub_env::Env::new())?;
/// assert_eq!(out, [3]);
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn select_keys<B, Dir, K, Kp, E>(
    backend: &B,
    direction: &Dir,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    Kp: KParam<B>,
    E: Environment,
{
    keys_into(backend, direction_of(direction)?, keys, out_keys, k, env)
}

/// The `k` largest keys with the value of each (`values[i]` belongs to `keys[i]`). Values are
/// any `Copy` type of 4 or 8 bytes (checked at compile time). `values` must have
/// `keys.len()` elements; the outputs at least `k`.
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_params::k;
///
/// let scores = [0.1f32, 0.7, 0.2];
/// let tokens = [11u64, 22, 33];
/// let (mut top, mut token) = ([0f32; 2], [0u64; 2]);
/// topk::max_pairs(&Host::new(), &scores[..], &tokens[..], &mut top[..], &mut token[..], &k::Static::<2>::new(), &oxicub_env::Env::new())?;
/// assert_eq!((top, token), ([0.7, 0.2], [22, 33]));
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
///
/// Values of another size do not build:
///
/// ```compile_fail
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_params::k;
///
/// let (mut top, mut v) = ([0u8; 1], [0u16; 1]);
/// topk::max_pairs(&Host::new(), &[1u8][..], &[7u16][..], &mut top[..], &mut v[..], &k::Static::<1>::new(), &oxicub_env::Env::new())?;
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn max_pairs<B, K, V, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    K: RadixKey,
    V: Copy + Send + Sync + 'static,
    Kp: KParam<B>,
    E: Environment,
{
    let dir = SelectDirection::Max;
    pairs_into(backend, dir, keys, values, out_keys, out_values, k, env)
}

/// The `k` smallest keys with the value of each; as [`max_pairs`] otherwise.
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_params::k;
///
/// let (mut low, mut tag) = ([0i32; 1], [0u32; 1]);
/// topk::min_pairs(&Host::new(), &[3i32, -3][..], &[1u32, 2][..], &mut low[..], &mut tag[..], &k::Static::<1>::new(), &oxicub_env::Env::new())?;
/// assert_eq!((low, tag), ([-3], [2]));
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn min_pairs<B, K, V, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    K: RadixKey,
    V: Copy + Send + Sync + 'static,
    Kp: KParam<B>,
    E: Environment,
{
    let dir = SelectDirection::Min;
    pairs_into(backend, dir, keys, values, out_keys, out_values, k, env)
}

/// [`max_pairs`] or [`min_pairs`], the direction given as a parameter.
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_params::{direction, k};
///
/// let (mut top, mut v) = ([0u8; 1], [0f64; 1]);
/// topk::select_pairs(&Host::new(), &direction::Max, &[1u8, 2][..], &[0.5f64, 1.5][..], &mut top[..], &mut v[..], &k::Static::<1>::new(), &oxicub_env::Env::new())?;
/// assert_eq!((top, v), ([2], [1.5]));
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn select_pairs<B, Dir, K, V, Kp, E>(
    backend: &B,
    direction: &Dir,
    keys: B::Slice<'_, K>,
    values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    V: Copy + Send + Sync + 'static,
    Kp: KParam<B>,
    E: Environment,
{
    let dir = direction_of(direction)?;
    pairs_into(backend, dir, keys, values, out_keys, out_values, k, env)
}

/// The `k` largest keys with their source indices (`u32`, `u64` or `i64`; see
/// [`SourceIndex`]).
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_params::k;
///
/// let (mut top, mut at) = ([0u32; 2], [0i64; 2]);
/// topk::max_indices(&Host::new(), &[4u32, 9, 4][..], &mut top[..], &mut at[..], &k::Static::<2>::new(), &oxicub_env::Env::new())?;
/// assert_eq!((top, at), ([9, 4], [1, 0]));
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn max_indices<B, K, I, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    K: RadixKey,
    I: SourceIndex,
    Kp: KParam<B>,
    E: Environment,
{
    let dir = SelectDirection::Max;
    indices_into(backend, dir, keys, out_keys, out_indices, k, env)
}

/// The `k` smallest keys with their source indices; as [`max_indices`] otherwise.
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_env::{require, tie_break};
/// use oxicub_params::k;
///
/// // Ties at the boundary go to the larger index when required.
/// let env = require!(tie_break::PreferLargerIndex);
/// let (mut low, mut at) = ([0u8; 1], [0u64; 1]);
/// topk::min_indices(&Host::new(), &[1u8, 1, 5][..], &mut low[..], &mut at[..], &k::Static::<1>::new(), &env)?;
/// assert_eq!((low, at), ([1], [1]));
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn min_indices<B, K, I, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    K: RadixKey,
    I: SourceIndex,
    Kp: KParam<B>,
    E: Environment,
{
    let dir = SelectDirection::Min;
    indices_into(backend, dir, keys, out_keys, out_indices, k, env)
}

/// [`max_indices`] or [`min_indices`], the direction given as a parameter.
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_params::{direction, k};
///
/// let (mut low, mut at) = ([0i16; 1], [0u32; 1]);
/// topk::select_indices(&Host::new(), &direction::Min, &[2i16, -2][..], &mut low[..], &mut at[..], &k::Static::<1>::new(), &oxicub_env::Env::new())?;
/// assert_eq!((low, at), ([-2], [1]));
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn select_indices<B, Dir, K, I, Kp, E>(
    backend: &B,
    direction: &Dir,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    k: &Kp,
    env: &E,
) -> Result<(), Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    I: SourceIndex,
    Kp: KParam<B>,
    E: Environment,
{
    let dir = direction_of(direction)?;
    indices_into(backend, dir, keys, out_keys, out_indices, k, env)
}

/// Like [`select_keys`], returning new buffers of `min(k, keys.len())` keys (for a deferred `k`,
/// `min(bounds.max, keys.len())`, of which the first `k` are written).
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_params::{direction, k};
///
/// let top = topk::select_keys_owned(&Host::new(), &direction::Max, &[3u64, 1, 2][..], &k::Static::<2>::new(), &oxicub_env::Env::new())?;
/// assert_eq!(top, vec![3, 2]);
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn select_keys_owned<B, Dir, K, Kp, E>(
    backend: &B,
    direction: &Dir,
    keys: B::Slice<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<B::OwnedKeys<K>, Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    Kp: KParam<B>,
    E: Environment,
{
    let request = front_check::<B, Kp, E>(keys.len(), k, env, direction_of(direction)?)?;
    let (out_keys, _) =
        backend.topk_owned_checked::<K, u32>(request, k.k_arg(), keys, ValuesIn::None)?;
    Ok(out_keys)
}

/// Like [`select_pairs`], returning new key and value buffers.
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_params::{direction, k};
///
/// let (keys, values) = topk::select_pairs_owned(&Host::new(), &direction::Min, &[3i8, 1][..], &[30u32, 10][..], &k::Static::<1>::new(), &oxicub_env::Env::new())?;
/// assert_eq!((keys, values), (vec![1], vec![10]));
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
#[allow(clippy::type_complexity)]
pub fn select_pairs_owned<B, Dir, K, V, Kp, E>(
    backend: &B,
    direction: &Dir,
    keys: B::Slice<'_, K>,
    values: B::Slice<'_, V>,
    k: &Kp,
    env: &E,
) -> Result<(B::OwnedKeys<K>, B::OwnedValues<V>), Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    V: Copy + Send + Sync + 'static,
    Kp: KParam<B>,
    E: Environment,
{
    check_value_size::<V>();
    let request = front_check::<B, Kp, E>(keys.len(), k, env, direction_of(direction)?)?;
    Error::check_len("values", values.len(), keys.len(), "keys.len()")?;
    let (out_keys, out_values) =
        backend.topk_owned_checked(request, k.k_arg(), keys, ValuesIn::Copy(values))?;
    match out_values {
        Some(out_values) => Ok((out_keys, out_values)),
        None => unreachable!("a backend returns values when given values"),
    }
}

/// Like [`select_indices`], returning new key and index buffers.
///
/// ```
/// use oxicub_algorithms::{topk, Host};
/// use oxicub_params::{direction, k};
///
/// let (keys, at) = topk::select_indices_owned::<_, _, _, u32, _, _>(&Host::new(), &direction::Max, &[3i8, 7][..], &k::Static::<1>::new(), &oxicub_env::Env::new())?;
/// assert_eq!((keys, at), (vec![7], vec![1]));
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
#[allow(clippy::type_complexity)]
pub fn select_indices_owned<B, Dir, K, I, Kp, E>(
    backend: &B,
    direction: &Dir,
    keys: B::Slice<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<(B::OwnedKeys<K>, B::OwnedValues<I>), Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    I: SourceIndex,
    Kp: KParam<B>,
    E: Environment,
{
    let request = front_check::<B, Kp, E>(keys.len(), k, env, direction_of(direction)?)?;
    check_index_type::<I>(&request)?;
    let (out_keys, out_indices) =
        backend.topk_owned_checked(request, k.k_arg(), keys, ValuesIn::Index(I::from_index))?;
    match out_indices {
        Some(out_indices) => Ok((out_keys, out_indices)),
        None => unreachable!("a backend returns indices when asked for them"),
    }
}
