//! Segmented sort: the keys of every segment sorted in place of the segment, alone
//! ([`sort_keys`]), with a value each ([`sort_pairs`]), or with each key's index within its
//! segment ([`sort_indices`]: the argsort of `torch.sort`), into output buffers (the seed's
//! segmented sort, `docs/design/segmented_sort.md`).
//!
//! # Segments
//!
//! A [`Problem`] holds the shared segment vocabulary ([`Segments`]) and the sort order:
//!
//! * **Layout.** [`Problem::strided`]: the rows of a `[rows x stride]` matrix, row `i` sorted
//!   over its first `size_i` keys. [`Problem::offsets`]: segment `i` is
//!   `keys[begin[i] .. end[i]]`; the segments must be in order and disjoint (`begin[i] >=
//!   end[i - 1]`), since each is written where it lies. The seed's head flags and head indices
//!   become offsets with [`segments::offsets_from_head_flags`] and
//!   [`segments::offsets_from_head_indices`], which check every head.
//!   On [`Cuda`](crate::Cuda), [`segments::offsets_from_head_flags_on_device`] and
//!   [`segments::offsets_from_head_indices_on_device`] do the same in device memory, leaving
//!   the number of segments on the device for a `num_segments::Deferred` sort with no host
//!   round trip.
//!   [`Problem::listed`]: segment `i` is the `i`-th slice of a list (on [`Cuda`](crate::Cuda),
//!   views of separate allocations), sorted into one joined output ([`sort_keys_listed`],
//!   [`sort_pairs_listed`], [`sort_indices_listed`]) or each where it lies
//!   ([`sort_keys_listed_in_place`], [`sort_pairs_listed_in_place`]).
//! * **Sizes and count**: static, uniform or per segment, and static, uniform or deferred, as
//!   in [`segments`].
//! * **Order**: `order::Ascending`, `order::Descending`, `order::Choice` (one order chosen at
//!   run time), or per segment (`order::PerSegment` over `&[SortOrder]` or bytes, `0` =
//!   ascending, `1` = descending).
//!
//! Keys are ordered by their radix transform ([`crate::radix`]), as in top-k: `-0.0` sorts just
//! below `+0.0` and every NaN above `+inf` (last ascending, first descending); the keys written
//! are the input keys bit for bit.
//!
//! # Requirements
//!
//! The environment chooses between `stable_sorted` (the default: equal keys keep their input
//! order, so every output bit is determined) and `output_ordering::Sorted` (equal keys, and the
//! values they carry, in any order; may be faster). What a sort cannot honour does not build:
//!
//! ```compile_fail
//! use oxicub::{segmented_sort::{self, Problem}, Host};
//! use oxicub::env::{output_ordering, require};
//! use oxicub::params::{num_segments, order, segment_size};
//!
//! // A sort's output is sorted: `unsorted` is not an ordering it can give.
//! let env = require!(output_ordering::Unsorted);
//! let problem = Problem::strided(2, segment_size::Static::<2>::new(), order::Ascending, num_segments::uniform(1)?);
//! segmented_sort::sort_keys(&Host::new(), &problem, &[2u8, 1][..], &mut [0u8; 2][..], &env)?.check()?;
//! # Ok::<(), oxicub::Error>(())
//! ```
//!
//! # Results and errors
//!
//! Output `j` of a segment's keys is written at the segment's place (`begin + j`); positions
//! outside every segment are left untouched. The checked result is the sort's
//! [`MergeStatistics`] (the seed's merge-pass report; none on the host backend). The outputs need `keys.len()` elements
//! ([`Error::BufferTooSmall`]), `values` exactly `keys.len()` ([`Error::LengthMismatch`]).
//! Per-segment values are checked as in [`segments`]: a segment that fails (offsets past the
//! keys, a size outside its bounds, an order byte outside the compiled set) writes nothing, the
//! others are sorted, and the smallest such segment is reported by
//! [`Outcome::check`](crate::segments::Pending::check). Offsets out of order (a begin above
//! its end, or below the previous segment's end) are reported the same way, but then no
//! segment is written: the segments can no longer be trusted to be disjoint.
//!
//! Backends: [`Host`](crate::Host) (the oracle), [`Cuda`](crate::Cuda) (keys of at most 32
//! bits: segments binned by size class and sorted a block at a time in registers, long ones in
//! chunks joined by the seed's early-exit merge passes; 64-bit keys: the seed's whole-array
//! segmented mergesort; the per-segment checks are made on the device and reading the report is
//! the caller's synchronisation point) and [`AnyBackend`](crate::AnyBackend). One array sorted
//! whole is [`locality_sort`](crate::locality_sort).
//!
//! ```
//! use oxicub::{segmented_sort::{self, Problem}, segments, Host};
//! use oxicub::env::Env;
//! use oxicub::params::{num_segments, order, segment_size};
//!
//! // Three segments given by their heads, sorted ascending with their source positions.
//! let keys = [5i32, 1, 4, /**/ 9, /**/ 3, 3, 2];
//! let (begin, end) = segments::offsets_from_head_indices(&[3, 4], keys.len())?;
//! let problem = Problem::offsets(
//!     &begin[..],
//!     &end[..],
//!     segment_size::PerSegment::<()>::new(()),
//!     order::Ascending,
//!     num_segments::uniform(begin.len() as i64)?,
//! );
//! let (mut sorted, mut at) = ([0i32; 7], [0u32; 7]);
//! segmented_sort::sort_indices(&Host::new(), &problem, &keys[..], &mut sorted[..], &mut at[..], &Env::new())?
//!     .check()?;
//! assert_eq!(sorted, [1, 4, 5, 9, 2, 3, 3]);
//! assert_eq!(at, [1, 2, 0, 0, 2, 0, 1]); // within each segment; equal keys in input order
//! # Ok::<(), oxicub::Error>(())
//! ```

mod cuda;
mod host;
mod listed;
mod statistics;

pub use listed::{
    sort_indices_listed, sort_keys_listed, sort_keys_listed_in_place, sort_pairs_listed,
    sort_pairs_listed_in_place,
};
pub use statistics::{MergePass, MergeStatistics};

use oxicub_env::Environment;

use crate::backend::{Backend, Buffer, DeviceValue};
use crate::contract::segmented_sort::{SortArgsOn, SortBuffers, SortRequest};
use crate::contract::segmented_sort::{SortOrdering, SortTieBreak};
use crate::radix::RadixKey;
use crate::sealed::{Sealed, Token};
#[cfg(doc)]
use crate::segments;
use crate::segments::{Offsets, Pending, Segments, Strided};
use crate::values::{check_sort_value_width, SourceIndex, ValuesIn};
use crate::Error;

/// A backend that runs segmented sort: [`Host`](crate::Host), [`Cuda`](crate::Cuda) and
/// [`AnyBackend`](crate::AnyBackend).
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not run segmented sort",
    note = "oxicub's backends are `Host`, `Cuda` and `AnyBackend`"
)]
pub trait SegmentedSortBackend: Backend {
    /// Segmented sort after the front check (only the contract builds a request).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn segmented_sort_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &SortRequest,
        args: SortArgsOn<'_, Self>,
        keys: Self::Slice<'_, K>,
        values: ValuesIn<Self::Slice<'_, V>, V>,
        out_keys: Self::SliceMut<'_, K>,
        out_values: Option<Self::SliceMut<'_, V>>,
    ) -> Result<Pending<MergeStatistics>, Error>;

    /// Segmented sort in place after the front check: the keys (and values) are copied first,
    /// then sorted from the copy into the caller's buffers.
    #[doc(hidden)]
    fn segmented_sort_in_place_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &SortRequest,
        args: SortArgsOn<'_, Self>,
        keys: Self::SliceMut<'_, K>,
        values: Option<Self::SliceMut<'_, V>>,
    ) -> Result<Pending<MergeStatistics>, Error>;

    /// Segmented sort of a listed layout after the front check: the segments joined into one
    /// buffer and sorted into `out_keys` (and `out_values`), segment `i` at the sum of the
    /// earlier segments' lengths.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn segmented_sort_listed_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &SortRequest,
        args: SortArgsOn<'_, Self>,
        segments: &[Self::Slice<'_, K>],
        values: ValuesIn<&[Self::Slice<'_, V>], V>,
        out_keys: Self::SliceMut<'_, K>,
        out_values: Option<Self::SliceMut<'_, V>>,
    ) -> Result<Pending<MergeStatistics>, Error>;

    /// Segmented sort of a listed layout in place after the front check: joined, sorted into a
    /// copy, and written back segment by segment.
    #[doc(hidden)]
    fn segmented_sort_listed_in_place_checked<K: RadixKey, V: DeviceValue>(
        &self,
        token: Token,
        request: &SortRequest,
        args: SortArgsOn<'_, Self>,
        segments: &mut [Self::SliceMut<'_, K>],
        values: Option<&mut [Self::SliceMut<'_, V>]>,
    ) -> Result<Pending<MergeStatistics>, Error>;
}

/// What a segmented sort sorts: the segments and the order of each.
///
/// ```
/// use oxicub::segmented_sort::Problem;
/// use oxicub::params::{num_segments, order, segment_size};
///
/// // torch.sort(x, dim=-1, descending=True, stable=True) of a [4096 x 1000] matrix.
/// let rows = Problem::strided(1000, segment_size::Static::<1000>::new(), order::Descending, num_segments::uniform(4096)?);
/// # let _ = rows;
/// # Ok::<(), oxicub::params::ParamError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Problem<L, S, O, N> {
    pub(crate) segments: Segments<L, S, N>,
    pub(crate) order: O,
}

impl<L, S, O, N> Problem<L, S, O, N> {
    /// Every segment of `segments` sorted in `order`.
    pub fn new(segments: Segments<L, S, N>, order: O) -> Problem<L, S, O, N> {
        Problem { segments, order }
    }

    /// The segments.
    pub fn segments(&self) -> &Segments<L, S, N> {
        &self.segments
    }
}

impl<S, O, N> Problem<Strided, S, O, N> {
    /// Row `i` is `keys[i * stride ..][..size_i]`; every `size_i <= stride`.
    pub fn strided(stride: usize, segment_sizes: S, order: O, num_segments: N) -> Self {
        Problem::new(
            Segments::strided(stride, segment_sizes, num_segments),
            order,
        )
    }
}

impl<T, S, O, N> Problem<Offsets<T>, S, O, N> {
    /// Segment `i` is `keys[begin[i] .. end[i]]`, in order and disjoint. `segment_sizes`
    /// bounds `end[i] - begin[i]`: `segment_size::PerSegment::<(), MIN, MAX>::new(())`
    /// (optionally `.with_bounds(..)`), or a `Static`/`Uniform` size every segment must have.
    pub fn offsets(begin: T, end: T, segment_sizes: S, order: O, num_segments: N) -> Self {
        Problem::new(
            Segments::offsets(begin, end, segment_sizes, num_segments),
            order,
        )
    }
}

/// A segmented sort [`Problem`] every argument of which backend `B` can read: its layout
/// (offsets in the backend's memory), sizes, orders and count.
#[diagnostic::on_unimplemented(
    message = "the `{B}` backend cannot run the segmented sort problem `{Self}`",
    note = "every argument of the problem must be readable on the backend: per-segment values \
            and offsets in host slices on `Host` and `AnyBackend`, in `CudaView`s on `Cuda`"
)]
pub trait ProblemOn<B: Backend + ?Sized>: Sealed {
    /// The front check of a call on this problem: only it builds a request.
    #[doc(hidden)]
    fn checked<E: Environment>(
        &self,
        token: Token,
        buffers: SortBuffers<'_>,
        env: &E,
    ) -> Result<(SortRequest, SortArgsOn<'_, B>), Error>;
}

/// The keys of every segment sorted into `out_keys`, each segment where it lies. See the
/// [module docs](self) for the layouts, the requirements and the per-segment checks reported
/// by the returned [`Pending`].
///
/// ```
/// use oxicub::{segmented_sort::{self, Problem}, Host};
/// use oxicub::env::Env;
/// use oxicub::params::{num_segments, order, segment_size, SortOrder};
///
/// // Two rows of three, the first ascending, the second descending; NaN sorts above +inf.
/// let keys = [2.0f32, f32::NAN, -1.0, /**/ 0.5, f32::INFINITY, -0.0];
/// let orders = [SortOrder::Ascending, SortOrder::Descending];
/// let problem = Problem::strided(3, segment_size::Static::<3>::new(), order::PerSegment::<_>::new(&orders[..]), num_segments::uniform(2)?);
/// let mut out = [0f32; 6];
/// segmented_sort::sort_keys(&Host::new(), &problem, &keys[..], &mut out[..], &Env::new())?.check()?;
/// assert_eq!(out[..2], [-1.0, 2.0]);
/// assert!(out[2].is_nan());
/// assert_eq!(out[3..], [f32::INFINITY, 0.5, -0.0]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn sort_keys<B, K, P, E>(
    backend: &B,
    problem: &P,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    P: ProblemOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = [("out_keys", out_keys.len())];
    let buffers = SortBuffers {
        keys: keys.len(),
        values: None,
        index_limit: None,
        outputs: &outputs,
    };
    let (request, args) = problem.checked(Token::new(), buffers, env)?;
    let values = ValuesIn::None;
    backend.segmented_sort_checked::<K, u32>(
        Token::new(),
        &request,
        args,
        keys,
        values,
        out_keys,
        None,
    )
}

/// The keys of every segment sorted, each carrying its value (`values[j]` belongs to
/// `keys[j]`; any padding-free type of up to 8 bytes: a compile-time check). As [`sort_keys`] otherwise; under
/// `stable_sorted` equal keys keep their values in input order.
///
/// ```
/// use oxicub::{segmented_sort::{self, Problem}, Host};
/// use oxicub::env::Env;
/// use oxicub::params::{num_segments, order, segment_size};
///
/// let keys = [3u8, 1, 3, 0];
/// let tokens = [30u32, 10, 31, 0];
/// let problem = Problem::strided(4, segment_size::Static::<4>::new(), order::Descending, num_segments::uniform(1)?);
/// let (mut k, mut v) = ([0u8; 4], [0u32; 4]);
/// segmented_sort::sort_pairs(&Host::new(), &problem, &keys[..], &tokens[..], &mut k[..], &mut v[..], &Env::new())?.check()?;
/// assert_eq!((k, v), ([3, 3, 1, 0], [30, 31, 10, 0]));
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn sort_pairs<B, K, V, P, E>(
    backend: &B,
    problem: &P,
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
    P: ProblemOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    check_sort_value_width::<V>();
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_values", out_values.len()),
    ];
    let buffers = SortBuffers {
        keys: keys.len(),
        values: Some(values.len()),
        index_limit: None,
        outputs: &outputs,
    };
    let (request, args) = problem.checked(Token::new(), buffers, env)?;
    backend.segmented_sort_checked(
        Token::new(),
        &request,
        args,
        keys,
        ValuesIn::Copy(values),
        out_keys,
        Some(out_values),
    )
}

/// The keys of every segment sorted, with each key's index within its segment (`u32`, `i32`,
/// `u64` or `i64`: the argsort of `torch.sort`). As [`sort_keys`] otherwise.
///
/// ```
/// use oxicub::{segmented_sort::{self, Problem}, Host};
/// use oxicub::env::Env;
/// use oxicub::params::{num_segments, order, segment_size};
///
/// let scores = [0.5f32, 0.9, 0.1, /**/ 7.0, 7.0, 8.0];
/// let problem = Problem::strided(3, segment_size::Static::<3>::new(), order::Descending, num_segments::uniform(2)?);
/// let (mut sorted, mut at) = ([0f32; 6], [0i64; 6]);
/// segmented_sort::sort_indices(&Host::new(), &problem, &scores[..], &mut sorted[..], &mut at[..], &Env::new())?.check()?;
/// assert_eq!(at, [1, 0, 2, /**/ 2, 0, 1]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn sort_indices<B, K, I, P, E>(
    backend: &B,
    problem: &P,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    I: SourceIndex,
    P: ProblemOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_indices", out_indices.len()),
    ];
    let buffers = SortBuffers {
        keys: keys.len(),
        values: None,
        index_limit: Some(I::MAX_ITEMS),
        outputs: &outputs,
    };
    let (request, args) = problem.checked(Token::new(), buffers, env)?;
    backend.segmented_sort_checked(
        Token::new(),
        &request,
        args,
        keys,
        ValuesIn::Index(I::from_index),
        out_keys,
        Some(out_indices),
    )
}

/// [`sort_keys`] in place: each segment of `keys` sorted where it lies. The backend copies the
/// keys first (on the device: one device-to-device copy on the stream, into memory it frees in
/// stream order) and sorts from the copy, so the call costs one more read and write of the
/// keys than [`sort_keys`] into a second buffer.
///
/// ```
/// use oxicub::{segmented_sort::{self, Problem}, Host};
/// use oxicub::env::Env;
/// use oxicub::params::{num_segments, order, segment_size};
///
/// let mut keys = [3i32, 1, 2, /**/ 9, -4, 0];
/// let rows = Problem::strided(3, segment_size::Static::<3>::new(), order::Ascending, num_segments::uniform(2)?);
/// segmented_sort::sort_keys_in_place(&Host::new(), &rows, &mut keys[..], &Env::new())?.check()?;
/// assert_eq!(keys, [1, 2, 3, /**/ -4, 0, 9]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn sort_keys_in_place<B, K, P, E>(
    backend: &B,
    problem: &P,
    keys: B::SliceMut<'_, K>,
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    P: ProblemOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = [("keys", keys.len())];
    let buffers = SortBuffers {
        keys: keys.len(),
        values: None,
        index_limit: None,
        outputs: &outputs,
    };
    let (request, args) = problem.checked(Token::new(), buffers, env)?;
    backend.segmented_sort_in_place_checked::<K, u32>(Token::new(), &request, args, keys, None)
}

/// [`sort_pairs`] in place: each segment of `keys` sorted where it lies, `values` moved with
/// them. As [`sort_keys_in_place`], the backend sorts from a copy of both.
///
/// ```
/// use oxicub::{segmented_sort::{self, Problem}, Host};
/// use oxicub::env::Env;
/// use oxicub::params::{num_segments, order, segment_size};
///
/// let (mut keys, mut tokens) = ([0.5f32, 0.9, 0.9, 0.1], [10u16, 11, 12, 13]);
/// let rows = Problem::strided(4, segment_size::Static::<4>::new(), order::Descending, num_segments::uniform(1)?);
/// segmented_sort::sort_pairs_in_place(&Host::new(), &rows, &mut keys[..], &mut tokens[..], &Env::new())?.check()?;
/// assert_eq!((keys, tokens), ([0.9, 0.9, 0.5, 0.1], [11, 12, 10, 13]));
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn sort_pairs_in_place<B, K, V, P, E>(
    backend: &B,
    problem: &P,
    keys: B::SliceMut<'_, K>,
    values: B::SliceMut<'_, V>,
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    V: DeviceValue,
    P: ProblemOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    check_sort_value_width::<V>();
    let outputs = [("keys", keys.len()), ("values", values.len())];
    let buffers = SortBuffers {
        keys: keys.len(),
        values: Some(values.len()),
        index_limit: None,
        outputs: &outputs,
    };
    let (request, args) = problem.checked(Token::new(), buffers, env)?;
    backend.segmented_sort_in_place_checked(Token::new(), &request, args, keys, Some(values))
}
