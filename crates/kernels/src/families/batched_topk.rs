//! Family `batched_topk`: top-k of many segments (see `cuda/batched_topk.cuh`). The tiers a
//! call launches are chosen by the caller from the static bounds of its parameters
//! ([`BatchedTiers`]); each tier is its own template instantiation, so a call whose bounds
//! exclude a tier never compiles it. All stages are launched back to back on one stream; the
//! per-segment checks are reported through a small status buffer that the caller reads when
//! it chooses to synchronise.

use std::sync::Arc;

use cudarc::driver::SyncOnDrop;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use super::{keep, SelectedValues};
use crate::codegen::{device_constants, kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::error::DriverResultExt;
use crate::radix::{KeyType, RadixBits, RadixKey};
use crate::runtime::{LaunchOrder, LoadedKernel};
use crate::segments::{
    SEGMENT_COUNT_DEFERRED, SEGMENT_DESC_WORDS, SEGMENT_DIRECT, SEGMENT_FLAGS, SEGMENT_OFFSETS,
    SEGMENT_SIZES_PER_SEGMENT, SEGMENT_STATUS_COUNT_BAD, SEGMENT_STATUS_COUNT_VALUE,
    SEGMENT_STATUS_LISTS, SEGMENT_STATUS_VALUE, SEGMENT_STATUS_VIOLATION, SEGMENT_VALUE_POINTERS,
};
use crate::{KernelError, KernelRuntime, KernelSpec, ValueType};
use crate::{KernelFamily, Tier};

kernel_params! {
    /// Parameters of `batched_topk` (device pointers as `u64`, 0 where unused).
    struct BatchedTopKParams {
        keys: u64,
        values: u64,
        out_keys: u64,
        out_values: u64,
        begin_offsets: u64,
        end_offsets: u64,
        sizes: u64,
        ks: u64,
        directions: u64,
        num_segments_ptr: u64,
        descriptors: u64,
        status: u64,
        large_state: u64,
        large_histogram: u64,
        large_chunks: u64,
        large_selected: u64,
        large_ranks: u64,
        bins: u64,
        num_keys: u64,
        stride: u64,
        size_value: u64,
        size_min: u64,
        size_max: u64,
        k_value: u64,
        k_min: u64,
        k_max: u64,
        num_segments: u64,
        num_segments_min: u64,
        num_segments_max: u64,
        out_stride: u64,
        warp_max_size: u64,
        warp_max_k: u64,
        block_max_size: u64,
        stream_max_size: u64,
        stream_max_k: u64,
        stream_capacity: u64,
        stream_ctas: u64,
        stream_chunk: u64,
        stream_candidates: u64,
        stream_total: u64,
        stream_ranks: u64,
        stream_indices: u64,
        stream_counts: u64,
        stream_sorted_cap: u64,
        stream_sorted_offset: u64,
        stream_bins_offset: u64,
        stream_index_offset: u64,
        stream_rank_offset: u64,
        chunks_per_segment: u64,
        chunk_items: u64,
        selected_stride: u64,
        sort_span: u64,
        bin_capacity: u64,
        large_capacity: u64,
        total_min: u64,
        total_max: u64,
        flags: u32,
        direction_value: u32,
        direction_mask: u32,
        tiers: u32,
        stage: u32,
        shift: u32,
        half: u32,
        /// Explicit padding, always zero.
        reserved: u32,
    }
}

/// Threads per block of every tier.
pub const BLOCK_THREADS: u32 = 256;
/// The largest segment the warp tier takes (8 keys per lane).
pub const WARP_MAX_SIZE: i64 = 256;
/// Resident blocks per SM the warp tier's entry point asks the compiler for.
const WARP_MIN_BLOCKS_PER_SM: i64 = 4;
/// The largest `k` the warp tier takes (one selected item per lane).
pub const WARP_MAX_K: i64 = 32;
/// The largest segment the block tier takes, and the most items a block sorts in shared
/// memory.
pub const SORT_CAP: i64 = 2048;
/// Items per chunk of a huge segment (one block's work in the multi-block tier).
const CHUNK_ITEMS: u64 = 16 * 1024;
/// The most bytes of keys in a segment of the stream tier: its final selection falls back to
/// one block reading the whole segment when the sample misses, so the cap keeps that bounded.
pub const STREAM_MAX_BYTES: i64 = 1024 * 1024;
/// Bytes of keys one block of the stream tier's filter reads (a chunk).
const STREAM_CHUNK_BYTES: u64 = 128 * 1024;
/// Threads per block of the stream tier's final selection.
const STREAM_FINAL_THREADS: u32 = 1024;
/// The most blocks one stream-tier launch asks for (the kernels stride over the rest).
const STREAM_MAX_GRID: u64 = 1 << 20;
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

    /// Flag (`params.flags`, with the SEGMENT_* flags): `k` per segment, from `params.ks`.
    pub(crate) const BT_K_PER_SEGMENT: u32 = 4;
    /// Flag: the direction per segment, from `params.directions` (`u8`).
    pub(crate) const BT_DIR_PER_SEGMENT: u32 = 8;
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
        | BT_GLOBAL_SORT)
        & SEGMENT_FLAGS
        == 0,
    "a family's flags take bits the segmented problem's do not"
);

/// The tiers of a batched top-k call, as a set of bits.
///
/// ```
/// use oxicub_kernels::families::batched_topk::BatchedTiers;
///
/// // MoE routing: 256 experts, k = 8: only the warp tier exists.
/// let tiers = BatchedTiers::for_bounds((256, 256), (8, 8));
/// assert_eq!(tiers, BatchedTiers::WARP);
/// // Sparse attention: 131072 keys, k = 2048: only the stream tier (for keys of any width).
/// assert_eq!(BatchedTiers::for_bounds((131_072, 131_072), (2048, 2048)), BatchedTiers::STREAM);
/// // Larger segments than the stream tier takes: the multi-block tier too (for wide keys).
/// let tiers = BatchedTiers::for_bounds((131_072, 1 << 20), (2048, 2048));
/// assert_eq!(tiers, BatchedTiers::STREAM.or(BatchedTiers::LARGE));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchedTiers(pub u32);

impl BatchedTiers {
    /// No tier.
    pub const NONE: BatchedTiers = BatchedTiers(0);
    /// A warp per segment.
    pub const WARP: BatchedTiers = BatchedTiers(BT_TIER_WARP);
    /// A block per segment.
    pub const BLOCK: BatchedTiers = BatchedTiers(BT_TIER_BLOCK);
    /// Several blocks per segment.
    pub const LARGE: BatchedTiers = BatchedTiers(BT_TIER_LARGE);
    /// Several blocks per segment in two launches: a filter streams each chunk once against a
    /// sampled threshold, then a block per segment selects among the candidates.
    pub const STREAM: BatchedTiers = BatchedTiers(BT_TIER_STREAM);

    /// The largest segment the stream tier takes for keys of `key_bytes` bytes.
    ///
    /// ```
    /// use oxicub_kernels::families::batched_topk::BatchedTiers;
    ///
    /// assert_eq!(BatchedTiers::stream_max_size(4), 262_144);
    /// assert_eq!(BatchedTiers::stream_max_size(8), 131_072);
    /// ```
    pub const fn stream_max_size(key_bytes: u32) -> i64 {
        let bytes = if key_bytes == 0 { 1 } else { key_bytes as i64 };
        STREAM_MAX_BYTES / bytes
    }

    /// The tiers some segment may need, for keys of any width, when segment sizes lie in
    /// `sizes` and `k` in `k` (closed intervals): the union of [`BatchedTiers::for_key_bounds`]
    /// over the key widths. Usable in `const` context, so dispatch decides at compile time.
    pub const fn for_bounds(sizes: (i64, i64), k: (i64, i64)) -> BatchedTiers {
        // The stream bin grows and the multi-block bin shrinks with the cap, and the cap
        // shrinks with the key width: 1-byte keys need the stream tier whenever some width
        // does, 8-byte keys the multi-block tier.
        let narrow = BatchedTiers::for_key_bounds(1, sizes, k);
        let wide = BatchedTiers::for_key_bounds(8, sizes, k);
        BatchedTiers(narrow.0 | wide.0)
    }

    /// The tiers some segment of keys of `key_bytes` bytes may need when segment sizes lie in
    /// `sizes` and `k` in `k` (closed intervals).
    ///
    /// ```
    /// use oxicub_kernels::families::batched_topk::BatchedTiers;
    ///
    /// // Sparse attention, f32 scores: the stream tier.
    /// let tiers = BatchedTiers::for_key_bounds(4, (131_072, 131_072), (2048, 2048));
    /// assert_eq!(tiers, BatchedTiers::STREAM);
    /// // k above the stream tier's sort: the multi-block tier.
    /// let tiers = BatchedTiers::for_key_bounds(4, (131_072, 131_072), (4096, 4096));
    /// assert_eq!(tiers, BatchedTiers::LARGE);
    /// ```
    pub const fn for_key_bounds(key_bytes: u32, sizes: (i64, i64), k: (i64, i64)) -> BatchedTiers {
        let (size_min, size_max) = sizes;
        let (k_min, k_max) = k;
        let mut bits = 0;
        // Warp: some size <= 256 with min(k, size) <= 32.
        if size_min <= WARP_MAX_SIZE && (k_min <= WARP_MAX_K || size_min <= WARP_MAX_K) {
            bits |= BT_TIER_WARP;
        }
        // Block: some size <= 2048 outside the warp bin.
        let outside_warp =
            size_max > WARP_MAX_SIZE || (k_max > WARP_MAX_K && size_max > WARP_MAX_K);
        if size_min <= SORT_CAP && outside_warp {
            bits |= BT_TIER_BLOCK;
        }
        // Stream: some size in (SORT_CAP, cap] with min(k, size) <= STREAM_MAX_K (no size
        // in that range is at most STREAM_MAX_K, so k itself must be).
        let cap = BatchedTiers::stream_max_size(key_bytes);
        let stream_min = if size_min > SORT_CAP {
            size_min
        } else {
            SORT_CAP + 1
        };
        let stream = STREAM_TIER_ENABLED
            && stream_min <= size_max
            && stream_min <= cap
            && k_min <= STREAM_MAX_K;
        if stream {
            bits |= BT_TIER_STREAM;
        }
        // Multi-block: some size above SORT_CAP outside the stream bin.
        let beyond_stream = !STREAM_TIER_ENABLED || size_max > cap || k_max > STREAM_MAX_K;
        if size_max > SORT_CAP && beyond_stream {
            bits |= BT_TIER_LARGE;
        }
        BatchedTiers(bits)
    }

    /// The set less `tier`.
    pub const fn without(self, tier: BatchedTiers) -> BatchedTiers {
        BatchedTiers(self.0 & !tier.0)
    }

    /// The tiers in either set.
    pub const fn or(self, other: BatchedTiers) -> BatchedTiers {
        BatchedTiers(self.0 | other.0)
    }

    /// The tiers in both sets.
    pub const fn and(self, other: BatchedTiers) -> BatchedTiers {
        BatchedTiers(self.0 & other.0)
    }

    /// Whether `tier` is in the set.
    pub const fn contains(self, tier: BatchedTiers) -> bool {
        self.0 & tier.0 == tier.0 && tier.0 != 0
    }

    /// Keys per lane of the warp tier for segments of at most `size_max` items: the smallest
    /// power of two that holds them (1 to 8).
    pub const fn warp_items(size_max: i64) -> u32 {
        let mut items = 1u32;
        while (items as i64) * 32 < size_max && items < 8 {
            items *= 2;
        }
        items
    }
}

/// Which instantiation of the family: the control stages or one tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BatchedKernel {
    /// Number of segments, per-segment checks, descriptors (independent of the key type).
    Control,
    /// A warp per segment with `items` keys per lane.
    Warp {
        /// Keys per lane (1, 2, 4 or 8).
        items: u32,
    },
    /// A block per segment.
    Block,
    /// Several blocks per segment.
    Large,
    /// The stream tier's filter: a block per chunk of a segment.
    StreamFilter,
    /// The stream tier's final selection: a block of 1024 threads per segment.
    StreamFinal,
    /// The stream tier in one launch (sm_90): a cluster of two 1024-thread blocks per segment
    /// filters its keys and selects from the candidates held in their shared memory.
    StreamCluster,
}

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "batched_topk",
    header: concat!(
        include_str!("../../cuda/batched_topk/common.cuh"),
        include_str!("../../cuda/batched_topk/control.cuh"),
        include_str!("../../cuda/batched_topk/warp_rank.cuh"),
        include_str!("../../cuda/batched_topk/warp_select.cuh"),
        include_str!("../../cuda/batched_topk/warp.cuh"),
        include_str!("../../cuda/batched_topk/block.cuh"),
        include_str!("../../cuda/batched_topk/large.cuh"),
        include_str!("../../cuda/batched_topk/stream_common.cuh"),
        include_str!("../../cuda/batched_topk/stream_select.cuh"),
        include_str!("../../cuda/batched_topk/stream_sample.cuh"),
        include_str!("../../cuda/batched_topk/stream_filter.cuh"),
        include_str!("../../cuda/batched_topk/stream_final.cuh"),
        include_str!("../../cuda/batched_topk/stream_cluster_push.cuh"),
        include_str!("../../cuda/batched_topk/stream_cluster.cuh"),
        include_str!("../../cuda/batched_topk/entry.cuh"),
    ),
    constants: &[&BATCHED_TOPK_CONSTANTS],
    params_name: BatchedTopKParams::CXX_NAME,
    params_declaration: BatchedTopKParams::cxx_declaration,
    template_args: &[
        TemplateArg::Key,
        TemplateArg::BlockThreads,
        TemplateArg::Const("TIER"),
        TemplateArg::Const("VALUE_BYTES"),
        TemplateArg::Const("ITEMS"),
        TemplateArg::Const("SORT_CAP"),
    ],
    static_shared_bytes: |spec| {
        let sort = 16 * spec.constant("SORT_CAP").unwrap_or(0).max(0) as u64;
        let warps = u64::from(spec.block_threads) / 32;
        let bins = u64::from(BT_BINS);
        let code = spec.constant("TIER").map(|code| code as u32);
        match code {
            // The warp tier's candidates (32 u64 per warp), 8 warps.
            Some(BT_KERNEL_WARP) => 8 * 32 * 8,
            Some(BT_KERNEL_BLOCK) => sort,
            // + the last-arrival flag and the pivot's warp sums (with alignment).
            Some(BT_KERNEL_LARGE) => sort + 4 * bins + 4 * warps + 8 + 8 + 8 * warps,
            // The state (a histogram, warp sums, three ranks of up to 8 bytes, the filter's
            // sample hits per region of up to BT_STREAM_MAX_CTAS chunks, the final's copy tasks
            // (16 bytes each), 11 counters, the cluster's pushed totals (8 bytes) and two
            // mbarriers (8 bytes each), 16 bytes for the alignment of 8-byte ranks and of the
            // 16-byte tasks) and the filter's batch stage, whose words its sample bins share; the
            // final stage's buffers are dynamic.
            Some(BT_KERNEL_STREAM) => {
                // The filter's batch stage (4 vectors per lane; 2 for 1-byte keys, counted as 4
                // here), whose words the sample bins share (4096 at most).
                let filter = if spec.constant("ITEMS") == Some(i64::from(BT_STREAM_PART_FILTER)) {
                    (16 * 4 * 32 * warps).max(4 * 4096)
                } else {
                    0
                };
                let region_hits = 4 * u64::from(BT_STREAM_MAX_CTAS * BT_STREAM_FILTER_WARPS);
                let copy_tasks = 16 * u64::from(BT_STREAM_MAX_TASKS);
                4 * bins + 4 * warps + 24 + region_hits + copy_tasks + 4 * 11 + 8 + 16 + 16 + filter
            }
            // The control stages' block total.
            _ => 8,
        }
    },
};

impl KernelSpec {
    /// The spec of one `batched_topk` instantiation: keys of type `key` carrying values of
    /// `value_bytes` bytes (0, 4 or 8). The control stages use one instantiation for every
    /// key and value type.
    ///
    /// ```
    /// use oxicub_kernels::families::batched_topk::BatchedKernel;
    /// use oxicub_kernels::{KernelSpec, KeyType};
    ///
    /// let spec = KernelSpec::batched_topk(KeyType::F32, 4, BatchedKernel::Warp { items: 8 });
    /// assert_eq!(spec.to_string(), "oxicub::batched_topk<oxicub::KeyF32, 256, 1, 4, 8, 0>");
    /// ```
    pub fn batched_topk(key: KeyType, value_bytes: u8, kernel: BatchedKernel) -> KernelSpec {
        let (key, value_bytes, tier, code, items, sort_cap) = match kernel {
            BatchedKernel::Control => (KeyType::U32, 0, Tier::GridStride, BT_KERNEL_CONTROL, 1, 0),
            BatchedKernel::Warp { items } => {
                let tier = Tier::WarpPerSegment;
                (key, value_bytes, tier, BT_KERNEL_WARP, items, 0)
            }
            BatchedKernel::Block => {
                let tier = Tier::BlockPerSegment;
                (key, value_bytes, tier, BT_KERNEL_BLOCK, 1, SORT_CAP)
            }
            BatchedKernel::Large => {
                let tier = Tier::BlocksPerSegment;
                (key, value_bytes, tier, BT_KERNEL_LARGE, 1, SORT_CAP)
            }
            BatchedKernel::StreamFilter => {
                let (tier, part) = (Tier::BlocksPerSegment, BT_STREAM_PART_FILTER);
                (key, value_bytes, tier, BT_KERNEL_STREAM, part, STREAM_MAX_K)
            }
            BatchedKernel::StreamFinal => {
                let (tier, part) = (Tier::BlockPerSegment, BT_STREAM_PART_FINAL);
                (key, value_bytes, tier, BT_KERNEL_STREAM, part, STREAM_MAX_K)
            }
            BatchedKernel::StreamCluster => {
                let (tier, part) = (Tier::BlocksPerSegment, BT_STREAM_PART_CLUSTER);
                (key, value_bytes, tier, BT_KERNEL_STREAM, part, STREAM_MAX_K)
            }
        };
        let mut consts = vec![
            ("TIER", i64::from(code)),
            ("VALUE_BYTES", i64::from(value_bytes)),
            ("ITEMS", i64::from(items)),
            ("SORT_CAP", sort_cap),
        ];
        if code == BT_KERNEL_WARP {
            // The warp tier: at most 64 registers per thread (4 blocks of 256 resident per SM).
            // H200, [65536x256] k=8: 4 blocks 0.0369 ms, 5 (48 registers, spills) 0.0383,
            // 6 (40) 0.0477, 8 (32) 0.064; without a bound the compiler takes 80-120.
            consts.push(("MIN_BLOCKS", WARP_MIN_BLOCKS_PER_SM));
        }
        if matches!(kernel, BatchedKernel::StreamFilter) {
            // The filter: 2 blocks of 512 per SM (at most 64 registers), so [64x131072]'s 256
            // chunks stream in one wave on 132 SMs.
            consts.push(("MIN_BLOCKS", 2));
        }
        let block_threads = match kernel {
            BatchedKernel::StreamFinal | BatchedKernel::StreamCluster => STREAM_FINAL_THREADS,
            BatchedKernel::StreamFilter => BT_STREAM_FILTER_THREADS,
            _ => BLOCK_THREADS,
        };
        KernelSpec {
            family: KernelFamily::BatchedTopK,
            key,
            value: (value_bytes != 0).then_some(ValueType::Opaque { bytes: value_bytes }),
            direction: None,
            tier,
            block_threads,
            consts,
        }
    }
}

/// The specs a call with these tiers instantiates (the control stages and one per tier), for
/// keys of type `key` and values of `value_bytes` bytes; `warp_items` keys per lane in the
/// warp tier.
///
/// ```
/// use oxicub_kernels::families::batched_topk::{specs_for, BatchedTiers};
/// use oxicub_kernels::KeyType;
///
/// // k = Static<8> over segments of Static<256>: no block or multi-block kernel.
/// let specs = specs_for(KeyType::F32, 4, BatchedTiers::WARP, 8);
/// assert_eq!(specs.len(), 2);
/// ```
pub fn specs_for(
    key: KeyType,
    value_bytes: u8,
    tiers: BatchedTiers,
    warp_items: u32,
) -> Vec<KernelSpec> {
    let mut specs = vec![KernelSpec::batched_topk(
        key,
        value_bytes,
        BatchedKernel::Control,
    )];
    if tiers.contains(BatchedTiers::WARP) {
        let kernel = BatchedKernel::Warp { items: warp_items };
        specs.push(KernelSpec::batched_topk(key, value_bytes, kernel));
    }
    if tiers.contains(BatchedTiers::BLOCK) {
        specs.push(KernelSpec::batched_topk(
            key,
            value_bytes,
            BatchedKernel::Block,
        ));
    }
    if tiers.contains(BatchedTiers::LARGE) {
        specs.push(KernelSpec::batched_topk(
            key,
            value_bytes,
            BatchedKernel::Large,
        ));
    }
    if tiers.contains(BatchedTiers::STREAM) {
        for kernel in STREAM_KERNELS {
            specs.push(KernelSpec::batched_topk(key, value_bytes, kernel));
        }
    }
    specs
}

/// The stream tier's kernels: the filter and the final selection, or (a direct call of few
/// segments on sm_90) both in one clustered launch.
const STREAM_KERNELS: [BatchedKernel; 3] = [
    BatchedKernel::StreamFilter,
    BatchedKernel::StreamFinal,
    BatchedKernel::StreamCluster,
];

/// Every `batched_topk` spec dispatch can produce: each key type and value width with each
/// tier (and each warp width).
///
/// ```
/// assert_eq!(oxicub_kernels::families::batched_topk::specs().len(), 1 + 12 * 3 * 9);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    let mut specs = vec![KernelSpec::batched_topk(
        KeyType::U32,
        0,
        BatchedKernel::Control,
    )];
    for key in KeyType::ALL {
        for bytes in [0, 4, 8] {
            for items in [1, 2, 4, 8] {
                specs.push(KernelSpec::batched_topk(
                    key,
                    bytes,
                    BatchedKernel::Warp { items },
                ));
            }
            specs.push(KernelSpec::batched_topk(key, bytes, BatchedKernel::Block));
            specs.push(KernelSpec::batched_topk(key, bytes, BatchedKernel::Large));
            for kernel in STREAM_KERNELS {
                specs.push(KernelSpec::batched_topk(key, bytes, kernel));
            }
        }
    }
    specs
}

/// A per-segment value, or one for every segment.
#[derive(Clone, Copy, Debug)]
pub enum PerSegmentOr<'a, 'b, T, U> {
    /// The same for every segment.
    Uniform(U),
    /// One per segment (at least `max_segments` elements).
    PerSegment(&'b CudaView<'a, T>),
}

/// Where the segments are.
#[derive(Clone, Copy, Debug)]
pub enum BatchedLayout<'a, 'b> {
    /// Segment `i` starts at `i * stride`; its size is `sizes`.
    Strided {
        /// The stride.
        stride: u64,
        /// The sizes.
        sizes: PerSegmentOr<'a, 'b, i64, u64>,
    },
    /// Segment `i` is `begin[i]..end[i]`.
    Offsets {
        /// Begin offsets.
        begin: &'b CudaView<'a, i64>,
        /// End offsets.
        end: &'b CudaView<'a, i64>,
    },
    /// Every segment at its own device address (the seeds' iterator of iterators): segment
    /// `i` is the `end[i] - begin[i]` keys at byte address `begin[i] * size_of::<K>()`, so the
    /// begin and end are *element addresses* (address / key size), and the keys buffer of
    /// [`batched_topk`] is `None`. Copied values come from [`SelectedValues::Listed`] with
    /// one byte address per segment in `value_addresses`.
    Listed {
        /// Element address of each segment's first key.
        begin: &'b CudaView<'a, i64>,
        /// `begin[i]` + the segment's size.
        end: &'b CudaView<'a, i64>,
        /// The largest segment (sizes the scratch of the several-blocks tier).
        max_size: u64,
    },
}

/// Everything a batched top-k launch needs besides the buffers of keys and values.
#[derive(Clone, Copy, Debug)]
pub struct BatchedTopKPlan<'a, 'b> {
    /// The layout.
    pub layout: BatchedLayout<'a, 'b>,
    /// `k`.
    pub k: PerSegmentOr<'a, 'b, i64, u64>,
    /// The direction: 0 = max, 1 = min (per segment: `u8`s).
    pub direction: PerSegmentOr<'a, 'b, u8, u32>,
    /// The options of the direction that were compiled (bit 0: max, bit 1: min).
    pub direction_mask: u32,
    /// The number of segments: on the host, or deferred (an `i64` clamped into
    /// `num_segments_bounds`).
    pub num_segments: PerSegmentOr<'a, 'b, i64, u64>,
    /// Bounds of a deferred number of segments; its upper bound is the most segments launched.
    pub num_segments_bounds: (u64, u64),
    /// Bounds every segment size must satisfy.
    pub size_bounds: (u64, u64),
    /// Bounds every `k` must satisfy.
    pub k_bounds: (u64, u64),
    /// Bounds of the sum of the valid segments' sizes (the TotalItems guarantee; `(0,
    /// u64::MAX)` when there is none): the several-blocks tier's scratch is sized from the
    /// upper bound, and a sum outside them is reported.
    pub total_bounds: (u64, u64),
    /// Distance between consecutive segments' outputs.
    pub out_stride: u64,
    /// The most items one segment writes.
    pub per_segment_max: u64,
    /// The tiers to run.
    pub tiers: BatchedTiers,
    /// Keys per lane of the warp tier.
    pub warp_items: u32,
    /// Ties at the boundary keep the larger indices.
    pub prefer_larger_index: bool,
    /// The output is sorted by key.
    pub sorted: bool,
    /// ... with equal keys by index.
    pub stable: bool,
}

/// The status words a call leaves on the device (see [`BatchedStatus::decode`]).
#[derive(Debug)]
pub struct BatchedStatus {
    /// The words; `None` when the host checked every value before launching (strided layout,
    /// every parameter uniform and valid): nothing can fail on the device.
    pub words: Option<CudaSlice<u64>>,
}

/// The decoded status of a finished call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchedReport {
    /// The smallest invalid segment: (segment, violation code, offending value).
    pub violation: Option<(u64, u8, i64)>,
    /// A deferred number of segments outside its bounds: its value.
    pub bad_num_segments: Option<i64>,
    /// The sum of the valid segments' sizes, when it is outside the TotalItems guarantee.
    pub bad_total_items: Option<u64>,
}

impl BatchedStatus {
    /// Reads the status (waits for the stream).
    pub fn decode(&self, stream: &Arc<CudaStream>) -> Result<BatchedReport, KernelError> {
        let Some(words) = &self.words else {
            // Nothing to read; still the caller's synchronisation point.
            stream.synchronize().during("cuStreamSynchronize")?;
            return Ok(BatchedReport {
                violation: None,
                bad_num_segments: None,
                bad_total_items: None,
            });
        };
        let words = stream.clone_dtoh(words).during("cuMemcpyDtoHAsync")?;
        let word = |at: u32| words[at as usize];
        let first = word(SEGMENT_STATUS_VIOLATION);
        let violation = (first != u64::MAX).then(|| {
            (
                first >> 8,
                (first & 0xFF) as u8,
                word(SEGMENT_STATUS_VALUE) as i64,
            )
        });
        let bad_num_segments = (word(SEGMENT_STATUS_COUNT_BAD) != 0)
            .then_some(word(SEGMENT_STATUS_COUNT_VALUE) as i64);
        let bad_total_items = (word(BT_STATUS_TOTAL_BAD) != 0).then_some(word(BT_STATUS_TOTAL));
        Ok(BatchedReport {
            violation,
            bad_num_segments,
            bad_total_items,
        })
    }
}

/// Runs batched top-k: each segment's `min(k, size)` best keys (and values) into
/// `out_keys[i * out_stride ..]`, as `plan` says. Asynchronous on `stream`; returns the status
/// words to decode when the caller chooses to synchronise.
///
/// `keys` is the buffer the strided and offsets layouts index, and `None` exactly when the
/// layout is [`BatchedLayout::Listed`] (each segment has its own address); copied values are
/// [`SelectedValues::Listed`] exactly then too.
pub fn batched_topk<K: RadixKey, V>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    plan: BatchedTopKPlan<'_, '_>,
    keys: Option<&CudaView<'_, K>>,
    out_keys: &mut CudaViewMut<'_, K>,
    mut values: SelectedValues<'_, '_, V>,
) -> Result<BatchedStatus, KernelError> {
    let listed = matches!(plan.layout, BatchedLayout::Listed { .. });
    let value_addresses = matches!(values, SelectedValues::Listed { .. });
    let mismatch = |reason: &str| KernelError::InvalidSpec {
        kernel: "batched_topk".to_owned(),
        reason: reason.to_owned(),
    };
    // The number of keys the layout may address: the buffer's length, or (listed) every
    // element address a segment may start at.
    let num_keys = match (keys, listed) {
        (Some(keys), false) => {
            runtime.check_buffer("keys", keys)?;
            keys.len() as u64
        }
        (None, true) => i64::MAX as u64,
        _ => {
            return Err(mismatch(
                "a keys buffer goes with exactly the non-listed layouts",
            ))
        }
    };
    match (&values, listed) {
        (SelectedValues::Copy { .. }, true) | (SelectedValues::Listed { .. }, false) => {
            return Err(mismatch(
                "copied values of a listed layout come as per-segment addresses, and only then",
            ))
        }
        _ => {}
    }
    runtime.check_buffer("out_keys", &*out_keys)?;
    let max_segments = match plan.num_segments {
        PerSegmentOr::Uniform(n) => n,
        PerSegmentOr::PerSegment(_) => plan.num_segments_bounds.1,
    };
    let out_len = if max_segments == 0 || plan.per_segment_max == 0 {
        0
    } else {
        (max_segments - 1)
            .saturating_mul(plan.out_stride)
            .saturating_add(plan.per_segment_max)
    };
    let at_least = |buffer: &'static str, actual: usize, expected: u64| {
        if (actual as u64) < expected {
            Err(KernelError::LengthMismatch {
                buffer,
                actual,
                expected: expected as usize,
            })
        } else {
            Ok(())
        }
    };
    at_least("out_keys", out_keys.len(), out_len)?;
    let value_bytes = match &values {
        SelectedValues::None => 0u8,
        SelectedValues::Copy { values, out } => {
            runtime.check_buffer("values", *values)?;
            runtime.check_buffer("out_values", &**out)?;
            at_least("values", values.len(), num_keys)?;
            at_least("out_values", out.len(), out_len)?;
            std::mem::size_of::<V>() as u8
        }
        SelectedValues::Listed {
            value_addresses,
            out,
        } => {
            runtime.check_buffer("value_addresses", *value_addresses)?;
            runtime.check_buffer("out_values", &**out)?;
            at_least("value_addresses", value_addresses.len(), max_segments)?;
            at_least("out_values", out.len(), out_len)?;
            std::mem::size_of::<V>() as u8
        }
        SelectedValues::Index { out } => {
            runtime.check_buffer("out_values", &**out)?;
            at_least("out_values", out.len(), out_len)?;
            std::mem::size_of::<V>() as u8
        }
    };
    if !matches!(value_bytes, 0 | 4 | 8) {
        return Err(KernelError::InvalidSpec {
            kernel: "batched_topk".to_owned(),
            reason: format!("values must be 4 or 8 bytes, not {value_bytes}"),
        });
    }
    let per_segment = |name: &'static str, view: &CudaView<'_, i64>| {
        runtime.check_buffer(name, view)?;
        at_least(name, view.len(), max_segments)
    };
    if let BatchedLayout::Offsets { begin, end } | BatchedLayout::Listed { begin, end, .. } =
        plan.layout
    {
        per_segment("begin_offsets", begin)?;
        per_segment("end_offsets", end)?;
    }
    if let BatchedLayout::Strided {
        sizes: PerSegmentOr::PerSegment(sizes),
        ..
    } = plan.layout
    {
        per_segment("segment_sizes", sizes)?;
    }
    if let PerSegmentOr::PerSegment(k) = plan.k {
        per_segment("k", k)?;
    }
    if let PerSegmentOr::PerSegment(directions) = plan.direction {
        runtime.check_buffer("direction", directions)?;
        at_least("direction", directions.len(), max_segments)?;
    }
    if let PerSegmentOr::PerSegment(n) = plan.num_segments {
        runtime.check_buffer("num_segments", n)?;
        at_least("num_segments", n.len(), 1)?;
    }

    let alloc = |count: u64| stream.alloc_zeros::<u64>(count.max(1) as usize);
    // Scratch every stage writes before it reads: no clearing.
    // None (pointer 0) when no stage uses it: a direct call of the warp or block tier
    // allocates nothing (an allocation and a free cost host time on every call).
    let scratch = |count: u64| -> Result<Option<CudaSlice<u64>>, KernelError> {
        if count == 0 {
            return Ok(None);
        }
        // SAFETY: u64 has no invalid bit patterns, and the kernels write every word of these
        // buffers (state and histogram in LARGE_INIT, chunk counts in LARGE_COUNT, selected
        // indices in LARGE_COLLECT / LARGE_SORT_INIT, descriptors in RESOLVE) before reading it.
        let buffer = unsafe { stream.alloc::<u64>(count as usize) };
        buffer.map(Some).during("cuMemAllocAsync")
    };
    let direct = direct_shape(&plan, num_keys);
    // A direct call has nothing to report (no allocation, no clearing).
    let mut status = if direct {
        None
    } else {
        Some(alloc(BT_STATUS_WORDS as u64).during("cuMemAllocAsync")?)
    };
    if max_segments == 0 && matches!(plan.num_segments, PerSegmentOr::Uniform(_)) {
        // No segment: nothing to launch, nothing to report (a deferred count is still read,
        // to report it when it is outside its bounds).
        let mut none = [0u64; BT_STATUS_WORDS as usize];
        none[0] = u64::MAX;
        if let Some(status) = status.as_mut() {
            stream
                .memcpy_htod(&none, status)
                .during("cuMemcpyHtoDAsync")?;
        }
        return Ok(BatchedStatus { words: status });
    }
    let tiers = effective_tiers::<K>(&plan);
    let large = tiers.contains(BatchedTiers::LARGE);
    // Sorted sets larger than a block sorts in shared memory are sorted in global memory.
    let global_sort = large && plan.sorted && plan.per_segment_max > SORT_CAP as u64;
    let sort_span = if global_sort {
        plan.per_segment_max.next_power_of_two()
    } else {
        0
    };
    if sort_span > u64::from(u32::MAX) {
        return Err(KernelError::InvalidSpec {
            kernel: "batched_topk (several blocks per segment)".to_owned(),
            reason: format!(
                "sorted output of {} items per segment is more than the global sort handles",
                plan.per_segment_max
            ),
        });
    }
    let descriptor_words = if direct {
        0
    } else {
        max_segments.saturating_mul(u64::from(SEGMENT_DESC_WORDS))
    };
    let mut descriptors = scratch(descriptor_words)?;
    let largest = match plan.layout {
        BatchedLayout::Listed { max_size, .. } => plan.size_bounds.1.min(max_size),
        _ => plan.size_bounds.1.min(num_keys),
    };
    let chunks = if large {
        largest.div_ceil(CHUNK_ITEMS).max(1)
    } else {
        0
    };
    // The several-blocks tier's scratch, per position in its bin: at most every segment, and
    // at most as many as the TotalItems guarantee leaves room for (each of its segments holds
    // more than the tiers before it take).
    let large_capacity = if direct {
        max_segments
    } else {
        let smallest = if plan.tiers.contains(BatchedTiers::BLOCK) {
            SORT_CAP as u64 + 1
        } else if plan.tiers.contains(BatchedTiers::WARP) {
            (WARP_MAX_K as u64 + 1).min(u64::from(plan.warp_items) * 32 + 1)
        } else {
            1
        };
        let smallest = smallest.max(plan.size_bounds.0).max(1);
        max_segments.min(plan.total_bounds.1 / smallest)
    };
    let large_segments = if large { large_capacity } else { 0 };
    // The stream tier's list has the same bound as the large one (its segments hold more than
    // the tiers before it take, too); its scratch is per list position.
    let stream_tier = tiers.contains(BatchedTiers::STREAM);
    let stream_capacity = if stream_tier && !direct {
        large_capacity
    } else {
        0
    };
    let stream_slots = if direct {
        max_segments
    } else {
        stream_capacity
    };
    let stream_shape = stream_layout::<K>(&plan, tiers, largest, stream_slots);
    // A direct call of the stream tier whose segments all fit on the device at once as
    // clusters takes the one clustered launch (sm_90); it needs no scratch.
    let stream_direct = stream_tier && direct && plan.per_segment_max > 0;
    let cluster = if stream_direct && direct_bin_is_stream(&plan, tiers, &stream_shape) {
        cluster_launch::<K>(runtime, stream, value_bytes, &plan, max_segments)
    } else {
        None
    };
    let stream_scratch = |words: u64| if cluster.is_some() { 0 } else { words };
    let bin_words = if direct {
        0
    } else {
        max_segments
            .saturating_mul(2)
            .saturating_add(large_capacity)
            .saturating_add(stream_capacity)
    };
    let mut bins = scratch(bin_words)?;
    let mut large_state = scratch(large_segments.saturating_mul(u64::from(BT_LARGE_WORDS)))?;
    let mut large_histogram = scratch(large_segments.saturating_mul(u64::from(BT_BINS)))?;
    let mut large_chunks = scratch(large_segments.saturating_mul(chunks))?;
    let selected_stride = if global_sort {
        sort_span
    } else {
        plan.out_stride
    };
    let selected_len = if large {
        large_segments.saturating_mul(selected_stride)
    } else {
        0
    };
    let mut large_selected = scratch(selected_len)?;
    let ranks_len = if global_sort { selected_len } else { 0 };
    let mut large_ranks = scratch(ranks_len)?;
    let mut stream_ranks = scratch(stream_scratch(stream_shape.rank_words))?;
    let mut stream_indices = scratch(stream_scratch(stream_shape.index_words))?;
    let mut stream_counts = scratch(stream_scratch(stream_shape.count_words))?;

    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    // Listed: the segments' element addresses are offsets from a keys base of 0.
    let keys_ptr = match keys {
        Some(keys) => keep(&mut guards, keys.device_ptr(stream)),
        None => 0,
    };
    let out_keys_ptr = keep(&mut guards, out_keys.device_ptr_mut(stream));
    let status_ptr = match status.as_mut() {
        Some(status) => keep(&mut guards, status.device_ptr_mut(stream)),
        None => 0,
    };
    let descriptors_ptr = keep_opt(&mut guards, stream, &mut descriptors);
    let large_state_ptr = keep_opt(&mut guards, stream, &mut large_state);
    let large_histogram_ptr = keep_opt(&mut guards, stream, &mut large_histogram);
    let large_chunks_ptr = keep_opt(&mut guards, stream, &mut large_chunks);
    let large_selected_ptr = keep_opt(&mut guards, stream, &mut large_selected);
    let large_ranks_ptr = keep_opt(&mut guards, stream, &mut large_ranks);
    let bins_ptr = keep_opt(&mut guards, stream, &mut bins);
    let stream_ranks_ptr = keep_opt(&mut guards, stream, &mut stream_ranks);
    let stream_indices_ptr = keep_opt(&mut guards, stream, &mut stream_indices);
    let stream_counts_ptr = keep_opt(&mut guards, stream, &mut stream_counts);
    let (values_ptr, out_values_ptr, values_are_index) = values.device_ptrs(stream, &mut guards);
    let index_flag = if values_are_index {
        BT_VALUES_ARE_INDEX
    } else {
        0
    };
    let mut flags = index_flag;
    if value_addresses {
        flags |= SEGMENT_VALUE_POINTERS;
    }
    let (stride, size_value, sizes_ptr, begin_ptr, end_ptr) = match plan.layout {
        BatchedLayout::Strided { stride, sizes } => match sizes {
            PerSegmentOr::Uniform(size) => (stride, size, 0, 0, 0),
            PerSegmentOr::PerSegment(view) => {
                flags |= SEGMENT_SIZES_PER_SEGMENT;
                (stride, 0, keep(&mut guards, view.device_ptr(stream)), 0, 0)
            }
        },
        BatchedLayout::Offsets { begin, end } | BatchedLayout::Listed { begin, end, .. } => {
            flags |= SEGMENT_OFFSETS;
            (
                0,
                0,
                0,
                keep(&mut guards, begin.device_ptr(stream)),
                keep(&mut guards, end.device_ptr(stream)),
            )
        }
    };
    let (k_value, ks_ptr) = match plan.k {
        PerSegmentOr::Uniform(k) => (k, 0),
        PerSegmentOr::PerSegment(view) => {
            flags |= BT_K_PER_SEGMENT;
            (0, keep(&mut guards, view.device_ptr(stream)))
        }
    };
    let (direction_value, directions_ptr) = match plan.direction {
        PerSegmentOr::Uniform(d) => (d, 0),
        PerSegmentOr::PerSegment(view) => {
            flags |= BT_DIR_PER_SEGMENT;
            (0, keep(&mut guards, view.device_ptr(stream)))
        }
    };
    let (num_segments, num_segments_ptr) = match plan.num_segments {
        PerSegmentOr::Uniform(n) => (n, 0),
        PerSegmentOr::PerSegment(view) => {
            flags |= SEGMENT_COUNT_DEFERRED;
            (0, keep(&mut guards, view.device_ptr(stream)))
        }
    };
    if plan.prefer_larger_index {
        flags |= BT_PREFER_LARGER;
    }
    if plan.stable {
        flags |= BT_STABLE;
    }
    if plan.sorted {
        flags |= BT_SORTED;
    }
    if global_sort {
        flags |= BT_GLOBAL_SORT;
    }
    if direct {
        flags |= SEGMENT_DIRECT;
    }
    let params = BatchedTopKParams {
        keys: keys_ptr,
        values: values_ptr,
        out_keys: out_keys_ptr,
        out_values: out_values_ptr,
        begin_offsets: begin_ptr,
        end_offsets: end_ptr,
        sizes: sizes_ptr,
        ks: ks_ptr,
        directions: directions_ptr,
        num_segments_ptr,
        descriptors: descriptors_ptr,
        status: status_ptr,
        large_state: large_state_ptr,
        large_histogram: large_histogram_ptr,
        large_chunks: large_chunks_ptr,
        large_selected: large_selected_ptr,
        large_ranks: large_ranks_ptr,
        bins: bins_ptr,
        num_keys,
        stride,
        size_value,
        size_min: plan.size_bounds.0,
        size_max: plan.size_bounds.1,
        k_value,
        k_min: plan.k_bounds.0,
        k_max: plan.k_bounds.1,
        num_segments,
        num_segments_min: plan.num_segments_bounds.0,
        num_segments_max: plan.num_segments_bounds.1,
        out_stride: plan.out_stride,
        warp_max_size: u64::from(plan.warp_items) * 32,
        warp_max_k: WARP_MAX_K as u64,
        block_max_size: SORT_CAP as u64,
        stream_max_size: stream_shape.max_size,
        stream_max_k: STREAM_MAX_K as u64,
        stream_capacity,
        stream_ctas: stream_shape.ctas,
        stream_chunk: stream_shape.chunk,
        stream_candidates: stream_shape.candidates,
        stream_total: stream_shape.total,
        stream_ranks: stream_ranks_ptr,
        stream_indices: stream_indices_ptr,
        stream_counts: stream_counts_ptr,
        stream_sorted_cap: stream_shape.sorted_cap,
        stream_sorted_offset: stream_shape.sorted_offset,
        stream_bins_offset: stream_shape.bins_offset,
        stream_index_offset: stream_shape.index_offset,
        stream_rank_offset: stream_shape.rank_offset,
        chunks_per_segment: chunks,
        chunk_items: CHUNK_ITEMS,
        selected_stride,
        sort_span,
        bin_capacity: max_segments,
        large_capacity,
        total_min: plan.total_bounds.0,
        total_max: plan.total_bounds.1,
        flags,
        direction_value,
        direction_mask: plan.direction_mask,
        tiers: tiers.0,
        stage: BT_STAGE_INIT,
        shift: 0,
        half: 0,
        reserved: 0,
    };
    let key = K::KEY_TYPE;
    let launch_step =
        |kernel: BatchedKernel, grid_items: u64, stage: u32, shift: u32, half: u32| {
            let spec = KernelSpec::batched_topk(key, value_bytes, kernel);
            let loaded = runtime.kernel(&spec)?;
            let grid = runtime.grid_blocks(&loaded, grid_items, 1);
            let params = BatchedTopKParams {
                stage,
                shift,
                half,
                ..params
            };
            runtime.launch(stream, &loaded, grid, params)
        };
    let launch = |kernel: BatchedKernel, grid_items: u64, stage: u32, shift: u32| {
        launch_step(kernel, grid_items, stage, shift, 0)
    };
    let threads = u64::from(BLOCK_THREADS);
    if !direct {
        launch(BatchedKernel::Control, 1, BT_STAGE_INIT, 0)?;
        launch(BatchedKernel::Control, max_segments, BT_STAGE_RESOLVE, 0)?;
        launch(BatchedKernel::Control, 1, BT_STAGE_FINALIZE, 0)?;
    }
    if plan.per_segment_max > 0 {
        if tiers.contains(BatchedTiers::WARP) {
            let kernel = BatchedKernel::Warp {
                items: plan.warp_items,
            };
            launch(kernel, max_segments.saturating_mul(32), BT_STAGE_SELECT, 0)?;
        }
        if tiers.contains(BatchedTiers::BLOCK) {
            launch(
                BatchedKernel::Block,
                max_segments.saturating_mul(threads),
                BT_STAGE_SELECT,
                0,
            )?;
        }
        if let Some(cluster) = &cluster {
            let layout = &cluster.layout;
            let params = BatchedTopKParams {
                stage: BT_STAGE_SELECT,
                stream_total: layout.candidates,
                stream_sorted_cap: layout.candidates,
                stream_sorted_offset: layout.copy_offset,
                stream_bins_offset: layout.bins_offset,
                stream_index_offset: layout.index_offset,
                stream_rank_offset: layout.rank_offset,
                ..params
            };
            runtime.launch_clustered(
                stream,
                &cluster.kernel,
                cluster.grid,
                layout.shared_bytes,
                params,
                BT_CLUSTER_BLOCKS,
            )?;
            CLUSTERED_LAUNCHES.with(|n| n.set(n.get() + 1));
        } else if stream_tier {
            // The filter, a block per (list position, chunk) up to as many as are resident at
            // once (the blocks stride over the rest, so calls with more chunks than one wave,
            // which tests make, run its grid-stride path), then the final selection, a block
            // per list position.
            let blocks = |n: u64| n.clamp(1, STREAM_MAX_GRID) as u32;
            let spec = KernelSpec::batched_topk(key, value_bytes, BatchedKernel::StreamFilter);
            let loaded = runtime.kernel(&spec)?;
            let filter = BatchedTopKParams {
                stage: BT_STAGE_SELECT,
                ..params
            };
            let items = stream_slots.saturating_mul(stream_shape.ctas);
            let wave = runtime.grid_blocks(
                &loaded,
                items.saturating_mul(u64::from(BT_STREAM_FILTER_THREADS)),
                1,
            );
            let filter_blocks = stride_coprime(wave, items, stream_shape.ctas);
            runtime.launch_with_shared(
                stream,
                &loaded,
                filter_blocks,
                0,
                filter,
                LaunchOrder::AfterCompletion,
            )?;
            let spec = KernelSpec::batched_topk(key, value_bytes, BatchedKernel::StreamFinal);
            let loaded = runtime.kernel(&spec)?;
            let shared = stream_shape.shared_bytes;
            // Launched as a dependent of the filter: its launch overlaps the filter's tail.
            runtime.launch_with_shared(
                stream,
                &loaded,
                blocks(stream_slots),
                shared,
                filter,
                LaunchOrder::Programmatic,
            )?;
        }
        if large {
            // Grids over the large bin's positions (the kernels stride over what they find).
            let work = large_segments
                .saturating_mul(chunks)
                .saturating_mul(threads);
            let bins = large_segments.saturating_mul(u64::from(BT_BINS));
            launch(BatchedKernel::Large, bins, BT_STAGE_LARGE_INIT, 0)?;
            let bits = <K::Bits as RadixBits>::BITS;
            for pass in 0..bits / 8 {
                let shift = bits - 8 * (pass + 1);
                // The last work item of each segment picks the pivot (BT_STAGE_LARGE_PIVOT's job).
                launch(BatchedKernel::Large, work, BT_STAGE_LARGE_HISTOGRAM, shift)?;
            }
            launch(BatchedKernel::Large, work, BT_STAGE_LARGE_COUNT, 0)?;
            launch(BatchedKernel::Large, large_segments, BT_STAGE_LARGE_SCAN, 0)?;
            launch(BatchedKernel::Large, work, BT_STAGE_LARGE_COLLECT, 0)?;
            if global_sort {
                let slots = large_segments.saturating_mul(sort_span);
                launch(BatchedKernel::Large, slots, BT_STAGE_LARGE_SORT_INIT, 0)?;
                let mut size = 2u64;
                while size <= sort_span {
                    let mut half = size / 2;
                    while half > 0 {
                        let step = BT_STAGE_LARGE_SORT_STEP;
                        launch_step(BatchedKernel::Large, slots, step, size as u32, half as u32)?;
                        half /= 2;
                    }
                    size *= 2;
                }
            }
            let write = large_segments
                .saturating_mul(chunks)
                .saturating_mul(threads);
            launch(BatchedKernel::Large, write, BT_STAGE_LARGE_WRITE, 0)?;
        }
    }
    drop(guards);
    Ok(BatchedStatus { words: status })
}

/// The filter's grid: `wave` blocks (at most one per item), lowered when it strides over more
/// items to the largest count coprime to `ctas`, so that block b's items b, b + grid, ... cycle
/// through the chunk numbers (item = list position x ctas + chunk) instead of repeating one.
fn stride_coprime(wave: u32, items: u64, ctas: u64) -> u32 {
    fn gcd(a: u64, b: u64) -> u64 {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let mut grid = u64::from(wave.max(1));
    if items > grid {
        while grid > 1 && gcd(grid, ctas.max(1)) != 1 {
            grid -= 1;
        }
    }
    u32::try_from(grid).unwrap_or(u32::MAX)
}

/// Whether the host can check every segment before launching: strided layout, size, `k`,
/// direction and number of segments each one host value. Then every segment is alike, so the
/// checks the control stages make per segment are made here once (for the last segment, the
/// one that reaches furthest); when they pass, the tiers read the values from the parameters
/// (no control stages, no descriptors, no status to read back). When they fail, the general
/// path runs and reports the violation as usual.
fn direct_shape(plan: &BatchedTopKPlan<'_, '_>, num_keys: u64) -> bool {
    let BatchedLayout::Strided {
        stride,
        sizes: PerSegmentOr::Uniform(size),
    } = plan.layout
    else {
        return false;
    };
    let (PerSegmentOr::Uniform(k), PerSegmentOr::Uniform(dir), PerSegmentOr::Uniform(n)) =
        (plan.k, plan.direction, plan.num_segments)
    else {
        return false;
    };
    let size_ok = size >= plan.size_bounds.0 && size <= plan.size_bounds.1 && size <= stride;
    let k_ok = k >= plan.k_bounds.0 && k <= plan.k_bounds.1;
    let dir_ok = dir <= 1 && (plan.direction_mask >> dir) & 1 == 1;
    let end = n
        .checked_sub(1)
        .and_then(|last| last.checked_mul(stride))
        .and_then(|b| b.checked_add(size));
    let fits = matches!(end, Some(e) if e <= num_keys && e <= i64::MAX as u64);
    // The kernels hold these as signed 64-bit values.
    let small = size <= i64::MAX as u64 && k <= i64::MAX as u64;
    n > 0 && size_ok && k_ok && dir_ok && fits && small
}

/// The tiers a call runs: `plan.tiers` less what the key width's bounds exclude.
fn effective_tiers<K: RadixKey>(plan: &BatchedTopKPlan<'_, '_>) -> BatchedTiers {
    let clamp = |v: u64| v.min(i64::MAX as u64) as i64;
    let key_bytes = std::mem::size_of::<K>() as u32;
    let sizes = (clamp(plan.size_bounds.0), clamp(plan.size_bounds.1));
    let k = (clamp(plan.k_bounds.0), clamp(plan.k_bounds.1));
    // The width-independent bounds may have asked for the multi-block tier only because of
    // wider keys; the width's own bounds decide. What the plan lacks is never added.
    plan.tiers
        .and(BatchedTiers::for_key_bounds(key_bytes, sizes, k))
}

/// The stream tier's shapes: chunks, candidate slots, scratch and the final stage's dynamic
/// shared memory (the candidates, aliased by the exact path's sort region; the bucket copy;
/// the bucket starts and fill counters; the exact path's index and rank buffers).
#[derive(Default)]
struct StreamLayout {
    max_size: u64,
    ctas: u64,
    chunk: u64,
    candidates: u64,
    total: u64,
    sorted_cap: u64,
    sorted_offset: u64,
    bins_offset: u64,
    index_offset: u64,
    rank_offset: u64,
    shared_bytes: u32,
    rank_words: u64,
    index_words: u64,
    count_words: u64,
}

fn stream_layout<K: RadixKey>(
    plan: &BatchedTopKPlan<'_, '_>,
    tiers: BatchedTiers,
    largest: u64,
    slots: u64,
) -> StreamLayout {
    if !tiers.contains(BatchedTiers::STREAM) {
        return StreamLayout::default();
    }
    let key_bytes = std::mem::size_of::<K>() as u64;
    let max_size = BatchedTiers::stream_max_size(key_bytes as u32) as u64;
    // The largest segment the tier may get (`largest`: the bound the layout allows); a
    // uniform size is exact.
    let largest = match plan.layout {
        BatchedLayout::Strided {
            sizes: PerSegmentOr::Uniform(size),
            ..
        } => size.min(largest),
        _ => largest,
    }
    .clamp(1, max_size);
    let chunk = STREAM_CHUNK_BYTES / key_bytes;
    let ctas = largest.div_ceil(chunk);
    // Ranks are u32 for keys of up to 32 bits, else u64; a candidate is a rank and a u32
    // index. A region is a filter warp's part of a chunk.
    let rank_bytes = if key_bytes <= 4 { 4 } else { 8 };
    let budget = u64::from(if key_bytes <= 4 {
        BT_STREAM_CANDIDATES
    } else {
        BT_STREAM_CANDIDATES / 2
    });
    let regions = ctas * u64::from(BT_STREAM_FILTER_WARPS);
    // A segment's slots in global memory: four times its candidate budget, `candidates` per
    // region on average. A region that overflows sends its segment to the exact path over
    // every key (~10x slower), and sorted, smooth or clustered inputs crowd the candidates
    // into a few regions, so the filter shares a quarter of a sampled segment's slots out by
    // where the sample's best keys lie (bt_stream_slots; the rest evenly). The scratch is
    // half the keys' bytes for 4-byte keys; the final selection still holds at most `total`
    // in shared memory.
    let candidates = (4 * budget / regions).min(chunk / u64::from(BT_STREAM_FILTER_WARPS));
    let total = budget.min(candidates * regions);
    let selected = plan.per_segment_max.min(STREAM_MAX_K as u64);
    // The bucket copy holds the buckets up to the one of the k-th item.
    let sorted_cap = total.min(2 * selected + 1024);
    let sort_entry = if key_bytes <= 4 { 8 } else { 16 };
    let align = |x: u64| x.div_ceil(16) * 16;
    let candidate_bytes = (total * (rank_bytes + 4)).max(selected.next_power_of_two() * sort_entry);
    let sorted_offset = align(candidate_bytes);
    let bins_offset = align(sorted_offset + sorted_cap * (rank_bytes + 4));
    let index_offset = align(bins_offset + u64::from(BT_STARTS_WORDS + BT_BUCKETS) * 4);
    let rank_offset = align(index_offset + selected * 4);
    let shared = rank_offset + selected * rank_bytes;
    let words = |bytes: u64| bytes.div_ceil(8);
    let slots_per_segment = candidates * regions;
    StreamLayout {
        max_size,
        ctas,
        chunk,
        candidates,
        total,
        sorted_cap,
        sorted_offset,
        bins_offset,
        index_offset,
        rank_offset,
        shared_bytes: u32::try_from(shared).unwrap_or(u32::MAX),
        rank_words: words(
            slots
                .saturating_mul(slots_per_segment)
                .saturating_mul(rank_bytes),
        ),
        index_words: words(slots.saturating_mul(slots_per_segment).saturating_mul(4)),
        // Per region: its counts and its ranks' range (BT_STREAM_RECORD_WORDS u64 words).
        count_words: slots
            .saturating_mul(regions)
            .saturating_mul(u64::from(BT_STREAM_RECORD_WORDS)),
    }
}

thread_local! {
    /// The clustered launches made on this thread (a call launches on its caller's thread).
    static CLUSTERED_LAUNCHES: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many clustered launches of the stream tier ([`BatchedKernel::StreamCluster`]) this
/// thread has made: which path a call took, for tests and benchmarks (nothing else depends on
/// it). Per thread, so tests running side by side do not see each other's launches.
///
/// ```
/// let before = oxicub_kernels::families::batched_topk::clustered_launches();
/// assert!(oxicub_kernels::families::batched_topk::clustered_launches() >= before);
/// ```
pub fn clustered_launches() -> u64 {
    CLUSTERED_LAUNCHES.with(std::cell::Cell::get)
}

/// The dynamic shared memory of the clustered launch's blocks (batched_topk_stream.cuh,
/// PART 3): a block's candidates, its copy of the selected buckets (where the sample bins, the
/// streaming walk's stage and the exact path's index and rank buffers also lie) and its bucket
/// counts, starts and positions; the exact path's sort region aliases the candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ClusterLayout {
    /// Candidates a block holds (and the copy's length).
    candidates: u64,
    copy_offset: u64,
    bins_offset: u64,
    index_offset: u64,
    rank_offset: u64,
    shared_bytes: u32,
}

/// The layout for keys of `key_bytes` and `selected` (at most STREAM_MAX_K) items a segment;
/// `cluster_regions_fit` pins that the regions that share words fit.
fn cluster_layout(key_bytes: u64, selected: u64) -> ClusterLayout {
    let rank_bytes = if key_bytes <= 4 { 4 } else { 8 };
    let candidates = u64::from(if key_bytes <= 4 {
        BT_STREAM_CANDIDATES
    } else {
        BT_STREAM_CANDIDATES / 2
    });
    let align = |x: u64| x.div_ceil(16) * 16;
    let region = align(candidates * (rank_bytes + 4));
    let copy_offset = region;
    let bins_offset = copy_offset + region;
    let shared = bins_offset + u64::from(BT_STARTS_WORDS + 2 * BT_BUCKETS) * 4;
    let index_offset = copy_offset;
    ClusterLayout {
        candidates,
        copy_offset,
        bins_offset,
        index_offset,
        rank_offset: align(index_offset + selected * 4),
        shared_bytes: u32::try_from(shared).unwrap_or(u32::MAX),
    }
}

/// The clustered launch of a direct call: its kernel, layout and grid (a cluster per segment).
struct ClusterLaunch {
    kernel: LoadedKernel,
    layout: ClusterLayout,
    grid: u32,
}

/// The clustered launch, when the device launches clusters and every segment's cluster is
/// resident at once (more segments than that would run in waves, each a chain of barriers:
/// the filter and final selection take them instead).
fn cluster_launch<K: RadixKey>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    value_bytes: u8,
    plan: &BatchedTopKPlan<'_, '_>,
    segments: u64,
) -> Option<ClusterLaunch> {
    if !runtime.launches_with_attributes() || !clusters_enabled() {
        return None;
    }
    let key_bytes = std::mem::size_of::<K>() as u64;
    let selected = plan.per_segment_max.min(STREAM_MAX_K as u64);
    let layout = cluster_layout(key_bytes, selected);
    let spec = KernelSpec::batched_topk(K::KEY_TYPE, value_bytes, BatchedKernel::StreamCluster);
    if !runtime.shared_memory_fits(&spec, layout.shared_bytes) {
        return None;
    }
    // The clustered launch is an optimisation: where it cannot be prepared (its kernel does
    // not build, the occupancy query fails), the filter and final selection run instead.
    let kernel = runtime.kernel(&spec).ok()?;
    let resident = runtime
        .max_active_clusters(stream, &kernel, layout.shared_bytes, BT_CLUSTER_BLOCKS)
        .ok()?;
    let grid = segments.saturating_mul(u64::from(BT_CLUSTER_BLOCKS));
    (segments <= u64::from(resident) && grid <= u64::from(u32::MAX)).then(|| ClusterLaunch {
        kernel,
        layout,
        grid: grid as u32,
    })
}

/// Whether the clustered launch may be used: yes unless the environment variable
/// `OXICUB_STREAM_CLUSTERS` is `off` (read once; for side-by-side measurements and as a way
/// around a driver that mishandles clusters).
fn clusters_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("OXICUB_STREAM_CLUSTERS").map_or(true, |v| v != "off"))
}

/// Whether the segments of a direct call (all alike) go to the stream tier: the order of the
/// device's bt_bin. Only which launches are made depends on it; each kernel still takes just
/// the segments of its own tier.
fn direct_bin_is_stream(
    plan: &BatchedTopKPlan<'_, '_>,
    tiers: BatchedTiers,
    stream: &StreamLayout,
) -> bool {
    let (
        BatchedLayout::Strided {
            sizes: PerSegmentOr::Uniform(size),
            ..
        },
        PerSegmentOr::Uniform(k),
    ) = (plan.layout, plan.k)
    else {
        return false;
    };
    let written = k.min(size);
    let warp = tiers.contains(BatchedTiers::WARP)
        && size <= u64::from(plan.warp_items) * 32
        && written <= WARP_MAX_K as u64;
    let block = tiers.contains(BatchedTiers::BLOCK) && size <= SORT_CAP as u64;
    !warp && !block && size <= stream.max_size && written <= STREAM_MAX_K as u64
}

/// [`keep`] for a buffer that may not exist (pointer 0).
fn keep_opt<'a>(
    guards: &mut Vec<SyncOnDrop<'a>>,
    stream: &'a Arc<CudaStream>,
    buffer: &'a mut Option<CudaSlice<u64>>,
) -> u64 {
    match buffer {
        Some(buffer) => keep(guards, buffer.device_ptr_mut(stream)),
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A filter grid that strides over more items than it has blocks gives every block every
    /// chunk number in turn; one with enough blocks keeps one block per item.
    #[test]
    fn the_filter_grid_cycles_through_the_chunk_numbers() {
        assert_eq!(stride_coprime(256, 256, 4), 256);
        assert_eq!(stride_coprime(264, 700, 1), 264);
        assert_eq!(stride_coprime(264, 2048, 8), 263);
        assert_eq!(stride_coprime(264, 5000, 3), 263);
        assert_eq!(stride_coprime(264, 5000, 12), 263);
        assert_eq!(stride_coprime(4, 100, 8), 3);
        assert_eq!(stride_coprime(0, 100, 8), 1);
        for ctas in 1..=16u64 {
            let grid = u64::from(stride_coprime(264, 100_000, ctas));
            for block in [0, 1, grid - 1] {
                let chunks: std::collections::BTreeSet<u64> =
                    (0..ctas).map(|k| (block + k * grid) % ctas).collect();
                assert_eq!(chunks.len() as u64, ctas, "ctas {ctas}, grid {grid}");
            }
        }
    }

    /// The clustered launch's shared-memory regions that share words fit one another for every
    /// key width and every selection the tier takes: the exact path's packed sort entries (two
    /// words each for 8-byte keys) in the candidates' region, its index and rank buffers in the
    /// copy's, and the sample's bins (4096 words at most) in the copy's too.
    #[test]
    fn cluster_regions_fit() {
        for key_bytes in [1u64, 2, 4, 8] {
            for selected in [1u64, 1000, STREAM_MAX_K as u64] {
                let layout = cluster_layout(key_bytes, selected);
                let rank_bytes = if key_bytes <= 4 { 4 } else { 8 };
                let sort_entry = if key_bytes <= 4 { 8 } else { 16 };
                let region = layout.copy_offset;
                assert!(selected.next_power_of_two() * sort_entry <= region);
                assert!(layout.rank_offset + selected * rank_bytes <= layout.bins_offset);
                assert!(4 * 4096 <= region);
                if key_bytes <= 4 {
                    // The walk's stage: a batch (UNROLL 16-byte vectors a lane) per warp of
                    // the 1024-thread block (BtStreamBatch).
                    let unroll = if key_bytes >= 2 { 4 } else { 2 };
                    assert!(32 * unroll * 32 * 16 <= region, "{key_bytes} bytes");
                }
                assert_eq!(layout.bins_offset - layout.copy_offset, region);
                assert!(
                    u64::from(layout.shared_bytes) < 200 * 1024,
                    "{key_bytes} bytes"
                );
            }
        }
    }

    /// The final selection's block has a thread per filter region of the largest segment.
    #[test]
    fn the_final_has_a_thread_per_region() {
        let chunks = (STREAM_MAX_BYTES as u64).div_ceil(STREAM_CHUNK_BYTES);
        assert!(chunks <= u64::from(BT_STREAM_MAX_CTAS));
        let regions = chunks * u64::from(BT_STREAM_FILTER_WARPS);
        assert!(regions <= u64::from(STREAM_FINAL_THREADS));
    }
}
