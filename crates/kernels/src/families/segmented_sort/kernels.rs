//! The segmented sort family's table, parameter struct and specs.

use super::constants::{BLOCK_THREADS, SS_CONSTANTS, SS_ITEMS, SS_TILE, WIDE_BLOCK_THREADS};
use crate::codegen::{kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::radix::KeyType;
use crate::{KernelFamily, KernelSpec, Tier, ValueType};

kernel_params! {
    /// Parameters of `segmented_sort` (device pointers as `u64`, 0 where unused).
    struct SegmentedSortParams {
        keys: u64,
        values: u64,
        out_keys: u64,
        out_values: u64,
        begin_offsets: u64,
        end_offsets: u64,
        sizes: u64,
        orders: u64,
        num_segments_ptr: u64,
        status: u64,
        /// SEGMENT_DESC_WORDS u64 per segment (the family word: its order).
        descriptors: u64,
        /// `num_keys` u64: the start of each position's segment (SS_VALID when valid).
        seg_start: u64,
        /// Two buffers of `num_keys` u64 ranks, one after the other.
        ranks: u64,
        /// Two buffers of `num_keys` u64 positions, one after the other.
        positions: u64,
        /// A u32 per tile (the register path: per part of a chunk): 1 when its entries differ
        /// between the two buffers.
        tile_dirty: u64,
        /// Register path: SS_PLAN_WORDS u64, zeroed (the classes' counts, lists and batches).
        plan: u64,
        /// Register path: a u64 per segment, the segments grouped by class.
        segment_list: u64,
        /// Register path: a u64 per long segment, its first chunk.
        chunk_base: u64,
        /// Register path: SS_PARTITION_WORDS u64 per part (SS_PART entries of a chunk), where
        /// a merge pass's part starts in its first run, and its segment and place.
        partition: u64,
        /// Register path: two buffers of `num_keys` entries for the long segments, one after
        /// the other: u64 (rank << 32 | index within the segment), or u32 ranks (keys only, no
        /// NaN among them).
        entries: u64,
        num_keys: u64,
        stride: u64,
        size_value: u64,
        size_min: u64,
        size_max: u64,
        num_segments: u64,
        num_segments_min: u64,
        num_segments_max: u64,
        total_min: u64,
        total_max: u64,
        /// The runs a merge pass merges, in entries.
        width: u64,
        /// Two u64 per merge pass, zeroed: its merge tiles and its copy tiles.
        statistics: u64,
        flags: u32,
        order_value: u32,
        order_mask: u32,
        stage: u32,
        /// The buffer a merge pass (or the write) reads: 0 or 1.
        src: u32,
        /// The merge pass (its statistics' place).
        pass: u32,
        /// Register path: the merge passes launched (the statistics' tile and pass counts
        /// follow their words).
        passes: u32,
        /// Register path: the parts (SS_PART entries) of a BLOCK chunk.
        chunk_parts: u32,
    }
}

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "segmented_sort",
    header: concat!(
        include_str!("../../../cuda/segmented_sort/register_path.cuh"),
        include_str!("../../../cuda/segmented_sort/segmented_sort.cuh"),
    ),
    constants: &[&SS_CONSTANTS],
    params_name: SegmentedSortParams::CXX_NAME,
    params_declaration: SegmentedSortParams::cxx_declaration,
    template_args: &[
        TemplateArg::Key,
        TemplateArg::BlockThreads,
        TemplateArg::Const("VALUE_BYTES"),
    ],
    // The tile sort's ranks and tags (two u64 per entry), a merge pass's range and flags, the
    // classification's block counters (16 u32, 3 u64), 32 bytes for the alignment of the
    // variables between them, rounded up to the 16 bytes that align the dynamic shared memory
    // after them (the register path's entries: `register_shared_bytes`).
    static_shared_bytes: |_| {
        (2 * 8 * u64::from(SS_TILE) + 5 * 8 + 16 * 4 + 3 * 8 + 32).next_multiple_of(16)
    },
};

/// The dynamic shared memory of the register path's stages (BLOCK and RUNS) in a block of
/// `threads`: its tile of u64 entries with a spare word after every 16
/// (`RegisterSort::SHARED_WORDS`).
pub(crate) fn register_shared_bytes(threads: u32) -> u32 {
    let entries = threads * SS_ITEMS;
    8 * (entries + entries / 16)
}

/// The value widths the family moves (0: keys only).
pub(crate) const VALUE_WIDTHS: [u8; 5] = [0, 1, 2, 4, 8];

impl KernelSpec {
    /// The spec of the `segmented_sort` kernel: keys of type `key`, carrying values (or
    /// indices) of `value_bytes` bytes (0: keys only; 1, 2, 4 or 8).
    ///
    /// ```
    /// use oxicub::kernels::{KernelSpec, KeyType};
    ///
    /// let spec = KernelSpec::segmented_sort(KeyType::I32, 4);
    /// assert_eq!(spec.to_string(), "oxicub::segmented_sort<oxicub::KeyI32, 256, 4>");
    /// ```
    pub fn segmented_sort(key: KeyType, value_bytes: u8) -> KernelSpec {
        segmented_sort_spec(key, value_bytes, BLOCK_THREADS)
    }

    /// The `segmented_sort` kernel with blocks of 1024 threads, whose register path sorts tiles
    /// of 16384 keys (139 KiB of dynamic shared memory, one block an SM): keys of at most 32
    /// bits in segments longer than the 256-thread kernel's 4096-key tile.
    ///
    /// ```
    /// use oxicub::kernels::{KernelSpec, KeyType};
    ///
    /// let spec = KernelSpec::segmented_sort_wide(KeyType::F32, 0);
    /// assert_eq!(spec.to_string(), "oxicub::segmented_sort<oxicub::KeyF32, 1024, 0>");
    /// ```
    pub fn segmented_sort_wide(key: KeyType, value_bytes: u8) -> KernelSpec {
        segmented_sort_spec(key, value_bytes, WIDE_BLOCK_THREADS)
    }
}

/// A `segmented_sort` spec with blocks of `threads`: 64 registers a thread (four resident
/// blocks of 256, or one of 1024), which the register sort's 16 entries a thread fit.
fn segmented_sort_spec(key: KeyType, value_bytes: u8, threads: u32) -> KernelSpec {
    KernelSpec {
        family: KernelFamily::SegmentedSort,
        key,
        value: (value_bytes != 0).then_some(ValueType::Opaque { bytes: value_bytes }),
        direction: None,
        tier: Tier::GridStride,
        block_threads: threads,
        consts: vec![
            ("VALUE_BYTES", i64::from(value_bytes)),
            ("MIN_BLOCKS", i64::from(2048 / threads / 2)),
        ],
    }
}

/// Every `segmented_sort` spec: each key type, each value width; the wide kernel for keys of
/// at most 32 bits (the register path's).
///
/// ```
/// assert_eq!(oxicub::kernels::families::segmented_sort::specs().len(), 12 * 5 + 9 * 5);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    let mut specs = Vec::new();
    for key in KeyType::ALL {
        for bytes in VALUE_WIDTHS {
            specs.push(KernelSpec::segmented_sort(key, bytes));
            if key.bits() <= 32 {
                specs.push(KernelSpec::segmented_sort_wide(key, bytes));
            }
        }
    }
    specs
}
