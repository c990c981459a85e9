//! Batched top-k on the host: segments in parallel (rayon), each selected by a partial sort of
//! its (rank, tie-break index) pairs. The oracle of the GPU tests; also the per-segment checks
//! that the GPU makes on the device, in the same order, so both report the same error.

use rayon::prelude::*;

use crate::backend::{ChoiceValues, DeviceValue, ParamValues};
use crate::contract::{BatchedTopKArgs, BatchedTopKRequest};
use crate::radix::{RadixBits, RadixKey};
use crate::segments::host::{resolve_num_segments, resolve_segment};
use crate::segments::{total_items_error, LayoutArg, Outcome, Violation};
use crate::values::ValuesIn;
use crate::Error;
use oxicub_env::TieBreak;
use oxicub_kernels::families::batched_topk::BatchedFill;
use oxicub_params::SelectDirection;

/// One valid segment, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    /// Where it starts in `keys`.
    pub(crate) begin: u64,
    /// Its size.
    pub(crate) size: u64,
    /// How many items it writes: `min(k, size)`.
    pub(crate) written: u64,
    /// Its direction.
    pub(crate) direction: SelectDirection,
}

/// Resolves segment `i` and makes every per-segment check, in the order the device makes
/// them: the layout's, then `k`'s, then the direction's.
pub(crate) fn resolve(
    request: &BatchedTopKRequest,
    args: &BatchedTopKArgs<&[i64], &[i32], &[u8]>,
    i: u64,
) -> Result<Segment, (Violation, i64)> {
    let (begin, size) = resolve_segment(&request.segments, &args.segments, i)?;
    let at = i as usize;
    let k = args.k.at(at);
    if !request.k.contains(k) {
        let bounds = request.k;
        return Err((Violation::OutOfBounds { arg: "k", bounds }, k));
    }
    if request.reject_k_above_size && k as u64 > size {
        return Err((Violation::KAboveSize, k));
    }
    let direction = match args.direction {
        ChoiceValues::Host(direction) => direction,
        ChoiceValues::PerSegment(dirs) => {
            let byte = dirs[at];
            match byte {
                0 if request.directions & 1 != 0 => SelectDirection::Max,
                1 if request.directions & 2 != 0 => SelectDirection::Min,
                _ => return Err((direction_not_compiled(request), i64::from(byte))),
            }
        }
    };
    Ok(Segment {
        begin,
        size,
        written: (k as u64).min(size),
        direction,
    })
}

/// The key and index (when the call writes indices) of a fill, as the call's types.
fn fill_items<K: RadixKey, V: DeviceValue>(
    fill: BatchedFill,
    values: &ValuesIn<&[V], V>,
) -> (K, Option<V>) {
    let key = K::from_bits(K::Bits::from_u64_truncating(fill.key_bits));
    let value = match (fill.value_bits, values) {
        (Some(bits), ValuesIn::Index(_)) => Some(value_from_bits::<V>(bits)),
        _ => None,
    };
    (key, value)
}

/// The value whose bytes are the low bytes of `bits` (little-endian, as the device stores it).
fn value_from_bits<V: DeviceValue>(bits: u64) -> V {
    const { assert!(std::mem::size_of::<V>() <= 8, "values of at most 8 bytes") };
    let bytes = bits.to_le_bytes();
    // SAFETY: `V: DeviceValue` is valid for every bit pattern and at most 8 bytes (checked
    // above), so its first `size_of::<V>()` bytes of `bytes` are a valid `V`; the read is
    // unaligned.
    unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<V>()) }
}

/// A per-segment direction outside the compiled options.
pub(crate) fn direction_not_compiled(request: &BatchedTopKRequest) -> Violation {
    Violation::NotCompiled {
        arg: "direction",
        mask: request.directions,
        legend: "0 = max, 1 = min",
    }
}

/// The rank of a key: its radix code, inverted for min, so a larger rank is always better.
fn rank<K: RadixKey>(key: K, direction: SelectDirection) -> u64 {
    crate::radix::rank(key, direction == SelectDirection::Min)
}

/// The indices (within the segment) of its selected items, stable sorted: by rank, best first,
/// equal ranks by index. The set: the `written` best by rank, ties at the boundary by the
/// tie-break (smaller indices when unspecified).
pub(crate) fn select_segment<K: RadixKey>(
    keys: &[K],
    written: usize,
    direction: SelectDirection,
    tie_break: TieBreak,
) -> Vec<usize> {
    if written == 0 {
        return Vec::new();
    }
    let ranks: Vec<u64> = keys.iter().map(|&key| rank(key, direction)).collect();
    let mut order: Vec<usize> = (0..keys.len()).collect();
    let prefer_larger = tie_break == TieBreak::PreferLargerIndex;
    if written < keys.len() {
        order.select_nth_unstable_by(written - 1, |&a, &b| {
            let by_rank = ranks[b].cmp(&ranks[a]);
            by_rank.then(if prefer_larger { b.cmp(&a) } else { a.cmp(&b) })
        });
        order.truncate(written);
    }
    order.sort_unstable_by(|&a, &b| ranks[b].cmp(&ranks[a]).then(a.cmp(&b)));
    order
}

/// A processed segment and its selected indices, or why it was skipped.
type SegmentResult = Result<(Segment, Vec<usize>), (Violation, i64)>;

/// Whether every segment is alike (strided layout, one size, one `k`, one direction): then
/// segment 0 stands for all of them (the front check made the keys hold every segment up to
/// the count's upper bound, so none ends past them), and a call with up to 2^63 segments that
/// write nothing (stride 0, size 0) is decided without visiting them one by one.
fn segments_alike(args: &BatchedTopKArgs<&[i64], &[i32], &[u8]>) -> bool {
    matches!(
        (
            args.segments.layout,
            args.segments.sizes,
            args.k,
            args.direction
        ),
        (
            LayoutArg::Strided(_),
            ParamValues::Host(_),
            ParamValues::Host(_),
            ChoiceValues::Host(_)
        )
    )
}

/// Runs a checked call on the host.
pub(super) fn run<K: RadixKey, V: DeviceValue>(
    request: &BatchedTopKRequest,
    args: &BatchedTopKArgs<&[i64], &[i32], &[u8]>,
    keys: &[K],
    values: ValuesIn<&[V], V>,
    out_keys: &mut [K],
    out_values: Option<&mut [V]>,
) -> Outcome {
    let (num_segments, num_segments_error) =
        resolve_num_segments(&request.segments, args.segments.num_segments);
    let tie_break = request.requirements.tie_break;
    let select = |i: u64| -> SegmentResult {
        let segment = resolve(request, args, i)?;
        let items = &keys[segment.begin as usize..][..segment.size as usize];
        let selected = select_segment(
            items,
            segment.written as usize,
            segment.direction,
            tie_break,
        );
        Ok((segment, selected))
    };
    // The sum of the valid segments' sizes (the TotalItems guarantee bounds it: the device
    // sizes its scratch from it and reports the same error) and the first invalid segment.
    let (results, total, first_violation): (Vec<SegmentResult>, u64, _) = if segments_alike(args)
        && num_segments > 0
    {
        match resolve(request, args, 0) {
            // Only segments that write something are visited (the outputs bound them).
            Ok(first) => {
                let visited = if first.written == 0 { 0 } else { num_segments };
                let results = (0..visited).into_par_iter().map(select).collect();
                (results, first.size.saturating_mul(num_segments), None)
            }
            Err((violation, value)) => (Vec::new(), 0, Some(violation.error(0, value))),
        }
    } else {
        // Per-segment buffers (or none at all) bound the segments visited.
        let results: Vec<SegmentResult> = (0..num_segments).into_par_iter().map(select).collect();
        let total = results
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .fold(0u64, |sum, (segment, _)| sum.saturating_add(segment.size));
        let first = results
            .iter()
            .enumerate()
            .find_map(|(i, r)| r.as_ref().err().map(|&(v, value)| v.error(i as u64, value)));
        (results, total, first)
    };
    let total = total.min(i64::MAX as u64) as i64;
    let total_items = request.segments.total_items;
    let total_error = (!total_items.contains(total)).then(|| total_items_error(total_items, total));
    let stride = request.out_stride as usize;
    // A fill takes each valid segment's slots from its results to the most one segment writes
    // (the device's FILL stage). Every segment with such slots is among the results: the
    // alike segments skipped when they write nothing span no slot (their size and k are the
    // bounds).
    let fill = request
        .fill_bits
        .map(|fill| fill_items::<K, V>(fill, &values));
    let fill_end = request.per_segment_max as usize;
    let mut out_values = out_values;
    for (i, result) in results.into_iter().enumerate() {
        let Ok((segment, selected)) = result else {
            continue;
        };
        let base = i * stride;
        let begin = segment.begin as usize;
        for (j, &at) in selected.iter().enumerate() {
            out_keys[base + j] = keys[begin + at];
        }
        if let Some(out) = out_values.as_deref_mut() {
            for (j, &at) in selected.iter().enumerate() {
                out[base + j] = match &values {
                    ValuesIn::Copy(values) => values[begin + at],
                    ValuesIn::Index(index) => index(at as u64),
                    ValuesIn::None => continue,
                };
            }
        }
        if let Some((key, value)) = fill {
            let slots = base + selected.len()..base + fill_end;
            out_keys[slots.clone()].fill(key);
            if let (Some(out), Some(value)) = (out_values.as_deref_mut(), value) {
                out[slots].fill(value);
            }
        }
    }
    let error: Option<Error> = num_segments_error.or(total_error).or(first_violation);
    Outcome::ready((), error)
}
