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
//! `&i64`, on [`Cuda`](crate::Cuda) a one-element `CudaView<i64>`). Every entry point first runs
//! the one front check [`contract::topk`] against the environment's
//! guarantees.
//!
//! * `k = 0` is valid: nothing is written.
//! * `k > keys.len()` is an error ([`Error::Param`] naming `k`, bounds `[0, keys.len()]`) when
//!   the host knows `k`; so is a deferred `k` whose lower bound is above `keys.len()`.
//! * A deferred `k` is sized for by its bounds: the output buffers must hold
//!   `min(bounds.max, keys.len())` items (`bounds`: the tightest of its type, its runtime
//!   bounds and the environment's guarantees). It is read in stream order and checked where it
//!   is read, with one rule on every backend (as a deferred `num_segments` in
//!   [`batched_topk`](crate::batched_topk)): a value outside its bounds is clamped into them,
//!   the call selects that many (at most `keys.len()`), and the returned [`Outcome`]'s
//!   [`check`](Pending::check) reports it as [`Error::Param`] naming `k`, the bounds it broke
//!   and their origin (the type's, the runtime bounds, or the guarantee). A `k` inside its
//!   bounds but above `keys.len()` selects every key.
//! * Output buffers may be longer than the number of items written; the rest is untouched.
//!   Shorter is [`Error::BufferTooSmall`]. `values` must have `keys.len()` elements
//!   ([`Error::LengthMismatch`]).
//!
//! # Results
//!
//! Every function returns an [`Outcome`] (into caller buffers) or a [`Pending`] result (the
//! `*_owned` functions) once the front check has passed: its `check()` is where a deferred `k`
//! is reported. With `k` known on the host there is nothing to report and `check()` returns at
//! once; with a deferred `k` on [`Cuda`](crate::Cuda) it waits for the stream (the caller's
//! explicit synchronisation point; keep the outcome and check it later to chain launches).
//!
//! ```
//! use oxicub::{topk, Host};
//! use oxicub::env::Env;
//! use oxicub::params::k;
//!
//! // The seeds' worked example: K = 3 on `10 8 8 8 6 5`, default contract.
//! let keys = [10u32, 8, 8, 8, 6, 5];
//! let mut top = [0u32; 3];
//! let mut index = [0u32; 3];
//! topk::max_indices(&Host::new(), &keys[..], &mut top[..], &mut index[..], &k::Static::<3>::new(), &Env::new())?.check()?;
//! assert_eq!((top, index), ([10, 8, 8], [0, 1, 2]));
//! # Ok::<(), oxicub::Error>(())
//! ```

mod cuda;
mod host;

use oxicub_env::Environment;
use oxicub_params::{
    role, DiscreteParam, DiscreteParamFor, ParamFor, SelectDirection, SingleValue,
};

use crate::backend::{Backend, Buffer, DeviceValue, ParamValuesOn, ValuesOn};
use crate::contract::{self, TopKBuffers, TopKRequest};
use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::segments::{Outcome, Pending};
use crate::values::{check_topk_value_width, SourceIndex, ValuesIn};
use crate::Error;

/// A backend that runs single-problem top-k: [`Host`](crate::Host), [`Cuda`](crate::Cuda) and
/// [`AnyBackend`](crate::AnyBackend). Use the functions of this module: they check the
/// arguments once ([`contract`]) and then run the checked call.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not run top-k",
    note = "oxicub's backends are `Host`, `Cuda` and `AnyBackend`"
)]
pub trait TopKBackend: Backend {
    /// Keys returned by the `*_owned` functions (`Vec<K>` on the host, [`DeviceKeys`] on
    /// [`Cuda`](crate::Cuda)).
    ///
    /// [`DeviceKeys`]: crate::DeviceKeys
    type OwnedKeys<K: RadixKey>;
    /// Values returned by the `*_owned` functions (`Vec<V>` on the host, [`DeviceValues`] on
    /// [`Cuda`](crate::Cuda)).
    ///
    /// [`DeviceValues`]: crate::DeviceValues
    type OwnedValues<V: DeviceValue>;

    /// Top-k into caller buffers, after the front check (only the contract builds a request).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn topk_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: TopKRequest,
        k: ParamValuesOn<'_, Self>,
        keys: Self::Slice<'_, K>,
        values: ValuesIn<Self::Slice<'_, V>, V>,
        out_keys: Self::SliceMut<'_, K>,
        out_values: Option<Self::SliceMut<'_, V>>,
    ) -> Result<Outcome, Error>;

    /// Top-k into new buffers of `min(k, keys.len())` items, after the front check.
    #[doc(hidden)]
    #[allow(clippy::type_complexity)]
    fn topk_owned_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: TopKRequest,
        k: ParamValuesOn<'_, Self>,
        keys: Self::Slice<'_, K>,
        values: ValuesIn<Self::Slice<'_, V>, V>,
    ) -> Result<Pending<(Self::OwnedKeys<K>, Option<Self::OwnedValues<V>>)>, Error>;
}

fn keys_into<B, K, Kp, E>(
    backend: &B,
    direction: SelectDirection,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    K: RadixKey,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let outputs = [("out_keys", out_keys.len())];
    let buffers = TopKBuffers {
        keys: keys.len(),
        values: None,
        index_limit: None,
        outputs: &outputs,
    };
    let request = contract::checked_topk::<B, Kp, E>(buffers, k, env, direction)?;
    backend.topk_checked::<K, u32>(
        Token::new(),
        request,
        k.values(),
        keys,
        ValuesIn::None,
        out_keys,
        None,
    )
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
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    K: RadixKey,
    V: DeviceValue,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    check_topk_value_width::<V>();
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_values", out_values.len()),
    ];
    let buffers = TopKBuffers {
        keys: keys.len(),
        values: Some(values.len()),
        index_limit: None,
        outputs: &outputs,
    };
    let request = contract::checked_topk::<B, Kp, E>(buffers, k, env, direction)?;
    let values = ValuesIn::Copy(values);
    backend.topk_checked(
        Token::new(),
        request,
        k.values(),
        keys,
        values,
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
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    K: RadixKey,
    I: SourceIndex,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_indices", out_indices.len()),
    ];
    let buffers = TopKBuffers {
        keys: keys.len(),
        values: None,
        index_limit: Some(I::MAX_ITEMS),
        outputs: &outputs,
    };
    let request = contract::checked_topk::<B, Kp, E>(buffers, k, env, direction)?;
    let indices = ValuesIn::Index(I::from_index);
    backend.topk_checked(
        Token::new(),
        request,
        k.values(),
        keys,
        indices,
        out_keys,
        Some(out_indices),
    )
}

/// The `k` largest keys (NaN above `+inf`), written to `out_keys` in the environment's order.
///
/// `out_keys` needs at least `k` elements (see the [module docs](self) for deferred `k`); the
/// rest is untouched. Errors: `k > keys.len()` ([`Error::Param`]), `out_keys` too short
/// ([`Error::BufferTooSmall`]), a `k` outside the environment's guarantees; a deferred `k`
/// outside its bounds is reported by the outcome's [`check`](Pending::check).
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::env::{require, determinism, output_ordering};
/// use oxicub::params::k;
///
/// let keys = [0.5f32, f32::NAN, 2.0, -1.0];
/// let mut top = [0f32; 2];
/// topk::max_keys(&Host::new(), &keys[..], &mut top[..], &k::uniform(2)?, &oxicub::env::Env::new())?.check()?;
/// assert!(top[0].is_nan() && top[1] == 2.0);
///
/// // Opting out of determinism and order allows faster paths; the set is still the top 2.
/// let env = require!(determinism::NotGuaranteed, output_ordering::Unsorted);
/// topk::max_keys(&Host::new(), &[1u8, 9, 4][..], &mut [0u8; 2][..], &k::Static::<2>::new(), &env)?.check()?;
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn max_keys<B, K, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    K: RadixKey,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    keys_into(backend, SelectDirection::Max, keys, out_keys, k, env)
}

/// The `k` smallest keys (NaN last), written to `out_keys` in the environment's order; as
/// [`max_keys`] otherwise.
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::params::k;
///
/// let mut low = [0i64; 2];
/// topk::min_keys(&Host::new(), &[4i64, -7, 0, -7][..], &mut low[..], &k::uniform(2)?, &oxicub::env::Env::new())?.check()?;
/// assert_eq!(low, [-7, -7]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn min_keys<B, K, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    K: RadixKey,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    keys_into(backend, SelectDirection::Min, keys, out_keys, k, env)
}

/// [`max_keys`] or [`min_keys`], the direction given as a parameter (`direction::Max`,
/// `direction::Min`, or `direction::Choice` for a run-time choice).
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::params::{direction, k, SelectDirection};
///
/// let dir = direction::Choice::<direction::Either>::new(SelectDirection::Min)?;
/// let mut out = [0u16; 1];
/// topk::select_keys(&Host::new(), &dir, &[5u16, 3, 8][..], &mut out[..], &k::Static::<1>::new(), &oxicub::env::Env::new())?.check()?;
/// assert_eq!(out, [3]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn select_keys<B, Dir, K, Kp, E>(
    backend: &B,
    direction: &Dir,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    keys_into(
        backend,
        contract::direction_of(direction)?,
        keys,
        out_keys,
        k,
        env,
    )
}

/// The `k` largest keys with the value of each (`values[i]` belongs to `keys[i]`). Values are
/// any `Copy` type of 4 or 8 bytes (checked at compile time). `values` must have
/// `keys.len()` elements; the outputs at least `k`.
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::params::k;
///
/// let scores = [0.1f32, 0.7, 0.2];
/// let tokens = [11u64, 22, 33];
/// let (mut top, mut token) = ([0f32; 2], [0u64; 2]);
/// topk::max_pairs(&Host::new(), &scores[..], &tokens[..], &mut top[..], &mut token[..], &k::Static::<2>::new(), &oxicub::env::Env::new())?.check()?;
/// assert_eq!((top, token), ([0.7, 0.2], [22, 33]));
/// # Ok::<(), oxicub::Error>(())
/// ```
///
/// Values of another size do not build:
///
/// ```compile_fail
/// use oxicub::{topk, Host};
/// use oxicub::params::k;
///
/// let (mut top, mut v) = ([0u8; 1], [0u16; 1]);
/// topk::max_pairs(&Host::new(), &[1u8][..], &[7u16][..], &mut top[..], &mut v[..], &k::Static::<1>::new(), &oxicub::env::Env::new())?.check()?;
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn max_pairs<B, K, V, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    k: &Kp,
    env: &E,
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    K: RadixKey,
    V: DeviceValue,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let dir = SelectDirection::Max;
    pairs_into(backend, dir, keys, values, out_keys, out_values, k, env)
}

/// The `k` smallest keys with the value of each; as [`max_pairs`] otherwise.
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::params::k;
///
/// let (mut low, mut tag) = ([0i32; 1], [0u32; 1]);
/// topk::min_pairs(&Host::new(), &[3i32, -3][..], &[1u32, 2][..], &mut low[..], &mut tag[..], &k::Static::<1>::new(), &oxicub::env::Env::new())?.check()?;
/// assert_eq!((low, tag), ([-3], [2]));
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn min_pairs<B, K, V, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    k: &Kp,
    env: &E,
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    K: RadixKey,
    V: DeviceValue,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let dir = SelectDirection::Min;
    pairs_into(backend, dir, keys, values, out_keys, out_values, k, env)
}

/// [`max_pairs`] or [`min_pairs`], the direction given as a parameter.
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::params::{direction, k};
///
/// let (mut top, mut v) = ([0u8; 1], [0f64; 1]);
/// topk::select_pairs(&Host::new(), &direction::Max, &[1u8, 2][..], &[0.5f64, 1.5][..], &mut top[..], &mut v[..], &k::Static::<1>::new(), &oxicub::env::Env::new())?.check()?;
/// assert_eq!((top, v), ([2], [1.5]));
/// # Ok::<(), oxicub::Error>(())
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
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    V: DeviceValue,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let dir = contract::direction_of(direction)?;
    pairs_into(backend, dir, keys, values, out_keys, out_values, k, env)
}

/// The `k` largest keys with their source indices (`u32`, `i32`, `u64` or `i64`; see
/// [`SourceIndex`]).
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::params::k;
///
/// let (mut top, mut at) = ([0u32; 2], [0i64; 2]);
/// topk::max_indices(&Host::new(), &[4u32, 9, 4][..], &mut top[..], &mut at[..], &k::Static::<2>::new(), &oxicub::env::Env::new())?.check()?;
/// assert_eq!((top, at), ([9, 4], [1, 0]));
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn max_indices<B, K, I, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    k: &Kp,
    env: &E,
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    K: RadixKey,
    I: SourceIndex,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let dir = SelectDirection::Max;
    indices_into(backend, dir, keys, out_keys, out_indices, k, env)
}

/// The `k` smallest keys with their source indices; as [`max_indices`] otherwise.
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::env::{require, tie_break};
/// use oxicub::params::k;
///
/// // Ties at the boundary go to the larger index when required.
/// let env = require!(tie_break::PreferLargerIndex);
/// let (mut low, mut at) = ([0u8; 1], [0u64; 1]);
/// topk::min_indices(&Host::new(), &[1u8, 1, 5][..], &mut low[..], &mut at[..], &k::Static::<1>::new(), &env)?.check()?;
/// assert_eq!((low, at), ([1], [1]));
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn min_indices<B, K, I, Kp, E>(
    backend: &B,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    k: &Kp,
    env: &E,
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    K: RadixKey,
    I: SourceIndex,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let dir = SelectDirection::Min;
    indices_into(backend, dir, keys, out_keys, out_indices, k, env)
}

/// [`max_indices`] or [`min_indices`], the direction given as a parameter.
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::params::{direction, k};
///
/// let (mut low, mut at) = ([0i16; 1], [0u32; 1]);
/// topk::select_indices(&Host::new(), &direction::Min, &[2i16, -2][..], &mut low[..], &mut at[..], &k::Static::<1>::new(), &oxicub::env::Env::new())?.check()?;
/// assert_eq!((low, at), ([-2], [1]));
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn select_indices<B, Dir, K, I, Kp, E>(
    backend: &B,
    direction: &Dir,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    k: &Kp,
    env: &E,
) -> Result<Outcome, Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    I: SourceIndex,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let dir = contract::direction_of(direction)?;
    indices_into(backend, dir, keys, out_keys, out_indices, k, env)
}

/// Like [`select_keys`], returning new buffers of `min(k, keys.len())` keys (for a deferred `k`,
/// `min(bounds.max, keys.len())`, of which the first `k` are written and the rest hold zero
/// bits, on every backend).
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::params::{direction, k};
///
/// let top = topk::select_keys_owned(&Host::new(), &direction::Max, &[3u64, 1, 2][..], &k::Static::<2>::new(), &oxicub::env::Env::new())?.check()?;
/// assert_eq!(top, vec![3, 2]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn select_keys_owned<B, Dir, K, Kp, E>(
    backend: &B,
    direction: &Dir,
    keys: B::Slice<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<Pending<B::OwnedKeys<K>>, Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let buffers = TopKBuffers {
        keys: keys.len(),
        values: None,
        index_limit: None,
        outputs: &[],
    };
    let request =
        contract::checked_topk::<B, Kp, E>(buffers, k, env, contract::direction_of(direction)?)?;
    let owned = backend.topk_owned_checked::<K, u32>(
        Token::new(),
        request,
        k.values(),
        keys,
        ValuesIn::None,
    )?;
    Ok(owned.map(|(out_keys, _)| out_keys))
}

/// Like [`select_pairs`], returning new key and value buffers.
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::params::{direction, k};
///
/// let (keys, values) = topk::select_pairs_owned(&Host::new(), &direction::Min, &[3i8, 1][..], &[30u32, 10][..], &k::Static::<1>::new(), &oxicub::env::Env::new())?.check()?;
/// assert_eq!((keys, values), (vec![1], vec![10]));
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::type_complexity)]
pub fn select_pairs_owned<B, Dir, K, V, Kp, E>(
    backend: &B,
    direction: &Dir,
    keys: B::Slice<'_, K>,
    values: B::Slice<'_, V>,
    k: &Kp,
    env: &E,
) -> Result<Pending<(B::OwnedKeys<K>, B::OwnedValues<V>)>, Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    V: DeviceValue,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    check_topk_value_width::<V>();
    let buffers = TopKBuffers {
        keys: keys.len(),
        values: Some(values.len()),
        index_limit: None,
        outputs: &[],
    };
    let request =
        contract::checked_topk::<B, Kp, E>(buffers, k, env, contract::direction_of(direction)?)?;
    let owned = backend.topk_owned_checked(
        Token::new(),
        request,
        k.values(),
        keys,
        ValuesIn::Copy(values),
    )?;
    Ok(owned.map(|(out_keys, out_values)| match out_values {
        Some(out_values) => (out_keys, out_values),
        None => unreachable!("a backend returns values when given values"),
    }))
}

/// Like [`select_indices`], returning new key and index buffers.
///
/// ```
/// use oxicub::{topk, Host};
/// use oxicub::params::{direction, k};
///
/// let (keys, at) = topk::select_indices_owned::<_, _, _, u32, _, _>(&Host::new(), &direction::Max, &[3i8, 7][..], &k::Static::<1>::new(), &oxicub::env::Env::new())?.check()?;
/// assert_eq!((keys, at), (vec![7], vec![1]));
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::type_complexity)]
pub fn select_indices_owned<B, Dir, K, I, Kp, E>(
    backend: &B,
    direction: &Dir,
    keys: B::Slice<'_, K>,
    k: &Kp,
    env: &E,
) -> Result<Pending<(B::OwnedKeys<K>, B::OwnedValues<I>)>, Error>
where
    B: TopKBackend,
    Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    K: RadixKey,
    I: SourceIndex,
    Kp: ParamFor<role::K> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let buffers = TopKBuffers {
        keys: keys.len(),
        values: None,
        index_limit: Some(I::MAX_ITEMS),
        outputs: &[],
    };
    let request =
        contract::checked_topk::<B, Kp, E>(buffers, k, env, contract::direction_of(direction)?)?;
    let indices = ValuesIn::Index(I::from_index);
    let owned = backend.topk_owned_checked(Token::new(), request, k.values(), keys, indices)?;
    Ok(owned.map(|(out_keys, out_indices)| match out_indices {
        Some(out_indices) => (out_keys, out_indices),
        None => unreachable!("a backend returns indices when asked for them"),
    }))
}
