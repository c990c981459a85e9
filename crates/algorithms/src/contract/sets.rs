//! The contract of the set operations: the environment's guarantees about the inputs
//! (sortedness, repeated keys), the values beside the keys and the outputs against the
//! operation's bound.

use oxicub_env::Environment;
use oxicub_params::role::RoleId;
use oxicub_params::SortOrder;

use super::guaranteed_bounds;
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
