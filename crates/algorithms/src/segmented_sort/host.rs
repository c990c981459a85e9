//! Segmented sort on the host: segments in parallel (rayon), each by a stable sort of its
//! keys' ranks. The oracle of the GPU tests; also the per-segment checks the device will make,
//! in the same order, so both report the same error.

use rayon::prelude::*;

use super::{MergeStatistics, SegmentedSortBackend};
use crate::backend::{ChoiceValues, DeviceValue, Host};
use crate::contract::segmented_sort::{SortArgs, SortArgsOn, SortRequest};
use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::segments::host::{resolve_num_segments, resolve_segment};
use crate::segments::{total_items_error, LayoutArg, Outcome, Pending, Violation};
use crate::values::ValuesIn;
use crate::Error;
use oxicub_params::SortOrder;

/// One valid segment, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SortSegment {
    /// Where it starts in the keys (and the outputs).
    pub(crate) begin: u64,
    /// Its size.
    pub(crate) size: u64,
    /// Its order.
    pub(crate) order: SortOrder,
}

/// Resolves segment `i` and makes every per-segment check, in the order the device makes
/// them: the layout's, then (offsets) that it does not begin before the previous segment
/// ends, then the order's.
pub(crate) fn resolve(
    request: &SortRequest,
    args: &SortArgs<&[i64], &[i32], &[u8]>,
    i: u64,
) -> Result<SortSegment, (Violation, i64)> {
    let (begin, size) = resolve_segment(&request.segments, &args.segments, i)?;
    let at = i as usize;
    if let LayoutArg::Offsets { end, .. } = args.segments.layout {
        if at > 0 && (begin as i64) < end[at - 1] {
            return Err((Violation::Overlaps, begin as i64));
        }
    }
    let order = match args.order {
        ChoiceValues::Host(order) => order,
        ChoiceValues::PerSegment(orders) => match orders[at] {
            0 if request.orders & 1 != 0 => SortOrder::Ascending,
            1 if request.orders & 2 != 0 => SortOrder::Descending,
            byte => return Err((order_not_compiled(request), i64::from(byte))),
        },
    };
    Ok(SortSegment { begin, size, order })
}

/// A per-segment order outside the compiled options.
pub(crate) fn order_not_compiled(request: &SortRequest) -> Violation {
    Violation::NotCompiled {
        arg: "order",
        mask: request.orders,
        legend: "0 = ascending, 1 = descending",
    }
}

/// The rank of a key: its radix code, inverted for descending, so the output is ascending by
/// rank.
fn rank<K: RadixKey>(key: K, order: SortOrder) -> u64 {
    crate::radix::rank(key, order == SortOrder::Descending)
}

/// The indices (within the segment) of its keys in sorted order, equal keys by index.
pub(crate) fn sort_segment<K: RadixKey>(keys: &[K], order: SortOrder) -> Vec<u32> {
    let mut at: Vec<u32> = (0..keys.len() as u32).collect();
    // Stable: equal ranks keep their input order.
    at.sort_by_key(|&j| rank(keys[j as usize], order));
    at
}

/// Runs a checked call on the host.
fn run<K: RadixKey, V: DeviceValue>(
    request: &SortRequest,
    args: &SortArgs<&[i64], &[i32], &[u8]>,
    keys: &[K],
    values: ValuesIn<&[V], V>,
    out_keys: &mut [K],
    mut out_values: Option<&mut [V]>,
) -> Outcome {
    let (num_segments, count_error) =
        resolve_num_segments(&request.segments, args.segments.num_segments);
    type Sorted = Result<(SortSegment, Vec<u32>), (Violation, i64)>;
    let results: Vec<Sorted> = (0..num_segments)
        .into_par_iter()
        .map(|i| {
            let segment = resolve(request, args, i)?;
            let items = &keys[segment.begin as usize..][..segment.size as usize];
            Ok((segment, sort_segment(items, segment.order)))
        })
        .collect();
    // Offsets out of order anywhere (a begin above its end, or below the previous end) leave no
    // segment trustworthy as disjoint from the others: nothing is written.
    // A begin below the previous end counts whatever else is wrong with either segment (a
    // size check failing first must not hide it: valid segments around an invalid one could
    // overlap).
    let overlapping = match args.segments.layout {
        LayoutArg::Offsets { begin, end } => {
            (1..num_segments as usize).any(|i| begin[i] < end[i - 1])
        }
        _ => false,
    };
    let disorder = overlapping
        || results.iter().any(|r| {
            matches!(
                r,
                Err((Violation::OffsetsOutOfOrder | Violation::Overlaps, _))
            )
        });
    let mut total = 0u64;
    let mut first_violation = None;
    for (i, result) in results.into_iter().enumerate() {
        let (segment, order) = match result {
            Ok(sorted) => sorted,
            Err((violation, value)) => {
                first_violation.get_or_insert_with(|| violation.error(i as u64, value));
                continue;
            }
        };
        total = total.saturating_add(segment.size);
        if disorder {
            continue;
        }
        let begin = segment.begin as usize;
        for (j, &at) in order.iter().enumerate() {
            out_keys[begin + j] = keys[begin + at as usize];
        }
        if let Some(out) = out_values.as_deref_mut() {
            for (j, &at) in order.iter().enumerate() {
                out[begin + j] = match &values {
                    ValuesIn::Copy(values) => values[begin + at as usize],
                    ValuesIn::Index(index) => index(u64::from(at)),
                    ValuesIn::None => continue,
                };
            }
        }
    }
    let total = total.min(i64::MAX as u64) as i64;
    let total_items = request.segments.total_items;
    let total_error = (!total_items.contains(total)).then(|| total_items_error(total_items, total));
    Outcome::ready((), count_error.or(total_error).or(first_violation))
}

/// The in-place and listed forms of a backend whose arguments are host slices ([`Host`] and
/// [`AnyBackend`](crate::AnyBackend)), each through the backend's own `segmented_sort_checked`:
/// from copies of the inputs ([`in_place_on_host`]), or over the slices joined
/// (`listed::sort_joined`). Expanded inside each backend's `impl SegmentedSortBackend`.
macro_rules! host_slice_forms {
    () => {
        fn segmented_sort_in_place_checked<K: RadixKey, V: DeviceValue>(
            &self,
            token: $crate::sealed::Token,
            request: &$crate::contract::segmented_sort::SortRequest,
            args: $crate::contract::segmented_sort::SortArgsOn<'_, Self>,
            keys: &mut [K],
            values: Option<&mut [V]>,
        ) -> Result<$crate::segments::Pending<super::MergeStatistics>, $crate::Error> {
            super::host::in_place_on_host(keys, values, |input, input_values, keys, values| {
                self.segmented_sort_checked(token, request, args, input, input_values, keys, values)
            })
        }

        fn segmented_sort_listed_checked<K: RadixKey, V: DeviceValue>(
            &self,
            token: $crate::sealed::Token,
            request: &$crate::contract::segmented_sort::SortRequest,
            args: $crate::contract::segmented_sort::SortArgsOn<'_, Self>,
            segments: &[&[K]],
            values: $crate::values::ValuesIn<&[&[V]], V>,
            out_keys: &mut [K],
            out_values: Option<&mut [V]>,
        ) -> Result<$crate::segments::Pending<super::MergeStatistics>, $crate::Error> {
            super::listed::sort_joined(
                self, token, request, args, segments, values, out_keys, out_values,
            )
        }

        fn segmented_sort_listed_in_place_checked<K: RadixKey, V: DeviceValue>(
            &self,
            token: $crate::sealed::Token,
            request: &$crate::contract::segmented_sort::SortRequest,
            args: $crate::contract::segmented_sort::SortArgsOn<'_, Self>,
            segments: &mut [&mut [K]],
            values: Option<&mut [&mut [V]]>,
        ) -> Result<$crate::segments::Pending<super::MergeStatistics>, $crate::Error> {
            super::listed::sort_joined_in_place(self, token, request, args, segments, values)
        }
    };
}
pub(super) use host_slice_forms;

impl SegmentedSortBackend for Host {
    fn segmented_sort_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: &SortRequest,
        args: SortArgsOn<'_, Self>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<Pending<MergeStatistics>, Error> {
        // The host runs no merge pass: its statistics are empty.
        let outcome = run(request, &args, keys, values, out_keys, out_values);
        Ok(outcome.map(|()| MergeStatistics::default()))
    }

    host_slice_forms!();
}

/// Runs `sort` from copies of `keys` and `values` into them (the in-place forms on host slices:
/// [`Host`] and [`AnyBackend`](crate::AnyBackend)).
pub(super) fn in_place_on_host<K: Copy, V: Copy, R>(
    keys: &mut [K],
    values: Option<&mut [V]>,
    sort: impl FnOnce(&[K], ValuesIn<&[V], V>, &mut [K], Option<&mut [V]>) -> R,
) -> R {
    let input = keys.to_vec();
    let input_values = values.as_deref().map(<[V]>::to_vec);
    let values_in = match &input_values {
        Some(copy) => ValuesIn::Copy(&copy[..]),
        None => ValuesIn::None,
    };
    sort(&input, values_in, keys, values)
}
