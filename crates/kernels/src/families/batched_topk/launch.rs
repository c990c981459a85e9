//! The batched top-k launcher: checks the buffers, asks the plan ([`super::plan`]) what to
//! allocate and launch, binds the pointers and makes the launches. All stages are launched back
//! to back on one stream; the per-segment checks are reported through a small status buffer
//! that the caller reads when it chooses to synchronise.

use std::sync::Arc;

use cudarc::driver::SyncOnDrop;
use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use super::call::{BatchedLayout, BatchedTopKPlan};
use super::constants::{
    BT_CLUSTER_BLOCKS, BT_STAGE_CHUNK_OFFSET, BT_STAGE_FILL, BT_STAGE_INIT, BT_STAGE_SELECT,
    BT_STATUS_WORDS, BT_STREAM_FILTER_THREADS, SORT_CAP, STREAM_MAX_K, WARP_MAX_K,
};
use super::constants::{BT_K_I32, BT_STATUS_TOTAL, BT_STATUS_TOTAL_BAD};
use super::kernels::{BatchedKernel, BatchedTopKParams};
use super::layout::ClusterLayout;
use super::listed::ListedTables;
use super::plan::{
    plan as plan_call, stride_coprime, CallShape, LaunchPlan, LayoutShape, Step, ValuesShape,
};
use super::split::{split_rows, RowSplit};
use super::{DeviceInts, HostOrDevice};
use crate::families::scratch::{Scratch, ScratchBuffer};
use crate::families::{at_least, keep, SelectedValues};
use crate::radix::{RadixBits, RadixKey};
use crate::runtime::{LaunchOrder, LoadedKernel};
use crate::segments::{SegmentedStatus, SEGMENT_SIZES_I32};
use crate::{KernelError, KernelRuntime, KernelSpec};

/// Runs batched top-k: each segment's `min(k, size)` best keys (and values) into
/// `out_keys[i * out_stride ..]`, as `plan` says. Asynchronous on `stream`; returns the status
/// words to decode when the caller chooses to synchronise.
///
/// Its scratch, status words and tables come from `scratch` (when it only measures, the call
/// is checked and planned and nothing is launched).
///
/// `keys` is the buffer the strided and offsets layouts index, and `None` exactly when the
/// layout is [`BatchedLayout::Listed`] (each segment is its own view); copied values are
/// [`SelectedValues::Listed`] exactly then too.
pub fn batched_topk<K: RadixKey, V>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    scratch: &Scratch<'_>,
    plan: BatchedTopKPlan<'_, '_, K>,
    keys: Option<&CudaView<'_, K>>,
    out_keys: &mut CudaViewMut<'_, K>,
    mut values: SelectedValues<'_, '_, V>,
) -> Result<SegmentedStatus, KernelError> {
    let listed = matches!(plan.layout, BatchedLayout::Listed { .. });
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
    // A segment writes min(k, size) items, each checked on the device against the plan's
    // bounds and the layout: the outputs are laid out for per_segment_max a segment, so it
    // must cover that, and segments must not overlap.
    let k_cap = match plan.k {
        HostOrDevice::Host(k) => k,
        HostOrDevice::Device(_) => plan.k_bounds.1,
    };
    let size_cap = match plan.layout {
        BatchedLayout::Strided {
            stride,
            sizes: HostOrDevice::Host(size),
        } => size.min(stride),
        BatchedLayout::Strided { stride, .. } => plan.size_bounds.1.min(stride),
        BatchedLayout::Offsets { .. } => plan.size_bounds.1,
        BatchedLayout::Listed { segments } => plan.size_bounds.1.min(largest(segments)),
    };
    let written = k_cap.min(size_cap).min(num_keys);
    if plan.per_segment_max < written || plan.out_stride < plan.per_segment_max {
        return Err(mismatch(&format!(
            "a segment may write {written} items, but the plan lays out {} a segment, {} apart",
            plan.per_segment_max, plan.out_stride
        )));
    }
    let shape = call_shape::<K, V>(&plan, num_keys, &values);
    // A fill writes the index slots only of a call that writes indices (copied values' slots
    // past the results are left untouched).
    let writes_indices = matches!(values, SelectedValues::Index { .. });
    let max_segments = shape.max_segments();
    let out_len = shape.out_len();
    at_least("out_keys", out_keys.len(), out_len)?;
    match &values {
        SelectedValues::None => {}
        SelectedValues::Copy { values, out } => {
            runtime.check_buffer("values", *values)?;
            runtime.check_buffer("out_values", &**out)?;
            at_least("values", values.len(), num_keys)?;
            at_least("out_values", out.len(), out_len)?;
        }
        SelectedValues::Index { out } | SelectedValues::Listed { out, .. } => {
            runtime.check_buffer("out_values", &**out)?;
            at_least("out_values", out.len(), out_len)?;
        }
    }
    let value_bytes = shape.value_bytes;
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
    if let BatchedLayout::Offsets { begin, end } = plan.layout {
        per_segment("begin_offsets", begin)?;
        per_segment("end_offsets", end)?;
    }
    let per_segment_ints = |name: &'static str, ints: DeviceInts<'_, '_>| {
        ints.check(runtime, name)?;
        at_least(name, ints.len(), max_segments)
    };
    if let BatchedLayout::Strided {
        sizes: HostOrDevice::Device(sizes),
        ..
    } = plan.layout
    {
        per_segment_ints("segment_sizes", sizes)?;
    }
    if let HostOrDevice::Device(k) = plan.k {
        per_segment_ints("k", k)?;
    }
    if let HostOrDevice::Device(directions) = plan.direction {
        runtime.check_buffer("direction", directions)?;
        at_least("direction", directions.len(), max_segments)?;
    }
    if let HostOrDevice::Device(n) = plan.num_segments {
        runtime.check_buffer("num_segments", n)?;
        at_least("num_segments", n.len(), 1)?;
    }
    // The listed layout's tables, made from the views (they keep the views' guards).
    let listed = match plan.layout {
        BatchedLayout::Listed { segments } => {
            let values = match &values {
                SelectedValues::Listed { values, .. } => Some(*values),
                _ => None,
            };
            Some(ListedTables::new(
                runtime,
                scratch,
                stream,
                segments,
                values,
                max_segments,
            )?)
        }
        _ => None,
    };

    // Scratch every stage writes before it reads: no clearing; none where no stage uses it (a
    // direct call of the warp or block tier allocates nothing).
    let buffer = |buffer: &'static str, count: u64| {
        // SAFETY: the kernels write every word of these buffers (state and histogram in
        // LARGE_INIT, chunk counts in LARGE_COUNT, selected indices in LARGE_COLLECT /
        // LARGE_SORT_INIT, descriptors in RESOLVE) before reading it.
        unsafe { scratch_words(runtime, stream, scratch, buffer, count) }
    };
    let planned = plan_call(&shape, &runtime.limits())?;
    // A direct call has nothing to report (no allocation, no clearing).
    let mut status = if shape.is_direct() {
        None
    } else {
        scratch.status(runtime, stream, u64::from(BT_STATUS_WORDS))?
    };
    let Some(launch_plan) = planned else {
        // No segment: nothing to launch, nothing to report (a deferred count is still read, to
        // report it when it is outside its bounds).
        let mut none = [0u64; BT_STATUS_WORDS as usize];
        none[0] = u64::MAX;
        if let Some(status) = status.as_mut() {
            status.write(runtime, stream, &none)?;
        }
        return Ok(SegmentedStatus::new(runtime, status, TOTAL_WORDS));
    };
    // Long rows of a direct call: two calls of the stream tier, when its clustered launch runs.
    if let (Some(split), Some(keys)) = (split_rows(&shape), keys) {
        let (plan, launch_plan) = (&plan, &launch_plan);
        let values = &mut values;
        if run_split(
            runtime,
            stream,
            scratch,
            &split,
            plan,
            &shape,
            launch_plan,
            keys,
            out_keys,
            values,
        )? {
            return Ok(SegmentedStatus::new(runtime, status, TOTAL_WORDS));
        }
    }
    let mut descriptors = buffer("descriptors", launch_plan.descriptor_words())?;
    let cluster = launch_plan.cluster.and_then(|layout| {
        let clusters = launch_plan.stream_slots;
        cluster_launch::<K>(runtime, stream, value_bytes, layout, clusters)
    });
    let sizes = launch_plan.scratch(cluster.is_some());
    let mut bins = buffer("bins", sizes.bins)?;
    let mut large_state = buffer("large_state", sizes.large_state)?;
    let mut large_histogram = buffer("large_histogram", sizes.large_histogram)?;
    let mut large_chunks = buffer("large_chunks", sizes.large_chunks)?;
    let mut large_selected = buffer("large_selected", sizes.large_selected)?;
    let mut large_ranks = buffer("large_ranks", sizes.large_ranks)?;
    let mut stream_ranks = buffer("stream_ranks", sizes.stream_ranks)?;
    let mut stream_indices = buffer("stream_indices", sizes.stream_indices)?;
    let mut stream_counts = buffer("stream_counts", sizes.stream_counts)?;
    if scratch.is_measuring() {
        return Ok(SegmentedStatus::new(runtime, None, TOTAL_WORDS));
    }

    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    // Listed: the segments' element addresses are offsets from a keys base of 0.
    let keys_ptr = match keys {
        Some(keys) => keep(&mut guards, keys.device_ptr(stream)),
        None => 0,
    };
    let out_keys_ptr = keep(&mut guards, out_keys.device_ptr_mut(stream));
    let status_ptr = match status.as_mut() {
        Some(status) => status.ptr(&mut guards, stream),
        None => 0,
    };
    let descriptors_ptr = descriptors.ptr(&mut guards, stream);
    let large_state_ptr = large_state.ptr(&mut guards, stream);
    let large_histogram_ptr = large_histogram.ptr(&mut guards, stream);
    let large_chunks_ptr = large_chunks.ptr(&mut guards, stream);
    let large_selected_ptr = large_selected.ptr(&mut guards, stream);
    let large_ranks_ptr = large_ranks.ptr(&mut guards, stream);
    let bins_ptr = bins.ptr(&mut guards, stream);
    let stream_ranks_ptr = stream_ranks.ptr(&mut guards, stream);
    let stream_indices_ptr = stream_indices.ptr(&mut guards, stream);
    let stream_counts_ptr = stream_counts.ptr(&mut guards, stream);
    let (mut values_ptr, out_values_ptr) = values.device_ptrs(stream, &mut guards);
    if let Some(addresses) = listed.as_ref().and_then(|t| t.value_addresses.as_ref()) {
        values_ptr = addresses.read_ptr(&mut guards, stream);
    }
    // Host values come from the shape (launch_params); here only the addresses.
    let (sizes_ptr, begin_ptr, end_ptr) = match (plan.layout, &listed) {
        (BatchedLayout::Strided { sizes, .. }, _) => match sizes {
            HostOrDevice::Host(_) => (0, 0, 0),
            HostOrDevice::Device(sizes) => (sizes.ptr(&mut guards, stream), 0, 0),
        },
        (BatchedLayout::Offsets { begin, end }, _) => (
            0,
            keep(&mut guards, begin.device_ptr(stream)),
            keep(&mut guards, end.device_ptr(stream)),
        ),
        (BatchedLayout::Listed { .. }, Some(tables)) => (
            0,
            tables.begin.read_ptr(&mut guards, stream),
            tables.end.read_ptr(&mut guards, stream),
        ),
        (BatchedLayout::Listed { .. }, None) => unreachable!("a listed layout has its tables"),
    };
    let ks_ptr = match plan.k {
        HostOrDevice::Host(_) => 0,
        HostOrDevice::Device(ks) => ks.ptr(&mut guards, stream),
    };
    let directions_ptr = match plan.direction {
        HostOrDevice::Host(_) => 0,
        HostOrDevice::Device(view) => keep(&mut guards, view.device_ptr(stream)),
    };
    let num_segments_ptr = match plan.num_segments {
        HostOrDevice::Host(_) => 0,
        HostOrDevice::Device(view) => keep(&mut guards, view.device_ptr(stream)),
    };
    let at = Pointers {
        keys: keys_ptr,
        values: values_ptr,
        out_keys: out_keys_ptr,
        out_values: out_values_ptr,
        begin_offsets: begin_ptr,
        end_offsets: end_ptr,
        sizes: sizes_ptr,
        ks: ks_ptr,
        directions: directions_ptr,
        num_segments: num_segments_ptr,
        descriptors: descriptors_ptr,
        status: status_ptr,
        large_state: large_state_ptr,
        large_histogram: large_histogram_ptr,
        large_chunks: large_chunks_ptr,
        large_selected: large_selected_ptr,
        large_ranks: large_ranks_ptr,
        bins: bins_ptr,
        stream_ranks: stream_ranks_ptr,
        stream_indices: stream_indices_ptr,
        stream_counts: stream_counts_ptr,
    };
    let params = launch_params(&shape, &launch_plan, &at, width_flags(&plan));
    let fill = prepared_fill::<K>(runtime, &plan, value_bytes, writes_indices, &params)?;
    let key_bits = <K::Bits as RadixBits>::BITS;
    for step in launch_plan.steps(key_bits, cluster.as_ref()) {
        launch_step::<K>(runtime, stream, value_bytes, &params, step)?;
    }
    launch_fill(runtime, stream, fill, max_segments)?;
    drop(guards);
    drop(listed);
    Ok(SegmentedStatus::new(runtime, status, TOTAL_WORDS))
}

/// The fill's launch (`Problem::fill_past_k`), with `params` of the call: loaded before any
/// tier runs (a load that fails refuses the call before it writes anything), and only when a
/// segment has slots (no segment writes anything when per_segment_max is 0, and a direct call
/// may then count 2^63 of them).
fn prepared_fill<K: RadixKey>(
    runtime: &KernelRuntime,
    plan: &BatchedTopKPlan<'_, '_, K>,
    value_bytes: u8,
    writes_indices: bool,
    params: &BatchedTopKParams,
) -> Result<Option<(LoadedKernel, BatchedTopKParams)>, KernelError> {
    let fill = match plan.fill {
        Some(fill) if plan.per_segment_max > 0 => fill,
        _ => return Ok(None),
    };
    let key_bytes = std::mem::size_of::<K::Bits>() as u32;
    let fill_value_bytes = match fill.value_bits {
        Some(_) if writes_indices => u32::from(value_bytes),
        _ => 0,
    };
    let control = runtime.kernel(&KernelSpec::batched_topk(
        K::KEY_TYPE,
        value_bytes,
        BatchedKernel::Control,
    ))?;
    let fill_params = BatchedTopKParams {
        stage: BT_STAGE_FILL,
        fill_key: fill.key_bits,
        fill_value: fill.value_bits.unwrap_or(0),
        fill_widths: key_bytes | fill_value_bytes << 8,
        ..*params
    };
    Ok(Some((control, fill_params)))
}

/// Launches a prepared fill, a warp per segment: after every tier, in stream order (it writes
/// only the slots past the results).
fn launch_fill(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    fill: Option<(LoadedKernel, BatchedTopKParams)>,
    max_segments: u64,
) -> Result<(), KernelError> {
    if let Some((control, fill_params)) = fill {
        let grid = runtime.grid_blocks(&control, max_segments.saturating_mul(32), 1);
        runtime.launch(stream, &control, grid, fill_params)?;
    }
    Ok(())
}

/// Runs a long-row split ([`split_rows`], docs/design/batched_topk.md, "Long rows") of a
/// checked direct call: `Ok(false)`, with nothing allocated or launched, when its first call
/// cannot take the clustered launch (the call then runs as planned).
#[allow(clippy::too_many_arguments)]
fn run_split<K: RadixKey, V>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    scratch: &Scratch<'_>,
    split: &RowSplit,
    plan: &BatchedTopKPlan<'_, '_, K>,
    shape: &CallShape,
    launch_plan: &LaunchPlan,
    keys: &CudaView<'_, K>,
    out_keys: &mut CudaViewMut<'_, K>,
    values: &mut SelectedValues<'_, '_, V>,
) -> Result<bool, KernelError> {
    let limits = runtime.limits();
    let (Some(first), Some(second)) = (
        plan_call(&split.first, &limits)?,
        plan_call(&split.second, &limits)?,
    ) else {
        return Ok(false);
    };
    let clustered = |stage: &LaunchPlan, stage_shape: &CallShape| {
        let layout = stage.cluster?;
        let value_bytes = stage_shape.value_bytes;
        cluster_launch::<K>(runtime, stream, value_bytes, layout, stage.stream_slots)
    };
    let Some(first_cluster) = clustered(&first, &split.first) else {
        return Ok(false);
    };
    let second_cluster = clustered(&second, &split.second);
    let value_bytes = shape.value_bytes;
    let writes_indices = matches!(values, SelectedValues::Index { .. });
    // The candidates: every chunk's `written` keys and values (indices within the chunk, then
    // within the row, or the caller's values).
    let candidates = split.candidates();
    let words = |bytes: u64| candidates.saturating_mul(bytes).div_ceil(8);
    let key_bytes = std::mem::size_of::<K::Bits>() as u64;
    // SAFETY: the first call writes every candidate slot (each chunk writes `written` items:
    // its size is above `written`), and the chunk offsets and the second call read them after;
    // keys only, the values are absent (0 words).
    let (mut candidate_keys, mut candidate_values) = unsafe {
        let values = words(u64::from(value_bytes));
        (
            scratch_words(runtime, stream, scratch, "split_keys", words(key_bytes))?,
            scratch_words(runtime, stream, scratch, "split_values", values)?,
        )
    };
    // The second call's stream scratch, when it runs as the filter and final selection.
    let sizes = second.scratch(second_cluster.is_some());
    let buffer = |buffer: &'static str, count: u64| {
        // SAFETY: the filter writes its records and candidates before the final reads them.
        unsafe { scratch_words(runtime, stream, scratch, buffer, count) }
    };
    let mut stream_ranks = buffer("stream_ranks", sizes.stream_ranks)?;
    let mut stream_indices = buffer("stream_indices", sizes.stream_indices)?;
    let mut stream_counts = buffer("stream_counts", sizes.stream_counts)?;
    if scratch.is_measuring() {
        return Ok(true);
    }
    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    let keys_ptr = keep(&mut guards, keys.device_ptr(stream));
    let out_keys_ptr = keep(&mut guards, out_keys.device_ptr_mut(stream));
    let (values_ptr, out_values_ptr) = values.device_ptrs(stream, &mut guards);
    let candidate_keys_ptr = candidate_keys.ptr(&mut guards, stream);
    let candidate_values_ptr = candidate_values.ptr(&mut guards, stream);
    let key_bits = <K::Bits as RadixBits>::BITS;
    // 1. Each chunk's best into the candidates.
    let at = Pointers {
        keys: keys_ptr,
        values: values_ptr,
        out_keys: candidate_keys_ptr,
        out_values: candidate_values_ptr,
        ..Pointers::default()
    };
    let params = launch_params(&split.first, &first, &at, 0);
    for step in first.steps(key_bits, Some(&first_cluster)) {
        launch_step::<K>(runtime, stream, value_bytes, &params, step)?;
    }
    // 2. Indices within the chunk to indices within the row.
    if writes_indices {
        let control = runtime.kernel(&KernelSpec::batched_topk(
            K::KEY_TYPE,
            value_bytes,
            BatchedKernel::Control,
        ))?;
        let offsets = BatchedTopKParams {
            stage: BT_STAGE_CHUNK_OFFSET,
            num_keys: candidates,
            k_value: split.written,
            chunks_per_segment: split.chunks,
            chunk_items: split.chunk,
            fill_widths: u32::from(value_bytes) << 8,
            ..params
        };
        let grid = runtime.grid_blocks(&control, candidates, 1);
        runtime.launch(stream, &control, grid, offsets)?;
    }
    // 3. Each row's best among its candidates, under the caller's contract.
    let at = Pointers {
        keys: candidate_keys_ptr,
        values: candidate_values_ptr,
        out_keys: out_keys_ptr,
        out_values: out_values_ptr,
        stream_ranks: stream_ranks.ptr(&mut guards, stream),
        stream_indices: stream_indices.ptr(&mut guards, stream),
        stream_counts: stream_counts.ptr(&mut guards, stream),
        ..Pointers::default()
    };
    let params = launch_params(&split.second, &second, &at, 0);
    for step in second.steps(key_bits, second_cluster.as_ref()) {
        launch_step::<K>(runtime, stream, value_bytes, &params, step)?;
    }
    // The caller's fill, with the caller's parameters.
    let at = Pointers {
        out_keys: out_keys_ptr,
        out_values: out_values_ptr,
        ..Pointers::default()
    };
    let params = launch_params(shape, launch_plan, &at, width_flags(plan));
    let fill = prepared_fill::<K>(runtime, plan, value_bytes, writes_indices, &params)?;
    launch_fill(runtime, stream, fill, shape.max_segments())?;
    drop(guards);
    Ok(true)
}

/// `count` words of scratch named `buffer`, uninitialised; absent (pointer 0) when `count` is 0,
/// so that a call whose stages need none allocates nothing (an allocation and a free cost host
/// time on every call).
///
/// # Safety
///
/// As [`Scratch::uninit`]: the launches write every word before any reads it.
unsafe fn scratch_words(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    scratch: &Scratch<'_>,
    buffer: &'static str,
    count: u64,
) -> Result<ScratchBuffer<u64>, KernelError> {
    if count == 0 {
        return Ok(ScratchBuffer::Absent);
    }
    // SAFETY: the caller's launches initialise the words (this function's contract).
    unsafe { scratch.uninit::<u64>(runtime, stream, buffer, count) }
}

/// Makes one launch of the plan.
fn launch_step<K: RadixKey>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    value_bytes: u8,
    params: &BatchedTopKParams,
    step: Step<&ClusterLaunch>,
) -> Result<(), KernelError> {
    let spec = |kernel: BatchedKernel| KernelSpec::batched_topk(K::KEY_TYPE, value_bytes, kernel);
    match step {
        Step::Items {
            kernel,
            items,
            stage,
            shift,
            half,
        } => {
            let loaded = runtime.kernel(&spec(kernel))?;
            let grid = runtime.grid_blocks(&loaded, items, 1);
            let params = BatchedTopKParams {
                stage,
                shift,
                half,
                ..*params
            };
            runtime.launch(stream, &loaded, grid, params)
        }
        Step::Cluster(cluster) => {
            let layout = &cluster.layout;
            let params = BatchedTopKParams {
                stage: BT_STAGE_SELECT,
                stream_total: layout.candidates,
                stream_sorted_cap: layout.candidates,
                stream_sorted_offset: layout.copy_offset,
                stream_bins_offset: layout.bins_offset,
                stream_index_offset: layout.index_offset,
                stream_rank_offset: layout.rank_offset,
                ..*params
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
            Ok(())
        }
        Step::StreamFilter { items, ctas } => {
            let loaded = runtime.kernel(&spec(BatchedKernel::StreamFilter))?;
            let filter = BatchedTopKParams {
                stage: BT_STAGE_SELECT,
                ..*params
            };
            let threads = u64::from(BT_STREAM_FILTER_THREADS);
            let wave = runtime.grid_blocks(&loaded, items.saturating_mul(threads), 1);
            let filter_blocks = stride_coprime(wave, items, ctas);
            runtime.launch_with_shared(
                stream,
                &loaded,
                filter_blocks,
                0,
                filter,
                LaunchOrder::AfterCompletion,
            )
        }
        Step::StreamFinal {
            blocks,
            shared_bytes,
        } => {
            let loaded = runtime.kernel(&spec(BatchedKernel::StreamFinal))?;
            let final_params = BatchedTopKParams {
                stage: BT_STAGE_SELECT,
                ..*params
            };
            // Launched as a dependent of the filter: its launch overlaps the filter's tail.
            runtime.launch_with_shared(
                stream,
                &loaded,
                blocks,
                shared_bytes,
                final_params,
                LaunchOrder::Programmatic,
            )
        }
    }
}

/// The flags of the per-segment buffers a caller holds as `i32` (the kernels widen them).
fn width_flags<K>(plan: &BatchedTopKPlan<'_, '_, K>) -> u32 {
    let mut flags = 0;
    if let BatchedLayout::Strided {
        sizes: HostOrDevice::Device(sizes),
        ..
    } = plan.layout
    {
        if sizes.is_i32() {
            flags |= SEGMENT_SIZES_I32;
        }
    }
    if let HostOrDevice::Device(k) = plan.k {
        if k.is_i32() {
            flags |= BT_K_I32;
        }
    }
    flags
}

/// Every device address a call's launches read or write (0: not used).
#[derive(Clone, Copy, Debug, Default)]
struct Pointers {
    keys: u64,
    values: u64,
    out_keys: u64,
    out_values: u64,
    begin_offsets: u64,
    end_offsets: u64,
    sizes: u64,
    ks: u64,
    directions: u64,
    num_segments: u64,
    descriptors: u64,
    status: u64,
    large_state: u64,
    large_histogram: u64,
    large_chunks: u64,
    large_selected: u64,
    large_ranks: u64,
    bins: u64,
    stream_ranks: u64,
    stream_indices: u64,
    stream_counts: u64,
}

/// The parameters of a call's launches (each launch sets its stage): the shape's host values
/// and bounds, the plan's sizes and flags (with `extra_flags`), and the addresses `at`.
fn launch_params(
    shape: &CallShape,
    plan: &LaunchPlan,
    at: &Pointers,
    extra_flags: u32,
) -> BatchedTopKParams {
    let (stride, size_value) = match shape.layout {
        LayoutShape::Strided { stride, size } => (stride, size.unwrap_or(0)),
        LayoutShape::Offsets | LayoutShape::Listed { .. } => (0, 0),
    };
    let stream_shape = &plan.stream;
    BatchedTopKParams {
        keys: at.keys,
        values: at.values,
        out_keys: at.out_keys,
        out_values: at.out_values,
        begin_offsets: at.begin_offsets,
        end_offsets: at.end_offsets,
        sizes: at.sizes,
        ks: at.ks,
        directions: at.directions,
        num_segments_ptr: at.num_segments,
        descriptors: at.descriptors,
        status: at.status,
        large_state: at.large_state,
        large_histogram: at.large_histogram,
        large_chunks: at.large_chunks,
        large_selected: at.large_selected,
        large_ranks: at.large_ranks,
        bins: at.bins,
        num_keys: shape.num_keys,
        stride,
        size_value,
        size_min: shape.size_bounds.0,
        size_max: shape.size_bounds.1,
        k_value: shape.k.unwrap_or(0),
        k_min: shape.k_bounds.0,
        k_max: shape.k_bounds.1,
        num_segments: shape.num_segments.unwrap_or(0),
        num_segments_min: shape.num_segments_bounds.0,
        num_segments_max: shape.num_segments_bounds.1,
        out_stride: shape.out_stride,
        warp_max_size: u64::from(plan.warp_items) * 32,
        warp_max_k: WARP_MAX_K as u64,
        block_max_size: SORT_CAP as u64,
        stream_max_size: stream_shape.max_size,
        stream_max_k: STREAM_MAX_K as u64,
        stream_capacity: plan.stream_capacity,
        stream_ctas: stream_shape.ctas,
        stream_chunk: stream_shape.chunk,
        stream_candidates: stream_shape.candidates,
        stream_total: stream_shape.total,
        stream_ranks: at.stream_ranks,
        stream_indices: at.stream_indices,
        stream_counts: at.stream_counts,
        stream_sorted_cap: stream_shape.sorted_cap,
        stream_sorted_offset: stream_shape.sorted_offset,
        stream_bins_offset: stream_shape.bins_offset,
        stream_index_offset: stream_shape.index_offset,
        stream_rank_offset: stream_shape.rank_offset,
        chunks_per_segment: plan.chunks,
        chunk_items: plan.chunk_items,
        selected_stride: plan.selected_stride,
        sort_span: plan.sort_span,
        bin_capacity: shape.max_segments(),
        large_capacity: plan.large_capacity,
        total_min: shape.total_bounds.0,
        total_max: shape.total_bounds.1,
        flags: plan.flags | extra_flags,
        direction_value: shape.direction.unwrap_or(0),
        direction_mask: shape.direction_mask,
        tiers: plan.tiers.0,
        stage: BT_STAGE_INIT,
        shift: 0,
        half: 0,
        fill_key: 0,
        fill_value: 0,
        fill_end: shape.per_segment_max,
        fill_widths: 0,
    }
}

/// The call's shape for the plan: its host values and bounds, without its buffers.
fn call_shape<K: RadixKey, V>(
    plan: &BatchedTopKPlan<'_, '_, K>,
    num_keys: u64,
    values: &SelectedValues<'_, '_, V>,
) -> CallShape {
    CallShape {
        layout: match plan.layout {
            BatchedLayout::Strided { stride, sizes } => LayoutShape::Strided {
                stride,
                size: sizes.host(),
            },
            BatchedLayout::Offsets { .. } => LayoutShape::Offsets,
            BatchedLayout::Listed { segments } => LayoutShape::Listed {
                max_size: largest(segments),
            },
        },
        k: plan.k.host(),
        direction: plan.direction.host(),
        num_segments: plan.num_segments.host(),
        num_segments_bounds: plan.num_segments_bounds,
        size_bounds: plan.size_bounds,
        k_bounds: plan.k_bounds,
        total_bounds: plan.total_bounds,
        direction_mask: plan.direction_mask,
        out_stride: plan.out_stride,
        per_segment_max: plan.per_segment_max,
        tiers: plan.tiers,
        warp_items: plan.warp_items,
        prefer_larger: plan.prefer_larger_index,
        sorted: plan.sorted,
        stable: plan.stable,
        reject_k_above_size: plan.reject_k_above_size,
        num_keys,
        key: K::KEY_TYPE,
        values: match values {
            SelectedValues::None => ValuesShape::None,
            SelectedValues::Copy { .. } => ValuesShape::Copy,
            SelectedValues::Index { .. } => ValuesShape::Index,
            SelectedValues::Listed { .. } => ValuesShape::Listed,
        },
        // Any size that is not a value width (more than a u8 holds, too) is refused.
        value_bytes: match values {
            SelectedValues::None => 0,
            _ => u8::try_from(std::mem::size_of::<V>()).unwrap_or(u8::MAX),
        },
    }
}

/// The clustered launch of a direct call: its kernel, layout and grid (a cluster per segment).
struct ClusterLaunch {
    kernel: LoadedKernel,
    layout: ClusterLayout,
    grid: u32,
}

/// The clustered launch the plan chose (where the device launches clusters and fits their
/// blocks) with `layout`, when all of its `clusters` (one per segment or stream-list position)
/// are resident at once (more would run in waves, each a chain of barriers: the filter and
/// final selection take them instead).
fn cluster_launch<K: RadixKey>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    value_bytes: u8,
    layout: ClusterLayout,
    clusters: u64,
) -> Option<ClusterLaunch> {
    if !clusters_enabled() {
        return None;
    }
    let spec = KernelSpec::batched_topk(K::KEY_TYPE, value_bytes, BatchedKernel::StreamCluster);
    // The clustered launch is an optimisation: where it cannot be prepared (its kernel does
    // not build, the occupancy query fails), the filter and final selection run instead, and
    // the reason is logged, once per cause.
    let prepared = runtime.kernel(&spec).and_then(|kernel| {
        let shared = layout.shared_bytes;
        let resident = runtime.max_active_clusters(stream, &kernel, shared, BT_CLUSTER_BLOCKS)?;
        Ok((kernel, resident))
    });
    let (kernel, resident) = match prepared {
        Ok(prepared) => prepared,
        Err(error) => {
            if first_report(&format!("{spec}: {error}")) {
                tracing::warn!(
                    kernel = %spec,
                    %error,
                    "the stream tier's clustered launch could not be prepared; its filter and \
                     final selection run instead"
                );
            }
            return None;
        }
    };
    let grid = clusters.saturating_mul(u64::from(BT_CLUSTER_BLOCKS));
    (clusters <= u64::from(resident) && grid <= u64::from(u32::MAX)).then(|| ClusterLaunch {
        kernel,
        layout,
        grid: grid as u32,
    })
}

/// Whether `cause` is reported for the first time in this process: a cause that stops a
/// faster path recurs on every call that would take it, and is logged once.
fn first_report(cause: &str) -> bool {
    static REPORTED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut reported = REPORTED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if reported.iter().any(|seen| seen == cause) {
        return false;
    }
    reported.push(cause.to_owned());
    true
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
/// let before = oxicub::kernels::families::batched_topk::clustered_launches();
/// assert!(oxicub::kernels::families::batched_topk::clustered_launches() >= before);
/// ```
pub fn clustered_launches() -> u64 {
    CLUSTERED_LAUNCHES.with(std::cell::Cell::get)
}

/// Whether the clustered launch may be used: yes unless the environment variable
/// `OXICUB_STREAM_CLUSTERS` is `off` (read once; for side-by-side measurements and as a way
/// around a driver that mishandles clusters).
fn clusters_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("OXICUB_STREAM_CLUSTERS").map_or(true, |v| v != "off"))
}

/// The largest of a listed layout's segments.
fn largest<K>(segments: &[CudaView<'_, K>]) -> u64 {
    segments.iter().map(|s| s.len() as u64).max().unwrap_or(0)
}

/// Where batched top-k keeps the valid segments' total size and its check.
const TOTAL_WORDS: (u32, u32) = (BT_STATUS_TOTAL, BT_STATUS_TOTAL_BAD);

#[cfg(test)]
mod tests {
    use super::first_report;

    /// A cause is reported the first time only; another cause is reported too.
    #[test]
    fn each_cause_is_reported_once() {
        let cause = "oxicub::batched_topk<..>: the occupancy query failed (a test's cause)";
        assert!(first_report(cause));
        assert!(!first_report(cause));
        assert!(!first_report(cause));
        assert!(first_report("another cause (a test's)"));
    }
}
