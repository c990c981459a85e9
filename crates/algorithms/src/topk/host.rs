//! Top-k on the host: MSB-first radix select over the keys' radix codes (rayon-parallel digit
//! histograms, one pass per byte, early exit once the boundary bucket is taken whole), then
//! the boundary resolved by source index and only the `k` results sorted. The oracle of the
//! GPU tests.

use rayon::prelude::*;

use super::TopKBackend;
use crate::backend::{zeroed, DeviceValue, Host, ParamValues};
use crate::contract::TopKRequest;
use crate::radix::{RadixBits, RadixKey};
use crate::sealed::Token;
use crate::segments::{Outcome, Pending};
use crate::values::ValuesIn;
use crate::Error;
use oxicub_env::{OutputOrdering, TieBreak};
use oxicub_params::SelectDirection;

/// Bits per radix-select pass.
const DIGIT_BITS: u32 = 8;
/// Keys per rayon task.
const CHUNK: usize = 1 << 16;

/// The number of items to select: the host value, or a deferred one clamped into its bounds
/// (and the error to report when it was outside them), then to `num_items`, as the device
/// does.
pub(super) fn resolve_k(
    request: &TopKRequest,
    k: ParamValues<&[i64], &[i32]>,
) -> (usize, Option<Error>) {
    let (value, error) = match k {
        ParamValues::Host(value) => (value, None),
        ParamValues::Deferred(value) => request.k.resolve("k", value[0]),
        ParamValues::PerSegment(_) | ParamValues::PerSegment32(_) | ParamValues::BoundsOnly => {
            unreachable!("a single-problem k is one value (`SingleValue`)")
        }
    };
    ((value as u64).min(request.num_items) as usize, error)
}

/// The length of an `*_owned` result: `min(k, keys.len())` for a `k` the host knows, and for a
/// deferred `k` what the call may write, `min(bounds.max, keys.len())` (its first `k` slots
/// written), on every backend.
pub(super) fn owned_len<I, N>(request: &TopKRequest, k: ParamValues<I, N>) -> usize {
    match k {
        ParamValues::Host(value) => (value as u64).min(request.num_items) as usize,
        _ => request.max_written as usize,
    }
}

/// An `*_owned` result of the `selected` items, padded to `len` (a deferred k's bound): the
/// slots past them hold zero bits, as on the device.
pub(super) fn padded<K: RadixKey, V: DeviceValue>(
    len: usize,
    mut keys: Vec<K>,
    values: Option<Vec<V>>,
) -> (Vec<K>, Option<Vec<V>>) {
    keys.resize(
        len,
        K::from_bits(<K::Bits as RadixBits>::from_u64_truncating(0)),
    );
    let values = values.map(|mut values| {
        values.resize(len, zeroed::<V>());
        values
    });
    (keys, values)
}

/// The rank of a key: its radix code, inverted for min, so a larger rank is always better.
fn rank<K: RadixKey>(key: K, direction: SelectDirection) -> u64 {
    crate::radix::rank(key, direction == SelectDirection::Min)
}

/// Source indices of the selected items, in the output order the request asks for.
pub(super) fn select<K: RadixKey>(keys: &[K], k: usize, request: &TopKRequest) -> Vec<usize> {
    let direction = request.direction;
    if k == 0 {
        return Vec::new();
    }
    let mut selected: Vec<usize> = if k >= keys.len() {
        (0..keys.len()).collect()
    } else {
        select_set(keys, k, request)
    };
    if request.requirements.ordering != OutputOrdering::Unsorted {
        // Stable sort of an index-ordered set: equal keys stay in source-index order, which
        // satisfies both `Sorted` and `StableSorted`.
        selected.par_sort_by_key(|&i| std::cmp::Reverse(rank(keys[i], direction)));
    }
    selected
}

/// The selected set in source-index order: radix select of the boundary, then the items above
/// it and the boundary items the tie-break keeps. `0 < k < keys.len()`.
fn select_set<K: RadixKey>(keys: &[K], k: usize, request: &TopKRequest) -> Vec<usize> {
    let direction = request.direction;
    let bits = <K::Bits as RadixBits>::BITS;
    let bins = 1usize << DIGIT_BITS;
    // Invariant: the items whose masked rank is above `prefix` are `k - remaining` selected
    // items; those equal to it (the candidates) hold the other `remaining`.
    let (mut prefix, mut mask, mut remaining) = (0u64, 0u64, k as u64);
    let mut shift = bits;
    while shift > 0 {
        shift -= DIGIT_BITS;
        let histogram = keys
            .par_chunks(CHUNK)
            .map(|chunk| {
                let mut counts = vec![0u64; bins];
                for &key in chunk {
                    let r = rank(key, direction);
                    if r & mask == prefix {
                        counts[((r >> shift) & (bins as u64 - 1)) as usize] += 1;
                    }
                }
                counts
            })
            .reduce(
                || vec![0u64; bins],
                |mut total, part| {
                    total.iter_mut().zip(part).for_each(|(t, p)| *t += p);
                    total
                },
            );
        // The pivot bucket: scanning from the best digit down, the one that reaches `remaining`.
        let mut above = 0u64;
        let mut pivot = 0usize;
        for digit in (0..bins).rev() {
            if above + histogram[digit] >= remaining {
                pivot = digit;
                break;
            }
            above += histogram[digit];
        }
        remaining -= above;
        prefix |= (pivot as u64) << shift;
        mask |= ((bins as u64) - 1) << shift;
        if histogram[pivot] == remaining {
            break; // the whole pivot bucket is selected: no tie to break
        }
    }
    let mut winners: Vec<usize> = (0..keys.len())
        .into_par_iter()
        .filter(|&i| rank(keys[i], direction) & mask > prefix)
        .collect();
    let boundary: Vec<usize> = (0..keys.len())
        .into_par_iter()
        .filter(|&i| rank(keys[i], direction) & mask == prefix)
        .collect();
    let take = remaining as usize;
    // After an early exit every candidate is taken; otherwise the candidates have equal keys
    // and the tie-break chooses by index (the host prefers smaller ones when unspecified).
    let kept = match request.requirements.tie_break {
        TieBreak::PreferLargerIndex => &boundary[boundary.len() - take..],
        TieBreak::PreferSmallerIndex | TieBreak::Unspecified => &boundary[..take],
    };
    winners.extend_from_slice(kept);
    winners.par_sort_unstable();
    winners
}

/// Writes the selected keys and values (as ordered in `selected`) to the first slots of the
/// outputs.
fn write_selected<K: RadixKey, V: Copy + Send + Sync>(
    selected: &[usize],
    keys: &[K],
    values: &ValuesIn<&[V], V>,
    out_keys: &mut [K],
    out_values: Option<&mut [V]>,
) {
    out_keys[..selected.len()]
        .par_iter_mut()
        .zip(selected.par_iter())
        .for_each(|(out, &i)| *out = keys[i]);
    if let Some(out_values) = out_values {
        let out_values = &mut out_values[..selected.len()];
        match values {
            ValuesIn::None => {}
            ValuesIn::Copy(values) => out_values
                .par_iter_mut()
                .zip(selected.par_iter())
                .for_each(|(out, &i)| *out = values[i]),
            ValuesIn::Index(index) => out_values
                .par_iter_mut()
                .zip(selected.par_iter())
                .for_each(|(out, &i)| *out = index(i as u64)),
        }
    }
}

impl TopKBackend for Host {
    type OwnedKeys<K: RadixKey> = Vec<K>;
    type OwnedValues<V: DeviceValue> = Vec<V>;

    #[allow(clippy::too_many_arguments)]
    fn topk_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: TopKRequest,
        k: ParamValues<&[i64], &[i32]>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<Outcome, Error> {
        let (count, error) = resolve_k(&request, k);
        let selected = select(keys, count, &request);
        write_selected(&selected, keys, &values, out_keys, out_values);
        Ok(Outcome::ready((), error))
    }

    fn topk_owned_checked<K: RadixKey, V: DeviceValue>(
        &self,
        _: Token,
        request: TopKRequest,
        k: ParamValues<&[i64], &[i32]>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
    ) -> Result<Pending<(Vec<K>, Option<Vec<V>>)>, Error> {
        let len = owned_len(&request, k);
        let (count, error) = resolve_k(&request, k);
        let selected = select(keys, count, &request);
        let out_keys: Vec<K> = selected.par_iter().map(|&i| keys[i]).collect();
        let out_values = match values {
            ValuesIn::None => None,
            ValuesIn::Copy(values) => Some(selected.par_iter().map(|&i| values[i]).collect()),
            ValuesIn::Index(index) => Some(selected.par_iter().map(|&i| index(i as u64)).collect()),
        };
        Ok(Pending::ready(padded(len, out_keys, out_values), error))
    }
}
