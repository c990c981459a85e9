//! Family `topk_radix_select`: single-problem top-k by MSB-first radix select. One kernel whose
//! stages (see `cuda/topk_radix_select.cuh`) are launched back to back on one stream; the pass
//! state lives on the device, so no value comes back to the host between passes.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop};

use super::{keep, SelectedValues};
use crate::codegen::{device_constants, kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::error::DriverResultExt;
use crate::radix::{KeyType, RadixBits, RadixKey};
use crate::{Direction, KernelError, KernelRuntime, KernelSpec, ValueType};
use crate::{KernelFamily, Tier};

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
        /// Bounds a deferred k is clamped into.
        k_min: u64,
        k_max: u64,
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

/// Threads per block (and items per tile).
const BLOCK_THREADS: u32 = 256;
/// The most keys one block may count in its 32-bit shared histogram.
const MAX_KEYS_PER_BLOCK: u64 = 1 << 31;

/// Threads of the SAMPLE block (PART 2): `TOPK_SAMPLES / SAMPLE_THREADS` keys each, in
/// registers.
const SAMPLE_THREADS: u32 = 1024;
/// The fast path's threshold lets fewer than k keys through (a fallback) with at most this
/// probability.
const SAMPLE_FAILURE: f64 = 1e-15;
/// The fast path runs on inputs of at least this many keys.
const FAST_MIN_LEN: u64 = 1 << 16;
/// The rank sort (sorted output, and the deterministic fast path) serves k up to this bound;
/// larger k sorts by the bit-split passes and runs the input-order stages.
const RANK_K_MAX: u64 = 32768;
/// Most items the rank sort takes: k plus the boundary ties.
const RANK_CAP_MAX: u64 = 65536;

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

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "topk_radix_select",
    header: concat!(
        include_str!("../../cuda/topk_radix_select/common.cuh"),
        include_str!("../../cuda/topk_radix_select/prefilter.cuh"),
        include_str!("../../cuda/topk_radix_select/sample.cuh"),
        include_str!("../../cuda/topk_radix_select/stages.cuh"),
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
            Some(TOPK_PART_PREFILTER) => 8 * threads / 32 + 8, // the warp sums, a flag (8-byte aligned)
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
    /// use oxicub_kernels::{KernelSpec, KeyType};
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
    /// use oxicub_kernels::{KernelSpec, KeyType};
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
    /// use oxicub_kernels::{KernelSpec, KeyType};
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
/// assert_eq!(oxicub_kernels::families::topk_radix_select::specs().len(), 60);
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

/// Where `k` is.
#[derive(Clone, Copy, Debug)]
pub enum TopKCount<'a> {
    /// Known on the host (at most the number of keys).
    Host(u64),
    /// An `i64` on the device, read in stream order and clamped into `min..=max` (and the number
    /// of keys).
    Deferred {
        /// A one-element view.
        value: &'a CudaView<'a, i64>,
        /// Lower clamp.
        min: u64,
        /// Upper clamp.
        max: u64,
    },
}

/// What a top-k call selects and how it lays the result out.
#[derive(Clone, Copy, Debug)]
pub struct TopKPlan<'a> {
    /// `Descending` selects the largest keys, `Ascending` the smallest.
    pub direction: Direction,
    /// Among keys equal to the k-th, keep the larger source indices (else the smaller).
    pub prefer_larger_index: bool,
    /// Sort the result by key (equal keys in source-index order); else any order (source-index
    /// order, or sorted, when `deterministic`).
    pub sorted: bool,
    /// The same result on every run (and GPU). When false and `sorted` is false, the result is
    /// written in whatever order the threads finish, and ties at the k-th key are taken in any
    /// order.
    pub deterministic: bool,
    /// `k`.
    pub k: TopKCount<'a>,
    /// The most items the call may write (`min(k or its upper bound, keys.len())`); the output
    /// buffers hold at least this many.
    pub max_written: u64,
}

/// Selects the top `k` keys (and values) of `keys` into the first `k` slots of the outputs, as
/// `plan` says; the rest of the outputs is untouched. Asynchronous on `stream`; every stage is
/// launched back to back with no synchronisation. `V` must be 4 or 8 bytes.
///
/// ```no_run
/// use oxicub_kernels::families::topk_radix_select::{topk_radix_select, TopKCount, TopKPlan};
/// use oxicub_kernels::families::SelectedValues;
/// use oxicub_kernels::{open_context, Direction, KernelRuntime};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let keys = stream.clone_htod(&[3u32, 9, 1]).map_err(|e| e.to_string())?;
/// let mut top = stream.alloc_zeros::<u32>(2).map_err(|e| e.to_string())?;
/// let plan = TopKPlan { direction: Direction::Descending, prefer_larger_index: false, sorted: true, deterministic: true, k: TopKCount::Host(2), max_written: 2 };
/// topk_radix_select::<u32, u32>(&runtime, &stream, plan, &keys.as_view(), &mut top.as_view_mut(), SelectedValues::None)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn topk_radix_select<K: RadixKey, V>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    plan: TopKPlan<'_>,
    keys: &CudaView<'_, K>,
    out_keys: &mut CudaViewMut<'_, K>,
    mut values: SelectedValues<'_, '_, V>,
) -> Result<(), KernelError> {
    runtime.check_buffer("keys", keys)?;
    runtime.check_buffer("out_keys", &*out_keys)?;
    let len = keys.len() as u64;
    let max_written = plan.max_written.min(len);
    let at_least = |buffer: &'static str, actual: usize| {
        if (actual as u64) < max_written {
            Err(KernelError::LengthMismatch {
                buffer,
                actual,
                expected: max_written as usize,
            })
        } else {
            Ok(())
        }
    };
    at_least("out_keys", out_keys.len())?;
    let value_bytes = match &values {
        SelectedValues::None => 0u8,
        SelectedValues::Copy { values, out } => {
            runtime.check_buffer("values", *values)?;
            runtime.check_buffer("out_values", &**out)?;
            if values.len() != keys.len() {
                return Err(KernelError::LengthMismatch {
                    buffer: "values",
                    actual: values.len(),
                    expected: keys.len(),
                });
            }
            at_least("out_values", out.len())?;
            std::mem::size_of::<V>() as u8
        }
        SelectedValues::Index { out } => {
            runtime.check_buffer("out_values", &**out)?;
            at_least("out_values", out.len())?;
            std::mem::size_of::<V>() as u8
        }
        SelectedValues::Listed { .. } => {
            return Err(KernelError::InvalidSpec {
                kernel: "topk_radix_select".to_owned(),
                reason: "per-segment value addresses are a batched top-k layout".to_owned(),
            })
        }
    };
    let spec = KernelSpec::topk_radix_select(K::KEY_TYPE, value_bytes);
    if !matches!(value_bytes, 0 | 4 | 8) {
        return Err(KernelError::InvalidSpec {
            kernel: spec.to_string(),
            reason: format!("values must be 4 or 8 bytes, not {value_bytes}"),
        });
    }
    if let TopKCount::Deferred { value, .. } = plan.k {
        runtime.check_buffer("k", value)?;
        if value.is_empty() {
            return Err(KernelError::LengthMismatch {
                buffer: "k",
                actual: 0,
                expected: 1,
            });
        }
    }
    if max_written == 0 {
        return Ok(()); // k = 0 or no keys: nothing to write
    }
    let kernel = runtime.kernel(&spec)?;

    let bits = <K::Bits as RadixBits>::BITS;
    let passes = bits / TOPK_DIGIT_BITS;
    let input_tiles = len.div_ceil(u64::from(BLOCK_THREADS));
    // The fast path: a sampled threshold, one read of the input into a candidate buffer, the
    // select over the candidates. `kb` bounds k (a deferred k is at most max_written).
    let kb = max_written;
    let direct = !plan.deterministic && !plan.sorted;
    let rank_sort = plan.sorted && kb <= RANK_K_MAX;
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
    // One segment of the candidate buffer per prefilter warp, each for 4x its expected share
    // (more for a small sample_rank, whose count varies more: the count of keys reaching T is
    // about stratum x Gamma(sample_rank)), plus 64.
    let prefilter = if fast {
        Some((
            runtime.kernel(&KernelSpec::topk_radix_select_sample(K::KEY_TYPE))?,
            runtime.kernel(&KernelSpec::topk_radix_select_prefilter(K::KEY_TYPE))?,
        ))
    } else {
        None
    };
    let prefilter_grid = prefilter
        .as_ref()
        .map_or(1, |(_, p)| runtime.grid_blocks(p, len, 1));
    let segments = u64::from(prefilter_grid) * u64::from(BLOCK_THREADS / 32);
    let cand_cap = if fast {
        (4 * expected + 16 * stratum).div_ceil(segments) + 64
    } else {
        0
    };
    // The rank sort groups its items in the candidate buffer (no longer read by then).
    let cand_slots = (segments * cand_cap).max(rank_cap);
    let sort_scratch = if plan.sorted && !rank_sort {
        max_written
    } else {
        0
    };
    // One scratch allocation per call (each stream-ordered allocation and free costs host time,
    // which bounds the call at 2^24 keys), carved into 256-byte aligned regions of u64 words:
    // first those that must start zeroed (one memset), then the rest.
    let mut words = 0u64;
    let key_bytes = std::mem::size_of::<K::Bits>() as u64;
    let state_at = region(&mut words, u64::from(TOPK_STATE_SLOTS), 8);
    // The digit histograms of the select, then the rank sort's bucket counts and starts (u32).
    let histogram_at = region(
        &mut words,
        (u64::from(passes) << TOPK_DIGIT_BITS) + u64::from(TOPK_RANK_BUCKETS),
        8,
    );
    // Output positions (zeroed), then each item's bucket and slot.
    let rank_pos_at = region(&mut words, 2 * rank_cap, 8);
    let tmp_keys_at = region(&mut words, sort_scratch, key_bytes);
    let tmp_values_at = region(&mut words, sort_scratch, 8);
    let zeroed = words;
    // Every word below is written by a stage before any stage reads it: tile counts before the
    // scans, each prefilter warp's count before the later stages, candidates below their
    // segment's count, rank items below their count.
    let tile_offsets_at = region(&mut words, input_tiles, 8);
    let boundary_offsets_at = region(&mut words, input_tiles, 8);
    let cand_counts_at = region(&mut words, segments, 8);
    let cand_keys_at = region(&mut words, cand_slots, key_bytes);
    let cand_index_at = region(&mut words, cand_slots, 8);
    let rank_keys_at = region(&mut words, rank_cap, key_bytes);
    let rank_index_at = region(&mut words, rank_cap, 8);
    // SAFETY: the first `zeroed` words are zeroed below; every other word is written before it
    // is read (above).
    let mut scratch = unsafe { stream.alloc::<u64>(words as usize) }.during("cuMemAllocAsync")?;
    stream
        .memset_zeros(&mut scratch.slice_mut(..zeroed as usize))
        .during("cuMemsetD8Async")?;

    // Device pointers, with the guards that order each buffer's other uses around the launches.
    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    let keys_ptr = keep(&mut guards, keys.device_ptr(stream));
    let out_keys_ptr = keep(&mut guards, out_keys.device_ptr_mut(stream));
    let scratch_ptr = keep(&mut guards, scratch.device_ptr_mut(stream));
    let at = |word: u64| scratch_ptr + 8 * word;
    let (values_ptr, out_values_ptr, values_are_index) = values.device_ptrs(stream, &mut guards);
    let index_flag = if values_are_index {
        TOPK_VALUES_ARE_INDEX
    } else {
        0
    };
    let (k_pointer, k_value, k_min, k_max) = match plan.k {
        TopKCount::Host(k) => (0, k.min(len), 0, 0),
        TopKCount::Deferred { value, min, max } => (
            keep(&mut guards, value.device_ptr(stream)),
            0,
            min,
            max.min(max_written),
        ),
    };
    let flip = match plan.direction {
        Direction::Descending => 0,
        Direction::Ascending => u64::MAX >> (64 - bits),
    };
    let base_flags = index_flag
        | if plan.prefer_larger_index {
            TOPK_PREFER_LARGER
        } else {
            0
        }
        | if direct { TOPK_DIRECT } else { 0 }
        | if rank_sort { TOPK_RANK_SORT } else { 0 };
    let params = TopKRadixSelectParams {
        keys: keys_ptr,
        values: values_ptr,
        out_keys: out_keys_ptr,
        out_values: out_values_ptr,
        tmp_keys: at(tmp_keys_at),
        tmp_values: at(tmp_values_at),
        state: at(state_at),
        histogram: at(histogram_at),
        tile_offsets: at(tile_offsets_at),
        boundary_offsets: at(boundary_offsets_at),
        cand_keys: at(cand_keys_at),
        cand_index: at(cand_index_at),
        rank_keys: at(rank_keys_at),
        rank_index: at(rank_index_at),
        rank_pos: at(rank_pos_at),
        cand_counts: at(cand_counts_at),
        cand_segments: segments,
        cand_cap,
        rank_cap,
        sample_rank,
        k_pointer,
        len,
        k_value,
        k_min,
        k_max,
        flip,
        stage: TOPK_STAGE_INIT,
        shift: 0,
        pass: 0,
        flags: base_flags,
        scan_slot: 0,
        reserved: 0,
    };
    let input_grid = runtime.grid_blocks(&kernel, len, 1);
    let histogram_grid = runtime.grid_blocks(&kernel, len, len.div_ceil(MAX_KEYS_PER_BLOCK));
    let output_grid = runtime.grid_blocks(&kernel, max_written, 1);
    let launch = |grid: u32, stage: u32, shift: u32, pass: u32, flags: u32, scan_slot: u32| {
        let params = TopKRadixSelectParams {
            stage,
            shift,
            pass,
            flags: base_flags | flags,
            scan_slot,
            ..params
        };
        runtime.launch(stream, &kernel, grid, params)
    };

    if let Some((sample, prefilter)) = &prefilter {
        // INIT + SAMPLE in one launch of its own kernel; the prefilter on its own kernel,
        // DECIDE in its last block; each PIVOT in the last block of its HISTOGRAM.
        let sample_params = TopKRadixSelectParams {
            stage: TOPK_STAGE_SAMPLE,
            ..params
        };
        runtime.launch(stream, sample, 1, sample_params)?;
        let params = TopKRadixSelectParams {
            stage: TOPK_STAGE_PREFILTER,
            ..params
        };
        runtime.launch(stream, prefilter, prefilter_grid, params)?;
    } else {
        launch(1, TOPK_STAGE_INIT, 0, 0, 0, 0)?;
    }
    for pass in 0..passes {
        let shift = bits - TOPK_DIGIT_BITS * (pass + 1);
        launch(histogram_grid, TOPK_STAGE_HISTOGRAM, shift, pass, 0, 0)?;
    }
    if fast {
        let grid = runtime.grid_blocks(&kernel, cand_slots, 1);
        launch(grid, TOPK_STAGE_FINAL, 0, 0, 0, 0)?;
    }
    // The input-order stages: the whole work in mode 0, no-ops on the fast path.
    launch(input_grid, TOPK_STAGE_COUNT_BOUNDARY, 0, 0, 0, 0)?;
    launch(
        1,
        TOPK_STAGE_SCAN,
        0,
        0,
        TOPK_SCAN_BOUNDARY,
        TOPK_SLOT_BOUNDARY,
    )?;
    launch(input_grid, TOPK_STAGE_COUNT_SELECTED, 0, 0, 0, 0)?;
    launch(1, TOPK_STAGE_SCAN, 0, 0, 0, TOPK_SLOT_SELECTED)?;
    launch(input_grid, TOPK_STAGE_SCATTER_SELECTED, 0, 0, 0, 0)?;
    if rank_cap > 0 {
        let grid = runtime.grid_blocks(&kernel, rank_cap, 1);
        launch(grid, TOPK_STAGE_RANK_BUCKET, 0, 0, 0, 0)?;
        launch(grid, TOPK_STAGE_RANK_PLACE, 0, 0, 0, 0)?;
        let fill = runtime.grid_blocks(&kernel, u64::MAX, 1);
        launch(fill, TOPK_STAGE_RANK_COUNT, 0, 0, 0, 0)?;
        launch(grid, TOPK_STAGE_RANK_SCATTER, 0, 0, 0, 0)?;
    }
    if plan.sorted && !rank_sort {
        // LSD stable split by each rank bit, set bits first: sorted by rank descending, equal
        // ranks in source-index order. An even number of passes ends in the outputs.
        for bit in 0..bits {
            let source = if bit % 2 == 1 { TOPK_SOURCE_IS_TMP } else { 0 };
            let flags = TOPK_LEN_IS_SELECTED | source;
            launch(output_grid, TOPK_STAGE_COUNT_SPLIT, bit, 0, flags, 0)?;
            launch(
                1,
                TOPK_STAGE_SCAN,
                0,
                0,
                TOPK_LEN_IS_SELECTED,
                TOPK_SLOT_ONES,
            )?;
            launch(output_grid, TOPK_STAGE_SCATTER_SPLIT, bit, 0, flags, 0)?;
        }
    }
    drop(guards);
    Ok(())
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
    // TOPK_SAMPLES here, as the host bounds lambda; larger inputs give a far-off answer, never a
    // smaller one than needed, and the caller rejects it).
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
    use super::poisson_quantile;

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
}
