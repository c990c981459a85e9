//! The top-k family's numbers: the host's tuning of the fast path and the rank sort, and the
//! constants its kernel shares with the host (generated into every top-k kernel).

use crate::codegen::device_constants;

/// Threads per block (and items per tile).
pub(crate) const BLOCK_THREADS: u32 = 256;
/// The most keys one block may count in its 32-bit shared histogram.
pub(crate) const MAX_KEYS_PER_BLOCK: u64 = 1 << 31;

/// Threads of the SAMPLE block (PART 2): `TOPK_SAMPLES / SAMPLE_THREADS` keys each, in
/// registers.
pub(crate) const SAMPLE_THREADS: u32 = 1024;
/// The fast path's threshold lets fewer than k keys through (a fallback) with at most this
/// probability.
pub(crate) const SAMPLE_FAILURE: f64 = 1e-15;
/// The fast path runs on inputs of at least this many keys.
pub(crate) const FAST_MIN_LEN: u64 = 1 << 16;
/// The rank sort (sorted output, and the deterministic fast path) serves k up to this bound;
/// larger k sorts by the bit-split passes and runs the input-order stages.
pub(crate) const RANK_K_MAX: u64 = 32768;
/// Most items the rank sort takes: k plus the boundary ties.
pub(crate) const RANK_CAP_MAX: u64 = 65536;

device_constants! {
    /// The constants the top-k launcher and its kernel share.
    pub(crate) static TOPK_CONSTANTS;

    /// Template argument `PART`: every stage but the prefilter and the sample.
    pub(crate) const TOPK_PART_STAGES: u32 = 0;
    /// `PART`: the prefilter alone.
    pub(crate) const TOPK_PART_PREFILTER: u32 = 1;
    /// `PART`: the sample alone.
    pub(crate) const TOPK_PART_SAMPLE: u32 = 2;

    /// `params.stage`: k read (host value or deferred, clamped), the pass state reset.
    pub(crate) const TOPK_STAGE_INIT: u32 = 0;
    /// Stage: a digit's histogram over the candidates (the last block finds the pivot).
    pub(crate) const TOPK_STAGE_HISTOGRAM: u32 = 1;
    /// Stage: the pivot on its own (one block).
    pub(crate) const TOPK_STAGE_PIVOT: u32 = 2;
    /// Stage: the boundary items per tile.
    pub(crate) const TOPK_STAGE_COUNT_BOUNDARY: u32 = 3;
    /// Stage: the exclusive scan of the tile counts (one block).
    pub(crate) const TOPK_STAGE_SCAN: u32 = 4;
    /// Stage: the selected items per tile.
    pub(crate) const TOPK_STAGE_COUNT_SELECTED: u32 = 5;
    /// Stage: the stable compaction of the selected items.
    pub(crate) const TOPK_STAGE_SCATTER_SELECTED: u32 = 6;
    /// Stage: the items with rank bit `shift` set, per tile.
    pub(crate) const TOPK_STAGE_COUNT_SPLIT: u32 = 7;
    /// Stage: the stable split by that bit.
    pub(crate) const TOPK_STAGE_SCATTER_SPLIT: u32 = 8;
    /// Stage: INIT, then the fast path's threshold from a sample (PART 2).
    pub(crate) const TOPK_STAGE_SAMPLE: u32 = 9;
    /// Stage: the fast path's one read of the input into the candidate buffer (PART 1).
    pub(crate) const TOPK_STAGE_PREFILTER: u32 = 10;
    /// Stage: the fast path's mode on its own (one thread).
    pub(crate) const TOPK_STAGE_DECIDE: u32 = 11;
    /// Stage: the fast path's selection over the candidates.
    pub(crate) const TOPK_STAGE_FINAL: u32 = 12;
    /// Stage: the rank sort's count of better items.
    pub(crate) const TOPK_STAGE_RANK_COUNT: u32 = 13;
    /// Stage: the rank sort's outputs.
    pub(crate) const TOPK_STAGE_RANK_SCATTER: u32 = 14;
    /// Stage: the rank sort's buckets.
    pub(crate) const TOPK_STAGE_RANK_BUCKET: u32 = 15;
    /// Stage: the rank sort's items grouped by bucket.
    pub(crate) const TOPK_STAGE_RANK_PLACE: u32 = 16;

    /// State slot (`u64`): k.
    pub(crate) const TOPK_SLOT_K: u32 = 0;
    /// State slot: the selected ranks' common prefix.
    pub(crate) const TOPK_SLOT_PREFIX: u32 = 1;
    /// State slot: the bits of that prefix.
    pub(crate) const TOPK_SLOT_MASK: u32 = 2;
    /// State slot: the boundary items still to take.
    pub(crate) const TOPK_SLOT_REMAINING: u32 = 3;
    /// State slot: the select is done.
    pub(crate) const TOPK_SLOT_DONE: u32 = 4;
    /// State slot: the boundary items in all (a scan's total).
    pub(crate) const TOPK_SLOT_BOUNDARY: u32 = 5;
    /// State slot: the selected items in all (a scan's total).
    pub(crate) const TOPK_SLOT_SELECTED: u32 = 6;
    /// State slot: the items with the split's bit set (a scan's total).
    pub(crate) const TOPK_SLOT_ONES: u32 = 7;
    /// State slot: the fast path's rank threshold T.
    pub(crate) const TOPK_SLOT_THRESHOLD: u32 = 8;
    /// State slot: the keys with rank >= T (may exceed the candidate buffer).
    pub(crate) const TOPK_SLOT_CANDIDATES: u32 = 9;
    /// State slot: 1 for the fast path over the candidate buffer, 0 over the input.
    pub(crate) const TOPK_SLOT_MODE: u32 = 10;
    /// State slot: the items FINAL appended to the rank buffer.
    pub(crate) const TOPK_SLOT_RANKED: u32 = 11;
    /// State slot (direct path): the output slots taken by items above the pivot bucket.
    pub(crate) const TOPK_SLOT_ABOVE: u32 = 12;
    /// State slot (direct path): the boundary tickets handed out.
    pub(crate) const TOPK_SLOT_TICKETS: u32 = 13;
    /// State slot: SAMPLE ran.
    pub(crate) const TOPK_SLOT_SAMPLED: u32 = 14;
    /// State slot: the PREFILTER blocks done.
    pub(crate) const TOPK_SLOT_PREFILTERED: u32 = 15;
    /// State slots (8): the blocks of each HISTOGRAM pass that have merged.
    pub(crate) const TOPK_SLOT_FINISHED: u32 = 16;
    /// State slot: the best rank written to the rank buffer.
    pub(crate) const TOPK_SLOT_MAX_RANK: u32 = 24;
    /// State slot: the RANK_BUCKET blocks done.
    pub(crate) const TOPK_SLOT_BUCKETED: u32 = 25;
    /// State slots in all.
    pub(crate) const TOPK_STATE_SLOTS: u32 = 32;

    /// Flag (`params.flags`): keep the boundary items with the larger indices.
    pub(crate) const TOPK_PREFER_LARGER: u32 = 1;
    /// Flag: write source indices instead of reading values.
    pub(crate) const TOPK_VALUES_ARE_INDEX: u32 = 2;
    /// Flag (split): read tmp_*, write out_* (else the reverse).
    pub(crate) const TOPK_SOURCE_IS_TMP: u32 = 4;
    /// Flag: the stage runs over the selected items.
    pub(crate) const TOPK_LEN_IS_SELECTED: u32 = 8;
    /// Flag (scan): the boundary tile counts (else the other).
    pub(crate) const TOPK_SCAN_BOUNDARY: u32 = 16;
    /// Flag: no determinism, unsorted: FINAL writes the outputs.
    pub(crate) const TOPK_DIRECT: u32 = 32;
    /// Flag: the result is sorted by the rank sort (else unsorted).
    pub(crate) const TOPK_RANK_SORT: u32 = 64;

    /// Keys sampled for the fast path's threshold.
    pub(crate) const TOPK_SAMPLES: u32 = 16384;
    /// Bits per radix-select pass.
    pub(crate) const TOPK_DIGIT_BITS: u32 = 8;
    /// Bins of a pass.
    pub(crate) const TOPK_BINS: u32 = 1 << TOPK_DIGIT_BITS;
    /// Leading rank bits of the rank sort's buckets.
    pub(crate) const TOPK_RANK_BUCKET_BITS: u32 = 12;
    /// Buckets of the rank sort (u32 counts and starts).
    pub(crate) const TOPK_RANK_BUCKETS: u32 = 1 << TOPK_RANK_BUCKET_BITS;
}
