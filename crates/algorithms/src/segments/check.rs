//! The front check of the segmented part of a call, made once by every segmented algorithm's
//! contract: the layout against the sizes, the keys buffer, the per-segment buffers.

use oxicub_params::{role, Bounds, ParamFor, SingleValue};

use super::{total_items_error, Layout, LayoutArg, Segments};
use crate::backend::{Backend, Buffer, ParamValues, PerSegmentOn, ValuesOn};
use crate::contract::{DeferredBounds, SegmentBounds};
use crate::Error;

/// What is known about the segments of a checked call.
#[derive(Clone, Copy, Debug)]
pub struct SegmentsRequest {
    /// The number of keys the layout addresses (`keys.len()`).
    pub(crate) num_keys: u64,
    /// The tightest bounds of every segment size (static, runtime, guarantees).
    pub(crate) sizes: Bounds,
    /// The bounds of the number of segments (`merged`: the tightest).
    pub(crate) num_segments: DeferredBounds,
    /// The `TotalItems` guarantee: bounds of the sum of the valid segments' sizes.
    pub(crate) total_items: Bounds,
    /// The most segments the call may process (the host value, or the upper bound).
    pub(crate) max_segments: u64,
    /// The most items one segment may hold.
    pub(crate) largest: u64,
}

/// The segmented arguments of a checked call; `I` and `N` are the backend's buffers of `i64`s
/// and of `i32`s.
#[derive(Clone, Copy, Debug)]
pub struct SegmentArgs<I, N> {
    /// Where the segments are.
    pub(crate) layout: LayoutArg<I>,
    /// The segment sizes.
    pub(crate) sizes: ParamValues<I, N>,
    /// The number of segments.
    pub(crate) num_segments: ParamValues<I, N>,
}

/// [`SegmentArgs`] as backend `B` reads them.
pub type SegmentArgsOn<'r, B> =
    SegmentArgs<<B as Backend>::Values<'r, i64>, <B as Backend>::Values<'r, i32>>;

/// A buffer of one value per segment must hold `max_segments` of them.
pub(crate) fn check_per_segment(
    arg: &'static str,
    len: usize,
    request: &SegmentsRequest,
) -> Result<(), Error> {
    if (len as u64) < request.max_segments {
        return Err(Error::BufferTooSmall {
            arg,
            len,
            required: request.max_segments.min(usize::MAX as u64) as usize,
            required_from: "num_segments (its upper bound when deferred)",
        });
    }
    Ok(())
}

/// Checks the segments of a call over `num_keys` keys, whose bounds the contract merged with
/// the environment's guarantees: the
/// layout against the sizes, the keys buffer where the host knows every segment, and the
/// per-segment buffers' lengths.
pub(crate) fn check<'p, B, L, S, N>(
    segments: &'p Segments<L, S, N>,
    bounds: SegmentBounds,
    num_keys: usize,
) -> Result<(SegmentsRequest, SegmentArgsOn<'p, B>), Error>
where
    B: Backend + ?Sized,
    L: Layout<B>,
    S: ParamFor<role::SegmentSize> + PerSegmentOn<B>,
    N: ParamFor<role::NumSegments> + SingleValue + ValuesOn<B>,
{
    let Segments {
        layout,
        sizes,
        num_segments,
    } = segments;
    check_parts((layout, sizes, num_segments), bounds, num_keys)
}

/// [`check`] of segments given as their parts (a batched set operation's two inputs share one
/// number of segments).
pub(crate) fn check_parts<'p, B, L, S, N>(
    (layout, sizes, num_segments): (&'p L, &'p S, &'p N),
    bounds: SegmentBounds,
    num_keys: usize,
) -> Result<(SegmentsRequest, SegmentArgsOn<'p, B>), Error>
where
    B: Backend + ?Sized,
    L: Layout<B>,
    S: ParamFor<role::SegmentSize> + PerSegmentOn<B>,
    N: ParamFor<role::NumSegments> + SingleValue + ValuesOn<B>,
{
    let args = SegmentArgs {
        layout: layout.arg(),
        sizes: sizes.values(),
        num_segments: num_segments.values(),
    };
    let num_keys = num_keys as u64;
    let max_segments = match args.num_segments {
        ParamValues::Host(n) => n as u64,
        _ => bounds.num_segments.merged.max as u64,
    };
    let mut request = SegmentsRequest {
        num_keys,
        sizes: bounds.sizes,
        num_segments: bounds.num_segments,
        total_items: bounds.total_items,
        max_segments,
        largest: (bounds.sizes.max as u64).min(num_keys),
    };
    match (args.layout, args.sizes) {
        (LayoutArg::Strided(stride), ParamValues::Host(size)) => {
            let size = size as u64;
            if size > stride {
                return Err(Error::InvalidArgument {
                    arg: "segment_sizes",
                    reason: format!("{size} is larger than the stride {stride}"),
                });
            }
            let needed = match max_segments.checked_sub(1) {
                None => 0,
                Some(last) => last
                    .checked_mul(stride)
                    .and_then(|v| v.checked_add(size))
                    .unwrap_or(u64::MAX),
            };
            if num_keys < needed {
                return Err(Error::BufferTooSmall {
                    arg: "keys",
                    len: num_keys as usize,
                    required: needed.min(usize::MAX as u64) as usize,
                    required_from: "(num_segments - 1) * stride + segment size",
                });
            }
            if let ParamValues::Host(n) = args.num_segments {
                // Every segment has this size: the total is known here (a call the device
                // runs without a status reports nothing afterwards).
                let total = size.saturating_mul(n as u64).min(i64::MAX as u64) as i64;
                if !request.total_items.contains(total) {
                    return Err(total_items_error(request.total_items, total));
                }
            }
            request.largest = request.largest.min(stride).min(size);
        }
        (LayoutArg::Strided(stride), ParamValues::PerSegment(_) | ParamValues::PerSegment32(_)) => {
            request.largest = request.largest.min(stride);
        }
        (LayoutArg::Strided(_), _) => {
            return Err(Error::InvalidArgument {
                arg: "segment_sizes",
                reason: "a strided layout needs the sizes: pass Static, Uniform or PerSegment \
                         over the sizes, not PerSegment<()>"
                    .to_owned(),
            });
        }
        (
            LayoutArg::Offsets { .. } | LayoutArg::Listed,
            ParamValues::PerSegment(_) | ParamValues::PerSegment32(_),
        ) => {
            let reason = if matches!(args.layout, LayoutArg::Listed) {
                "with listed segments the sizes are the slices' lengths: pass only bounds \
                 (segment_size::PerSegment::<(), MIN, MAX>::new(())) or a Static/Uniform size"
            } else {
                "with offsets the sizes are end - begin: pass only bounds \
                 (segment_size::PerSegment::<(), MIN, MAX>::new(())) or a Static/Uniform size"
            };
            return Err(Error::InvalidArgument {
                arg: "segment_sizes",
                reason: reason.to_owned(),
            });
        }
        (LayoutArg::Offsets { .. } | LayoutArg::Listed, _) => {}
    }
    Ok((request, args))
}

/// Checks the lengths of the segments' per-segment buffers (begin and end offsets, sizes), in
/// that order; an algorithm's contract calls it once its own scalar checks have passed, then
/// checks its own per-segment buffers.
pub(crate) fn check_buffers<I: Buffer, N: Buffer>(
    request: &SegmentsRequest,
    args: &SegmentArgs<I, N>,
) -> Result<(), Error> {
    if let LayoutArg::Offsets { begin, end } = &args.layout {
        check_per_segment("begin_offsets", begin.len(), request)?;
        check_per_segment("end_offsets", end.len(), request)?;
    }
    if let Some(len) = args.sizes.per_segment_len() {
        check_per_segment("segment_sizes", len, request)?;
    }
    Ok(())
}

/// A deferred value is read from a one-element buffer: it must have that element.
pub(crate) fn check_deferred<I: Buffer, N>(
    arg: &'static str,
    values: &ParamValues<I, N>,
) -> Result<(), Error> {
    match values {
        ParamValues::Deferred(value) if value.is_empty() => Err(Error::BufferTooSmall {
            arg,
            len: 0,
            required: 1,
            required_from: "a deferred value is one element",
        }),
        _ => Ok(()),
    }
}
