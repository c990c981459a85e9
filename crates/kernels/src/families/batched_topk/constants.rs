//! The batched top-k family's numbers: the host's tuning caps and tier bounds, and the constants
//! its kernels share with the host (generated into every batched top-k kernel).

use crate::codegen::device_constants;
use crate::segments::{SEGMENT_FLAGS, SEGMENT_STATUS_LISTS};

/// Threads per block of every tier.
pub const BLOCK_THREADS: u32 = 256;
/// The largest segment the warp tier takes (8 keys per lane).
pub const WARP_MAX_SIZE: i64 = 256;
/// Resident blocks per SM the warp tier's entry point asks the compiler for.
pub(crate) const WARP_MIN_BLOCKS_PER_SM: i64 = 4;
/// The largest `k` the warp tier takes (one selected item per lane).
pub const WARP_MAX_K: i64 = 32;
/// The largest segment the block tier takes, and the most items a block sorts in shared
/// memory.
pub const SORT_CAP: i64 = 2048;
/// Items per chunk of a huge segment (one block's work in the multi-block tier), when the call
/// has segments enough to fill the device with such chunks.
pub(crate) const CHUNK_ITEMS: u64 = 16 * 1024;
/// The smallest chunk the multi-block tier cuts a segment into, for calls of few segments.
pub(crate) const MIN_CHUNK_ITEMS: u64 = 2 * 1024;
/// The multi-block tier's grid that smaller chunks aim for: about 4 blocks of 256 threads per
/// SM on a 132-SM device.
pub(crate) const LARGE_BLOCKS_TARGET: u64 = 512;
/// The most bytes of keys in a segment of the stream tier: its final selection falls back to
/// one block reading the whole segment when the sample misses, so the cap keeps that bounded.
pub const STREAM_MAX_BYTES: i64 = 1024 * 1024;
/// Bytes of keys one block of the stream tier's filter reads (a chunk).
pub(crate) const STREAM_CHUNK_BYTES: u64 = 128 * 1024;
/// The most segments whose control stages run fused in one block (`BT_STAGE_CONTROL`): two
/// per thread of the control kernel's 256. Above it the three launches spread RESOLVE over
/// the device; below it they cost more than the block's loop (each launch ~2-4 us).
pub(crate) const BT_FUSED_CONTROL_SEGMENTS: u64 = 512;
/// The most chunks a long-row split cuts a call's rows into, over every row: its first call is
/// one clustered launch, a cluster per chunk (66 fit an H100 or H200 at once for f32 keys).
pub(crate) const SPLIT_MAX_SEGMENTS: u64 = 64;
/// The most chunks of one row in a long-row split. The second call's row is that many sorted
/// runs, and the stream tier's sample (8 keys every size / 512) then takes each run's best
/// group first: its m-th best sample lands higher than in a row of random order, by up to one
/// sampling period a run. With `c` runs the sample's margin, `(6 sqrt(e) + 4) / e` for
/// `e = 4096 / c`, must exceed that loss, `c^2 / 512`: it does up to 8 runs (0.27 against
/// 0.125), not at 16 (0.39 against 0.5). Beyond, fewer than `written` keys may reach the
/// threshold and the cluster takes its exact path (64 runs of 1024: 196 us, ncu, H100;
/// docs/design/batched_topk.md, "Long rows").
pub(crate) const SPLIT_MAX_CHUNKS: u64 = 8;
/// The smallest chunk of a long-row split (above SORT_CAP, so chunks bin to the stream tier).
pub(crate) const SPLIT_MIN_CHUNK: u64 = 4096;
/// Threads per block of the stream tier's final selection.
pub(crate) const STREAM_FINAL_THREADS: u32 = 1024;
/// The most blocks one stream-tier launch asks for (the kernels stride over the rest).
pub(crate) const STREAM_MAX_GRID: u64 = 1 << 20;
/// The largest `min(k, size)` the stream tier takes (its on-chip sort); larger goes to the
/// multi-block tier.
pub const STREAM_MAX_K: i64 = 2048;
/// Whether the stream tier is used (the fallback switch: without it, its segments go to the
/// multi-block tier, as before the tier existed).
pub const STREAM_TIER_ENABLED: bool = true;

device_constants! {
    /// The constants the batched top-k launcher and its kernels share.
    pub(crate) static BATCHED_TOPK_CONSTANTS;

    /// Template argument `TIER`: the control stages.
    pub(crate) const BT_KERNEL_CONTROL: u32 = 0;
    /// `TIER`: a warp per segment.
    pub(crate) const BT_KERNEL_WARP: u32 = 1;
    /// `TIER`: a block per segment.
    pub(crate) const BT_KERNEL_BLOCK: u32 = 2;
    /// `TIER`: several blocks per segment (radix select over the segment).
    pub(crate) const BT_KERNEL_LARGE: u32 = 3;
    /// `TIER`: the stream tier, its part given by `ITEMS`.
    pub(crate) const BT_KERNEL_STREAM: u32 = 4;
    /// Stream tier part (`ITEMS`): the filter.
    pub(crate) const BT_STREAM_PART_FILTER: u32 = 1;
    /// Stream tier part: the final selection.
    pub(crate) const BT_STREAM_PART_FINAL: u32 = 2;
    /// Stream tier part: both in one clustered launch.
    pub(crate) const BT_STREAM_PART_CLUSTER: u32 = 3;

    /// `params.stage`: the number of segments; resets the status words.
    pub(crate) const BT_STAGE_INIT: u32 = 0;
    /// Stage: every segment resolved, checked, described and binned.
    pub(crate) const BT_STAGE_RESOLVE: u32 = 1;
    /// Stage: the offending value of the reported segment; the total items' check.
    pub(crate) const BT_STAGE_FINALIZE: u32 = 2;
    /// Stage: a tier's selection.
    pub(crate) const BT_STAGE_SELECT: u32 = 3;
    /// Stage of the multi-block tier: its state and histograms cleared.
    pub(crate) const BT_STAGE_LARGE_INIT: u32 = 4;
    /// Multi-block stage: a digit's histogram (the last work item of a segment picks the pivot).
    pub(crate) const BT_STAGE_LARGE_HISTOGRAM: u32 = 5;
    /// Multi-block stage: the pivot on its own (one thread per segment).
    pub(crate) const BT_STAGE_LARGE_PIVOT: u32 = 6;
    /// Multi-block stage: the boundary items per chunk.
    pub(crate) const BT_STAGE_LARGE_COUNT: u32 = 7;
    /// Multi-block stage: the exclusive scan of the chunk counts.
    pub(crate) const BT_STAGE_LARGE_SCAN: u32 = 8;
    /// Multi-block stage: the selected indices collected.
    pub(crate) const BT_STAGE_LARGE_COLLECT: u32 = 9;
    /// Multi-block stage: the outputs written.
    pub(crate) const BT_STAGE_LARGE_WRITE: u32 = 10;
    /// Multi-block stage: the global sort's ranks and padding.
    pub(crate) const BT_STAGE_LARGE_SORT_INIT: u32 = 11;
    /// Multi-block stage: one compare-exchange step of the global sort.
    pub(crate) const BT_STAGE_LARGE_SORT_STEP: u32 = 12;
    /// Control stage: each valid segment's slots past its results, up to `fill_end`, get the
    /// fill key (and value), a warp per segment.
    pub(crate) const BT_STAGE_FILL: u32 = 13;
    /// Control stage: INIT, RESOLVE and FINALIZE in one launch of one block, for calls of at
    /// most `BT_FUSED_CONTROL_SEGMENTS` segments.
    pub(crate) const BT_STAGE_CONTROL: u32 = 14;
    /// Control stage of a long-row split: each candidate's index (`out_values`, `fill_widths
    /// >> 8` bytes, `num_keys` of them, `k_value` a chunk) raised by its chunk's offset in its
    /// row (`chunks_per_segment` chunks of `chunk_items` keys).
    pub(crate) const BT_STAGE_CHUNK_OFFSET: u32 = 15;

    /// Flag (`params.flags`, with the SEGMENT_* flags): `k` per segment, from `params.ks`.
    pub(crate) const BT_K_PER_SEGMENT: u32 = 4;
    /// Flag: the direction per segment, from `params.directions` (`u8`).
    pub(crate) const BT_DIR_PER_SEGMENT: u32 = 8;
    /// Flag: those per-segment `k` are `i32` (else `i64`).
    pub(crate) const BT_K_I32: u32 = 8192;
    /// Flag: ties at the boundary keep the larger indices.
    pub(crate) const BT_PREFER_LARGER: u32 = 32;
    /// Flag: the output by key, equal keys by index.
    pub(crate) const BT_STABLE: u32 = 64;
    /// Flag: the value written is the index within the segment.
    pub(crate) const BT_VALUES_ARE_INDEX: u32 = 128;
    /// Flag: the output sorted by key (stable or not).
    pub(crate) const BT_SORTED: u32 = 256;
    /// Flag: the multi-block tier sorts its selected sets in global memory.
    pub(crate) const BT_GLOBAL_SORT: u32 = 512;
    /// Flag: a segment whose `k` is above its size is invalid (VIOLATION_K_ABOVE_SIZE), not
    /// clamped.
    pub(crate) const BT_REJECT_K_ABOVE_SIZE: u32 = 4096;

    /// Bin (a bit of `params.tiers`, the tiers a call runs): a warp per segment.
    pub(crate) const BT_TIER_WARP: u32 = 1;
    /// Bin: a block per segment.
    pub(crate) const BT_TIER_BLOCK: u32 = 2;
    /// Bin: several blocks per segment.
    pub(crate) const BT_TIER_LARGE: u32 = 4;
    /// Bin: the stream tier.
    pub(crate) const BT_TIER_STREAM: u32 = 8;
    /// Bin lists (warp, block, large, stream), each counted in a status word from
    /// SEGMENT_STATUS_LISTS.
    pub(crate) const BT_LISTS: u32 = 4;
    /// Status word: the sum of the valid segments' sizes.
    pub(crate) const BT_STATUS_TOTAL: u32 = SEGMENT_STATUS_LISTS + BT_LISTS;
    /// Status word: 1 when that sum is outside the TotalItems guarantee.
    pub(crate) const BT_STATUS_TOTAL_BAD: u32 = BT_STATUS_TOTAL + 1;
    /// Status words (`u64`) of a call.
    pub(crate) const BT_STATUS_WORDS: u32 = BT_STATUS_TOTAL_BAD + 1;

    /// `u64` words of the multi-block tier's state per segment.
    pub(crate) const BT_LARGE_WORDS: u32 = 8;
    /// Bins of a radix digit (8 bits).
    pub(crate) const BT_BINS: u32 = 256;

    /// Chunks per segment of the stream tier at most (STREAM_MAX_BYTES / STREAM_CHUNK_BYTES
    /// is at most this).
    pub(crate) const BT_STREAM_MAX_CTAS: u32 = 16;
    /// Threads per block of the stream tier's filter.
    pub(crate) const BT_STREAM_FILTER_THREADS: u32 = 512;
    /// Warps per block of the filter: each has its own candidate slots (a region).
    pub(crate) const BT_STREAM_FILTER_WARPS: u32 = BT_STREAM_FILTER_THREADS / 32;
    /// Candidates per segment the stream tier's final selection holds in shared memory (keys of
    /// up to 4 bytes; half for 8-byte keys); a segment with more takes the exact path over
    /// every key.
    pub(crate) const BT_STREAM_CANDIDATES: u32 = 8192;
    /// Candidates per copy task of the final selection.
    pub(crate) const BT_STREAM_TASK: u32 = 128;
    /// Copy tasks of the final selection at most: one per region, and one per BT_STREAM_TASK
    /// of the candidates on chip.
    pub(crate) const BT_STREAM_MAX_TASKS: u32 =
        BT_STREAM_MAX_CTAS * BT_STREAM_FILTER_WARPS + BT_STREAM_CANDIDATES / BT_STREAM_TASK;
    /// `u64` words of a filter region's record in the stream tier's counts.
    pub(crate) const BT_STREAM_RECORD_WORDS: u32 = 4;
    /// Buckets of the stream tier's final selection.
    pub(crate) const BT_BUCKETS: u32 = 4096;
    /// Words of its bucket starts array: BT_BUCKETS + 1 starts, padded so that the array after
    /// it is 16-byte aligned (the kernels access it as vectors).
    pub(crate) const BT_STARTS_WORDS: u32 = BT_BUCKETS + 4;
    /// Blocks per cluster of the stream tier's clustered launch.
    pub(crate) const BT_CLUSTER_BLOCKS: u32 = 2;
}

const _: () = assert!(BT_STARTS_WORDS > BT_BUCKETS && BT_STARTS_WORDS % 4 == 0);
const _: () = assert!(
    (BT_K_PER_SEGMENT
        | BT_DIR_PER_SEGMENT
        | BT_PREFER_LARGER
        | BT_STABLE
        | BT_VALUES_ARE_INDEX
        | BT_SORTED
        | BT_GLOBAL_SORT
        | BT_REJECT_K_ABOVE_SIZE
        | BT_K_I32)
        & SEGMENT_FLAGS
        == 0,
    "a family's flags take bits the segmented problem's do not"
);
