//! Batched set operations: one operation over many pairs of sorted lists in one call (pair `i`
//! is `a`'s segment `i` and `b`'s segment `i`), each pair's result compacted after the one
//! before, its place in `out_offsets`. No peer library offers it; the GPU runs the whole batch
//! as one operation over composite keys (`docs/design/sets.md`, "Batched").

use oxicub_env::Environment;
use oxicub_params::{role, ParamFor, SingleValue};

use super::{checked_request, SetOperation, SetOrder, SetOutputs, SetValues, SetsBackend};
use crate::backend::{Backend, Buffer, DeviceValue, PerSegmentOn, ValuesOn};
use crate::contract::sets::{checked_batch, BatchArgsOn, BatchRequest, SetRequest};
use crate::contract::{SortOrdering, SortTieBreak};
use crate::radix::RadixKey;
use crate::sealed::{Sealed, Token};
use crate::segments::{Layout, Offsets, Pending, Strided};
use crate::values::{SourceIndex, ValuesIn};
use crate::Error;

/// A layout a batched set operation reads its segments from: [`Strided`] or [`Offsets`] (each
/// segment where it lies in its input, in order and disjoint).
#[diagnostic::on_unimplemented(
    message = "a batched set operation cannot read segments laid out as `{Self}`",
    label = "each input's segments must lie in that input, in order",
    note = "pass `segments::Strided::new(..)` or `segments::Offsets::new(begin, end)`; listed \
            segments can be joined into one buffer with offsets first"
)]
pub trait BatchLayout: Sealed {}
impl BatchLayout for Strided {}
impl<O> BatchLayout for Offsets<O> {}

/// The pairs of a batched set operation: `a`'s segments and `b`'s, in the shared segment
/// vocabulary ([`crate::segments`]), and their number.
///
/// Each input's segments must be in order and disjoint (`begin[i] >= end[i - 1]`; gaps between
/// them are allowed and ignored), as a strided layout always is. An invalid pair (offsets out
/// of order or past the input, a size outside its bounds, a segment overlapping the one before)
/// fails the whole call with [`Error::InvalidSegment`] naming the pair and the input
/// (`a_offsets`, `b_segment_sizes`, ...).
///
/// ```
/// use oxicub::sets::Batch;
/// use oxicub::segments::{Offsets, Strided};
/// use oxicub::params::{num_segments, segment_size};
///
/// // The rows of a CSR matrix (row_ptr) against 4 dense rows of 8 candidates each.
/// let row_ptr = [0i64, 3, 3, 7, 9];
/// let pairs = Batch::new(
///     Offsets::new(&row_ptr[..4], &row_ptr[1..]),
///     segment_size::PerSegment::<()>::new(()),
///     Strided::new(8),
///     segment_size::Static::<8>::new(),
///     num_segments::uniform(4)?,
/// );
/// # let _ = pairs;
/// # Ok::<(), oxicub::params::ParamError>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Batch<LA, SA, LB, SB, N> {
    pub(crate) a_layout: LA,
    pub(crate) a_sizes: SA,
    pub(crate) b_layout: LB,
    pub(crate) b_sizes: SB,
    pub(crate) num_segments: N,
}

impl<LA: BatchLayout, SA, LB: BatchLayout, SB, N> Batch<LA, SA, LB, SB, N> {
    /// `num_segments` pairs: pair `i` is `a`'s segment `i` (in `a_layout`, its size bounded by
    /// `a_sizes`) and `b`'s segment `i`. Sizes and counts are the segment vocabulary's: with
    /// offsets, `segment_size::PerSegment::<(), MIN, MAX>::new(())` bounds `end - begin`;
    /// a strided layout takes `Static`, `Uniform` or per-segment sizes.
    pub fn new(a_layout: LA, a_sizes: SA, b_layout: LB, b_sizes: SB, num_segments: N) -> Self {
        Batch {
            a_layout,
            a_sizes,
            b_layout,
            b_sizes,
            num_segments,
        }
    }

    /// The number of pairs.
    pub fn num_segments(&self) -> &N {
        &self.num_segments
    }
}

/// A [`Batch`] every argument of which backend `B` can read (offsets and per-segment sizes in
/// the backend's memory).
#[diagnostic::on_unimplemented(
    message = "the `{B}` backend cannot run the batch `{Self}`",
    note = "every argument of the batch must be readable on the backend: offsets and \
            per-segment sizes in host slices on `Host` and `AnyBackend`, in `CudaView`s on `Cuda`"
)]
pub trait BatchOn<B: Backend + ?Sized>: Sealed {
    /// The front check of a batched call's segments: only it builds a request.
    #[doc(hidden)]
    fn checked<E: Environment>(
        &self,
        token: Token,
        set: SetRequest,
        inputs: (usize, usize),
        out_offsets: usize,
        env: &E,
    ) -> Result<(BatchRequest, BatchArgsOn<'_, B>), Error>;
}

impl<LA, SA, LB, SB, N> Sealed for Batch<LA, SA, LB, SB, N> {}

impl<B, LA, SA, LB, SB, N> BatchOn<B> for Batch<LA, SA, LB, SB, N>
where
    B: Backend + ?Sized,
    LA: Layout<B> + BatchLayout,
    LB: Layout<B> + BatchLayout,
    SA: ParamFor<role::SegmentSize> + PerSegmentOn<B>,
    SB: ParamFor<role::SegmentSize> + PerSegmentOn<B>,
    N: ParamFor<role::NumSegments> + SingleValue + ValuesOn<B>,
{
    fn checked<E: Environment>(
        &self,
        _: Token,
        set: SetRequest,
        (a, b): (usize, usize),
        out_offsets: usize,
        env: &E,
    ) -> Result<(BatchRequest, BatchArgsOn<'_, B>), Error> {
        let a = ((&self.a_layout, &self.a_sizes, &self.num_segments), a);
        let b = ((&self.b_layout, &self.b_sizes, &self.num_segments), b);
        checked_batch(set, a, b, out_offsets, env)
    }
}

/// The keys of `operation` over every pair of `batch` (pair `i`: `a`'s segment `i` and `b`'s
/// segment `i`, each sorted in `order`), pair `i`'s written to
/// `out_keys[out_offsets[i] .. out_offsets[i + 1]]`, the pairs one after another from
/// `out_offsets[0] = 0`. The checked result is the number written (`out_offsets[n]`).
///
/// The semantics of each pair are [`keys`](super::keys)'s. The outputs need room for the
/// operation's bound over the whole of `a` and `b` (the segments are disjoint, so it bounds
/// the sum of the pairs' results); `out_offsets` needs `num_segments + 1` elements (its upper
/// bound when deferred). A key out of order within a segment is [`Error::NotSorted`] at its
/// position in `a` or `b` (keys between segments are never read as keys: their order does not
/// matter).
///
/// ```
/// use oxicub::{sets::{self, op, Batch}, segments::Offsets, Host};
/// use oxicub::env::Env;
/// use oxicub::params::{num_segments, order, segment_size};
///
/// // Adjacency lists intersected pair by pair: common neighbours of (0, 1) and (2, 3).
/// let a = [1u32, 4, 6, 9, /**/ 2, 3];
/// let b = [4u32, 9, 10, /**/ 3, 7];
/// let (a_ptr, b_ptr) = ([0i64, 4, 6], [0i64, 3, 5]);
/// let batch = Batch::new(
///     Offsets::new(&a_ptr[..2], &a_ptr[1..]),
///     segment_size::PerSegment::<()>::new(()),
///     Offsets::new(&b_ptr[..2], &b_ptr[1..]),
///     segment_size::PerSegment::<()>::new(()),
///     num_segments::uniform(2)?,
/// );
/// let (mut out, mut at) = ([0u32; 5], [0i64; 3]);
/// let n = sets::batched_keys(&Host::new(), op::Intersection, order::Ascending, &batch, &a[..], &b[..], &mut out[..], &mut at[..], &Env::new())?
///     .check()?;
/// assert_eq!((n, &out[..n], at), (3, &[4, 9, 3][..], [0, 2, 3]));
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn batched_keys<B, K, Op, O, P, E>(
    backend: &B,
    operation: Op,
    order: O,
    batch: &P,
    a: B::Slice<'_, K>,
    b: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_offsets: B::SliceMut<'_, i64>,
    env: &E,
) -> Result<Pending<usize>, Error>
where
    B: SetsBackend,
    K: RadixKey,
    Op: SetOperation,
    O: SetOrder,
    P: BatchOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = SetOutputs {
        keys: out_keys,
        values: None,
        count: None,
    };
    run_batch::<B, K, u32, Op, O, P, E>(
        backend,
        operation,
        order,
        batch,
        a,
        b,
        ValuesIn::None,
        None,
        outputs,
        out_offsets,
        env,
    )
}

/// [`batched_keys`], each key carrying its value (`a_values[i]` belongs to `a[i]`,
/// `b_values[j]` to `b[j]`), written as [`pairs`](super::pairs) writes them.
///
/// ```
/// use oxicub::{sets::{self, op, Batch}, segments::Strided, Host};
/// use oxicub::env::Env;
/// use oxicub::params::{num_segments, order, segment_size};
///
/// // Two rows of three (scores descending) merged with two rows of two.
/// let (a, a_from) = ([9i32, 5, 1, /**/ 8, 8, 2], [0u8, 0, 0, 0, 0, 0]);
/// let (b, b_from) = ([7i32, 5, /**/ 8, 3], [1u8, 1, 1, 1]);
/// let batch = Batch::new(
///     Strided::new(3),
///     segment_size::Static::<3>::new(),
///     Strided::new(2),
///     segment_size::Static::<2>::new(),
///     num_segments::uniform(2)?,
/// );
/// let (mut keys, mut from, mut at) = ([0i32; 10], [9u8; 10], [0i64; 3]);
/// sets::batched_pairs(&Host::new(), op::Merge, order::Descending, &batch, &a[..], &a_from[..], &b[..], &b_from[..], &mut keys[..], &mut from[..], &mut at[..], &Env::new())?
///     .check()?;
/// assert_eq!(keys, [9, 7, 5, 5, 1, /**/ 8, 8, 8, 3, 2]);
/// assert_eq!(from, [0, 1, 0, 1, 0, /**/ 0, 0, 1, 1, 0]);
/// assert_eq!(at, [0, 5, 10]);
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn batched_pairs<B, K, V, Op, O, P, E>(
    backend: &B,
    operation: Op,
    order: O,
    batch: &P,
    a: B::Slice<'_, K>,
    a_values: B::Slice<'_, V>,
    b: B::Slice<'_, K>,
    b_values: B::Slice<'_, V>,
    out_keys: B::SliceMut<'_, K>,
    out_values: B::SliceMut<'_, V>,
    out_offsets: B::SliceMut<'_, i64>,
    env: &E,
) -> Result<Pending<usize>, Error>
where
    B: SetsBackend,
    K: RadixKey,
    V: DeviceValue,
    Op: SetOperation,
    O: SetOrder,
    P: BatchOn<B>,
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
    run_batch(
        backend,
        operation,
        order,
        batch,
        a,
        b,
        values,
        None,
        outputs,
        out_offsets,
        env,
    )
}

/// [`batched_keys`], each key with its source position in the whole inputs: `i` for `a[i]`,
/// `a.len() + j` for `b[j]` (as [`indices`](super::indices)), as `u32`, `i32`, `u64` or `i64`.
///
/// ```
/// use oxicub::{sets::{self, op, Batch}, segments::Offsets, Host};
/// use oxicub::env::Env;
/// use oxicub::params::{num_segments, order, segment_size};
///
/// // Segments with gaps between them: a[2] and b[0] belong to no pair.
/// let (a, b) = ([1u16, 5, 0, 5, 6], [9u16, 5, 6]);
/// let (a_begin, a_end, b_begin, b_end) = ([0i64, 3], [2i64, 5], [1i64, 2], [2i64, 3]);
/// let batch = Batch::new(
///     Offsets::new(&a_begin[..], &a_end[..]),
///     segment_size::PerSegment::<()>::new(()),
///     Offsets::new(&b_begin[..], &b_end[..]),
///     segment_size::PerSegment::<()>::new(()),
///     num_segments::uniform(2)?,
/// );
/// let (mut keys, mut from, mut at) = ([0u16; 5], [0u32; 5], [0i64; 3]);
/// let n = sets::batched_indices(&Host::new(), op::Difference, order::Ascending, &batch, &a[..], &b[..], &mut keys[..], &mut from[..], &mut at[..], &Env::new())?
///     .check()?;
/// assert_eq!((n, &keys[..n], &from[..n], at), (2, &[1, 5][..], &[0, 3][..], [0, 1, 2]));
/// # Ok::<(), oxicub::Error>(())
/// ```
#[allow(clippy::too_many_arguments)]
pub fn batched_indices<B, K, I, Op, O, P, E>(
    backend: &B,
    operation: Op,
    order: O,
    batch: &P,
    a: B::Slice<'_, K>,
    b: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    out_offsets: B::SliceMut<'_, i64>,
    env: &E,
) -> Result<Pending<usize>, Error>
where
    B: SetsBackend,
    K: RadixKey,
    I: SourceIndex,
    Op: SetOperation,
    O: SetOrder,
    P: BatchOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let outputs = SetOutputs {
        keys: out_keys,
        values: Some(out_indices),
        count: None,
    };
    let values = ValuesIn::Index(I::from_index);
    run_batch(
        backend,
        operation,
        order,
        batch,
        a,
        b,
        values,
        Some(I::MAX_ITEMS),
        outputs,
        out_offsets,
        env,
    )
}

/// The body of every batched entry point: [`super::run_checked`]'s front check of the
/// operation, the batch's segments, then the backend.
#[allow(clippy::too_many_arguments)]
fn run_batch<B, K, V, Op, O, P, E>(
    backend: &B,
    operation: Op,
    order: O,
    batch: &P,
    a: B::Slice<'_, K>,
    b: B::Slice<'_, K>,
    values: SetValues<'_, '_, B, V>,
    index_limit: Option<u64>,
    outputs: SetOutputs<'_, '_, '_, B, K, V>,
    out_offsets: B::SliceMut<'_, i64>,
    env: &E,
) -> Result<Pending<usize>, Error>
where
    B: SetsBackend,
    K: RadixKey,
    V: DeviceValue,
    Op: SetOperation,
    O: SetOrder,
    P: BatchOn<B>,
    E: Environment,
    E::Ordering: SortOrdering,
    E::TieBreak: SortTieBreak,
{
    let set = checked_request(
        &operation,
        &order,
        &a,
        &b,
        &values,
        index_limit,
        &outputs,
        env,
    )?;
    let inputs = (a.len(), b.len());
    let (request, args) = batch.checked(Token::new(), set, inputs, out_offsets.len(), env)?;
    backend.batched_set_operation_checked(
        Token::new(),
        &request,
        args,
        a,
        b,
        values,
        outputs,
        out_offsets,
    )
}
