//! Family `topk_radix_select`: single-problem top-k by MSB-first radix select. One kernel whose
//! stages (see `cuda/topk_radix_select.cuh`) are launched back to back on one stream; the pass
//! state lives on the device, so no value comes back to the host between passes.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop};

use crate::error::DriverResultExt;
use crate::params::{kernel_params, KernelParams};
use crate::radix::{KeyType, RadixBits, RadixKey};
use crate::spec::{FamilyTable, KernelFamily, TemplateArg, Tier};
use crate::{Direction, KernelError, KernelRuntime, KernelSpec, ValueType};

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
        /// 8 u64 slots of pass state.
        state: u64,
        /// `passes x 256` zeroed u64 counters.
        histogram: u64,
        /// Per-tile counts, then offsets, of the selected / split items.
        tile_offsets: u64,
        /// Per-tile counts, then offsets, of the boundary items.
        boundary_offsets: u64,
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
/// Bits per radix-select pass.
const DIGIT_BITS: u32 = 8;
/// The most keys one block may count in its 32-bit shared histogram.
const MAX_KEYS_PER_BLOCK: u64 = 1 << 31;

// Stages, state slots and flags: as in the header.
const STAGE_INIT: u32 = 0;
const STAGE_HISTOGRAM: u32 = 1;
const STAGE_PIVOT: u32 = 2;
const STAGE_COUNT_BOUNDARY: u32 = 3;
const STAGE_SCAN: u32 = 4;
const STAGE_COUNT_SELECTED: u32 = 5;
const STAGE_SCATTER_SELECTED: u32 = 6;
const STAGE_COUNT_SPLIT: u32 = 7;
const STAGE_SCATTER_SPLIT: u32 = 8;
const SLOT_BOUNDARY: u32 = 5;
const SLOT_SELECTED: u32 = 6;
const SLOT_ONES: u32 = 7;
const STATE_SLOTS: usize = 8;
const FLAG_PREFER_LARGER: u32 = 1;
const FLAG_VALUES_ARE_INDEX: u32 = 2;
const FLAG_SOURCE_IS_TMP: u32 = 4;
const FLAG_LEN_IS_SELECTED: u32 = 8;
const FLAG_SCAN_BOUNDARY: u32 = 16;

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "topk_radix_select",
    header: include_str!("../../cuda/topk_radix_select.cuh"),
    params_name: TopKRadixSelectParams::CXX_NAME,
    params_declaration: TopKRadixSelectParams::cxx_declaration,
    template_args: &[
        TemplateArg::Key,
        TemplateArg::BlockThreads,
        TemplateArg::Const("VALUE_BYTES"),
    ],
    // 256 u32 bin counters, one u32 per warp, one u64 per thread for the scan.
    static_shared_bytes: |spec| {
        let threads = u64::from(spec.block_threads);
        4 * (1 << DIGIT_BITS) + 4 * threads / 32 + 8 * threads
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
    /// assert_eq!(spec.to_string(), "oxicub::topk_radix_select<oxicub::KeyF32, 256, 8>");
    /// ```
    pub fn topk_radix_select(key: KeyType, value_bytes: u8) -> KernelSpec {
        KernelSpec {
            family: KernelFamily::TopKRadixSelect,
            key,
            value: (value_bytes != 0).then_some(ValueType::Opaque { bytes: value_bytes }),
            direction: None,
            tier: Tier::GridStride,
            block_threads: BLOCK_THREADS,
            consts: vec![("VALUE_BYTES", i64::from(value_bytes))],
        }
    }
}

/// Every `topk_radix_select` spec that dispatch produces: each key type, keys only and values
/// of 4 and 8 bytes.
///
/// ```
/// assert_eq!(oxicub_kernels::families::topk_radix_select::specs().len(), 36);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    let mut specs = Vec::new();
    for key in KeyType::ALL {
        for bytes in [0, 4, 8] {
            specs.push(KernelSpec::topk_radix_select(key, bytes));
        }
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
    /// Sort the result by key (equal keys in source-index order); else source-index order.
    pub sorted: bool,
    /// `k`.
    pub k: TopKCount<'a>,
    /// The most items the call may write (`min(k or its upper bound, keys.len())`); the output
    /// buffers hold at least this many.
    pub max_written: u64,
}

/// The values a top-k call carries with the keys.
#[derive(Debug)]
pub enum TopKValues<'a, 'b, V> {
    /// Keys only.
    None,
    /// `values[i]` goes with `keys[i]` into `out`.
    Copy {
        /// One per key.
        values: &'b CudaView<'a, V>,
        /// At least `max_written`.
        out: &'b mut CudaViewMut<'a, V>,
    },
    /// The source index of each selected key (truncated to the width of `V`) into `out`.
    Index {
        /// At least `max_written`.
        out: &'b mut CudaViewMut<'a, V>,
    },
}

/// Selects the top `k` keys (and values) of `keys` into the first `k` slots of the outputs, as
/// `plan` says; the rest of the outputs is untouched. Asynchronous on `stream`; every stage is
/// launched back to back with no synchronisation. `V` must be 4 or 8 bytes.
///
/// ```no_run
/// use oxicub_kernels::families::topk_radix_select::{topk_radix_select, TopKCount, TopKPlan, TopKValues};
/// use oxicub_kernels::{open_context, Direction, KernelRuntime};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let keys = stream.clone_htod(&[3u32, 9, 1]).map_err(|e| e.to_string())?;
/// let mut top = stream.alloc_zeros::<u32>(2).map_err(|e| e.to_string())?;
/// let plan = TopKPlan { direction: Direction::Descending, prefer_larger_index: false, sorted: true, k: TopKCount::Host(2), max_written: 2 };
/// topk_radix_select::<u32, u32>(&runtime, &stream, plan, &keys.as_view(), &mut top.as_view_mut(), TopKValues::None)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn topk_radix_select<K: RadixKey, V>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    plan: TopKPlan<'_>,
    keys: &CudaView<'_, K>,
    out_keys: &mut CudaViewMut<'_, K>,
    mut values: TopKValues<'_, '_, V>,
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
        TopKValues::None => 0u8,
        TopKValues::Copy { values, out } => {
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
        TopKValues::Index { out } => {
            runtime.check_buffer("out_values", &**out)?;
            at_least("out_values", out.len())?;
            std::mem::size_of::<V>() as u8
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
    let passes = bits / DIGIT_BITS;
    let input_tiles = len.div_ceil(u64::from(BLOCK_THREADS));
    let alloc = |count: u64| stream.alloc_zeros::<u64>(count.max(1) as usize);
    let mut state = alloc(STATE_SLOTS as u64).during("cuMemAllocAsync")?;
    let mut histogram = alloc(u64::from(passes) << DIGIT_BITS).during("cuMemAllocAsync")?;
    let mut tile_offsets = alloc(input_tiles).during("cuMemAllocAsync")?;
    let mut boundary_offsets = alloc(input_tiles).during("cuMemAllocAsync")?;
    let sort_scratch = if plan.sorted { max_written } else { 0 };
    let mut tmp_keys = stream
        .alloc_zeros::<K::Bits>(sort_scratch.max(1) as usize)
        .during("cuMemAllocAsync")?;
    let mut tmp_values = alloc(sort_scratch).during("cuMemAllocAsync")?;

    // Device pointers, with the guards that order each buffer's other uses around the launches.
    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    let keys_ptr = keep(&mut guards, keys.device_ptr(stream));
    let out_keys_ptr = keep(&mut guards, out_keys.device_ptr_mut(stream));
    let state_ptr = keep(&mut guards, state.device_ptr_mut(stream));
    let histogram_ptr = keep(&mut guards, histogram.device_ptr_mut(stream));
    let tile_offsets_ptr = keep(&mut guards, tile_offsets.device_ptr_mut(stream));
    let boundary_offsets_ptr = keep(&mut guards, boundary_offsets.device_ptr_mut(stream));
    let tmp_keys_ptr = keep(&mut guards, tmp_keys.device_ptr_mut(stream));
    let tmp_values_ptr = keep(&mut guards, tmp_values.device_ptr_mut(stream));
    let (values_ptr, out_values_ptr, index_flag) = match &mut values {
        TopKValues::None => (0, 0, 0),
        TopKValues::Copy { values, out } => (
            keep(&mut guards, values.device_ptr(stream)),
            keep(&mut guards, out.device_ptr_mut(stream)),
            0,
        ),
        TopKValues::Index { out } => (
            0,
            keep(&mut guards, out.device_ptr_mut(stream)),
            FLAG_VALUES_ARE_INDEX,
        ),
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
            FLAG_PREFER_LARGER
        } else {
            0
        };
    let params = TopKRadixSelectParams {
        keys: keys_ptr,
        values: values_ptr,
        out_keys: out_keys_ptr,
        out_values: out_values_ptr,
        tmp_keys: tmp_keys_ptr,
        tmp_values: tmp_values_ptr,
        state: state_ptr,
        histogram: histogram_ptr,
        tile_offsets: tile_offsets_ptr,
        boundary_offsets: boundary_offsets_ptr,
        k_pointer,
        len,
        k_value,
        k_min,
        k_max,
        flip,
        stage: STAGE_INIT,
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

    launch(1, STAGE_INIT, 0, 0, 0, 0)?;
    for pass in 0..passes {
        let shift = bits - DIGIT_BITS * (pass + 1);
        launch(histogram_grid, STAGE_HISTOGRAM, shift, pass, 0, 0)?;
        launch(1, STAGE_PIVOT, shift, pass, 0, 0)?;
    }
    launch(input_grid, STAGE_COUNT_BOUNDARY, 0, 0, 0, 0)?;
    launch(1, STAGE_SCAN, 0, 0, FLAG_SCAN_BOUNDARY, SLOT_BOUNDARY)?;
    launch(input_grid, STAGE_COUNT_SELECTED, 0, 0, 0, 0)?;
    launch(1, STAGE_SCAN, 0, 0, 0, SLOT_SELECTED)?;
    launch(input_grid, STAGE_SCATTER_SELECTED, 0, 0, 0, 0)?;
    if plan.sorted {
        // LSD stable split by each rank bit, set bits first: sorted by rank descending, equal
        // ranks in source-index order. An even number of passes ends in the outputs.
        for bit in 0..bits {
            let source = if bit % 2 == 1 { FLAG_SOURCE_IS_TMP } else { 0 };
            let flags = FLAG_LEN_IS_SELECTED | source;
            launch(output_grid, STAGE_COUNT_SPLIT, bit, 0, flags, 0)?;
            launch(1, STAGE_SCAN, 0, 0, FLAG_LEN_IS_SELECTED, SLOT_ONES)?;
            launch(output_grid, STAGE_SCATTER_SPLIT, bit, 0, flags, 0)?;
        }
    }
    drop(guards);
    Ok(())
}

/// Keeps the guard of a device pointer until the launches are issued; returns the pointer.
fn keep<'a>(guards: &mut Vec<SyncOnDrop<'a>>, (ptr, guard): (u64, SyncOnDrop<'a>)) -> u64 {
    guards.push(guard);
    ptr
}
