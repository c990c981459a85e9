//! Multiset operations and merge on sorted arrays (seed 003, ModernGPU's multisets;
//! `docs/design/sets.md`): [`keys`], [`pairs`] and [`indices`] run one [`op`] over two inputs `a`
//! and `b` sorted in one order, with the C++ `std::set_*` semantics on multisets.
//!
//! # Semantics
//!
//! Equal keys are paired by rank: the `i`-th copy of a key in `a` matches the `i`-th copy in
//! `b`. With `m` copies of a key in `a` and `n` in `b`:
//!
//! | operation | copies written | from |
//! | --- | --- | --- |
//! | [`op::Intersection`] | `min(m, n)` | `a` |
//! | [`op::Union`] | `max(m, n)` | `a`'s matched, then the extra copies from the side holding them |
//! | [`op::Difference`] | `m - n` (0 if `n >= m`) | `a` (its last copies) |
//! | [`op::SymmetricDifference`] | `|m - n|` | the side holding the extra copies |
//! | [`op::Merge`] | `m + n` | `a`'s first, then `b`'s |
//!
//! Every output keeps its inputs' order, so a value (or an index) travels with its key exactly
//! as `std::set_*` would copy it. Keys are ordered by their radix transform ([`crate::radix`]),
//! as in every oxicub algorithm: `-0.0` below `+0.0`, every NaN above `+inf` and all NaNs equal
//! (a NaN in `a` matches a NaN in `b`); the keys written are the input keys bit for bit.
//!
//! # Outputs, count and checks
//!
//! The outputs need room for the operation's largest result ([`SetOperation::bound`]: `min(m,
//! n)` keys for intersection, `m` for difference, `m + n` otherwise), checked before anything
//! runs. The number written is known only after the run: the checked result is that count
//! (reading it is the call's synchronisation point on [`Cuda`](crate::Cuda)).
//!
//! An input that is not sorted in the call's order is an error
//! ([`Error::NotSorted`], naming the input and the first position out
//! of order), never a silently wrong answer; the outputs are then unspecified. The
//! environment's [`guarantee::SortedInputs`](oxicub_params::guarantee::SortedInputs) promises
//! sorted inputs and skips the check. [`guarantee::NoDuplicateKeys`](oxicub_params::guarantee::NoDuplicateKeys)
//! promises that no key repeats within `a` or within `b` (the seed's `Duplicates = false`); a
//! repeat is then [`Error::RepeatedKey`] unless the inputs are also
//! promised sorted.
//!
//! # Requirements
//!
//! A set operation's output is sorted and stable (equal keys in input order, `a`'s before
//! `b`'s): the environment may require `stable_sorted` (the default) or `sorted`, and no
//! tie-break but `prefer_smaller_index`, as for a sort.
//!
//! ```
//! use oxicub::{sets::{self, op}, Host};
//! use oxicub::env::Env;
//! use oxicub::params::order;
//!
//! // The seed's example: 1 1 2 3 3 3 5 6 6 6 6 7 7 8 8 9 and 1 2 2 3 3 3 3 6 6 6 6 8.
//! let a = [1u32, 1, 2, 3, 3, 3, 5, 6, 6, 6, 6, 7, 7, 8, 8, 9];
//! let b = [1u32, 2, 2, 3, 3, 3, 3, 6, 6, 6, 6, 8];
//! let mut out = [0u32; 12];
//! let n = sets::keys(&Host::new(), op::Intersection, order::Ascending, &a[..], &b[..], &mut out[..], &Env::new())?
//!     .check()?;
//! assert_eq!(out[..n], [1, 2, 3, 3, 3, 6, 6, 6, 6, 8]);
//! # Ok::<(), oxicub::Error>(())
//! ```
//!
//! Backends: [`Host`](crate::Host) (the oracle: the `std::set_*` loops over the keys' ranks),
//! [`Cuda`](crate::Cuda) (the seed's Balanced Path partitions, a serial operation a thread,
//! outputs compacted a tile at a time; the inputs' order checked within the same pass) and
//! [`AnyBackend`](crate::AnyBackend).

mod batched;
mod cuda;
mod host;
pub mod op;

pub use batched::{batched_indices, batched_keys, batched_pairs, Batch, BatchLayout, BatchOn};
pub use op::SetOperation;

use oxicub_env::Environment;
use oxicub_params::SortOrder;

use crate::backend::{Backend, Buffer, DeviceValue};
use crate::contract::sets::{checked_sets, BatchArgsOn, BatchRequest, SetBuffers, SetRequest};
use crate::contract::{SortOrdering, SortTieBreak};
use crate::radix::RadixKey;
use crate::sealed::{Sealed, Token};
use crate::segments::Pending;
use crate::values::{check_sort_value_width, SourceIndex, ValuesIn};
use crate::Error;

/// The values of a set operation on backend `B`: `a`'s and `b`'s, or the source positions.
#[doc(hidden)]
pub type SetValues<'a, 'b, B, V> =
    ValuesIn<(<B as Backend>::Slice<'a, V>, <B as Backend>::Slice<'b, V>), V>;

/// A backend that runs set operations: [`Host`](crate::Host), [`Cuda`](crate::Cuda) and
/// [`AnyBackend`](crate::AnyBackend).
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not run set operations",
    note = "oxicub's backends are `Host`, `Cuda` and `AnyBackend`"
)]
pub trait SetsBackend: Backend {
    /// A set operation after the front check (only the contract builds a request).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn set_operation_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &SetRequest,
        a: Self::Slice<'_, K>,
        b: Self::Slice<'_, K>,
        values: SetValues<'_, '_, Self, V>,
        outputs: SetOutputs<'_, '_, '_, Self, K, V>,
    ) -> Result<Pending<usize>, Error>;

    /// A batched set operation after the front check.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn batched_set_operation_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &BatchRequest,
        args: BatchArgsOn<'_, Self>,
        a: Self::Slice<'_, K>,
        b: Self::Slice<'_, K>,
        values: SetValues<'_, '_, Self, V>,
        outputs: SetOutputs<'_, '_, '_, Self, K, V>,
        out_offsets: Self::SliceMut<'_, i64>,
    ) -> Result<Pending<usize>, Error>;
}

/// Where a set operation writes on backend `B`: the keys, the values (or source positions) and
/// the count.
#[doc(hidden)]
#[derive(Debug)]
pub struct SetOutputs<'k, 'v, 'c, B: Backend + ?Sized, K: 'k, V: 'v> {
    pub(crate) keys: B::SliceMut<'k, K>,
    pub(crate) values: Option<B::SliceMut<'v, V>>,
    /// One element that gets the number written, on the backend (on the GPU in stream order).
    pub(crate) count: Option<B::SliceMut<'c, i64>>,
}

/// The order both inputs of a set operation are sorted in: `order::Ascending`,
/// `order::Descending` or `order::Choice` (one order chosen at run time).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an order for a set operation",
    label = "both inputs are sorted in this one order",
    note = "pass `order::Ascending`, `order::Descending` or `order::Choice::new(..)?`"
)]
pub trait SetOrder: Sealed {
    /// The order.
    fn sort_order(&self) -> SortOrder;
}

impl SetOrder for oxicub_params::order::Ascending {
    fn sort_order(&self) -> SortOrder {
        SortOrder::Ascending
    }
}

impl SetOrder for oxicub_params::order::Descending {
    fn sort_order(&self) -> SortOrder {
        SortOrder::Descending
    }
}

impl<S> SetOrder for oxicub_params::order::Choice<S>
where
    S: oxicub_params::OptionSet<Option = SortOrder>,
{
    fn sort_order(&self) -> SortOrder {
        self.get()
    }
}

// The keys of `operation` over `a` and `b` (both sorted in `order`) into `out_keys`; the
/// checked result is the number written. See the [module docs](self) for the semantics.
///
/// ```
/// use oxicub::{sets::{self, op}, Host};
/// use oxicub::env::Env;
/// use oxicub::params::order;
///
/// let (a, b) = ([9i32, 7, 7, 2], [8i32, 7, 2, 2]);
/// let mut out = [0i32; 8];
/// let n = sets::keys(&Host::new(), op::Union, order::Descending, &a[..], &b[..], &mut out[..], &Env::new())?
///     .check()?;
/// assert_eq!(out[..n], [9, 8, 7, 7, 2, 2]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn keys<B, K, Op, O, E>(
    backend: &B,
    operation: Op,
    order: O,
    a: B::Slice<'_, K>,
    b: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    env: &E,
) -> Result<Pending<usize>, Error>
where
    B: SetsBackend,
    K: RadixKey,
    Op: SetOperation,
    O: SetOrder,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = SetOutputs {
        keys: out_keys,
        values: None,
        count: None,
    };
    run_checked::<B, K, u32, Op, O, E>(
        backend,
        operation,
        order,
        a,
        b,
        ValuesIn::None,
        None,
        outputs,
        env,
    )
}

/// [`keys`], the number written also into `count[0]` on the backend: on
/// [`Cuda`](crate::Cuda) by the kernel, in stream order, with no host synchronisation, so the
/// next kernel on the stream (or a `num_segments::Deferred` parameter) can read it. `count`
/// needs one element ([`Error::BufferTooSmall`] otherwise). The checked result is the same
/// count; after an order error `count[0]` is unspecified.
///
/// ```
/// use oxicub::{sets::{self, op}, Host};
/// use oxicub::env::Env;
/// use oxicub::params::order;
///
/// let (a, b) = ([1u64, 4, 9], [4u64, 9, 16]);
/// let (mut out, mut count) = ([0u64; 3], [0i64; 1]);
/// let n = sets::keys_with_count(&Host::new(), op::Intersection, order::Ascending, &a[..], &b[..], &mut out[..], &mut count[..], &Env::new())?
///     .check()?;
/// assert_eq!((n, count[0], &out[..n]), (2, 2, &[4, 9][..]));
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn keys_with_count<B, K, Op, O, E>(
    backend: &B,
    operation: Op,
    order: O,
    a: B::Slice<'_, K>,
    b: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    count: B::SliceMut<'_, i64>,
    env: &E,
) -> Result<Pending<usize>, Error>
where
    B: SetsBackend,
    K: RadixKey,
    Op: SetOperation,
    O: SetOrder,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = SetOutputs {
        keys: out_keys,
        values: None,
        count: Some(count),
    };
    run_checked::<B, K, u32, Op, O, E>(
        backend,
        operation,
        order,
        a,
        b,
        ValuesIn::None,
        None,
        outputs,
        env,
    )
}

/// The keys of `operation` over `a` and `b`, each carrying its value (`a_values[i]` belongs to
/// `a[i]`, `b_values[j]` to `b[j]`; any padding-free type of up to 8 bytes: a compile-time
/// check), into `out_keys` and `out_values`. A written key's value is the one `std::set_*`
/// copies with it: intersection and difference take `a`'s, union `a`'s for matched keys and
/// the extra copies' from their side, symmetric difference the extra copies', merge each from
/// its side.
///
/// ```
/// use oxicub::{sets::{self, op}, Host};
/// use oxicub::env::Env;
/// use oxicub::params::order;
///
/// let (a, b) = ([1u8, 3, 3], [3u8, 4]);
/// let (a_tags, b_tags) = (['a', 'b', 'c'].map(u32::from), ['x', 'y'].map(u32::from));
/// let (mut keys, mut tags) = ([0u8; 5], [0u32; 5]);
/// let n = sets::pairs(&Host::new(), op::SymmetricDifference, order::Ascending, &a[..], &a_tags[..], &b[..], &b_tags[..], &mut keys[..], &mut tags[..], &Env::new())?
///     .check()?;
/// assert_eq!((&keys[..n], &tags[..n]), (&[1, 3, 4][..], &[u32::from('a'), u32::from('c'), u32::from('y')][..]));
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn pairs<B, K, V, Op, O, E>(
    backend: &B,
    operation: Op,
    order: O,
    a: B::Slice<'_, K>,
    a_values: B::Slice<'_, V>,
    b: B::Slice<'_, K>,
    b_values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    env: &E,
) -> Result<Pending<usize>, Error>
where
    B: SetsBackend,
    K: RadixKey,
    V: DeviceValue,
    Op: SetOperation,
    O: SetOrder,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = SetOutputs {
        keys: out_keys,
        values: Some(out_values),
        count: None,
    };
    let values = ValuesIn::Copy((a_values, b_values));
    run_checked(backend, operation, order, a, b, values, None, outputs, env)
}

/// [`pairs`], the number written also into `count[0]` on the backend (as
/// [`keys_with_count`]).
///
/// ```
/// use oxicub::{sets::{self, op}, Host};
/// use oxicub::env::Env;
/// use oxicub::params::order;
///
/// let (a, b) = ([2i16, 5], [5i16, 7]);
/// let (a_weights, b_weights) = ([0.5f32, 1.5], [2.5f32, 3.5]);
/// let (mut keys, mut weights, mut count) = ([0i16; 4], [0f32; 4], [0i64; 1]);
/// let n = sets::pairs_with_count(&Host::new(), op::Merge, order::Ascending, &a[..], &a_weights[..], &b[..], &b_weights[..], &mut keys[..], &mut weights[..], &mut count[..], &Env::new())?
///     .check()?;
/// assert_eq!((count[0], keys, weights), (4, [2, 5, 5, 7], [0.5, 1.5, 2.5, 3.5]));
/// # let _ = n;
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn pairs_with_count<B, K, V, Op, O, E>(
    backend: &B,
    operation: Op,
    order: O,
    a: B::Slice<'_, K>,
    a_values: B::Slice<'_, V>,
    b: B::Slice<'_, K>,
    b_values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    count: B::SliceMut<'_, i64>,
    env: &E,
) -> Result<Pending<usize>, Error>
where
    B: SetsBackend,
    K: RadixKey,
    V: DeviceValue,
    Op: SetOperation,
    O: SetOrder,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = SetOutputs {
        keys: out_keys,
        values: Some(out_values),
        count: Some(count),
    };
    let values = ValuesIn::Copy((a_values, b_values));
    run_checked(backend, operation, order, a, b, values, None, outputs, env)
}

/// The keys of `operation` over `a` and `b`, each with its source position: `i` for `a[i]`,
/// `a.len() + j` for `b[j]` (the seed's pairs demonstration: `a`'s values counting from 0,
/// `b`'s from `a.len()`), as `u32`, `i32`, `u64` or `i64`.
///
/// ```
/// use oxicub::{sets::{self, op}, Host};
/// use oxicub::env::Env;
/// use oxicub::params::order;
///
/// let (a, b) = ([0.5f32, 1.0], [0.25f32, 1.0, 1.0]);
/// let (mut keys, mut from) = ([0f32; 5], [0u32; 5]);
/// let n = sets::indices(&Host::new(), op::Merge, order::Ascending, &a[..], &b[..], &mut keys[..], &mut from[..], &Env::new())?
///     .check()?;
/// assert_eq!((n, from), (5, [2, 0, 1, 3, 4])); // equal keys: a's first
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn indices<B, K, I, Op, O, E>(
    backend: &B,
    operation: Op,
    order: O,
    a: B::Slice<'_, K>,
    b: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    env: &E,
) -> Result<Pending<usize>, Error>
where
    B: SetsBackend,
    K: RadixKey,
    I: SourceIndex,
    Op: SetOperation,
    O: SetOrder,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = SetOutputs {
        keys: out_keys,
        values: Some(out_indices),
        count: None,
    };
    let index_limit = Some(I::MAX_ITEMS);
    let values = ValuesIn::Index(I::from_index);
    run_checked(
        backend,
        operation,
        order,
        a,
        b,
        values,
        index_limit,
        outputs,
        env,
    )
}

/// [`indices`], the number written also into `count[0]` on the backend (as
/// [`keys_with_count`]).
///
/// ```
/// use oxicub::{sets::{self, op}, Host};
/// use oxicub::env::Env;
/// use oxicub::params::order;
///
/// let (a, b) = ([3u32, 3, 8], [3u32, 5]);
/// let (mut keys, mut from, mut count) = ([0u32; 5], [0u64; 5], [0i64; 1]);
/// sets::indices_with_count(&Host::new(), op::SymmetricDifference, order::Ascending, &a[..], &b[..], &mut keys[..], &mut from[..], &mut count[..], &Env::new())?
///     .check()?;
/// assert_eq!((count[0], &keys[..3], &from[..3]), (3, &[3, 5, 8][..], &[1, 4, 2][..]));
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn indices_with_count<B, K, I, Op, O, E>(
    backend: &B,
    operation: Op,
    order: O,
    a: B::Slice<'_, K>,
    b: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    count: B::SliceMut<'_, i64>,
    env: &E,
) -> Result<Pending<usize>, Error>
where
    B: SetsBackend,
    K: RadixKey,
    I: SourceIndex,
    Op: SetOperation,
    O: SetOrder,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = SetOutputs {
        keys: out_keys,
        values: Some(out_indices),
        count: Some(count),
    };
    let index_limit = Some(I::MAX_ITEMS);
    let values = ValuesIn::Index(I::from_index);
    run_checked(
        backend,
        operation,
        order,
        a,
        b,
        values,
        index_limit,
        outputs,
        env,
    )
}

/// The body of every entry point: the front check, then the backend.
#[allow(clippy::too_many_arguments)]
fn run_checked<B, K, V, Op, O, E>(
    backend: &B,
    operation: Op,
    order: O,
    a: B::Slice<'_, K>,
    b: B::Slice<'_, K>,
    values: SetValues<'_, '_, B, V>,
    index_limit: Option<u64>,
    outputs: SetOutputs<'_, '_, '_, B, K, V>,
    env: &E,
) -> Result<Pending<usize>, Error>
where
    B: SetsBackend,
    K: RadixKey,
    V: DeviceValue,
    Op: SetOperation,
    O: SetOrder,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let request = checked_request(
        &operation,
        &order,
        &a,
        &b,
        &values,
        index_limit,
        &outputs,
        env,
    )?;
    backend.set_operation_checked(Token::new(), &request, a, b, values, outputs)
}

/// The front check of every entry point, batched or not: the inputs, the values beside them
/// (their lengths for pairs; for indices `index_limit`, the most positions the index type
/// numbers) and the outputs (the second one named `out_values` for pairs, `out_indices` for
/// indices) against the operation's bound over the whole of `a` and `b`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn checked_request<B, K, V, Op, O, E>(
    operation: &Op,
    order: &O,
    a: &B::Slice<'_, K>,
    b: &B::Slice<'_, K>,
    values: &SetValues<'_, '_, B, V>,
    index_limit: Option<u64>,
    outputs: &SetOutputs<'_, '_, '_, B, K, V>,
    env: &E,
) -> Result<SetRequest, Error>
where
    B: SetsBackend,
    K: RadixKey,
    V: DeviceValue,
    Op: SetOperation,
    O: SetOrder,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    check_sort_value_width::<V>();
    let (value_lens, values_arg) = match values {
        ValuesIn::Copy((a_values, b_values)) => {
            (Some((a_values.len(), b_values.len())), "out_values")
        }
        ValuesIn::Index(_) => (None, "out_indices"),
        ValuesIn::None => (None, "out_values"),
    };
    let lens = [
        ("out_keys", outputs.keys.len()),
        (values_arg, outputs.values.as_ref().map_or(0, Buffer::len)),
    ];
    let named = if outputs.values.is_some() { 2 } else { 1 };
    let buffers = SetBuffers {
        a: a.len(),
        b: b.len(),
        values: value_lens,
        index_limit,
        outputs: &lens[..named],
        count: outputs.count.as_ref().map(Buffer::len),
    };
    checked_sets(operation, order.sort_order(), buffers, env)
}
