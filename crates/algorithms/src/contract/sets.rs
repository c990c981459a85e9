//! The contract of the set operations: the environment's guarantees about the inputs
//! (sortedness, repeated keys), the values beside the keys and the outputs against the
//! operation's bound.

use oxicub_env::{merged_bounds, Environment};
use oxicub_params::role::{self, RoleId};
use oxicub_params::{ParamFor, SingleValue, SortOrder};

use super::{guaranteed_bounds, total_items_bounds, DeferredBounds, SegmentBounds};
use crate::backend::{Backend, PerSegmentOn, ValuesOn};
use crate::segments::{self, Layout, SegmentArgs, SegmentsRequest};
use crate::sets::op::SetOp;
use crate::sets::SetOperation;
use crate::Error;

/// What a set operation checks of its inputs' order while it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InputCheck {
    /// Nothing: the environment guarantees sorted inputs.
    None,
    /// Each input sorted (equal neighbours allowed).
    Sorted,
    /// Each input sorted with no key repeated (the environment promises no duplicates).
    Strict,
}

/// One checked set operation, as the backends receive it. Only the front check builds one.
#[derive(Clone, Copy, Debug)]
pub struct SetRequest {
    /// The operation.
    pub(crate) op: SetOp,
    /// The order both inputs are sorted in.
    pub(crate) order: SortOrder,
    /// What the run checks of the inputs' order.
    pub(crate) check: InputCheck,
    /// The environment promises no key repeated within an input (the GPU partitions by
    /// Merge Path with a star test, not Balanced Path).
    pub(crate) no_duplicates: bool,
    /// The most keys the operation writes (the outputs hold at least this many).
    pub(crate) bound: u64,
}

/// The buffers of a set operation call, by length.
pub(crate) struct SetBuffers<'a> {
    /// `a.len()`.
    pub(crate) a: usize,
    /// `b.len()`.
    pub(crate) b: usize,
    /// `a_values.len()` and `b_values.len()`, for pairs.
    pub(crate) values: Option<(usize, usize)>,
    /// The most items the index type numbers, for indices (`SourceIndex::MAX_ITEMS`).
    pub(crate) index_limit: Option<u64>,
    /// The output buffers the call writes.
    pub(crate) outputs: &'a [(&'static str, usize)],
    /// `count.len()`, when the call also writes its count into a buffer.
    pub(crate) count: Option<usize>,
}

/// The front check of every set operation entry point.
pub(crate) fn checked_sets<Op: SetOperation, E: Environment>(
    operation: &Op,
    order: SortOrder,
    buffers: SetBuffers<'_>,
    env: &E,
) -> Result<SetRequest, Error> {
    let (a, b) = (
        Error::item_count(buffers.a)? as u64,
        Error::item_count(buffers.b)? as u64,
    );
    if let Some((a_values, b_values)) = buffers.values {
        Error::check_len("a_values", a_values, buffers.a, "a.len()")?;
        Error::check_len("b_values", b_values, buffers.b, "b.len()")?;
    }
    if let Some(max) = buffers.index_limit {
        let positions = a.saturating_add(b);
        if positions > max {
            return Err(Error::TooLarge {
                arg: "b",
                len: positions,
                max,
                reason: "the index type cannot number every position of a and b (b's count \
                         from a.len()); use u64 or i64 indices",
            });
        }
    }
    let bound = operation.bound(a, b);
    for &(arg, len) in buffers.outputs {
        if (len as u64) < bound {
            return Err(Error::BufferTooSmall {
                arg,
                len,
                required: bound.min(usize::MAX as u64) as usize,
                required_from: match Op::OP {
                    SetOp::Intersection => "min(a.len(), b.len()): the intersection's bound",
                    SetOp::Difference => "a.len(): the difference's bound",
                    _ => "a.len() + b.len(): the operation's bound",
                },
            });
        }
    }
    if let Some(len @ 0) = buffers.count {
        return Err(Error::BufferTooSmall {
            arg: "count",
            len,
            required: 1,
            required_from: "the count's one element",
        });
    }
    let multiplicity = guaranteed_bounds(RoleId::KeyMultiplicity, "key_multiplicity", env)?;
    let unsorted = guaranteed_bounds(RoleId::UnsortedPositions, "unsorted_positions", env)?;
    let no_duplicates = multiplicity.max <= 1;
    let check = if unsorted.max == 0 {
        InputCheck::None
    } else if no_duplicates {
        InputCheck::Strict
    } else {
        InputCheck::Sorted
    };
    Ok(SetRequest {
        op: Op::OP,
        order,
        check,
        no_duplicates,
        bound,
    })
}

/// A checked batched set operation: the operation, and each input's segments.
#[derive(Clone, Copy, Debug)]
pub struct BatchRequest {
    /// The operation over the whole of `a` and `b` (the outputs' bound included).
    pub(crate) set: SetRequest,
    /// What is known about `a`'s segments (its number of segments is the pairs').
    pub(crate) a: SegmentsRequest,
    /// What is known about `b`'s segments.
    pub(crate) b: SegmentsRequest,
}

/// The segmented arguments of a checked batched call; `I` and `N` are the backend's buffers of
/// `i64`s and of `i32`s.
#[derive(Clone, Copy, Debug)]
pub struct BatchArgs<I, N> {
    /// `a`'s segments (and the number of pairs).
    pub(crate) a: SegmentArgs<I, N>,
    /// `b`'s segments.
    pub(crate) b: SegmentArgs<I, N>,
}

/// [`BatchArgs`] as backend `B` reads them.
pub type BatchArgsOn<'r, B> =
    BatchArgs<<B as Backend>::Values<'r, i64>, <B as Backend>::Values<'r, i32>>;

/// The most pairs a batched call takes: a pair's two regions (its segment and the gap before
/// it) are numbered in 32 bits on the device.
pub(crate) const MAX_PAIRS: u64 = (1 << 31) - 1;

/// The front check of a batched call's segments, after [`checked_sets`] checked the operation
/// over the whole inputs: each side's layout against its sizes and its keys, the per-segment
/// buffers, the deferred count, and `out_offsets` (one more than the pairs).
pub(crate) fn checked_batch<'p, B, LA, SA, LB, SB, N, E>(
    set: SetRequest,
    a: ((&'p LA, &'p SA, &'p N), usize),
    b: ((&'p LB, &'p SB, &'p N), usize),
    out_offsets: usize,
    env: &E,
) -> Result<(BatchRequest, BatchArgsOn<'p, B>), Error>
where
    B: Backend + ?Sized,
    LA: Layout<B>,
    LB: Layout<B>,
    SA: ParamFor<role::SegmentSize> + PerSegmentOn<B>,
    SB: ParamFor<role::SegmentSize> + PerSegmentOn<B>,
    N: ParamFor<role::NumSegments> + SingleValue + ValuesOn<B>,
    E: Environment,
{
    let total_items = total_items_bounds(env)?;
    let guarantees = env.guarantees();
    let count = merged_bounds(a.0 .2, guarantees)?;
    let num_segments = DeferredBounds::of(a.0 .2, count);
    let a_bounds = SegmentBounds {
        sizes: merged_bounds(a.0 .1, guarantees)?,
        num_segments,
        total_items,
    };
    let b_bounds = SegmentBounds {
        sizes: merged_bounds(b.0 .1, guarantees)?,
        ..a_bounds
    };
    let side = |error: Error, side: &'static str| rename_side(error, side);
    let (a_request, a_args) =
        segments::check_parts(a.0, a_bounds, a.1).map_err(|e| side(e, "a"))?;
    let (b_request, b_args) =
        segments::check_parts(b.0, b_bounds, b.1).map_err(|e| side(e, "b"))?;
    segments::check_buffers(&a_request, &a_args).map_err(|e| side(e, "a"))?;
    segments::check_buffers(&b_request, &b_args).map_err(|e| side(e, "b"))?;
    segments::check_deferred("num_segments", &a_args.num_segments)?;
    if a_request.max_segments > MAX_PAIRS {
        return Err(Error::TooLarge {
            arg: "num_segments",
            len: a_request.max_segments,
            max: MAX_PAIRS,
            reason: "a batched set operation takes at most 2^31 - 1 pairs (its upper bound \
                     when deferred)",
        });
    }
    let required = a_request.max_segments + 1;
    if (out_offsets as u64) < required {
        return Err(Error::BufferTooSmall {
            arg: "out_offsets",
            len: out_offsets,
            required: required as usize,
            required_from: "num_segments + 1 (its upper bound when deferred)",
        });
    }
    let request = BatchRequest {
        set,
        a: a_request,
        b: b_request,
    };
    Ok((
        request,
        BatchArgs {
            a: a_args,
            b: b_args,
        },
    ))
}

/// `error` about one input's segments, its argument named for that input (`a_offsets`,
/// `b_segment_sizes`, ...).
pub(crate) fn rename_side(error: Error, side: &'static str) -> Error {
    let renamed = |arg: &'static str| -> &'static str {
        match (side, arg) {
            ("a", "offsets") => "a_offsets",
            ("b", "offsets") => "b_offsets",
            ("a", "begin_offsets") => "a_begin_offsets",
            ("b", "begin_offsets") => "b_begin_offsets",
            ("a", "end_offsets") => "a_end_offsets",
            ("b", "end_offsets") => "b_end_offsets",
            ("a", "segment_sizes") => "a_segment_sizes",
            ("b", "segment_sizes") => "b_segment_sizes",
            ("a", "keys") => "a",
            ("b", "keys") => "b",
            _ => arg,
        }
    };
    match error {
        Error::InvalidSegment {
            segment,
            arg,
            value,
            reason,
        } => Error::InvalidSegment {
            segment,
            arg: renamed(arg),
            value,
            reason,
        },
        Error::InvalidArgument { arg, reason } => Error::InvalidArgument {
            arg: renamed(arg),
            reason,
        },
        Error::BufferTooSmall {
            arg,
            len,
            required,
            required_from,
        } => Error::BufferTooSmall {
            arg: renamed(arg),
            len,
            required,
            required_from,
        },
        other => other,
    }
}
