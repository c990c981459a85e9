//! The top-k family's table, parameter struct and specs: the stages in one instantiation, the
//! prefilter and the sample each in their own.

use super::constants::*;
use crate::codegen::{kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::radix::KeyType;
use crate::{KernelFamily, KernelSpec, Tier, ValueType};

kernel_params! {
    /// Parameters of `topk_radix_select` (device pointers as `u64`, 0 where unused).
    struct TopKRadixSelectParams {
        /// `len` keys.
        keys: u64,
        /// `len` values (or 0).
        values: u64,
        /// At least `k` keys.
        out_keys: u64,
        /// At least `k` values (or 0).
        out_values: u64,
        /// Scratch for the sort: `k` keys.
        tmp_keys: u64,
        /// Scratch for the sort: `k` values.
        tmp_values: u64,
        /// 32 u64 slots of pass state, zeroed.
        state: u64,
        /// `passes x 256` zeroed u64 counters, then 4096 zeroed u64 words: the rank sort's
        /// bucket counts and starts (u32).
        histogram: u64,
        /// Per-tile counts, then offsets, of the selected / split items.
        tile_offsets: u64,
        /// Per-tile counts, then offsets, of the boundary items.
        boundary_offsets: u64,
        /// Candidate buffer (fast path): `cand_cap` keys.
        cand_keys: u64,
        /// Candidate buffer: `cand_cap` source indices (u64).
        cand_index: u64,
        /// Rank buffer: `rank_cap` keys.
        rank_keys: u64,
        /// Rank buffer: `rank_cap` source indices (u64).
        rank_index: u64,
        /// Rank buffer: `rank_cap` zeroed u64 output positions, then `rank_cap` u64 (bucket and
        /// slot of each item).
        rank_pos: u64,
        /// Candidates written per segment (one segment per prefilter warp).
        cand_counts: u64,
        /// Number of segments.
        cand_segments: u64,
        /// Capacity of each segment of the candidate buffer (0: no fast path).
        cand_cap: u64,
        /// Capacity of the rank buffer (0: no rank sort).
        rank_cap: u64,
        /// The threshold is the `sample_rank`-th best of the sampled keys.
        sample_rank: u64,
        /// A deferred k (`i64` on the device), or 0.
        k_pointer: u64,
        /// Number of keys.
        len: u64,
        /// k when the host knows it.
        k_value: u64,
        /// Bounds a deferred k is checked against and clamped into.
        k_min: u64,
        k_max: u64,
        /// Two zeroed u64 words: a deferred k outside [k_min, k_max] sets the first to 1 and
        /// the second to the value (0 when k is on the host).
        k_report: u64,
        /// Rank = radix code XOR flip: 0 for max, all ones for min.
        flip: u64,
        stage: u32,
        shift: u32,
        pass: u32,
        flags: u32,
        scan_slot: u32,
        /// Explicit padding, always zero.
        reserved: u32,
    }
}

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "topk_radix_select",
    header: concat!(
        include_str!("../../../cuda/topk_radix_select/common.cuh"),
        include_str!("../../../cuda/topk_radix_select/prefilter.cuh"),
        include_str!("../../../cuda/topk_radix_select/sample.cuh"),
        include_str!("../../../cuda/topk_radix_select/stages.cuh"),
    ),
    constants: &[&TOPK_CONSTANTS],
    params_name: TopKRadixSelectParams::CXX_NAME,
    params_declaration: TopKRadixSelectParams::cxx_declaration,
    template_args: &[
        TemplateArg::Key,
        TemplateArg::BlockThreads,
        TemplateArg::Const("VALUE_BYTES"),
        TemplateArg::Const("PART"),
    ],
    // 256 u32 bin counters, one u32 per warp, one u64 per thread for the scan, two u64 tiles
    // per thread for the rank sort, one u64 block base, two flags.
    // PART 1 (the prefilter alone): one u64 per warp and a flag.
    // PART 2 (the sample alone): 256 u32 bins, one u32 per warp, the pivot (u64 + u32).
    static_shared_bytes: |spec| {
        let threads = u64::from(spec.block_threads);
        let bins = u64::from(TOPK_BINS);
        match spec.constant("PART").map(|part| part as u32) {
            // The warp sums, a flag (8-byte aligned).
            Some(TOPK_PART_PREFILTER) => 8 * threads / 32 + 8,
            Some(TOPK_PART_SAMPLE) => 4 * bins + 4 * threads / 32 + 12,
            _ => 4 * bins + 4 * threads / 32 + 8 * threads + 16 * threads + 10,
        }
    },
};

impl KernelSpec {
    /// The spec of the `topk_radix_select` kernel: keys of type `key`, carrying values of
    /// `value_bytes` bytes (0: keys only; 4 or 8).
    ///
    /// ```
    /// use oxicub::kernels::{KernelSpec, KeyType};
    ///
    /// let spec = KernelSpec::topk_radix_select(KeyType::F32, 8);
    /// assert_eq!(spec.to_string(), "oxicub::topk_radix_select<oxicub::KeyF32, 256, 8, 0>");
    /// ```
    pub fn topk_radix_select(key: KeyType, value_bytes: u8) -> KernelSpec {
        KernelSpec {
            family: KernelFamily::TopKRadixSelect,
            key,
            value: (value_bytes != 0).then_some(ValueType::Opaque { bytes: value_bytes }),
            direction: None,
            tier: Tier::GridStride,
            block_threads: BLOCK_THREADS,
            consts: vec![
                ("VALUE_BYTES", i64::from(value_bytes)),
                ("PART", TOPK_PART_STAGES.into()),
            ],
        }
    }

    /// The spec of `topk_radix_select`'s prefilter (the fast path's one full read of the input),
    /// compiled alone so that its register count sets its occupancy.
    ///
    /// ```
    /// use oxicub::kernels::{KernelSpec, KeyType};
    ///
    /// let spec = KernelSpec::topk_radix_select_prefilter(KeyType::F32);
    /// assert_eq!(spec.to_string(), "oxicub::topk_radix_select<oxicub::KeyF32, 256, 0, 1>");
    /// ```
    pub fn topk_radix_select_prefilter(key: KeyType) -> KernelSpec {
        KernelSpec {
            // 4 blocks of 256 per SM (at most 64 registers): the loads in flight that keep
            // the stream near the copy rate.
            consts: vec![
                ("VALUE_BYTES", 0),
                ("PART", TOPK_PART_PREFILTER.into()),
                ("MIN_BLOCKS", 4),
            ],
            ..KernelSpec::topk_radix_select(key, 0)
        }
    }

    /// The spec of `topk_radix_select`'s SAMPLE stage (the fast path's threshold from a
    /// 16384-key sample held in registers), compiled alone as one block of 1024 threads.
    ///
    /// ```
    /// use oxicub::kernels::{KernelSpec, KeyType};
    ///
    /// let spec = KernelSpec::topk_radix_select_sample(KeyType::F32);
    /// assert_eq!(spec.to_string(), "oxicub::topk_radix_select<oxicub::KeyF32, 1024, 0, 2>");
    /// ```
    pub fn topk_radix_select_sample(key: KeyType) -> KernelSpec {
        KernelSpec {
            block_threads: SAMPLE_THREADS,
            consts: vec![("VALUE_BYTES", 0), ("PART", TOPK_PART_SAMPLE.into())],
            ..KernelSpec::topk_radix_select(key, 0)
        }
    }
}

/// Every `topk_radix_select` spec that dispatch produces: each key type, keys only and values
/// of 4 and 8 bytes, and the prefilter and the sample of each key type.
///
/// ```
/// assert_eq!(oxicub::kernels::families::topk_radix_select::specs().len(), 60);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    let mut specs = Vec::new();
    for key in KeyType::ALL {
        for bytes in [0, 4, 8] {
            specs.push(KernelSpec::topk_radix_select(key, bytes));
        }
        specs.push(KernelSpec::topk_radix_select_prefilter(key));
        specs.push(KernelSpec::topk_radix_select_sample(key));
    }
    specs
}
