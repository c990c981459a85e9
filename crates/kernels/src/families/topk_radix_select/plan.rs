//! The launch plan of a top-k call, as pure functions of its shape (no buffers, no device):
//! whether the fast path samples a threshold and prefilters, whether the rank sort orders the
//! result, the scratch layout and the stages in stream order (docs/design/topk.md,
//! "Radix select", "Sample and prefilter" and "Rank sort"). The launcher ([`super::launch`])
//! adds the one number that depends on the device, the prefilter's grid
//! ([`SelectPlan::layout`]).

use super::constants::*;
use crate::Direction;

/// A call as the plan sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SelectShape {
    /// Number of keys.
    pub(crate) len: u64,
    /// The most items the call writes (`min(k or its bound, len)`), above 0.
    pub(crate) max_written: u64,
    /// Bits (and bytes) of a key.
    pub(crate) key_bits: u32,
    pub(crate) key_bytes: u64,
    pub(crate) direction: Direction,
    pub(crate) sorted: bool,
    pub(crate) deterministic: bool,
    pub(crate) prefer_larger: bool,
    /// The values written are source indices.
    pub(crate) values_are_index: bool,
}

/// What a call runs, before the device's prefilter grid is known.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SelectPlan {
    pub(crate) shape_len: u64,
    pub(crate) max_written: u64,
    pub(crate) key_bits: u32,
    pub(crate) key_bytes: u64,
    pub(crate) sorted: bool,
    /// No determinism and unsorted: FINAL writes the outputs directly.
    pub(crate) direct: bool,
    /// The rank sort orders the result.
    pub(crate) rank_sort: bool,
    /// Items the rank buffer holds (0: no rank sort).
    pub(crate) rank_cap: u64,
    /// Keys per sample stratum.
    pub(crate) stratum: u64,
    /// The threshold is the `sample_rank`-th best sample.
    pub(crate) sample_rank: u64,
    /// Keys expected to reach the threshold.
    pub(crate) expected: u64,
    /// The fast path: sample, prefilter, select over the candidates.
    pub(crate) fast: bool,
    /// Rank = radix code XOR flip.
    pub(crate) flip: u64,
    /// The flags of every stage.
    pub(crate) flags: u32,
}

/// Plans a call.
pub(crate) fn plan(shape: &SelectShape) -> SelectPlan {
    let len = shape.len;
    let max_written = shape.max_written;
    // The fast path: a sampled threshold, one read of the input into a candidate buffer, the
    // select over the candidates. `kb` bounds k (a deferred k is at most max_written).
    let kb = max_written;
    let direct = !shape.deterministic && !shape.sorted;
    let rank_sort = shape.sorted && kb <= RANK_K_MAX;
    let rank_cap = if rank_sort || (!direct && kb <= RANK_K_MAX) {
        (2 * kb).max(kb + 4096).min(RANK_CAP_MAX).max(kb)
    } else {
        0
    };
    // Sample i is drawn from keys [i * stratum, (i + 1) * stratum): at most
    // lambda = kb / stratum samples are expected among the top kb keys, and T (the
    // sample_rank-th best sample) lets fewer than k keys through only if sample_rank of them
    // are: P(Poisson(lambda) >= sample_rank) <= SAMPLE_FAILURE (the stratified count is more
    // concentrated than the Poisson one).
    let stratum = (len / u64::from(TOPK_SAMPLES)).max(1);
    let sample_rank = poisson_quantile(kb as f64 / stratum as f64, SAMPLE_FAILURE);
    let expected = sample_rank * stratum;
    let fast = len >= FAST_MIN_LEN
        && sample_rank <= u64::from(TOPK_SAMPLES) / 4
        && 4 * expected + 4096 <= len / 4
        && (direct || rank_cap > 0);
    let flip = match shape.direction {
        Direction::Descending => 0,
        Direction::Ascending => u64::MAX >> (64 - shape.key_bits),
    };
    let set = |condition: bool, flag: u32| if condition { flag } else { 0 };
    let flags = set(shape.values_are_index, TOPK_VALUES_ARE_INDEX)
        | set(shape.prefer_larger, TOPK_PREFER_LARGER)
        | set(direct, TOPK_DIRECT)
        | set(rank_sort, TOPK_RANK_SORT);
    SelectPlan {
        shape_len: len,
        max_written,
        key_bits: shape.key_bits,
        key_bytes: shape.key_bytes,
        sorted: shape.sorted,
        direct,
        rank_sort,
        rank_cap,
        stratum,
        sample_rank,
        expected,
        fast,
        flip,
        flags,
    }
}

/// The call's one scratch allocation, in `u64` words: 256-byte aligned regions, first those
/// that must start zeroed (one memset of `zeroed` words), then the rest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScratchLayout {
    /// Words of the allocation.
    pub(crate) words: u64,
    /// Words that start zeroed.
    pub(crate) zeroed: u64,
    /// Segments of the candidate buffer (one per prefilter warp), and their capacity.
    pub(crate) segments: u64,
    pub(crate) cand_cap: u64,
    /// Slots of the candidate buffer (the rank sort groups its items there too).
    pub(crate) cand_slots: u64,
    /// Word offsets of the regions.
    pub(crate) state: u64,
    pub(crate) histogram: u64,
    pub(crate) rank_pos: u64,
    pub(crate) tmp_keys: u64,
    pub(crate) tmp_values: u64,
    pub(crate) tile_offsets: u64,
    pub(crate) boundary_offsets: u64,
    pub(crate) cand_counts: u64,
    pub(crate) cand_keys: u64,
    pub(crate) cand_index: u64,
    pub(crate) rank_keys: u64,
    pub(crate) rank_index: u64,
}

/// How many blocks a stage launches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Grid {
    /// Exactly this many.
    Blocks(u32),
    /// The device's grid for `items` items (at most a wave), at least `min_blocks`.
    Items { items: u64, min_blocks: u64 },
}

/// One launch, in stream order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// INIT and SAMPLE, one block of the sample's kernel.
    Sample,
    /// PREFILTER on its own kernel, on the layout's grid (DECIDE in its last block).
    Prefilter,
    /// A stage of the main kernel.
    Stage {
        grid: Grid,
        stage: u32,
        shift: u32,
        pass: u32,
        flags: u32,
        scan_slot: u32,
    },
}

impl SelectPlan {
    /// Digit passes of the radix select.
    pub(crate) fn passes(&self) -> u32 {
        self.key_bits / TOPK_DIGIT_BITS
    }

    /// Items the bit-split sort keeps aside (sorted output the rank sort does not serve).
    fn sort_scratch(&self) -> u64 {
        if self.sorted && !self.rank_sort {
            self.max_written
        } else {
            0
        }
    }

    /// The scratch layout when the prefilter (fast path) runs on `prefilter_grid` blocks (1 on
    /// the other path).
    pub(crate) fn layout(&self, prefilter_grid: u32) -> ScratchLayout {
        let segments = u64::from(prefilter_grid) * u64::from(BLOCK_THREADS / 32);
        // One segment of the candidate buffer per prefilter warp, each for 4x its expected
        // share (more for a small sample_rank, whose count varies more: the count of keys
        // reaching T is about stratum x Gamma(sample_rank)), plus 64.
        let cand_cap = if self.fast {
            (4 * self.expected + 16 * self.stratum).div_ceil(segments) + 64
        } else {
            0
        };
        // The rank sort groups its items in the candidate buffer (no longer read by then).
        let cand_slots = (segments * cand_cap).max(self.rank_cap);
        let sort_scratch = self.sort_scratch();
        let input_tiles = self.shape_len.div_ceil(u64::from(BLOCK_THREADS));
        let key_bytes = self.key_bytes;
        // One scratch allocation per call (each stream-ordered allocation and free costs host
        // time, which bounds the call at 2^24 keys).
        let mut words = 0u64;
        let state = region(&mut words, u64::from(TOPK_STATE_SLOTS), 8);
        // The digit histograms of the select, then the rank sort's bucket counts and starts
        // (u32).
        let histogram = region(
            &mut words,
            (u64::from(self.passes()) << TOPK_DIGIT_BITS) + u64::from(TOPK_RANK_BUCKETS),
            8,
        );
        // Output positions (zeroed), then each item's bucket and slot.
        let rank_pos = region(&mut words, 2 * self.rank_cap, 8);
        let tmp_keys = region(&mut words, sort_scratch, key_bytes);
        let tmp_values = region(&mut words, sort_scratch, 8);
        let zeroed = words;
        // Every word below is written by a stage before any stage reads it: tile counts before
        // the scans, each prefilter warp's count before the later stages, candidates below
        // their segment's count, rank items below their count.
        let tile_offsets = region(&mut words, input_tiles, 8);
        let boundary_offsets = region(&mut words, input_tiles, 8);
        let cand_counts = region(&mut words, segments, 8);
        let cand_keys = region(&mut words, cand_slots, key_bytes);
        let cand_index = region(&mut words, cand_slots, 8);
        let rank_keys = region(&mut words, self.rank_cap, key_bytes);
        let rank_index = region(&mut words, self.rank_cap, 8);
        ScratchLayout {
            words,
            zeroed,
            segments,
            cand_cap,
            cand_slots,
            state,
            histogram,
            rank_pos,
            tmp_keys,
            tmp_values,
            tile_offsets,
            boundary_offsets,
            cand_counts,
            cand_keys,
            cand_index,
            rank_keys,
            rank_index,
        }
    }

    /// The launches in stream order; `cand_slots` from the layout.
    pub(crate) fn steps(&self, cand_slots: u64) -> Vec<Step> {
        let len = self.shape_len;
        let stage =
            |grid: Grid, stage: u32, shift: u32, pass: u32, flags: u32, slot: u32| Step::Stage {
                grid,
                stage,
                shift,
                pass,
                flags,
                scan_slot: slot,
            };
        let items = |items: u64| Grid::Items {
            items,
            min_blocks: 1,
        };
        let one = Grid::Blocks(1);
        let input = items(len);
        let output = items(self.max_written);
        let mut steps = Vec::new();
        if self.fast {
            // INIT + SAMPLE in one launch of its own kernel; the prefilter on its own kernel,
            // DECIDE in its last block; each PIVOT in the last block of its HISTOGRAM.
            steps.push(Step::Sample);
            steps.push(Step::Prefilter);
        } else {
            steps.push(stage(one, TOPK_STAGE_INIT, 0, 0, 0, 0));
        }
        let bits = self.key_bits;
        let histogram = Grid::Items {
            items: len,
            min_blocks: len.div_ceil(MAX_KEYS_PER_BLOCK),
        };
        for pass in 0..self.passes() {
            let shift = bits - TOPK_DIGIT_BITS * (pass + 1);
            steps.push(stage(histogram, TOPK_STAGE_HISTOGRAM, shift, pass, 0, 0));
        }
        if self.fast {
            steps.push(stage(items(cand_slots), TOPK_STAGE_FINAL, 0, 0, 0, 0));
        }
        // The input-order stages: the whole work in mode 0, no-ops on the fast path.
        let boundary = (TOPK_SCAN_BOUNDARY, TOPK_SLOT_BOUNDARY);
        steps.push(stage(input, TOPK_STAGE_COUNT_BOUNDARY, 0, 0, 0, 0));
        steps.push(stage(one, TOPK_STAGE_SCAN, 0, 0, boundary.0, boundary.1));
        steps.push(stage(input, TOPK_STAGE_COUNT_SELECTED, 0, 0, 0, 0));
        steps.push(stage(one, TOPK_STAGE_SCAN, 0, 0, 0, TOPK_SLOT_SELECTED));
        steps.push(stage(input, TOPK_STAGE_SCATTER_SELECTED, 0, 0, 0, 0));
        if self.rank_cap > 0 {
            let grid = items(self.rank_cap);
            steps.push(stage(grid, TOPK_STAGE_RANK_BUCKET, 0, 0, 0, 0));
            steps.push(stage(grid, TOPK_STAGE_RANK_PLACE, 0, 0, 0, 0));
            steps.push(stage(items(u64::MAX), TOPK_STAGE_RANK_COUNT, 0, 0, 0, 0));
            steps.push(stage(grid, TOPK_STAGE_RANK_SCATTER, 0, 0, 0, 0));
        }
        if self.sorted && !self.rank_sort {
            // LSD stable split by each rank bit, set bits first: sorted by rank descending,
            // equal ranks in source-index order. An even number of passes ends in the outputs.
            for bit in 0..bits {
                let source = if bit % 2 == 1 { TOPK_SOURCE_IS_TMP } else { 0 };
                let flags = TOPK_LEN_IS_SELECTED | source;
                steps.push(stage(output, TOPK_STAGE_COUNT_SPLIT, bit, 0, flags, 0));
                let ones = TOPK_SLOT_ONES;
                steps.push(stage(
                    one,
                    TOPK_STAGE_SCAN,
                    0,
                    0,
                    TOPK_LEN_IS_SELECTED,
                    ones,
                ));
                steps.push(stage(output, TOPK_STAGE_SCATTER_SPLIT, bit, 0, flags, 0));
            }
        }
        steps
    }
}

/// The word offset of a new region of `count` items of `bytes` bytes at the end of a scratch
/// layout `words` long (then past it): 256-byte aligned, at least one word.
fn region(words: &mut u64, count: u64, bytes: u64) -> u64 {
    let at = *words;
    *words += (count * bytes).div_ceil(8).max(1).next_multiple_of(32);
    at
}

/// The smallest `m >= 1` with `P(X >= m) <= p` for `X ~ Poisson(lambda)`: the tail is summed
/// from the far end (small terms first), so it stays exact far below the mode's probability.
fn poisson_quantile(lambda: f64, p: f64) -> u64 {
    if lambda <= 0.0 {
        return 1;
    }
    // The terms past lambda + 40 sqrt(lambda) + 60 are far below p.
    let top = (lambda + 40.0 * lambda.sqrt() + 60.0).ceil() as u64;
    let mode = lambda.floor() as u64;
    // ln pmf(mode) = mode ln(lambda) - lambda - ln(mode!), by the sum of logs (mode is at most
    // TOPK_SAMPLES here, as the host bounds lambda; larger inputs give a far-off answer, never
    // a smaller one than needed, and the caller rejects it).
    let mut ln_pmf = -lambda;
    for j in 1..=mode {
        ln_pmf += lambda.ln() - (j as f64).ln();
    }
    let mut pmf = Vec::with_capacity((top - mode + 1) as usize);
    for j in mode..=top {
        pmf.push(ln_pmf.exp());
        ln_pmf += lambda.ln() - ((j + 1) as f64).ln();
    }
    let mut tail = 0.0;
    let mut m = top + 1;
    for (offset, term) in pmf.iter().enumerate().rev() {
        if tail + term > p {
            break;
        }
        tail += term;
        m = mode + offset as u64;
    }
    m.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call over `len` f32 keys writing `k`: the largest, ties to the smaller index, keys only.
    fn shape(len: u64, k: u64, sorted: bool, deterministic: bool) -> SelectShape {
        SelectShape {
            len,
            max_written: k.min(len),
            key_bits: 32,
            key_bytes: 4,
            direction: Direction::Descending,
            sorted,
            deterministic,
            prefer_larger: false,
            values_are_index: false,
        }
    }

    fn stages(steps: &[Step]) -> Vec<u32> {
        steps
            .iter()
            .filter_map(|step| match step {
                Step::Stage { stage, .. } => Some(*stage),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn poisson_quantile_matches_hand_values() {
        // P(Poisson(1) >= 17) = 1.09e-15, P(Poisson(1) >= 18) = 6.1e-17.
        assert_eq!(poisson_quantile(1.0, 1e-15), 18);
        assert_eq!(poisson_quantile(1.0, 1.1e-15), 17);
        // lambda = 2^-11: P(X >= 4) = 2.4e-15, P(X >= 5) = 2.3e-19.
        assert_eq!(poisson_quantile(1.0 / 2048.0, 1e-15), 5);
        assert_eq!(poisson_quantile(1.0 / 2048.0, 2.4e-15), 4);
        assert_eq!(poisson_quantile(0.0, 1e-15), 1);
        // A large mean: about lambda + 8 sqrt(lambda).
        let m = poisson_quantile(4096.0, 1e-15);
        assert!((4096 + 7 * 64..4096 + 9 * 64).contains(&m), "{m}");
    }

    /// No determinism and no order (2^24 keys, k = 2048): the fast path writes the outputs
    /// from FINAL; the input-order stages are launched (no-ops unless the fast path falls
    /// back) and nothing sorts.
    #[test]
    fn an_unordered_call_takes_the_direct_fast_path() {
        let plan = plan(&shape(1 << 24, 2048, false, false));
        assert!(plan.fast && plan.direct && !plan.rank_sort);
        assert_eq!(plan.rank_cap, 0);
        assert_eq!(plan.flags, TOPK_DIRECT);
        let layout = plan.layout(528);
        let steps = plan.steps(layout.cand_slots);
        assert_eq!(&steps[..2], [Step::Sample, Step::Prefilter]);
        let mut expected = vec![TOPK_STAGE_HISTOGRAM; 4];
        expected.extend([
            TOPK_STAGE_FINAL,
            TOPK_STAGE_COUNT_BOUNDARY,
            TOPK_STAGE_SCAN,
            TOPK_STAGE_COUNT_SELECTED,
            TOPK_STAGE_SCAN,
            TOPK_STAGE_SCATTER_SELECTED,
        ]);
        assert_eq!(stages(&steps), expected);
        // One candidate segment per prefilter warp.
        assert_eq!(layout.segments, 528 * 8);
        assert!(layout.cand_cap > 64 && layout.cand_slots == layout.segments * layout.cand_cap);
    }

    /// A sorted deterministic call with k up to RANK_K_MAX: the fast path and the rank sort,
    /// whose buffer holds k and its boundary ties.
    #[test]
    fn a_sorted_call_takes_the_rank_sort() {
        let plan = plan(&shape(1 << 24, 1000, true, true));
        assert!(plan.fast && plan.rank_sort && !plan.direct);
        assert_eq!(plan.rank_cap, 1000 + 4096);
        assert_eq!(plan.flags, TOPK_RANK_SORT);
        let stages = stages(&plan.steps(plan.layout(528).cand_slots));
        assert_eq!(
            &stages[stages.len() - 4..],
            [
                TOPK_STAGE_RANK_BUCKET,
                TOPK_STAGE_RANK_PLACE,
                TOPK_STAGE_RANK_COUNT,
                TOPK_STAGE_RANK_SCATTER
            ]
        );
        assert!(!stages.contains(&TOPK_STAGE_COUNT_SPLIT));
    }

    /// Sorted output past the rank sort's k: the input-order path and a stable split per rank
    /// bit (count, scan, scatter), through the scratch's tmp regions.
    #[test]
    fn a_large_sorted_call_splits_by_every_bit() {
        let plan = plan(&shape(1 << 20, 40_000, true, true));
        assert!(!plan.rank_sort && plan.rank_cap == 0 && !plan.fast);
        let layout = plan.layout(1);
        assert!(layout.tmp_values - layout.tmp_keys >= 40_000 * 4 / 8);
        let stages = stages(&plan.steps(layout.cand_slots));
        assert_eq!(stages[0], TOPK_STAGE_INIT);
        let splits = stages
            .iter()
            .filter(|&&s| s == TOPK_STAGE_COUNT_SPLIT)
            .count();
        assert_eq!(splits, 32);
        assert_eq!(stages.len(), 1 + 4 + 5 + 3 * 32);
    }

    /// Short inputs do not sample (the input-order stages do the work), and the smallest
    /// direction's flip covers the key's bits.
    #[test]
    fn short_inputs_skip_the_fast_path() {
        let plan = plan(&shape(FAST_MIN_LEN - 1, 10, false, true));
        assert!(!plan.fast);
        assert_eq!(plan.steps(0)[0], {
            Step::Stage {
                grid: Grid::Blocks(1),
                stage: TOPK_STAGE_INIT,
                shift: 0,
                pass: 0,
                flags: 0,
                scan_slot: 0,
            }
        });
        let min = super::plan(&SelectShape {
            direction: Direction::Ascending,
            key_bits: 16,
            key_bytes: 2,
            ..shape(100, 10, false, true)
        });
        assert_eq!(min.flip, 0xFFFF);
    }

    /// The scratch's regions follow one another, 256-byte aligned, the zeroed ones first.
    #[test]
    fn the_scratch_regions_are_aligned_and_in_order() {
        for (sorted, deterministic, k) in [
            (false, false, 2048),
            (true, true, 1000),
            (true, true, 40_000),
        ] {
            let plan = plan(&shape(1 << 22, k, sorted, deterministic));
            let layout = plan.layout(264);
            let regions = [
                layout.state,
                layout.histogram,
                layout.rank_pos,
                layout.tmp_keys,
                layout.tmp_values,
                layout.tile_offsets,
                layout.boundary_offsets,
                layout.cand_counts,
                layout.cand_keys,
                layout.cand_index,
                layout.rank_keys,
                layout.rank_index,
                layout.words,
            ];
            assert!(regions.windows(2).all(|w| w[0] < w[1]), "{regions:?}");
            assert!(regions.iter().all(|r| r % 32 == 0));
            assert_eq!(layout.zeroed, layout.tile_offsets);
            assert!(layout.histogram - layout.state >= u64::from(TOPK_STATE_SLOTS));
        }
    }
}
