//! Set operations on the host: the `std::set_*` loops over the keys' ranks (the radix
//! transform, inverted for descending inputs, so one ascending comparison serves both orders).
//! The oracle of the GPU tests, written from the standard's semantics.

use super::op::SetOp;
use super::{SetOutputs, SetsBackend};
use crate::backend::{DeviceValue, Host};
use crate::contract::sets::{InputCheck, SetRequest};
use crate::radix::{rank, RadixKey};
use crate::sealed::Token;
use crate::segments::Pending;
use crate::values::ValuesIn;
use crate::Error;
use oxicub_params::SortOrder;

/// Where an output comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// `a[i]`.
    A(usize),
    /// `b[j]`.
    B(usize),
}

/// The first position of `keys` out of `check`'s order (by rank): `Some((position, repeat))`,
/// `repeat` when the key equals the one before it (out of order only under
/// [`InputCheck::Strict`]).
pub(crate) fn first_out_of_order(ranks: &[u64], check: InputCheck) -> Option<(usize, bool)> {
    if check == InputCheck::None {
        return None;
    }
    let strict = check == InputCheck::Strict;
    ranks
        .windows(2)
        .position(|w| w[1] < w[0] || (strict && w[1] == w[0]))
        .map(|i| (i + 1, ranks[i + 1] == ranks[i]))
}

/// The error for input `arg`'s first position out of order, if any.
pub(crate) fn order_error(arg: &'static str, ranks: &[u64], request: &SetRequest) -> Option<Error> {
    first_out_of_order(ranks, request.check)
        .map(|(position, repeat)| order_error_at(arg, position as u64, repeat, request))
}

/// The error for input `arg` out of order at `position` (`repeat`: its key equals the one
/// before it).
pub(crate) fn order_error_at(
    arg: &'static str,
    position: u64,
    repeat: bool,
    request: &SetRequest,
) -> Error {
    if repeat {
        Error::RepeatedKey { arg, position }
    } else {
        Error::NotSorted {
            arg,
            position,
            order: match request.order {
                SortOrder::Ascending => "ascending",
                SortOrder::Descending => "descending",
            },
        }
    }
}

/// The outputs of `op` over two sorted sequences of ranks, in order: the `std::set_*` and
/// `std::merge` loops.
pub(crate) fn set_operation(op: SetOp, a: &[u64], b: &[u64], mut emit: impl FnMut(Source)) {
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        match op {
            SetOp::Intersection => {
                if x == y {
                    emit(Source::A(i));
                }
                i += usize::from(x <= y);
                j += usize::from(y <= x);
            }
            SetOp::Union => {
                emit(if y < x { Source::B(j) } else { Source::A(i) });
                i += usize::from(x <= y);
                j += usize::from(y <= x);
            }
            SetOp::Difference => {
                if x < y {
                    emit(Source::A(i));
                }
                i += usize::from(x <= y);
                j += usize::from(y <= x);
            }
            SetOp::SymmetricDifference => {
                if x < y {
                    emit(Source::A(i));
                } else if y < x {
                    emit(Source::B(j));
                }
                i += usize::from(x <= y);
                j += usize::from(y <= x);
            }
            SetOp::Merge => {
                // Stable: on equal keys a's first.
                if y < x {
                    emit(Source::B(j));
                    j += 1;
                } else {
                    emit(Source::A(i));
                    i += 1;
                }
            }
        }
    }
    // What is left of one input: copied by every operation that keeps it.
    let a_rest = matches!(
        op,
        SetOp::Union | SetOp::Difference | SetOp::SymmetricDifference | SetOp::Merge
    );
    let b_rest = matches!(op, SetOp::Union | SetOp::SymmetricDifference | SetOp::Merge);
    if a_rest {
        (i..a.len()).for_each(|i| emit(Source::A(i)));
    }
    if b_rest {
        (j..b.len()).for_each(|j| emit(Source::B(j)));
    }
}

/// The ranks of `keys` in `order`.
fn ranks_of<K: RadixKey>(keys: &[K], order: SortOrder) -> Vec<u64> {
    let descending = order == SortOrder::Descending;
    keys.iter().map(|&k| rank(k, descending)).collect()
}

impl SetsBackend for Host {
    fn set_operation_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &SetRequest,
        a: &[K],
        b: &[K],
        values: ValuesIn<(&[V], &[V]), V>,
        outputs: SetOutputs<'_, '_, '_, Self, K, V>,
    ) -> Result<Pending<usize>, Error> {
        let SetOutputs {
            keys: out_keys,
            values: mut out_values,
            count,
        } = outputs;
        let (a_ranks, b_ranks) = (ranks_of(a, request.order), ranks_of(b, request.order));
        let unsorted =
            order_error("a", &a_ranks, request).or_else(|| order_error("b", &b_ranks, request));
        if let Some(error) = unsorted {
            return Ok(Pending::ready(0, Some(error)));
        }
        let mut written = 0;
        set_operation(request.op, &a_ranks, &b_ranks, |source| {
            out_keys[written] = match source {
                Source::A(i) => a[i],
                Source::B(j) => b[j],
            };
            if let Some(out) = out_values.as_deref_mut() {
                out[written] = match (&values, source) {
                    (ValuesIn::Copy((a_values, _)), Source::A(i)) => a_values[i],
                    (ValuesIn::Copy((_, b_values)), Source::B(j)) => b_values[j],
                    (ValuesIn::Index(index), Source::A(i)) => index(i as u64),
                    (ValuesIn::Index(index), Source::B(j)) => index((a.len() + j) as u64),
                    (ValuesIn::None, _) => return,
                };
            }
            written += 1;
        });
        if let Some(first) = count.and_then(|count| count.first_mut()) {
            *first = written as i64;
        }
        Ok(Pending::ready(written, None))
    }
}
