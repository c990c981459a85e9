//! The contract of batched top-k as the oracle reads it (`batched_topk` and `segments` module
//! docs), in the order the front check reports:
//!
//! 1. The guarantees and parameters merged (`contract::batched_topk`): `total_items`'s
//!    guarantees, then the sizes, `k` and the number of segments, each against its guarantees.
//! 2. The layout against the sizes: a strided layout needs sizes, and a host size at most the
//!    stride, keys for `(n - 1) * stride + size` (`n` the count or its upper bound) and, with a
//!    host count, a total inside `TotalItems`; offsets and listed layouts take only bounds.
//! 3. `out_stride` at least the most one segment can write (`min(k.max, sizes.max)`, at most
//!    the stride, `keys.len()` and a host size or `k`).
//! 4. The per-segment buffers (begin and end offsets, sizes, `k`, direction) hold `n` values.
//! 5. Each output holds `(n - 1) * out_stride + that most` (0 without segments).
//! 6. Listed: the list holds `n` slices. Pairs: `values` as long as the keys (listed: one
//!    value slice per key slice, each as long).
//!
//! A call that passes runs every segment below the count (a deferred count outside its bounds
//! is clamped into them and reported). Segment `i` is checked for its layout (offsets in order,
//! inside the keys; size inside its bounds, at most the stride, inside the keys), then `k`, then
//! the direction; a failing segment writes nothing and the smallest one is reported. The valid
//! segments' sizes must sum inside `TotalItems`, else that is reported and the results are
//! unspecified (nothing past the outputs' required length is written). The outcome reports the
//! count, else the total, else the segment. Each valid segment writes `min(k_i, size_i)` items
//! at `i * out_stride`; every other slot is untouched.
//!
//! Where the docs leave it open, the order above is the one the existing tests pin
//! (`crates/algorithms/tests/batched_topk_host_errors.rs`): the order of the checks within one
//! segment, and which of several outcome errors is reported, are not in the docs.

use oxicub_algorithms::Error;
use oxicub_env::Resolved;
use oxicub_params::{BoundOrigin, Bounds, SelectDirection};

use super::{BatchedCall, Direction, KArg, Layout, Sizes};
use super::{STATIC_K, STATIC_NUM_SEGMENTS, STATIC_SIZE};
use crate::fuzz::expected::assert_outcome;
use crate::fuzz::{
    check_selection, check_untouched, deferred_report, merged, Entry, Expected, FuzzValue, Single,
};
use crate::oracle::RefKey;

/// What the front check knows once its scalar checks pass (steps 1 to 3 and the output
/// length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scalars {
    /// `keys.len()` (listed: the slices' total).
    pub num_keys: u64,
    /// The merged bounds of the segment sizes.
    pub sizes: Bounds,
    /// The merged bounds of `k`.
    pub k: Bounds,
    /// The merged bounds of the number of segments.
    pub num_segments: Bounds,
    /// The number of segments' own bounds (its value, or a deferred count's runtime bounds).
    pub own_num_segments: Bounds,
    /// The `TotalItems` guarantees' bounds.
    pub total_items: Bounds,
    /// The count, or its upper bound when deferred.
    pub max_segments: u64,
    /// The most one segment can write.
    pub per_segment_max: u64,
    /// The distance between segments' outputs.
    pub out_stride: u64,
    /// The length each output needs.
    pub out_len: u64,
}

/// One valid segment of a call that runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentRun {
    /// Its index.
    pub segment: usize,
    /// Where it starts in the keys (listed: in the slices one after another).
    pub begin: usize,
    /// Its size.
    pub size: usize,
    /// `min(k, size)`.
    pub written: usize,
    /// Its direction.
    pub direction: SelectDirection,
}

/// A call that passes the front check: what it reports and writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchedRun {
    /// The error `Outcome::check` returns, if any.
    pub outcome: Option<Expected>,
    /// `false` when the sizes broke `TotalItems`: then only the slots past
    /// [`out_len`](Self::out_len) are pinned (untouched).
    pub results_specified: bool,
    /// The distance between segments' outputs.
    pub out_stride: usize,
    /// The length each output needs.
    pub out_len: usize,
    /// The valid segments, in order.
    pub segments: Vec<SegmentRun>,
}

fn too_small(arg: &'static str, len: usize, required: u64) -> Result<(), Expected> {
    if (len as u64) < required {
        return Err(Expected::BufferTooSmall {
            arg,
            len,
            required: required.min(usize::MAX as u64) as usize,
        });
    }
    Ok(())
}

impl<Key: RefKey> BatchedCall<Key> {
    /// The number of keys the layout addresses (listed: the slices' total).
    pub fn num_keys(&self) -> u64 {
        match &self.layout {
            Layout::Listed { lens } => lens.iter().map(|&l| l as u64).sum(),
            _ => self.keys.len() as u64,
        }
    }

    /// The output buffers, by name and length.
    pub fn outputs(&self) -> Vec<(&'static str, usize)> {
        let second = match self.entry {
            Entry::Keys => return vec![("out_keys", self.out_lens[0])],
            Entry::Pairs => "out_values",
            Entry::Indices => "out_indices",
        };
        vec![("out_keys", self.out_lens[0]), (second, self.out_lens[1])]
    }

    /// The host value of the segment sizes, if any.
    fn host_size(&self) -> Option<i64> {
        match &self.sizes {
            Sizes::Static => Some(STATIC_SIZE),
            Sizes::Uniform(value) => Some(*value),
            Sizes::PerSegment { .. } | Sizes::BoundsOnly { .. } => None,
        }
    }

    /// The host value of `k`, if any.
    fn host_k(&self) -> Option<i64> {
        match &self.k {
            KArg::Static => Some(STATIC_K),
            KArg::Uniform(value) => Some(*value),
            KArg::PerSegment { .. } => None,
        }
    }

    /// The front check's steps 1 to 3 and the output length.
    pub fn scalars(&self) -> Result<Scalars, Expected> {
        let g = &self.guarantees;
        let total_items = g.total_items[0].intersect(g.total_items[1]);
        if total_items.is_empty() {
            return Err(Expected::ContradictoryGuarantees {
                param: "total_items",
                bounds: total_items,
            });
        }
        let own = |host: Option<i64>, bounds: &Option<Bounds>| match host {
            Some(value) => Bounds::exactly(value),
            None => bounds.unwrap_or(Bounds::COUNTS),
        };
        let size_bounds = match &self.sizes {
            Sizes::PerSegment { bounds, .. } | Sizes::BoundsOnly { bounds } => *bounds,
            _ => None,
        };
        let host_size = self.host_size();
        let own_sizes = own(host_size, &size_bounds);
        let sizes = merged("segment_sizes", own_sizes, host_size, g.segment_sizes)?;
        let k_bounds = match &self.k {
            KArg::PerSegment { bounds, .. } => *bounds,
            _ => None,
        };
        let host_k = self.host_k();
        let k = merged("k", own(host_k, &k_bounds), host_k, g.k)?;
        let (host_count, count_bounds) = match self.num_segments {
            Single::Static => (Some(STATIC_NUM_SEGMENTS), None),
            Single::Uniform(value) => (Some(value), None),
            Single::Deferred { bounds, .. } => (None, bounds),
        };
        let own_count = own(host_count, &count_bounds);
        let num_segments = merged("num_segments", own_count, host_count, g.num_segments)?;
        let num_keys = self.num_keys();
        let max_segments = host_count.unwrap_or(num_segments.max) as u64;
        let mut largest = (sizes.max as u64).min(num_keys);
        let invalid_sizes = Err(Expected::InvalidArgument {
            arg: "segment_sizes",
        });
        match (&self.layout, host_size) {
            (Layout::Strided { stride }, Some(size)) => {
                let (size, stride) = (size as u64, *stride as u64);
                if size > stride {
                    return invalid_sizes;
                }
                let needed = match max_segments.checked_sub(1) {
                    None => 0,
                    Some(last) => last
                        .checked_mul(stride)
                        .and_then(|v| v.checked_add(size))
                        .unwrap_or(u64::MAX),
                };
                too_small("keys", num_keys as usize, needed)?;
                if host_count.is_some() {
                    let total = size.saturating_mul(max_segments).min(i64::MAX as u64) as i64;
                    if !total_items.contains(total) {
                        return Err(Expected::OutOfBounds {
                            param: "total_items",
                            value: total,
                            bounds: total_items,
                            origin: BoundOrigin::Guarantee,
                        });
                    }
                }
                largest = largest.min(stride).min(size);
            }
            (Layout::Strided { stride }, None) => match &self.sizes {
                Sizes::PerSegment { .. } => largest = largest.min(*stride as u64),
                _ => return invalid_sizes,
            },
            (Layout::Offsets { .. } | Layout::Listed { .. }, _) => {
                if let Sizes::PerSegment { .. } = self.sizes {
                    return invalid_sizes;
                }
            }
        }
        let mut per_segment_max = largest.min(k.max as u64);
        if let Some(k) = host_k {
            per_segment_max = per_segment_max.min(k as u64);
        }
        let out_stride = match self.out_stride {
            None => per_segment_max,
            Some(stride) if stride as u64 >= per_segment_max => stride as u64,
            Some(_) => return Err(Expected::InvalidArgument { arg: "out_stride" }),
        };
        let out_len = match max_segments.checked_sub(1) {
            Some(last) if per_segment_max > 0 => last
                .saturating_mul(out_stride)
                .saturating_add(per_segment_max),
            _ => 0,
        };
        Ok(Scalars {
            num_keys,
            sizes,
            k,
            num_segments,
            own_num_segments: own_count,
            total_items,
            max_segments,
            per_segment_max,
            out_stride,
            out_len,
        })
    }

    /// The whole front check: [`scalars`](Self::scalars), then steps 4 to 6.
    pub fn front(&self) -> Result<Scalars, Expected> {
        let s = self.scalars()?;
        let n = s.max_segments;
        if let Layout::Offsets { begin, end } = &self.layout {
            too_small("begin_offsets", begin.len(), n)?;
            too_small("end_offsets", end.len(), n)?;
        }
        if let Sizes::PerSegment { values, .. } = &self.sizes {
            too_small("segment_sizes", values.len(), n)?;
        }
        if let KArg::PerSegment { values, .. } = &self.k {
            too_small("k", values.len(), n)?;
        }
        match &self.direction {
            Direction::Bytes { bytes, .. } => too_small("direction", bytes.len(), n)?,
            Direction::Typed(directions) => too_small("direction", directions.len(), n)?,
            _ => {}
        }
        for (arg, len) in self.outputs() {
            too_small(arg, len, s.out_len)?;
        }
        if let Layout::Listed { lens } = &self.layout {
            too_small("segments", lens.len(), n)?;
        }
        if self.entry == Entry::Pairs {
            let mismatch = |actual: usize, expected: usize| {
                let error = Expected::LengthMismatch {
                    arg: "values",
                    actual,
                    expected,
                };
                (actual != expected).then_some(error)
            };
            let error = match &self.layout {
                Layout::Listed { lens } => {
                    mismatch(self.value_lens.len(), lens.len()).or_else(|| {
                        let mut pairs = self.value_lens.iter().zip(lens);
                        pairs.find_map(|(&values, &keys)| mismatch(values, keys))
                    })
                }
                _ => mismatch(self.values_len, s.num_keys as usize),
            };
            if let Some(error) = error {
                return Err(error);
            }
        }
        Ok(s)
    }

    /// Segment `i` of a call that runs, or the argument at fault and its value.
    fn resolve(&self, s: &Scalars, i: usize) -> Result<SegmentRun, (&'static str, i64)> {
        let out_of_bounds = |size: i64| ("segment_sizes", size);
        let (begin, size) = match &self.layout {
            Layout::Offsets { begin, end } => {
                let (b, e) = (begin[i], end[i]);
                if b < 0 || b > e {
                    return Err(("offsets", b));
                }
                if e as u64 > s.num_keys {
                    return Err(("offsets", e));
                }
                if !s.sizes.contains(e - b) {
                    return Err(out_of_bounds(e - b));
                }
                (b as u64, (e - b) as u64)
            }
            Layout::Listed { lens } => {
                let size = lens[i] as i64;
                if !s.sizes.contains(size) {
                    return Err(out_of_bounds(size));
                }
                (lens[..i].iter().map(|&l| l as u64).sum(), size as u64)
            }
            Layout::Strided { stride } => {
                let size = match (&self.sizes, self.host_size()) {
                    (_, Some(size)) => size,
                    (Sizes::PerSegment { values, .. }, None) => values[i],
                    _ => unreachable!("the front check rejects a strided layout without sizes"),
                };
                if !s.sizes.contains(size) {
                    return Err(out_of_bounds(size));
                }
                let (size, stride) = (size as u64, *stride as u64);
                if size > stride {
                    return Err(("segment_sizes", size as i64));
                }
                let end = (i as u64).saturating_mul(stride).saturating_add(size);
                if end > s.num_keys {
                    return Err(("offsets", end.min(i64::MAX as u64) as i64));
                }
                (i as u64 * stride, size)
            }
        };
        let k = match &self.k {
            KArg::PerSegment { values, .. } => values[i],
            _ => self.host_k().unwrap_or_default(),
        };
        if !s.k.contains(k) {
            return Err(("k", k));
        }
        let direction = match &self.direction {
            Direction::Max => SelectDirection::Max,
            Direction::Min => SelectDirection::Min,
            Direction::Choice(direction) => *direction,
            Direction::Typed(directions) => directions[i],
            Direction::Bytes { set, bytes } => {
                let direction = match bytes[i] {
                    0 => SelectDirection::Max,
                    1 => SelectDirection::Min,
                    byte => return Err(("direction", i64::from(byte))),
                };
                if !set.admits(direction) {
                    return Err(("direction", i64::from(bytes[i])));
                }
                direction
            }
        };
        Ok(SegmentRun {
            segment: i,
            begin: begin as usize,
            size: size as usize,
            written: (k as u64).min(size) as usize,
            direction,
        })
    }

    /// The front check's error, or what the call reports and which segments write.
    pub fn predict(&self) -> Result<BatchedRun, Expected> {
        let s = self.front()?;
        let (count, count_error) = match self.num_segments {
            Single::Static => (STATIC_NUM_SEGMENTS, None),
            Single::Uniform(value) => (value, None),
            Single::Deferred { value, .. } => {
                let own = s.own_num_segments;
                deferred_report("num_segments", value, own, s.num_segments)
            }
        };
        let (mut segments, mut violation, mut total) = (Vec::new(), None, 0u64);
        for i in 0..count as usize {
            match self.resolve(&s, i) {
                Ok(segment) => {
                    total = total.saturating_add(segment.size as u64);
                    segments.push(segment);
                }
                Err((arg, value)) => {
                    violation.get_or_insert(Expected::InvalidSegment {
                        segment: i as u64,
                        arg,
                        value,
                    });
                }
            }
        }
        let total = total.min(i64::MAX as u64) as i64;
        let total_error = (!s.total_items.contains(total)).then_some(Expected::OutOfBounds {
            param: "total_items",
            value: total,
            bounds: s.total_items,
            origin: BoundOrigin::Guarantee,
        });
        Ok(BatchedRun {
            results_specified: total_error.is_none(),
            outcome: count_error.or(total_error).or(violation),
            out_stride: s.out_stride as usize,
            out_len: s.out_len as usize,
            segments,
        })
    }

    /// Checks a call: `result` is the entry point's result with `Outcome::check` applied;
    /// the outputs started as poison; `second` is the values or indices output (`None` for
    /// keys).
    pub fn check<V: FuzzValue>(
        &self,
        requirements: Resolved,
        result: &Result<Result<(), Error>, Error>,
        out_keys: &[Key],
        second: Option<&[V]>,
    ) {
        let run = match self.predict() {
            Err(expected) => {
                expected.assert_is("front check", result);
                return check_untouched("rejected call", out_keys, second, 0);
            }
            Ok(run) => run,
        };
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(error) => panic!("front check: expected the call to run, got {error:?}"),
        };
        assert_outcome("outcome", &run.outcome, outcome);
        let slots = |from: usize, to: usize| (&out_keys[from..to], second.map(|s| &s[from..to]));
        let past = |from: usize| (&out_keys[from..], second.map(|s| &s[from..]));
        if !run.results_specified {
            let (keys, second) = past(run.out_len);
            return check_untouched("past the output", keys, second, run.out_len);
        }
        let mut untouched_from = 0;
        // A segment that writes nothing may lie past the outputs (`out_stride` is unchecked
        // when no segment can write).
        for segment in run.segments.iter().filter(|s| s.written > 0) {
            let base = segment.segment * run.out_stride;
            let (keys, rest) = slots(untouched_from, base);
            check_untouched("between segments", keys, rest, untouched_from);
            let end = base + segment.written;
            let source = &self.keys[segment.begin..segment.begin + segment.size];
            let first = match self.entry {
                Entry::Pairs => segment.begin as u64,
                _ => 0,
            };
            let written = second.map(|s| (&s[base..end], first));
            let what = format!("segment {}", segment.segment);
            let (k, direction) = (segment.written, segment.direction);
            let out = &out_keys[base..end];
            check_selection(&what, source, k, direction, requirements, out, written);
            untouched_from = end;
        }
        let (keys, rest) = past(untouched_from);
        check_untouched("past the last segment", keys, rest, untouched_from);
    }
}
