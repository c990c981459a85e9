//! Locality sort: one array sorted by the seed's mergesort whose passes leave in place every
//! tile whose source interval already maps onto its destination, so keys that start near their
//! sorted places cost little (seed 004's `LocalitySortKeys` / `LocalitySortPairs`;
//! docs/design/segmented_sort.md, "GPU: register path"). The result is the sort's:
//! the same keys, orders, requirements and errors as a one-segment
//! [`segmented_sort`].
//!
//! ```
//! use oxicub::{locality_sort, Host};
//! use oxicub::env::Env;
//! use oxicub::params::order;
//!
//! // Keys near their places: i + noise.
//! let keys = [1u32, 0, 2, 4, 3, 5, 7, 6];
//! let tags = [10u32, 11, 12, 13, 14, 15, 16, 17];
//! let (mut sorted, mut carried) = ([0u32; 8], [0u32; 8]);
//! locality_sort::sort_pairs(&Host::new(), &order::Ascending, &keys[..], &tags[..], &mut sorted[..], &mut carried[..], &Env::new())?
//!     .check()?;
//! assert_eq!(sorted, [0, 1, 2, 3, 4, 5, 6, 7]);
//! assert_eq!(carried, [11, 10, 12, 14, 13, 15, 17, 16]);
//! # Ok::<(), oxicub::Error>(())
//! ```

use oxicub_env::Environment;
use oxicub_params::{
    num_segments, segment_size, DiscreteParam, DiscreteParamFor, ParamError, SortOrder,
};

use crate::backend::{Buffer, ChoicesOn, DeviceValue};
use crate::contract::{SortOrdering, SortTieBreak};
use crate::radix::RadixKey;
use crate::segmented_sort::{self, MergeStatistics, Problem, SegmentedSortBackend};
use crate::segments::{Pending, Strided};
use crate::Error;

/// The one segment of `n` keys.
type Whole<O> = Problem<
    Strided,
    segment_size::Uniform<0, { i64::MAX }>,
    O,
    num_segments::Uniform<0, { i64::MAX }>,
>;

fn whole<O>(n: usize, order: O) -> Result<Whole<O>, Error> {
    let n = Error::item_count(n)?;
    let size = segment_size::Uniform::new(n).map_err(Error::Param)?;
    let count = num_segments::uniform(1).map_err(|e: ParamError| Error::Param(e))?;
    Ok(Problem::strided(n as usize, size, order, count))
}

/// The keys sorted into `out_keys` in `order` (`order::Ascending`, `order::Descending` or
/// `order::Choice`), under the environment's requirements (stable by default); `out_keys`
/// needs `keys.len()` elements. The checked result is the merge passes' statistics: on keys
/// near their places, few tiles merge.
///
/// ```
/// use oxicub::{locality_sort, Host};
/// use oxicub::params::order;
///
/// let mut out = [0i16; 5];
/// locality_sort::sort_keys(&Host::new(), &order::Descending, &[2i16, 3, 1, 5, 4][..], &mut out[..], &oxicub::env::Env::new())?
///     .check()?;
/// assert_eq!(out, [5, 4, 3, 2, 1]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn sort_keys<B, K, O, E>(
    backend: &B,
    order: &O,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    O: DiscreteParamFor<SortOrder> + DiscreteParam<Option = SortOrder> + ChoicesOn<B> + Copy,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let problem = whole(keys.len(), *order)?;
    segmented_sort::sort_keys(backend, &problem, keys, out_keys, env)
}

/// The keys sorted, each carrying its value (any padding-free type of up to 8 bytes); as
/// [`sort_keys`] otherwise.
#[allow(clippy::too_many_arguments)]
pub fn sort_pairs<B, K, V, O, E>(
    backend: &B,
    order: &O,
    keys: B::Slice<'_, K>,
    values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    V: DeviceValue,
    O: DiscreteParamFor<SortOrder> + DiscreteParam<Option = SortOrder> + ChoicesOn<B> + Copy,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let problem = whole(keys.len(), *order)?;
    segmented_sort::sort_pairs(backend, &problem, keys, values, out_keys, out_values, env)
}

/// [`sort_keys`] in place (the backend sorts from a copy of the keys:
/// [`segmented_sort::sort_keys_in_place`]).
///
/// ```
/// use oxicub::{locality_sort, Host};
/// use oxicub::params::order;
///
/// let mut keys = [1u32, 0, 2, 4, 3];
/// locality_sort::sort_keys_in_place(&Host::new(), &order::Ascending, &mut keys[..], &oxicub::env::Env::new())?
///     .check()?;
/// assert_eq!(keys, [0, 1, 2, 3, 4]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn sort_keys_in_place<B, K, O, E>(
    backend: &B,
    order: &O,
    keys: B::SliceMut<'_, K>,
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    O: DiscreteParamFor<SortOrder> + DiscreteParam<Option = SortOrder> + ChoicesOn<B> + Copy,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let problem = whole(keys.len(), *order)?;
    segmented_sort::sort_keys_in_place(backend, &problem, keys, env)
}

/// [`sort_pairs`] in place (the backend sorts from a copy of the keys and values:
/// [`segmented_sort::sort_pairs_in_place`]).
pub fn sort_pairs_in_place<B, K, V, O, E>(
    backend: &B,
    order: &O,
    keys: B::SliceMut<'_, K>,
    values: B::SliceMut<'_, V>,
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    V: DeviceValue,
    O: DiscreteParamFor<SortOrder> + DiscreteParam<Option = SortOrder> + ChoicesOn<B> + Copy,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let problem = whole(keys.len(), *order)?;
    segmented_sort::sort_pairs_in_place(backend, &problem, keys, values, env)
}
