//! The batched top-k family's table, parameter struct and specs: one instantiation for the
//! control stages and one per tier (and per part of the stream tier).

use super::constants::*;
use super::tiers::BatchedTiers;
use crate::codegen::{kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::radix::KeyType;
use crate::{KernelFamily, KernelSpec, Tier, ValueType};

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
        /// The fill key's bits, the fill value's bits and the slot a row's fill ends at
        /// (BT_STAGE_FILL).
        fill_key: u64,
        fill_value: u64,
        fill_end: u64,
        flags: u32,
        direction_value: u32,
        direction_mask: u32,
        tiers: u32,
        stage: u32,
        shift: u32,
        half: u32,
        /// The fill's widths: key bytes, and value bytes (0: none) << 8.
        fill_widths: u32,
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
        include_str!("../../../cuda/batched_topk/common.cuh"),
        include_str!("../../../cuda/batched_topk/control.cuh"),
        include_str!("../../../cuda/batched_topk/warp_rank.cuh"),
        include_str!("../../../cuda/batched_topk/warp_select.cuh"),
        include_str!("../../../cuda/batched_topk/warp.cuh"),
        include_str!("../../../cuda/batched_topk/block.cuh"),
        include_str!("../../../cuda/batched_topk/large.cuh"),
        include_str!("../../../cuda/batched_topk/stream_common.cuh"),
        include_str!("../../../cuda/batched_topk/stream_select.cuh"),
        include_str!("../../../cuda/batched_topk/stream_sample.cuh"),
        include_str!("../../../cuda/batched_topk/stream_filter.cuh"),
        include_str!("../../../cuda/batched_topk/stream_final.cuh"),
        include_str!("../../../cuda/batched_topk/stream_cluster_push.cuh"),
        include_str!("../../../cuda/batched_topk/stream_cluster.cuh"),
        include_str!("../../../cuda/batched_topk/entry.cuh"),
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
    /// use oxicub::kernels::families::batched_topk::BatchedKernel;
    /// use oxicub::kernels::{KernelSpec, KeyType};
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
            // Without a bound the compiler takes 80-120 and fewer blocks hide less latency;
            // tighter bounds spill (docs/design/batched_topk.md, "Warp tier" and
            // "Tried and dropped").
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
/// use oxicub::kernels::families::batched_topk::{specs_for, BatchedTiers};
/// use oxicub::kernels::KeyType;
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
/// assert_eq!(oxicub::kernels::families::batched_topk::specs().len(), 1 + 12 * 3 * 9);
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
