//! The listed layout: every segment is its own slice (on [`Cuda`](crate::Cuda), its own device view), the
//! seeds' "iterator of iterators". A KV cache whose pages live in separate allocations, or one
//! score tensor per request, is ranked in one call without first being copied together.
//!
//! On [`Cuda`](crate::Cuda) the kernels read each segment at its own address (the device receives one
//! address per segment, uploaded with the call); on [`Host`](crate::Host) and [`AnyBackend`](crate::AnyBackend) the slices
//! are joined into one buffer and run as the offsets layout (the host is the oracle; the
//! [`AnyBackend`](crate::AnyBackend) copies to the device anyway).

use super::{check_value_size, checked, Args, LayoutArg, Outcome, PerSegmentLengths, Problem};
use super::{BatchedTopKBackend, Directions, Layout, NumSegments, Request, SegmentK, SegmentSizes};
use crate::backend::Buffer;
use crate::radix::RadixKey;
use crate::topk::{SourceIndex, ValuesIn};
use crate::Error;
use oxicub_env::Environment;

/// The listed layout: segment `i` is the `i`-th slice of the list passed to
/// [`select_keys_listed`], [`select_pairs_listed`] or [`select_indices_listed`]. Build the
/// problem with [`Problem::listed`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Listed {
    _private: (),
}

impl<B: BatchedTopKBackend + ?Sized> Layout<B> for Listed {
    fn arg(&self) -> LayoutArg<B::Ints<'_>> {
        LayoutArg::Listed
    }
}

impl<S, K, D, N> Problem<Listed, S, K, D, N> {
    /// Segment `i` is the `i`-th slice of the list passed with the call (at least
    /// `num_segments` slices; on [`Cuda`](crate::Cuda), `CudaView`s of any allocations). `segment_sizes`
    /// bounds the slices' lengths, as with [`Problem::offsets`]:
    /// `segment_size::PerSegment::<(), MIN, MAX>::new(())`, or a `Static`/`Uniform` size every
    /// slice must have.
    ///
    /// ```
    /// use oxicub_algorithms::{batched_topk::{self, Problem}, Host};
    /// use oxicub_params::{direction, k, num_segments, segment_size};
    ///
    /// // Two requests' scores, each in its own buffer.
    /// let (a, b) = ([0.5f32, 0.9, 0.1], [3.0f32, -1.0]);
    /// let problem = Problem::listed(
    ///     segment_size::PerSegment::<(), 0, 4096>::new(()),
    ///     k::Static::<2>::new(),
    ///     direction::Max,
    ///     num_segments::uniform(2)?,
    /// );
    /// let (mut top, mut at) = ([0f32; 4], [0u32; 4]);
    /// batched_topk::select_indices_listed(&Host::new(), &problem, &[&a[..], &b[..]], &mut top[..], &mut at[..], &oxicub_env::Env::new())?
    ///     .check()?;
    /// assert_eq!((top, at), ([0.9, 0.5, 3.0, -1.0], [1, 0, 0, 1]));
    /// # Ok::<(), oxicub_algorithms::Error>(())
    /// ```
    pub fn listed(
        segment_sizes: S,
        k: K,
        direction: D,
        num_segments: N,
    ) -> Problem<Listed, S, K, D, N> {
        Problem {
            layout: Listed::default(),
            segment_sizes,
            k,
            direction,
            num_segments,
            out_stride: None,
        }
    }
}

/// A listed call on a backend with host-memory arguments ([`Host`](crate::Host),
/// [`AnyBackend`](crate::AnyBackend)): the slices joined into one buffer, run through the
/// backend's own offsets path.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_joined<B, K, V>(
    backend: &B,
    request: &Request,
    args: Args<'_, B>,
    segments: &[&[K]],
    values: ValuesIn<&[&[V]], V>,
    out_keys: &mut [K],
    out_values: Option<&mut [V]>,
) -> Result<Outcome, Error>
where
    B: for<'x> BatchedTopKBackend<
            Ints<'x> = &'x [i64],
            Bytes<'x> = &'x [u8],
            Int<'x> = &'x i64,
            Slice<'x, K> = &'x [K],
            Slice<'x, V> = &'x [V],
            SliceMut<'x, K> = &'x mut [K],
            SliceMut<'x, V> = &'x mut [V],
        > + ?Sized,
    K: RadixKey,
    V: Copy + Send + Sync + 'static,
{
    let joined = Joined::new(segments, values);
    backend.batched_topk_checked::<K, V>(
        request,
        joined.args(&args),
        &joined.keys[..],
        joined.values(),
        out_keys,
        out_values,
    )
}

/// The list's slices joined into one buffer, with the offsets of each: how the host backends
/// run a listed problem.
struct Joined<K, V> {
    keys: Vec<K>,
    values: Option<Vec<V>>,
    index: Option<fn(u64) -> V>,
    begin: Vec<i64>,
    end: Vec<i64>,
}

impl<K: Copy, V: Copy> Joined<K, V> {
    fn new(segments: &[&[K]], values: ValuesIn<&[&[V]], V>) -> Joined<K, V> {
        let total: usize = segments.iter().map(|s| s.len()).sum();
        let mut keys = Vec::with_capacity(total);
        let (mut begin, mut end) = (Vec::new(), Vec::new());
        for segment in segments {
            begin.push(keys.len() as i64);
            keys.extend_from_slice(segment);
            end.push(keys.len() as i64);
        }
        let (values, index) = match values {
            ValuesIn::None => (None, None),
            ValuesIn::Copy(lists) => (Some(lists.concat()), None),
            ValuesIn::Index(index) => (None, Some(index)),
        };
        Joined {
            keys,
            values,
            index,
            begin,
            end,
        }
    }

    /// The call's arguments (of a backend with host-memory arguments) with the offsets of the
    /// joined buffer as the layout.
    fn args<'s, 'a: 's, B>(&'s self, args: &Args<'a, B>) -> Args<'s, B>
    where
        B: for<'x> BatchedTopKBackend<
                Ints<'x> = &'x [i64],
                Bytes<'x> = &'x [u8],
                Int<'x> = &'x i64,
            > + ?Sized,
    {
        Args {
            layout: LayoutArg::Offsets {
                begin: &self.begin[..],
                end: &self.end[..],
            },
            sizes: args.sizes,
            k: args.k,
            direction: args.direction,
            num_segments: args.num_segments,
        }
    }

    fn values(&self) -> ValuesIn<&[V], V> {
        match (&self.values, self.index) {
            (Some(values), _) => ValuesIn::Copy(values),
            (None, Some(index)) => ValuesIn::Index(index),
            (None, None) => ValuesIn::None,
        }
    }
}

/// The front check of a listed call: the problem's, then the list's length.
fn checked_listed<'p, B, K, S, Kp, D, N, E>(
    problem: &'p Problem<Listed, S, Kp, D, N>,
    segments: &[B::Slice<'_, K>],
    env: &E,
    outputs: &[(&'static str, usize)],
) -> Result<(super::Request, Args<'p, B>), Error>
where
    B: BatchedTopKBackend + PerSegmentLengths,
    S: SegmentSizes<B>,
    Kp: SegmentK<B>,
    D: Directions<B>,
    N: NumSegments<B>,
    E: Environment,
{
    // As the offsets layout over the slices joined: the total bounds every segment.
    let total = segments
        .iter()
        .fold(0usize, |sum, s| sum.saturating_add(s.len()));
    let (request, args) = checked::<B, Listed, S, Kp, D, N, E>(problem, total, env, outputs)?;
    if (segments.len() as u64) < request.max_segments {
        return Err(Error::BufferTooSmall {
            arg: "segments",
            len: segments.len(),
            required: request.max_segments as usize,
            required_from: "num_segments (its upper bound when deferred)",
        });
    }
    Ok((request, args))
}

/// [`select_keys`](super::select_keys) over a listed layout: segment `i` is `segments[i]`.
///
/// ```
/// use oxicub_algorithms::{batched_topk::{self, Problem}, Host};
/// use oxicub_params::{direction, k, num_segments, segment_size};
///
/// let (a, b, c) = ([7u32, 1, 9], [4u32], [2u32, 8]);
/// let problem = Problem::listed(segment_size::PerSegment::<(), 0, 8>::new(()), k::uniform(2)?, direction::Min, num_segments::uniform(3)?);
/// let mut low = [0u32; 6];
/// batched_topk::select_keys_listed(&Host::new(), &problem, &[&a[..], &b[..], &c[..]], &mut low[..], &oxicub_env::Env::new())?
///     .check()?;
/// assert_eq!(low, [1, 7, 4, 0, 2, 8]); // segment 1 holds one key: k is clamped to 1
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
pub fn select_keys_listed<B, K, S, Kp, D, N, E>(
    backend: &B,
    problem: &Problem<Listed, S, Kp, D, N>,
    segments: &[B::Slice<'_, K>],
    out_keys: B::SliceMut<'_, K>,
    env: &E,
) -> Result<Outcome, Error>
where
    B: BatchedTopKBackend + PerSegmentLengths,
    K: RadixKey,
    S: SegmentSizes<B>,
    Kp: SegmentK<B>,
    D: Directions<B>,
    N: NumSegments<B>,
    E: Environment,
{
    let outputs = [("out_keys", out_keys.len())];
    let (request, args) = checked_listed::<B, K, S, Kp, D, N, E>(problem, segments, env, &outputs)?;
    backend.batched_topk_listed_checked::<K, u32>(
        &request,
        args,
        segments,
        ValuesIn::None,
        out_keys,
        None,
    )
}

/// [`select_pairs`](super::select_pairs) over a listed layout: segment `i` is `segments[i]`
/// with its values `values[i]` (of the same length).
///
/// ```
/// use oxicub_algorithms::{batched_topk::{self, Problem}, Host};
/// use oxicub_params::{direction, k, num_segments, segment_size};
///
/// let (a, b) = ([0.2f32, 0.7], [0.9f32, 0.1, 0.5]);
/// let (ta, tb) = ([100u64, 101], [200u64, 201, 202]);
/// let problem = Problem::listed(segment_size::PerSegment::<(), 0, 16>::new(()), k::Static::<1>::new(), direction::Max, num_segments::uniform(2)?);
/// let (mut top, mut token) = ([0f32; 2], [0u64; 2]);
/// batched_topk::select_pairs_listed(&Host::new(), &problem, &[&a[..], &b[..]], &[&ta[..], &tb[..]], &mut top[..], &mut token[..], &oxicub_env::Env::new())?
///     .check()?;
/// assert_eq!((top, token), ([0.7, 0.9], [101, 200]));
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn select_pairs_listed<B, K, V, S, Kp, D, N, E>(
    backend: &B,
    problem: &Problem<Listed, S, Kp, D, N>,
    segments: &[B::Slice<'_, K>],
    values: &[B::Slice<'_, V>],
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    env: &E,
) -> Result<Outcome, Error>
where
    B: BatchedTopKBackend + PerSegmentLengths,
    K: RadixKey,
    V: Copy + Send + Sync + 'static,
    S: SegmentSizes<B>,
    Kp: SegmentK<B>,
    D: Directions<B>,
    N: NumSegments<B>,
    E: Environment,
{
    check_value_size::<V>();
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_values", out_values.len()),
    ];
    let (request, args) = checked_listed::<B, K, S, Kp, D, N, E>(problem, segments, env, &outputs)?;
    Error::check_len("values", values.len(), segments.len(), "segments.len()")?;
    for (segment, value) in segments.iter().zip(values) {
        Error::check_len(
            "values",
            value.len(),
            segment.len(),
            "the length of each values[i] must be that of segments[i]",
        )?;
    }
    backend.batched_topk_listed_checked(
        &request,
        args,
        segments,
        ValuesIn::Copy(values),
        out_keys,
        Some(out_values),
    )
}

/// [`select_indices`](super::select_indices) over a listed layout: each selected key's index
/// within its slice.
///
/// See [`Problem::listed`] for an example.
pub fn select_indices_listed<B, K, I, S, Kp, D, N, E>(
    backend: &B,
    problem: &Problem<Listed, S, Kp, D, N>,
    segments: &[B::Slice<'_, K>],
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    env: &E,
) -> Result<Outcome, Error>
where
    B: BatchedTopKBackend + PerSegmentLengths,
    K: RadixKey,
    I: SourceIndex,
    S: SegmentSizes<B>,
    Kp: SegmentK<B>,
    D: Directions<B>,
    N: NumSegments<B>,
    E: Environment,
{
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_indices", out_indices.len()),
    ];
    let (request, args) = checked_listed::<B, K, S, Kp, D, N, E>(problem, segments, env, &outputs)?;
    let largest = segments.iter().map(|s| s.len() as u64).max().unwrap_or(0);
    if largest > I::MAX_ITEMS {
        return Err(Error::TooLarge {
            arg: "segments",
            len: largest,
            max: I::MAX_ITEMS,
            reason: "the index type cannot hold every index within a segment; use u64 or i64",
        });
    }
    backend.batched_topk_listed_checked(
        &request,
        args,
        segments,
        ValuesIn::Index(I::from_index),
        out_keys,
        Some(out_indices),
    )
}

/// The element address of a device view of `K`s, or `None` when it is not aligned to `K`.
pub(super) fn element_address<K>(address: u64) -> Option<i64> {
    let size = std::mem::size_of::<K>() as u64;
    (address % size == 0).then_some((address / size) as i64)
}
