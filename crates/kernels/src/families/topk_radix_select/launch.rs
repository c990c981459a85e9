//! The top-k launcher: checks the buffers, asks the plan ([`super::plan`]) what to allocate and
//! launch, binds the pointers and makes the launches. Every stage is launched back to back on
//! one stream; the pass state lives on the device, so no value comes back to the host between
//! passes.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop};

use super::call::{TopKPlan, TopKStatus};
use super::constants::{
    TOPK_STAGE_INIT, TOPK_STAGE_PREFILTER, TOPK_STAGE_SAMPLE, TOPK_STATE_SLOTS,
};
use super::kernels::TopKRadixSelectParams;
use super::plan::{plan as select_plan, Grid, SelectShape, Step};

use crate::families::scratch::{Scratch, StatusWords};
use crate::families::{at_least, keep, HostOrDevice, SelectedValues};
use crate::radix::{RadixBits, RadixKey};
use crate::{KernelError, KernelRuntime, KernelSpec};

/// Selects the top `k` keys (and values) of `keys` into the first `k` slots of the outputs, as
/// `call` says; the rest of the outputs is untouched. Asynchronous on `stream`; every stage is
/// launched back to back with no synchronisation. `V` must be 4 or 8 bytes. Returns the status
/// that reports a deferred `k` outside its bounds ([`TopKStatus::decode`]).
///
/// ```no_run
/// use oxicub::kernels::families::topk_radix_select::{topk_radix_select, TopKPlan};
/// use oxicub::kernels::families::HostOrDevice;
/// use oxicub::kernels::families::SelectedValues;
/// use oxicub::kernels::{open_context, Direction, KernelRuntime, Scratch};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let keys = stream.clone_htod(&[3u32, 9, 1]).map_err(|e| e.to_string())?;
/// let mut top = stream.alloc_zeros::<u32>(2).map_err(|e| e.to_string())?;
/// let plan = TopKPlan { direction: Direction::Descending, prefer_larger_index: false, sorted: true, deterministic: true, k: HostOrDevice::Host(2), k_bounds: (2, 2), max_written: 2 };
/// topk_radix_select::<u32, u32>(&runtime, &stream, &Scratch::allocate(), plan, &keys.as_view(), &mut top.as_view_mut(), SelectedValues::None)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn topk_radix_select<K: RadixKey, V>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    scratch: &Scratch<'_>,
    call: TopKPlan<'_>,
    keys: &CudaView<'_, K>,
    out_keys: &mut CudaViewMut<'_, K>,
    mut values: SelectedValues<'_, '_, V>,
) -> Result<TopKStatus, KernelError> {
    runtime.check_buffer("keys", keys)?;
    runtime.check_buffer("out_keys", &*out_keys)?;
    let len = keys.len() as u64;
    let max_written = call.max_written.min(len);
    at_least("out_keys", out_keys.len(), max_written)?;
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
            at_least("out_values", out.len(), max_written)?;
            std::mem::size_of::<V>() as u8
        }
        SelectedValues::Index { out } => {
            runtime.check_buffer("out_values", &**out)?;
            at_least("out_values", out.len(), max_written)?;
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
    if let HostOrDevice::Host(k) = call.k {
        // The kernels write min(k, len) items: the outputs were checked for max_written.
        if k.min(len) > max_written {
            return Err(KernelError::InvalidSpec {
                kernel: spec.to_string(),
                reason: format!("k = {k} is more than the outputs hold ({max_written})"),
            });
        }
    }
    if let HostOrDevice::Device(value) = call.k {
        runtime.check_buffer("k", value)?;
        if value.is_empty() {
            return Err(KernelError::LengthMismatch {
                buffer: "k",
                actual: 0,
                expected: 1,
            });
        }
        let (min, max) = call.k_bounds;
        // The kernel compares and clamps in i64, then writes min(k, len) items.
        if min > max || max > i64::MAX as u64 || max.min(len) > max_written {
            return Err(KernelError::InvalidSpec {
                kernel: spec.to_string(),
                reason: format!(
                    "a deferred k bounded by [{min}, {max}] may be more than the outputs hold \
                     ({max_written}), or the bounds are not a range of i64"
                ),
            });
        }
    }
    // A deferred k is checked on the device even when nothing is written.
    let mut report = match call.k {
        HostOrDevice::Device(_) => scratch.status(runtime, stream, 2)?,
        HostOrDevice::Host(_) => None,
    };
    if max_written == 0 && matches!(call.k, HostOrDevice::Host(_)) {
        return Ok(TopKStatus::new(runtime, None)); // k = 0 or no keys: nothing to write
    }
    let kernel = runtime.kernel(&spec)?;

    if max_written == 0 {
        // Only the check of the deferred k: the INIT stage, on a scratch of the pass state.
        // SAFETY: INIT writes the state words it uses and reads none.
        let mut state =
            unsafe { scratch.uninit::<u64>(runtime, stream, "scratch", TOPK_STATE_SLOTS.into()) }?;
        if scratch.is_measuring() {
            return Ok(TopKStatus::new(runtime, None));
        }
        let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
        let report_ptr = report_pointer(&mut guards, stream, &mut report);
        let params = TopKRadixSelectParams {
            state: state.ptr(&mut guards, stream),
            ..init_params(&call, &mut guards, stream, report_ptr, len)
        };
        runtime.launch(stream, &kernel, 1, params)?;
        drop(guards);
        return Ok(TopKStatus::new(runtime, report));
    }
    let plan = select_plan(&SelectShape {
        len,
        max_written,
        key_bits: <K::Bits as RadixBits>::BITS,
        key_bytes: std::mem::size_of::<K::Bits>() as u64,
        direction: call.direction,
        sorted: call.sorted,
        deterministic: call.deterministic,
        prefer_larger: call.prefer_larger_index,
        values_are_index: matches!(values, SelectedValues::Index { .. }),
    });
    let sample_spec = KernelSpec::topk_radix_select_sample(K::KEY_TYPE);
    let prefilter_spec = KernelSpec::topk_radix_select_prefilter(K::KEY_TYPE);
    let prefilter_grid = if plan.fast {
        runtime.kernel(&sample_spec)?;
        let prefilter = runtime.kernel(&prefilter_spec)?;
        runtime.grid_blocks(&prefilter, len, 1)
    } else {
        1
    };
    let layout = plan.layout(prefilter_grid);
    // SAFETY: the first `layout.zeroed` words are zeroed below; the kernels write every other
    // word before they read it (ScratchLayout).
    let mut words = unsafe { scratch.uninit::<u64>(runtime, stream, "scratch", layout.words) }?;
    words.zero_prefix(runtime, stream, layout.zeroed)?;
    if scratch.is_measuring() {
        return Ok(TopKStatus::new(runtime, None));
    }

    // Device pointers, with the guards that order each buffer's other uses around the launches.
    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    let keys_ptr = keep(&mut guards, keys.device_ptr(stream));
    let out_keys_ptr = keep(&mut guards, out_keys.device_ptr_mut(stream));
    let scratch_ptr = words.ptr(&mut guards, stream);
    let at = |word: u64| scratch_ptr + 8 * word;
    let (values_ptr, out_values_ptr) = values.device_ptrs(stream, &mut guards);
    let report_ptr = report_pointer(&mut guards, stream, &mut report);
    let k_params = init_params(&call, &mut guards, stream, report_ptr, len);
    let params = TopKRadixSelectParams {
        keys: keys_ptr,
        values: values_ptr,
        out_keys: out_keys_ptr,
        out_values: out_values_ptr,
        tmp_keys: at(layout.tmp_keys),
        tmp_values: at(layout.tmp_values),
        state: at(layout.state),
        histogram: at(layout.histogram),
        tile_offsets: at(layout.tile_offsets),
        boundary_offsets: at(layout.boundary_offsets),
        cand_keys: at(layout.cand_keys),
        cand_index: at(layout.cand_index),
        rank_keys: at(layout.rank_keys),
        rank_index: at(layout.rank_index),
        rank_pos: at(layout.rank_pos),
        cand_counts: at(layout.cand_counts),
        cand_segments: layout.segments,
        cand_cap: layout.cand_cap,
        rank_cap: plan.rank_cap,
        sample_rank: plan.sample_rank,
        flip: plan.flip,
        flags: plan.flags,
        ..k_params
    };
    for step in plan.steps(layout.cand_slots) {
        match step {
            Step::Sample => {
                let sample = runtime.kernel(&sample_spec)?;
                let sample_params = TopKRadixSelectParams {
                    stage: TOPK_STAGE_SAMPLE,
                    ..params
                };
                runtime.launch(stream, &sample, 1, sample_params)?;
            }
            Step::Prefilter => {
                let prefilter = runtime.kernel(&prefilter_spec)?;
                let prefilter_params = TopKRadixSelectParams {
                    stage: TOPK_STAGE_PREFILTER,
                    ..params
                };
                runtime.launch(stream, &prefilter, prefilter_grid, prefilter_params)?;
            }
            Step::Stage {
                grid,
                stage,
                shift,
                pass,
                flags,
                scan_slot,
            } => {
                let grid = match grid {
                    Grid::Blocks(blocks) => blocks,
                    Grid::Items { items, min_blocks } => {
                        runtime.grid_blocks(&kernel, items, min_blocks)
                    }
                };
                let params = TopKRadixSelectParams {
                    stage,
                    shift,
                    pass,
                    flags: plan.flags | flags,
                    scan_slot,
                    ..params
                };
                runtime.launch(stream, &kernel, grid, params)?;
            }
        }
    }
    drop(guards);
    Ok(TopKStatus::new(runtime, report))
}

/// The device address of the report words (0: none).
fn report_pointer<'a>(
    guards: &mut Vec<SyncOnDrop<'a>>,
    stream: &'a Arc<CudaStream>,
    report: &'a mut Option<StatusWords>,
) -> u64 {
    match report.as_mut() {
        Some(report) => report.ptr(guards, stream),
        None => 0,
    }
}

/// The parameters of the INIT stage: `k` (the host's value, or the deferred one's pointer,
/// bounds and report words) and `len`; every other pointer 0, the state's included.
fn init_params<'a>(
    call: &TopKPlan<'a>,
    guards: &mut Vec<SyncOnDrop<'a>>,
    stream: &'a Arc<CudaStream>,
    k_report: u64,
    len: u64,
) -> TopKRadixSelectParams {
    let (k_pointer, k_value, k_min, k_max) = match call.k {
        HostOrDevice::Host(k) => (0, k.min(len), 0, 0),
        HostOrDevice::Device(value) => (
            keep(guards, value.device_ptr(stream)),
            0,
            call.k_bounds.0,
            call.k_bounds.1,
        ),
    };
    TopKRadixSelectParams {
        keys: 0,
        values: 0,
        out_keys: 0,
        out_values: 0,
        tmp_keys: 0,
        tmp_values: 0,
        state: 0,
        histogram: 0,
        tile_offsets: 0,
        boundary_offsets: 0,
        cand_keys: 0,
        cand_index: 0,
        rank_keys: 0,
        rank_index: 0,
        rank_pos: 0,
        cand_counts: 0,
        cand_segments: 0,
        cand_cap: 0,
        rank_cap: 0,
        sample_rank: 0,
        k_pointer,
        len,
        k_value,
        k_min,
        k_max,
        k_report,
        flip: 0,
        stage: TOPK_STAGE_INIT,
        shift: 0,
        pass: 0,
        flags: 0,
        scan_slot: 0,
        reserved: 0,
    }
}
