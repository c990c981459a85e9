//! The segmented problem on the host: the number of segments and each segment's place, with
//! the per-segment checks in the order the device makes them, so both report the same error.

use super::{LayoutArg, SegmentArgs, SegmentsRequest, Violation};
use crate::backend::ParamValues;
use crate::Error;

/// The number of segments: the host value, or a deferred one clamped into its bounds (an
/// out-of-bounds value is also returned as the error to report).
pub(crate) fn resolve_num_segments(
    request: &SegmentsRequest,
    num_segments: ParamValues<&[i64], &[i32]>,
) -> (u64, Option<Error>) {
    let value = match num_segments {
        ParamValues::Host(n) => return (n as u64, None),
        ParamValues::Deferred(n) => n[0],
        ParamValues::PerSegment(_) | ParamValues::PerSegment32(_) | ParamValues::BoundsOnly => {
            unreachable!("a number of segments is one value (`SingleValue`)")
        }
    };
    let (value, error) = request.num_segments.resolve("num_segments", value);
    (value as u64, error)
}

/// Where segment `i` is (`begin`, `size`), after the layout's checks; the violation and its
/// offending value otherwise.
pub(crate) fn resolve_segment(
    request: &SegmentsRequest,
    args: &SegmentArgs<&[i64], &[i32]>,
    i: u64,
) -> Result<(u64, u64), (Violation, i64)> {
    let at = i as usize;
    match args.layout {
        LayoutArg::Offsets { begin, end } => {
            let (b, e) = (begin[at], end[at]);
            if b < 0 || b > e {
                return Err((Violation::OffsetsOutOfOrder, b));
            }
            if e as u64 > request.num_keys {
                let num_keys = request.num_keys;
                return Err((Violation::PastBuffer { num_keys }, e));
            }
            let size = e - b;
            if !request.sizes.contains(size) {
                return Err((Violation::SizeOutOfBounds(request.sizes), size));
            }
            Ok((b as u64, size as u64))
        }
        LayoutArg::Strided(stride) => {
            // The front check requires the sizes of a strided layout.
            let size = args.sizes.at(at);
            if !request.sizes.contains(size) {
                return Err((Violation::SizeOutOfBounds(request.sizes), size));
            }
            let size = size as u64;
            if size > stride {
                return Err((Violation::SizeAboveStride, size as i64));
            }
            let begin = i.saturating_mul(stride);
            let end = begin.saturating_add(size);
            if end > request.num_keys {
                let num_keys = request.num_keys;
                let end = end.min(i64::MAX as u64) as i64;
                return Err((Violation::PastBuffer { num_keys }, end));
            }
            Ok((begin, size))
        }
        LayoutArg::Listed => unreachable!("the host joins listed segments into offsets first"),
    }
}
