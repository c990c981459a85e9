//! The contract of segmented sort: the requirements a sort can honour (compile-time), the
//! segmented problem's checks, the per-segment orders and the buffers.

use oxicub_env::{merged_bounds, output_ordering, tie_break, Environment};
use oxicub_params::{role, DiscreteParam, DiscreteParamFor, ParamFor, SingleValue, SortOrder};

use super::{total_items_bounds, DeferredBounds, SegmentBounds};
use crate::backend::{Backend, Buffer, ChoiceValues, ChoicesOn, PerSegmentOn, ValuesOn};
use crate::sealed::{Sealed, Token};
use crate::segmented_sort::{Problem, ProblemOn};
use crate::segments::{self, check_per_segment, Layout, SegmentArgs, SegmentsRequest};
use crate::Error;

/// An output ordering a sort (or a set operation, whose output is sorted too) gives:
/// `stable_sorted` (the default: equal keys keep their input order) or `sorted` (equal keys in
/// any order; may be faster).
#[diagnostic::on_unimplemented(
    message = "a sort or set operation cannot give the output ordering `{Self}`",
    label = "the environment requires it",
    note = "its output is sorted: require nothing (`stable_sorted`, the default) or \
            `output_ordering::Sorted` (equal keys in any order)"
)]
pub trait SortOrdering: Sealed {}
impl Sealed for output_ordering::Sorted {}
impl Sealed for output_ordering::StableSorted {}
impl SortOrdering for output_ordering::Sorted {}
impl SortOrdering for output_ordering::StableSorted {}

/// A tie-break a sort (or a set operation) honours: equal keys keep their input order (the
/// smaller source index first, `a`'s before `b`'s), so only `prefer_smaller_index` (or none)
/// agrees with it.
#[diagnostic::on_unimplemented(
    message = "a sort or set operation keeps equal keys in input order: the tie-break `{Self}` \
               contradicts it",
    label = "the environment requires it",
    note = "remove the tie-break (a stable sort puts the smaller source index first); for \
            equal keys last-first, sort the keys reversed"
)]
pub trait SortTieBreak: Sealed {}
impl Sealed for tie_break::Unspecified {}
impl Sealed for tie_break::PreferSmallerIndex {}
impl SortTieBreak for tie_break::Unspecified {}
impl SortTieBreak for tie_break::PreferSmallerIndex {}

/// One checked segmented sort call, as the backends receive it. Only the front check builds one.
#[derive(Clone, Copy, Debug)]
pub struct SortRequest {
    /// What is known about the segments.
    pub(crate) segments: SegmentsRequest,
    /// The orders that can occur (one bit per [`SortOrder`]).
    pub(crate) orders: u32,
}

/// The per-segment arguments of a checked call; `I`, `N` and `J` are the backend's buffers of
/// `i64`s, of `i32`s and of bytes.
#[derive(Clone, Copy, Debug)]
pub struct SortArgs<I, N, J> {
    /// The layout, sizes and number of segments.
    pub(crate) segments: SegmentArgs<I, N>,
    /// The orders.
    pub(crate) order: ChoiceValues<J, SortOrder>,
}

/// [`SortArgs`] as backend `B` reads them.
pub type SortArgsOn<'r, B> = SortArgs<
    <B as Backend>::Values<'r, i64>,
    <B as Backend>::Values<'r, i32>,
    <B as Backend>::Values<'r, u8>,
>;

impl<L, S, O, N> Sealed for Problem<L, S, O, N> {}

impl<B, L, S, O, N> ProblemOn<B> for Problem<L, S, O, N>
where
    B: Backend + ?Sized,
    L: Layout<B>,
    S: ParamFor<role::SegmentSize> + PerSegmentOn<B>,
    O: DiscreteParamFor<SortOrder> + DiscreteParam<Option = SortOrder> + ChoicesOn<B>,
    N: ParamFor<role::NumSegments> + SingleValue + ValuesOn<B>,
{
    /// The front check of every segmented sort entry point: the segments (bounds merged with
    /// the environment's guarantees), the orders' buffer, `values` and each output against
    /// `keys.len()`: each segment is written where it lies.
    fn checked<E: Environment>(
        &self,
        _: Token,
        buffers: SortBuffers<'_>,
        env: &E,
    ) -> Result<(SortRequest, SortArgsOn<'_, B>), Error> {
        let guarantees = env.guarantees();
        let sizes = merged_bounds(&self.segments.sizes, guarantees)?;
        let count = merged_bounds(&self.segments.num_segments, guarantees)?;
        let bounds = SegmentBounds {
            sizes,
            num_segments: DeferredBounds::of(&self.segments.num_segments, count),
            total_items: total_items_bounds(env)?,
        };
        let (segments, segment_args) = segments::check(&self.segments, bounds, buffers.keys)?;
        let args = SortArgs {
            segments: segment_args,
            order: self.order.choices(),
        };
        segments::check_buffers(&segments, &args.segments)?;
        if let ChoiceValues::PerSegment(orders) = args.order {
            check_per_segment("order", orders.len(), &segments)?;
        }
        if let Some(max) = buffers.index_limit {
            if segments.largest > max {
                return Err(Error::TooLarge {
                    arg: "keys",
                    len: segments.largest,
                    max,
                    reason: "a segment may hold more items than the index type can number; \
                             use u64 or i64 indices",
                });
            }
        }
        if let Some(values) = buffers.values {
            Error::check_len("values", values, buffers.keys, "keys.len()")?;
        }
        for &(arg, len) in buffers.outputs {
            if len < buffers.keys {
                return Err(Error::BufferTooSmall {
                    arg,
                    len,
                    required: buffers.keys,
                    required_from: "keys.len(): each segment is written where it lies",
                });
            }
        }
        segments::check_deferred("num_segments", &args.segments.num_segments)?;
        let request = SortRequest {
            segments,
            orders: O::OPTIONS,
        };
        Ok((request, args))
    }
}

/// The buffers of a segmented sort call, by length.
pub struct SortBuffers<'a> {
    /// `keys.len()`.
    pub(crate) keys: usize,
    /// `values.len()`, for pairs.
    pub(crate) values: Option<usize>,
    /// The most items the index type numbers, for indices (`SourceIndex::MAX_ITEMS`).
    pub(crate) index_limit: Option<u64>,
    /// The output buffers the call writes.
    pub(crate) outputs: &'a [(&'static str, usize)],
}
