//! The listed layout: every segment is its own slice (on [`Cuda`](crate::Cuda), its own device
//! view: per-request buffers, KV-cache pages), sorted in one call, into one joined output
//! ([`sort_keys_listed`], [`sort_pairs_listed`], [`sort_indices_listed`]: segment `i` at the sum
//! of the earlier segments' lengths) or each where it lies ([`sort_keys_listed_in_place`],
//! [`sort_pairs_listed_in_place`]).
//!
//! Every backend runs it as the offsets layout over the segments joined into one buffer: on
//! [`Cuda`](crate::Cuda) one gather kernel reads every view (and, in place, one scatter kernel
//! writes them back), so a listed call costs one more read and write of the keys (and values)
//! than the same sort over one buffer (`docs/design/segmented_sort.md`, "Listed segments").

use oxicub_env::Environment;

use super::{MergeStatistics, Problem, ProblemOn, SegmentedSortBackend};
use crate::backend::{Backend, Buffer, DeviceValue};
use crate::contract::segmented_sort::{SortArgs, SortBuffers, SortOrdering, SortRequest};
use crate::contract::segmented_sort::{SortArgsOn, SortTieBreak};
use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::segments::listed::{self, Joined};
use crate::segments::{check_per_segment, Listed, Pending, Segments};
use crate::values::{check_sort_value_width, SourceIndex, ValuesIn};
use crate::Error;

impl<S, O, N> Problem<Listed, S, O, N> {
    /// Segment `i` is the `i`-th slice of the list passed with the call (at least
    /// `num_segments` slices; on [`Cuda`](crate::Cuda), `CudaView`s of any allocations).
    /// `segment_sizes` bounds the slices' lengths, as with [`Problem::offsets`]:
    /// `segment_size::PerSegment::<(), MIN, MAX>::new(())`, or a `Static`/`Uniform` size every
    /// slice must have.
    ///
    /// ```
    /// use oxicub::{segmented_sort::{self, Problem}, Host};
    /// use oxicub::params::{num_segments, order, segment_size};
    /// use oxicub::env::Env;
    ///
    /// // Two requests' scores, each in its own buffer, sorted into one output.
    /// let (a, b) = ([0.5f32, 0.9, 0.1], [3.0f32, -1.0]);
    /// let problem = Problem::listed(
    ///     segment_size::PerSegment::<(), 0, 4096>::new(()),
    ///     order::Descending,
    ///     num_segments::uniform(2)?,
    /// );
    /// let (mut sorted, mut at) = ([0f32; 5], [0u32; 5]);
    /// segmented_sort::sort_indices_listed(&Host::new(), &problem, &[&a[..], &b[..]], &mut sorted[..], &mut at[..], &Env::new())?
    ///     .check()?;
    /// assert_eq!((sorted, at), ([0.9, 0.5, 0.1, 3.0, -1.0], [1, 0, 2, 0, 1]));
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn listed(segment_sizes: S, order: O, num_segments: N) -> Problem<Listed, S, O, N> {
        Problem::new(Segments::listed(segment_sizes, num_segments), order)
    }
}

/// The front check of a listed call: the slices' lengths as the keys', the values' lengths
/// slice by slice, then the list's length.
fn checked_listed<'p, B, S, O, N, E>(
    problem: &'p Problem<Listed, S, O, N>,
    segments: &[impl Buffer],
    values: Option<&[impl Buffer]>,
    index_limit: Option<u64>,
    outputs: &[(&'static str, usize)],
    env: &E,
) -> Result<(SortRequest, SortArgsOn<'p, B>), Error>
where
    B: Backend + ?Sized,
    Problem<Listed, S, O, N>: ProblemOn<B>,
    E: Environment,
{
    // As the offsets layout over the slices joined.
    let total = listed::joined_len(segments);
    let buffers = SortBuffers {
        keys: total,
        values: values.map(|_| total),
        index_limit,
        outputs,
    };
    let (request, args) = problem.checked(Token::new(), buffers, env)?;
    check_per_segment("segments", segments.len(), &request.segments)?;
    if let Some(values) = values {
        listed::check_values(segments, values)?;
    }
    Ok((request, args))
}

/// [`sort_keys`](super::sort_keys) over a listed layout: segment `i` is `segments[i]`, sorted
/// into `out_keys` at the sum of the earlier segments' lengths (`out_keys` holds their total).
///
/// ```
/// use oxicub::{segmented_sort::{self, Problem}, Host};
/// use oxicub::params::{num_segments, order, segment_size};
/// use oxicub::env::Env;
///
/// let (a, b, c) = ([7u32, 1, 9], [4u32], [8u32, 2]);
/// let problem = Problem::listed(segment_size::PerSegment::<(), 0, 8>::new(()), order::Ascending, num_segments::uniform(3)?);
/// let mut sorted = [0u32; 6];
/// segmented_sort::sort_keys_listed(&Host::new(), &problem, &[&a[..], &b[..], &c[..]], &mut sorted[..], &Env::new())?
///     .check()?;
/// assert_eq!(sorted, [1, 7, 9, /**/ 4, /**/ 2, 8]);
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn sort_keys_listed<B, K, S, O, N, E>(
    backend: &B,
    problem: &Problem<Listed, S, O, N>,
    segments: &[B::Slice<'_, K>],
    out_keys: B::SliceMut<'_, K>,
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    Problem<Listed, S, O, N>: ProblemOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = [("out_keys", out_keys.len())];
    let no_values: Option<&[&[u8]]> = None;
    let (request, args) =
        checked_listed::<B, S, O, N, E>(problem, segments, no_values, None, &outputs, env)?;
    backend.segmented_sort_listed_checked::<K, u32>(
        Token::new(),
        &request,
        args,
        segments,
        ValuesIn::None,
        out_keys,
        None,
    )
}

/// [`sort_pairs`](super::sort_pairs) over a listed layout: segment `i` is `segments[i]` with
/// its values `values[i]` (of the same length), sorted into `out_keys` and `out_values` at the
/// sum of the earlier segments' lengths.
///
/// ```
/// use oxicub::{segmented_sort::{self, Problem}, Host};
/// use oxicub::params::{num_segments, order, segment_size};
/// use oxicub::env::Env;
///
/// let (a, b) = ([0.2f32, 0.7, 0.2], [0.9f32]);
/// let (ta, tb) = ([100u64, 101, 102], [200u64]);
/// let problem = Problem::listed(segment_size::PerSegment::<(), 0, 16>::new(()), order::Ascending, num_segments::uniform(2)?);
/// let (mut keys, mut tokens) = ([0f32; 4], [0u64; 4]);
/// segmented_sort::sort_pairs_listed(&Host::new(), &problem, &[&a[..], &b[..]], &[&ta[..], &tb[..]], &mut keys[..], &mut tokens[..], &Env::new())?
///     .check()?;
/// assert_eq!((keys, tokens), ([0.2, 0.2, 0.7, 0.9], [100, 102, 101, 200]));
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn sort_pairs_listed<B, K, V, S, O, N, E>(
    backend: &B,
    problem: &Problem<Listed, S, O, N>,
    segments: &[B::Slice<'_, K>],
    values: &[B::Slice<'_, V>],
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    V: DeviceValue,
    Problem<Listed, S, O, N>: ProblemOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    check_sort_value_width::<V>();
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_values", out_values.len()),
    ];
    let (request, args) =
        checked_listed::<B, S, O, N, E>(problem, segments, Some(values), None, &outputs, env)?;
    backend.segmented_sort_listed_checked(
        Token::new(),
        &request,
        args,
        segments,
        ValuesIn::Copy(values),
        out_keys,
        Some(out_values),
    )
}

/// [`sort_indices`](super::sort_indices) over a listed layout: each key's index within its
/// slice. See [`Problem::listed`] for an example.
pub fn sort_indices_listed<B, K, I, S, O, N, E>(
    backend: &B,
    problem: &Problem<Listed, S, O, N>,
    segments: &[B::Slice<'_, K>],
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    I: SourceIndex,
    Problem<Listed, S, O, N>: ProblemOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_indices", out_indices.len()),
    ];
    let no_values: Option<&[&[u8]]> = None;
    let limit = Some(I::MAX_ITEMS);
    let (request, args) =
        checked_listed::<B, S, O, N, E>(problem, segments, no_values, limit, &outputs, env)?;
    backend.segmented_sort_listed_checked(
        Token::new(),
        &request,
        args,
        segments,
        ValuesIn::Index(I::from_index),
        out_keys,
        Some(out_indices),
    )
}

/// [`sort_keys_in_place`](super::sort_keys_in_place) over a listed layout: each slice of
/// `segments` sorted where it lies. The backend joins the slices into one buffer, sorts it into
/// a second and copies each segment back.
///
/// ```
/// use oxicub::{segmented_sort::{self, Problem}, Host};
/// use oxicub::params::{num_segments, order, segment_size};
/// use oxicub::env::Env;
///
/// let (mut a, mut b) = ([3i16, -1, 2], [9i16, 0]);
/// let problem = Problem::listed(segment_size::PerSegment::<(), 0, 8>::new(()), order::Descending, num_segments::uniform(2)?);
/// segmented_sort::sort_keys_listed_in_place(&Host::new(), &problem, &mut [&mut a[..], &mut b[..]], &Env::new())?
///     .check()?;
/// assert_eq!((a, b), ([3, 2, -1], [9, 0]));
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn sort_keys_listed_in_place<B, K, S, O, N, E>(
    backend: &B,
    problem: &Problem<Listed, S, O, N>,
    segments: &mut [B::SliceMut<'_, K>],
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    Problem<Listed, S, O, N>: ProblemOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let no_values: Option<&[&[u8]]> = None;
    let (request, args) =
        checked_listed::<B, S, O, N, E>(problem, segments, no_values, None, &[], env)?;
    backend.segmented_sort_listed_in_place_checked::<K, u32>(
        Token::new(),
        &request,
        args,
        segments,
        None,
    )
}

/// [`sort_pairs_in_place`](super::sort_pairs_in_place) over a listed layout: each slice of
/// `segments` sorted where it lies, `values[i]` (of the same length) moved with it. As
/// [`sort_keys_listed_in_place`], through joined copies.
///
/// ```
/// use oxicub::{segmented_sort::{self, Problem}, Host};
/// use oxicub::params::{num_segments, order, segment_size};
/// use oxicub::env::Env;
///
/// let (mut a, mut b) = ([5u8, 5, 1], [2u8]);
/// let (mut va, mut vb) = ([10u32, 11, 12], [20u32]);
/// let problem = Problem::listed(segment_size::PerSegment::<(), 0, 8>::new(()), order::Ascending, num_segments::uniform(2)?);
/// segmented_sort::sort_pairs_listed_in_place(&Host::new(), &problem, &mut [&mut a[..], &mut b[..]], &mut [&mut va[..], &mut vb[..]], &Env::new())?
///     .check()?;
/// assert_eq!((a, va), ([1, 5, 5], [12, 10, 11]));
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn sort_pairs_listed_in_place<B, K, V, S, O, N, E>(
    backend: &B,
    problem: &Problem<Listed, S, O, N>,
    segments: &mut [B::SliceMut<'_, K>],
    values: &mut [B::SliceMut<'_, V>],
    env: &E,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: SegmentedSortBackend,
    K: RadixKey,
    V: DeviceValue,
    Problem<Listed, S, O, N>: ProblemOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    check_sort_value_width::<V>();
    let (request, args) =
        checked_listed::<B, S, O, N, E>(problem, segments, Some(&*values), None, &[], env)?;
    backend.segmented_sort_listed_in_place_checked(
        Token::new(),
        &request,
        args,
        segments,
        Some(values),
    )
}

/// A listed call on a backend with host-memory arguments ([`Host`](crate::Host),
/// [`AnyBackend`](crate::AnyBackend)): the slices joined into one buffer, run through the
/// backend's own offsets path.
#[allow(clippy::too_many_arguments)]
pub(super) fn sort_joined<B, K, V>(
    backend: &B,
    token: Token,
    request: &SortRequest,
    args: SortArgs<&[i64], &[i32], &[u8]>,
    segments: &[&[K]],
    values: ValuesIn<&[&[V]], V>,
    out_keys: &mut [K],
    out_values: Option<&mut [V]>,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: for<'x> SegmentedSortBackend<
            Values<'x, i64> = &'x [i64],
            Values<'x, i32> = &'x [i32],
            Values<'x, u8> = &'x [u8],
            Slice<'x, K> = &'x [K],
            Slice<'x, V> = &'x [V],
            SliceMut<'x, K> = &'x mut [K],
            SliceMut<'x, V> = &'x mut [V],
        > + ?Sized,
    K: RadixKey,
    V: DeviceValue,
{
    let keys = Joined::new(segments);
    let joined_values = match &values {
        ValuesIn::Copy(lists) => Some(Joined::new(lists)),
        _ => None,
    };
    let values = match (&joined_values, values) {
        (Some(joined), _) => ValuesIn::Copy(&joined.items[..]),
        (None, ValuesIn::Index(index)) => ValuesIn::Index(index),
        (None, _) => ValuesIn::None,
    };
    let args = SortArgs {
        segments: keys.args(&args.segments),
        ..args
    };
    backend.segmented_sort_checked::<K, V>(
        token,
        request,
        args,
        &keys.items[..],
        values,
        out_keys,
        out_values,
    )
}

/// A listed in-place call on a backend with host-memory arguments: the slices joined, sorted
/// into a copy of the joined buffer (a segment the sort leaves alone keeps its keys), and the
/// copy's segments written back.
pub(super) fn sort_joined_in_place<B, K, V>(
    backend: &B,
    token: Token,
    request: &SortRequest,
    args: SortArgs<&[i64], &[i32], &[u8]>,
    segments: &mut [&mut [K]],
    values: Option<&mut [&mut [V]]>,
) -> Result<Pending<MergeStatistics>, Error>
where
    B: for<'x> SegmentedSortBackend<
            Values<'x, i64> = &'x [i64],
            Values<'x, i32> = &'x [i32],
            Values<'x, u8> = &'x [u8],
            Slice<'x, K> = &'x [K],
            Slice<'x, V> = &'x [V],
            SliceMut<'x, K> = &'x mut [K],
            SliceMut<'x, V> = &'x mut [V],
        > + ?Sized,
    K: RadixKey,
    V: DeviceValue,
{
    let keys = Joined::new(&segments.iter().map(|s| &**s).collect::<Vec<_>>());
    let joined_values = values
        .as_deref()
        .map(|lists| Joined::new(&lists.iter().map(|s| &**s).collect::<Vec<_>>()));
    let mut sorted = keys.items.clone();
    let mut sorted_values = joined_values.as_ref().map(|joined| joined.items.clone());
    let values_in = match &joined_values {
        Some(joined) => ValuesIn::Copy(&joined.items[..]),
        None => ValuesIn::None,
    };
    let args = SortArgs {
        segments: keys.args(&args.segments),
        ..args
    };
    let pending = backend.segmented_sort_checked::<K, V>(
        token,
        request,
        args,
        &keys.items[..],
        values_in,
        &mut sorted[..],
        sorted_values.as_deref_mut(),
    )?;
    split_into(&sorted, segments);
    if let (Some(sorted), Some(lists)) = (&sorted_values, values) {
        split_into(sorted, lists);
    }
    Ok(pending)
}

/// Copies `joined` back into the slices it was joined from.
fn split_into<T: Copy>(joined: &[T], lists: &mut [&mut [T]]) {
    let mut at = 0;
    for list in lists {
        list.copy_from_slice(&joined[at..at + list.len()]);
        at += list.len();
    }
}
