//! The listed layout: every segment is its own slice (on [`Cuda`](crate::Cuda), its own device view), the
//! seeds' "iterator of iterators". A KV cache whose pages live in separate allocations, or one
//! score tensor per request, is ranked in one call without first being copied together.
//!
//! On [`Cuda`](crate::Cuda) the kernels read each segment at its own address (the device receives one
//! address per segment, uploaded with the call); on [`Host`](crate::Host) and [`AnyBackend`](crate::AnyBackend) the slices
//! are joined into one buffer and run as the offsets layout (the host is the oracle; the
//! [`AnyBackend`](crate::AnyBackend) copies to the device anyway).

use oxicub_env::Environment;

use super::{with_fill, BatchedTopKBackend, Problem, ProblemOn};
use crate::backend::{Buffer, DeviceValue};
use crate::contract::{self, BatchedTopKArgs, BatchedTopKRequest};
use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::segments::listed::{self, Joined};
use crate::segments::{Listed, Outcome, Segments};
use crate::values::{check_topk_value_width, SourceIndex, ValuesIn};
use crate::Error;

impl<S, K, D, N> Problem<Listed, S, K, D, N> {
    /// Segment `i` is the `i`-th slice of the list passed with the call (at least
    /// `num_segments` slices; on [`Cuda`](crate::Cuda), `CudaView`s of any allocations). `segment_sizes`
    /// bounds the slices' lengths, as with [`Problem::offsets`]:
    /// `segment_size::PerSegment::<(), MIN, MAX>::new(())`, or a `Static`/`Uniform` size every
    /// slice must have.
    ///
    /// ```
    /// use oxicub::{batched_topk::{self, Problem}, Host};
    /// use oxicub::params::{direction, k, num_segments, segment_size};
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
    /// batched_topk::select_indices_listed(&Host::new(), &problem, &[&a[..], &b[..]], &mut top[..], &mut at[..], &oxicub::env::Env::new())?
    ///     .check()?;
    /// assert_eq!((top, at), ([0.9, 0.5, 3.0, -1.0], [1, 0, 0, 1]));
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn listed(
        segment_sizes: S,
        k: K,
        direction: D,
        num_segments: N,
    ) -> Problem<Listed, S, K, D, N> {
        Problem::new(Segments::listed(segment_sizes, num_segments), k, direction)
    }
}

/// A listed call on a backend with host-memory arguments ([`Host`](crate::Host),
/// [`AnyBackend`](crate::AnyBackend)): the slices joined into one buffer, run through the
/// backend's own offsets path.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_joined<B, K, V>(
    backend: &B,
    request: &BatchedTopKRequest,
    args: BatchedTopKArgs<&[i64], &[i32], &[u8]>,
    segments: &[&[K]],
    values: ValuesIn<&[&[V]], V>,
    out_keys: &mut [K],
    out_values: Option<&mut [V]>,
) -> Result<Outcome, Error>
where
    B: for<'x> BatchedTopKBackend<
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
    let (joined_values, values) = match values {
        ValuesIn::None => (None, None),
        ValuesIn::Copy(lists) => (Some(Joined::new(lists)), None),
        ValuesIn::Index(index) => (None, Some(index)),
    };
    let values = match (&joined_values, values) {
        (Some(joined), _) => ValuesIn::Copy(&joined.items[..]),
        (None, Some(index)) => ValuesIn::Index(index),
        (None, None) => ValuesIn::None,
    };
    let args = BatchedTopKArgs {
        segments: keys.args(&args.segments),
        ..args
    };
    backend.batched_topk_checked::<K, V>(
        Token::new(),
        request,
        args,
        &keys.items[..],
        values,
        out_keys,
        out_values,
    )
}

/// [`select_keys`](super::select_keys) over a listed layout: segment `i` is `segments[i]`.
///
/// ```
/// use oxicub::{batched_topk::{self, Problem}, Host};
/// use oxicub::params::{direction, k, num_segments, segment_size};
///
/// let (a, b, c) = ([7u32, 1, 9], [4u32], [2u32, 8]);
/// let problem = Problem::listed(segment_size::PerSegment::<(), 0, 8>::new(()), k::uniform(2)?, direction::Min, num_segments::uniform(3)?);
/// let mut low = [0u32; 6];
/// batched_topk::select_keys_listed(&Host::new(), &problem, &[&a[..], &b[..], &c[..]], &mut low[..], &oxicub::env::Env::new())?
///     .check()?;
/// assert_eq!(low, [1, 7, 4, 0, 2, 8]); // segment 1 holds one key: k is clamped to 1
/// # Ok::<(), oxicub::Error>(())
/// ```
pub fn select_keys_listed<B, K, S, Kp, D, N, E>(
    backend: &B,
    problem: &Problem<Listed, S, Kp, D, N>,
    segments: &[B::Slice<'_, K>],
    out_keys: B::SliceMut<'_, K>,
    env: &E,
) -> Result<Outcome, Error>
where
    B: BatchedTopKBackend,
    K: RadixKey,
    Problem<Listed, S, Kp, D, N>: ProblemOn<B>,
    E: Environment,
{
    let outputs = [("out_keys", out_keys.len())];
    let (request, args) = contract::checked_batched_topk_listed::<B, S, Kp, D, N, E>(
        problem, segments, env, &outputs,
    )?;
    let request = with_fill::<K, u32>(request, false)?;
    backend.batched_topk_listed_checked::<K, u32>(
        Token::new(),
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
/// use oxicub::{batched_topk::{self, Problem}, Host};
/// use oxicub::params::{direction, k, num_segments, segment_size};
///
/// let (a, b) = ([0.2f32, 0.7], [0.9f32, 0.1, 0.5]);
/// let (ta, tb) = ([100u64, 101], [200u64, 201, 202]);
/// let problem = Problem::listed(segment_size::PerSegment::<(), 0, 16>::new(()), k::Static::<1>::new(), direction::Max, num_segments::uniform(2)?);
/// let (mut top, mut token) = ([0f32; 2], [0u64; 2]);
/// batched_topk::select_pairs_listed(&Host::new(), &problem, &[&a[..], &b[..]], &[&ta[..], &tb[..]], &mut top[..], &mut token[..], &oxicub::env::Env::new())?
///     .check()?;
/// assert_eq!((top, token), ([0.7, 0.9], [101, 200]));
/// # Ok::<(), oxicub::Error>(())
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
    B: BatchedTopKBackend,
    K: RadixKey,
    V: DeviceValue,
    Problem<Listed, S, Kp, D, N>: ProblemOn<B>,
    E: Environment,
{
    check_topk_value_width::<V>();
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_values", out_values.len()),
    ];
    let (request, args) = contract::checked_batched_topk_listed::<B, S, Kp, D, N, E>(
        problem, segments, env, &outputs,
    )?;
    let request = with_fill::<K, u32>(request, false)?;
    listed::check_values(segments, values)?;
    backend.batched_topk_listed_checked(
        Token::new(),
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
    B: BatchedTopKBackend,
    K: RadixKey,
    I: SourceIndex,
    Problem<Listed, S, Kp, D, N>: ProblemOn<B>,
    E: Environment,
{
    let outputs = [
        ("out_keys", out_keys.len()),
        ("out_indices", out_indices.len()),
    ];
    let (request, args) = contract::checked_batched_topk_listed::<B, S, Kp, D, N, E>(
        problem, segments, env, &outputs,
    )?;
    let request = with_fill::<K, I>(request, true)?;
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
        Token::new(),
        &request,
        args,
        segments,
        ValuesIn::Index(I::from_index),
        out_keys,
        Some(out_indices),
    )
}
