//! Set operations on the host: the `std::set_*` loops over the keys' ranks (the radix
//! transform, inverted for descending inputs, so one ascending comparison serves both orders).
//! The oracle of the GPU tests, written from the standard's semantics.

use std::ops::Range;

use super::op::SetOp;
use super::{SetOutputs, SetsBackend};
use crate::backend::{DeviceValue, Host};
use crate::contract::sets::{rename_side, BatchArgsOn, BatchRequest, InputCheck, SetRequest};
use crate::radix::{rank, RadixKey};
use crate::sealed::Token;
use crate::segments::host::{resolve_num_segments, resolve_segment};
use crate::segments::Pending;
use crate::segments::{LayoutArg, SegmentArgs, SegmentsRequest, Violation};
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

/// `request`'s operation over each pair of ranges of `a` and `b` (one pair for a single call),
/// the pairs' outputs one after another; `out_offsets[i]` gets where pair `i`'s begin, and
/// `out_offsets[pairs]` (like `count[0]`) the number written. The order is checked within each
/// range only (keys between ranges are not keys of any pair).
fn run_pairs<K: RadixKey, V: DeviceValue>(
    request: &SetRequest,
    a: &[K],
    b: &[K],
    values: ValuesIn<(&[V], &[V]), V>,
    outputs: SetOutputs<'_, '_, '_, Host, K, V>,
    pairs: &[(Range<usize>, Range<usize>)],
    mut out_offsets: Option<&mut [i64]>,
) -> Pending<usize> {
    let SetOutputs {
        keys: out_keys,
        values: mut out_values,
        count,
    } = outputs;
    let (a_ranks, b_ranks) = (ranks_of(a, request.order), ranks_of(b, request.order));
    // The first position out of order within one input's ranges (side 0: a's, 1: b's).
    let first_unsorted = |ranks: &[u64], side: usize| {
        pairs.iter().find_map(|pair| {
            let range = if side == 0 { &pair.0 } else { &pair.1 };
            first_out_of_order(&ranks[range.clone()], request.check)
                .map(|(at, repeat)| (range.start + at, repeat))
        })
    };
    let unsorted = [
        ("a", first_unsorted(&a_ranks, 0)),
        ("b", first_unsorted(&b_ranks, 1)),
    ]
    .into_iter()
    .find_map(|(arg, bad)| bad.map(|(at, repeat)| order_error_at(arg, at as u64, repeat, request)));
    if let Some(error) = unsorted {
        return Pending::ready(0, Some(error));
    }
    let mut written = 0;
    for (i, (a_range, b_range)) in pairs.iter().enumerate() {
        if let Some(offsets) = out_offsets.as_deref_mut() {
            offsets[i] = written as i64;
        }
        let (a_ranks, b_ranks) = (&a_ranks[a_range.clone()], &b_ranks[b_range.clone()]);
        set_operation(request.op, a_ranks, b_ranks, |source| {
            let source = match source {
                Source::A(i) => Source::A(a_range.start + i),
                Source::B(j) => Source::B(b_range.start + j),
            };
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
    }
    if let Some(offsets) = out_offsets {
        offsets[pairs.len()] = written as i64;
    }
    if let Some(first) = count.and_then(|count| count.first_mut()) {
        *first = written as i64;
    }
    Pending::ready(written, None)
}

/// The ranges of one input's first `pairs` segments, checked as the device checks them: each
/// segment's layout, then (offsets) its begin against the end before it.
fn side_ranges(
    side: &'static str,
    request: &SegmentsRequest,
    args: &SegmentArgs<&[i64], &[i32]>,
    pair: u64,
) -> Result<Range<usize>, Error> {
    let (begin, size) = resolve_segment(request, args, pair)
        .map_err(|(violation, value)| rename_side(violation.error(pair, value), side))?;
    if let LayoutArg::Offsets { end, .. } = args.layout {
        if pair > 0 && (begin as i64) < end[pair as usize - 1] {
            let error = Violation::Overlaps.error(pair, begin as i64);
            return Err(rename_side(error, side));
        }
    }
    Ok(begin as usize..(begin + size) as usize)
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
        let whole = [(0..a.len(), 0..b.len())];
        Ok(run_pairs(request, a, b, values, outputs, &whole, None))
    }

    fn batched_set_operation_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &BatchRequest,
        args: BatchArgsOn<'_, Self>,
        a: &[K],
        b: &[K],
        values: ValuesIn<(&[V], &[V]), V>,
        outputs: SetOutputs<'_, '_, '_, Self, K, V>,
        out_offsets: &mut [i64],
    ) -> Result<Pending<usize>, Error> {
        let (count, error) = resolve_num_segments(&request.a, args.a.num_segments);
        if let Some(error) = error {
            return Ok(Pending::ready(0, Some(error)));
        }
        let mut pairs = Vec::with_capacity(count as usize);
        for pair in 0..count {
            let ranges = side_ranges("a", &request.a, &args.a, pair)
                .and_then(|a| Ok((a, side_ranges("b", &request.b, &args.b, pair)?)));
            match ranges {
                Ok(ranges) => pairs.push(ranges),
                Err(error) => return Ok(Pending::ready(0, Some(error))),
            }
        }
        let offsets = Some(out_offsets);
        Ok(run_pairs(
            &request.set,
            a,
            b,
            values,
            outputs,
            &pairs,
            offsets,
        ))
    }
}
