//! The segmented sort family's numbers: its stages, flags and status words, shared with its
//! kernel (generated into every segmented sort kernel).

use crate::codegen::device_constants;

/// Threads per block.
pub(crate) const BLOCK_THREADS: u32 = 256;

/// Threads per block of the register path's wide kernel (a 16384-key tile), for segments longer
/// than the narrow kernel's 4096-key tile.
pub(crate) const WIDE_BLOCK_THREADS: u32 = 1024;

device_constants! {
    /// The constants the segmented sort launcher and its kernel share.
    pub(crate) static SS_CONSTANTS;

    /// `params.stage`: the number of segments (a deferred one checked) and the status words.
    pub(crate) const SS_STAGE_INIT: u32 = 0;
    /// Stage: every position's segment start, rank and position (a position outside every
    /// valid segment is a segment of its own).
    pub(crate) const SS_STAGE_FILL: u32 = 1;
    /// Stage: each segment resolved, checked and described (with SS_CLASSES, its size class
    /// counted).
    pub(crate) const SS_STAGE_RESOLVE: u32 = 2;
    /// Stage: the offending value of the smallest invalid segment; the TotalItems check; with
    /// SS_CLASSES, the classes' lists and batches laid out.
    pub(crate) const SS_STAGE_FINALIZE: u32 = 3;
    /// Stage: each tile of SS_TILE entries sorted in shared memory.
    pub(crate) const SS_STAGE_TILE: u32 = 4;
    /// Stage: one merge pass (runs of `params.width` entries, from buffer `params.src`).
    pub(crate) const SS_STAGE_MERGE: u32 = 5;
    /// Stage: the keys and values written in sorted order from buffer `params.src`.
    pub(crate) const SS_STAGE_WRITE: u32 = 6;
    /// Stage: every segment (at most SS_TILE keys each) sorted by a block and written in place.
    pub(crate) const SS_STAGE_SMALL: u32 = 7;
    /// Stage (register path): each segment placed in its class's list (a long one gets its
    /// chunks; RESOLVE counted the classes, FINALIZE laid the lists out).
    pub(crate) const SS_STAGE_PLACE: u32 = 10;
    /// Stage (register path): batches of short segments, and the chunks of long ones, sorted
    /// in registers (`params.width`: one span for every segment, or 0 for the classes).
    pub(crate) const SS_STAGE_BLOCK: u32 = 11;
    /// Stage (register path): where each chunk of a merge pass starts in its two runs.
    pub(crate) const SS_STAGE_PARTITION: u32 = 12;
    /// Stage (register path): one merge pass over the long segments' chunks.
    pub(crate) const SS_STAGE_RUNS: u32 = 13;
    /// Stage (register path, keys-only float sorts with long segments, before BLOCK): whether a
    /// NaN is among the long segments' keys (their entries are then u64 with indices, else
    /// bare u32 ranks).
    pub(crate) const SS_STAGE_NAN_SCAN: u32 = 14;

    /// Entries a tile sorts in shared memory (a power of two).
    pub(crate) const SS_TILE: u32 = 1024;
    /// Entries a thread holds in the register path's sort.
    pub(crate) const SS_ITEMS: u32 = 16;
    /// Entries a block of a merge pass (PARTITION's and RUNS' unit, the statistics' tile)
    /// takes: the 256-thread kernel's tile. A chunk of the wide kernel's BLOCK is four parts,
    /// so its merge passes run four blocks an SM, not one (each block's loads overlap the
    /// others' merging).
    pub(crate) const SS_PART: u32 = 4096;
    /// Words per part that PARTITION writes for RUNS: the part's start on the merge path,
    /// its segment's begin and size (0 past its end), its place in the segment (above the
    /// order bit).
    pub(crate) const SS_PARTITION_WORDS: u32 = 4;
    /// The class of a long segment (short ones: 1 to 14, the log2 of their span, up to the
    /// wide kernel's 16384-key tile).
    pub(crate) const SS_LONG_CLASS: u32 = 15;

    /// Plan word (register path): 16 counts, one per class.
    pub(crate) const SS_PLAN_COUNT: u32 = 0;
    /// Plan words: where each class's list starts in the segment list.
    pub(crate) const SS_PLAN_LIST: u32 = 16;
    /// Plan words: each class's first batch (the long class's: the number of short batches).
    pub(crate) const SS_PLAN_BATCH: u32 = 32;
    /// Plan words: each class's next free place in the segment list.
    pub(crate) const SS_PLAN_CURSOR: u32 = 48;
    /// Plan word: the long segments placed (high half) and their chunks (low half).
    pub(crate) const SS_PLAN_LONG: u32 = 64;
    /// Plan word: the size of the longest long segment.
    pub(crate) const SS_PLAN_MAX_LONG: u32 = 65;
    /// Plan word: the chunks of the long segments.
    pub(crate) const SS_PLAN_CHUNKS: u32 = 66;
    /// Plan word: 1 when a long segment holds a NaN (NAN_SCAN).
    pub(crate) const SS_PLAN_NAN: u32 = 67;
    /// Plan word: the parts (SS_PART entries) of the long segments.
    pub(crate) const SS_PLAN_PARTS: u32 = 68;
    /// The number of plan words.
    pub(crate) const SS_PLAN_WORDS: u32 = 69;

    /// Flag (`params.flags`, above the segmented problem's): one order per segment, a byte
    /// each at `params.orders` (0 ascending, 1 descending).
    pub(crate) const SS_ORDER_PER_SEGMENT: u32 = 4096;
    /// Flag: the values written are each key's index within its segment.
    pub(crate) const SS_VALUES_INDEX: u32 = 8192;
    /// Flag: the register path's classes (RESOLVE counts them, FINALIZE lays them out).
    pub(crate) const SS_CLASSES: u32 = 16384;
    /// Flag: rows of one size whose count and order are on the host (the register path's
    /// uniform BLOCK takes each row from the stride; RESOLVE and FINALIZE do not run).
    pub(crate) const SS_DIRECT: u32 = 32768;

    /// Status word (after the segmented problem's): the sum of the valid segments' sizes.
    pub(crate) const SS_STATUS_TOTAL: u32 = 5;
    /// Status word: 1 when that sum is outside the TotalItems guarantee.
    pub(crate) const SS_STATUS_TOTAL_BAD: u32 = 6;
    /// Status word: 1 when offsets are out of order somewhere (nothing is written).
    pub(crate) const SS_STATUS_DISORDER: u32 = 7;
    /// The number of status words.
    pub(crate) const SS_STATUS_WORDS: u32 = 8;
}
