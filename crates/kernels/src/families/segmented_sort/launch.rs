//! The segmented sort launcher: checks the buffers, allocates the scratch the plan needs,
//! binds the pointers and launches every stage back to back on one stream; the per-segment
//! checks are reported through the status words.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, SyncOnDrop};

use super::call::{SegmentedSortPlan, SortLayout, SortStatus, SortTiles};
use super::constants::{BLOCK_THREADS, WIDE_BLOCK_THREADS};
use super::constants::{
    SS_CLASSES, SS_DIRECT, SS_ORDER_PER_SEGMENT, SS_PART, SS_PARTITION_WORDS, SS_PLAN_WORDS,
    SS_STAGE_BLOCK, SS_STAGE_FILL, SS_STAGE_FINALIZE, SS_STAGE_INIT, SS_STAGE_MERGE,
    SS_STAGE_NAN_SCAN, SS_STAGE_PARTITION, SS_STAGE_PLACE, SS_STAGE_RESOLVE, SS_STAGE_RUNS,
    SS_STAGE_SMALL, SS_STAGE_TILE, SS_STAGE_WRITE, SS_STATUS_TOTAL, SS_STATUS_TOTAL_BAD,
    SS_STATUS_WORDS, SS_TILE, SS_VALUES_INDEX,
};
use super::kernels::{register_shared_bytes, SegmentedSortParams};
use super::plan::{merge_widths, register_tile, sort_path, SortPath};
use crate::families::scratch::Scratch;
use crate::families::{at_least, keep, HostOrDevice, SelectedValues};
use crate::radix::{KeyType, RadixKey};
use crate::runtime::LaunchOrder;
use crate::segments::{
    SegmentedStatus, SEGMENT_COUNT_DEFERRED, SEGMENT_DESC_WORDS, SEGMENT_OFFSETS,
    SEGMENT_SIZES_I32, SEGMENT_SIZES_PER_SEGMENT,
};
use crate::{KernelError, KernelRuntime, KernelSpec};

/// Sorts the keys (and values, or each key's index within its segment) of every segment of
/// `keys` into the same places of the outputs, as `plan` says; positions outside every valid
/// segment are left untouched. Asynchronous on `stream`; returns the status words and the
/// merge-pass statistics to decode when the caller chooses to synchronise. `V` is 1, 2, 4 or 8 bytes (indices: 4 or 8).
pub fn segmented_sort<K: RadixKey, V>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    scratch: &Scratch<'_>,
    plan: SegmentedSortPlan<'_, '_>,
    keys: &CudaView<'_, K>,
    out_keys: &mut CudaViewMut<'_, K>,
    mut values: SelectedValues<'_, '_, V>,
) -> Result<SortStatus, KernelError> {
    let invalid = |reason: String| KernelError::InvalidSpec {
        kernel: "segmented_sort".to_owned(),
        reason,
    };
    runtime.check_buffer("keys", keys)?;
    runtime.check_buffer("out_keys", &*out_keys)?;
    let n = keys.len() as u64;
    at_least("out_keys", out_keys.len(), n)?;
    let value_bytes = std::mem::size_of::<V>() as u8;
    let (value_bytes, index) = match &values {
        SelectedValues::None => (0, false),
        SelectedValues::Copy { values, out } => {
            runtime.check_buffer("values", *values)?;
            runtime.check_buffer("out_values", &**out)?;
            at_least("values", values.len(), n)?;
            at_least("out_values", out.len(), n)?;
            (value_bytes, false)
        }
        SelectedValues::Index { out } => {
            runtime.check_buffer("out_values", &**out)?;
            at_least("out_values", out.len(), n)?;
            if !matches!(value_bytes, 4 | 8) {
                return Err(invalid(format!(
                    "indices are 4 or 8 bytes, not {value_bytes}"
                )));
            }
            (value_bytes, true)
        }
        SelectedValues::Listed { .. } => {
            return Err(invalid(
                "per-segment value addresses are not a sort layout".into(),
            ))
        }
    };
    if !matches!(value_bytes, 0 | 1 | 2 | 4 | 8) {
        return Err(invalid(format!(
            "values must be 1, 2, 4 or 8 bytes, not {value_bytes}"
        )));
    }
    let (count_min, count_max) = plan.num_segments_bounds;
    if count_min > count_max || count_max > i64::MAX as u64 {
        return Err(invalid(format!(
            "the bounds [{count_min}, {count_max}] of the number of segments are not a range \
             of i64"
        )));
    }
    let max_segments = match plan.num_segments {
        HostOrDevice::Host(count) => count,
        HostOrDevice::Device(_) => count_max,
    };
    // Every per-segment buffer holds a value for each segment the kernels may visit.
    let per_segment = |name: &'static str, len: usize| at_least(name, len, max_segments);
    let mut flags = 0u32;
    match plan.layout {
        SortLayout::Strided { sizes, .. } => {
            if let HostOrDevice::Device(sizes) = sizes {
                sizes.check(runtime, "sizes")?;
                per_segment("sizes", sizes.len())?;
                flags |= SEGMENT_SIZES_PER_SEGMENT;
                if sizes.is_i32() {
                    flags |= SEGMENT_SIZES_I32;
                }
            }
        }
        SortLayout::Offsets { begin, end } => {
            runtime.check_buffer("begin_offsets", begin)?;
            runtime.check_buffer("end_offsets", end)?;
            per_segment("begin_offsets", begin.len())?;
            per_segment("end_offsets", end.len())?;
            flags |= SEGMENT_OFFSETS;
        }
    }
    if let HostOrDevice::Device(orders) = plan.order {
        runtime.check_buffer("orders", orders)?;
        per_segment("orders", orders.len())?;
        flags |= SS_ORDER_PER_SEGMENT;
    }
    if let HostOrDevice::Device(count) = plan.num_segments {
        runtime.check_buffer("num_segments", count)?;
        at_least("num_segments", count.len(), 1)?;
        flags |= SEGMENT_COUNT_DEFERRED;
    }
    if index {
        flags |= SS_VALUES_INDEX;
    }

    let mut status = scratch.status(runtime, stream, SS_STATUS_WORDS.into())?;
    // Sized by the count's bound (a size the device cannot hold is refused by the allocation).
    let descriptor_words = max_segments
        .max(1)
        .saturating_mul(u64::from(SEGMENT_DESC_WORDS));
    // SAFETY: RESOLVE describes every segment below the count before FILL reads one.
    let mut descriptors =
        unsafe { scratch.uninit::<u64>(runtime, stream, "descriptors", descriptor_words) }?;
    // The path the keys' width and the segments' sizes select (plan.rs, `sort_path`).
    let (largest, uniform) = match plan.layout {
        SortLayout::Strided {
            stride,
            sizes: HostOrDevice::Host(size),
        } => (size.min(stride), true),
        SortLayout::Strided { stride, .. } => (plan.size_bounds.1.min(stride), false),
        SortLayout::Offsets { .. } => (plan.size_bounds.1, false),
    };
    let largest = largest.min(n);
    // The wide kernel's tile needs more shared memory a block than devices below sm_90 offer.
    let wide = KernelSpec::segmented_sort_wide(K::KEY_TYPE, value_bytes);
    let wide_fits = runtime.shared_memory_fits(&wide, register_shared_bytes(WIDE_BLOCK_THREADS));
    let path = sort_path(K::KEY_TYPE.bits(), largest, uniform, wide_fits);
    // The register path's block: its threads, its tile of keys, its dynamic shared memory.
    let threads = match path {
        SortPath::RegisterUniform { threads, .. } | SortPath::RegisterClasses { threads } => {
            threads
        }
        _ => BLOCK_THREADS,
    };
    let block_tile = register_tile(threads);
    let register_shared = register_shared_bytes(threads);
    // The merge passes take parts of SS_PART entries a block, on the narrow kernel: a chunk of
    // the wide kernel's BLOCK is four parts.
    let chunk_parts = block_tile / u64::from(SS_PART);
    let classes = matches!(path, SortPath::RegisterClasses { .. });
    if classes {
        flags |= SS_CLASSES;
    }
    // Rows of one size whose count and order are on the host have nothing the device could
    // find wrong (the front check checked them): no per-segment stages.
    let direct = matches!(path, SortPath::RegisterUniform { .. })
        && matches!(plan.num_segments, HostOrDevice::Host(_))
        && matches!(plan.order, HostOrDevice::Host(_));
    if direct {
        flags |= SS_DIRECT;
    }
    let spec = if threads == WIDE_BLOCK_THREADS {
        wide
    } else {
        KernelSpec::segmented_sort(K::KEY_TYPE, value_bytes)
    };
    let kernel = runtime.kernel(&spec)?;
    let mergesort = path == SortPath::Mergesort;
    // The mergesort's scratch: a word per position for the segment starts, two buffers of
    // ranks and of positions, a flag per tile.
    let words = if mergesort { n.max(1) } else { 1 };
    // SAFETY: FILL writes every start, rank and position of buffer 0 before any other stage
    // reads them, and each merge pass writes every entry of the buffer it fills before the
    // next stage reads it (a pass moves a permutation of its entries).
    let mut seg_start = unsafe { scratch.uninit::<u64>(runtime, stream, "seg_start", words) }?;
    let mut ranks = unsafe { scratch.uninit::<u64>(runtime, stream, "ranks", 2 * words) }?;
    let mut positions = unsafe { scratch.uninit::<u64>(runtime, stream, "positions", 2 * words) }?;
    let (tiles, widths) = match path {
        SortPath::Mergesort => (
            n.div_ceil(u64::from(SS_TILE)),
            merge_widths(u64::from(SS_TILE), n),
        ),
        SortPath::RegisterClasses { .. } => (0, merge_widths(block_tile, largest)),
        _ => (0, Vec::new()),
    };
    // Two words per merge pass; the register path's tile and pass counts after them.
    let mut statistics = scratch.status(runtime, stream, 2 * widths.len() as u64 + 2)?;

    // The register path's classes: the plan words, a place per segment, a first chunk per
    // long segment (above a tile, so at most n / (tile + 1) of them), SS_PARTITION_WORDS words
    // per chunk, and two buffers of entries for the long segments.
    let (list_words, longs, parts, entry_words) = if classes {
        let longs = (n / (block_tile + 1)).min(max_segments) + 1;
        let entries = if largest > block_tile { 2 * n } else { 1 };
        (
            max_segments.max(1),
            longs,
            (n.div_ceil(block_tile) + longs) * chunk_parts,
            entries,
        )
    } else {
        (1, 1, 1, 1)
    };
    let mut plan_words = scratch.zeroed::<u64>(runtime, stream, "plan", SS_PLAN_WORDS.into())?;
    // SAFETY: PLACE writes the place of every listed segment and the first chunk of every long
    // one before BLOCK reads them; PARTITION writes the words of every chunk a merge pass
    // reads; BLOCK writes every position of the long segments into entries buffer 0, and each
    // merge pass every position of the segments it has not finished into the other buffer.
    let mut segment_list =
        unsafe { scratch.uninit::<u64>(runtime, stream, "segment_list", list_words) }?;
    let mut chunk_base = unsafe { scratch.uninit::<u64>(runtime, stream, "chunk_base", longs) }?;
    let words_per_part = u64::from(SS_PARTITION_WORDS);
    let mut partition =
        unsafe { scratch.uninit::<u64>(runtime, stream, "partition", words_per_part * parts) }?;
    let mut entries = unsafe { scratch.uninit::<u64>(runtime, stream, "entries", entry_words) }?;
    // SAFETY: TILE (the mergesort) or BLOCK (a chunk of the register path: its parts) writes
    // every tile's flag before a merge pass reads it.
    let flags_words = if classes { parts } else { tiles.max(1) };
    let mut tile_dirty =
        unsafe { scratch.uninit::<u32>(runtime, stream, "tile_dirty", flags_words) }?;
    if scratch.is_measuring() {
        return Ok(SortStatus {
            status: SegmentedStatus::new(runtime, None, (SS_STATUS_TOTAL, SS_STATUS_TOTAL_BAD)),
            statistics: None,
            passes: 0,
            tiles: SortTiles::Host(0),
        });
    }

    let mut guards: Vec<SyncOnDrop<'_>> = Vec::new();
    let (values_ptr, out_values_ptr) = values.device_ptrs(stream, &mut guards);
    let (begin_offsets, end_offsets, sizes, stride, size_value) = match plan.layout {
        SortLayout::Strided { stride, sizes } => match sizes {
            HostOrDevice::Host(size) => (0, 0, 0, stride, size),
            HostOrDevice::Device(sizes) => (0, 0, sizes.ptr(&mut guards, stream), stride, 0),
        },
        SortLayout::Offsets { begin, end } => (
            keep(&mut guards, begin.device_ptr(stream)),
            keep(&mut guards, end.device_ptr(stream)),
            0,
            0,
            0,
        ),
    };
    let (orders, order_value) = match plan.order {
        HostOrDevice::Host(order) => (0, order),
        HostOrDevice::Device(orders) => (keep(&mut guards, orders.device_ptr(stream)), 0),
    };
    let (num_segments_ptr, num_segments) = match plan.num_segments {
        HostOrDevice::Host(count) => (0, count),
        HostOrDevice::Device(count) => (keep(&mut guards, count.device_ptr(stream)), 0),
    };
    let params = SegmentedSortParams {
        keys: keep(&mut guards, keys.device_ptr(stream)),
        values: values_ptr,
        out_keys: keep(&mut guards, out_keys.device_ptr_mut(stream)),
        out_values: out_values_ptr,
        begin_offsets,
        end_offsets,
        sizes,
        orders,
        num_segments_ptr,
        status: status
            .as_mut()
            .map_or(0, |status| status.ptr(&mut guards, stream)),
        descriptors: descriptors.ptr(&mut guards, stream),
        seg_start: seg_start.ptr(&mut guards, stream),
        ranks: ranks.ptr(&mut guards, stream),
        positions: positions.ptr(&mut guards, stream),
        tile_dirty: tile_dirty.ptr(&mut guards, stream),
        plan: plan_words.ptr(&mut guards, stream),
        segment_list: segment_list.ptr(&mut guards, stream),
        chunk_base: chunk_base.ptr(&mut guards, stream),
        partition: partition.ptr(&mut guards, stream),
        entries: entries.ptr(&mut guards, stream),
        statistics: statistics
            .as_mut()
            .map_or(0, |statistics| statistics.ptr(&mut guards, stream)),
        num_keys: n,
        stride,
        size_value,
        size_min: plan.size_bounds.0,
        size_max: plan.size_bounds.1,
        num_segments,
        num_segments_min: count_min,
        num_segments_max: count_max,
        total_min: plan.total_bounds.0,
        total_max: plan.total_bounds.1,
        width: 0,
        flags,
        order_value,
        order_mask: plan.order_mask,
        stage: SS_STAGE_INIT,
        src: 0,
        pass: 0,
        passes: widths.len() as u32,
        chunk_parts: chunk_parts as u32,
    };
    let stage = |stage: u32| SegmentedSortParams { stage, ..params };
    let over_keys = runtime.grid_blocks(&kernel, n, 1);
    runtime.launch(stream, &kernel, 1, stage(SS_STAGE_INIT))?;
    let over_segments = runtime.grid_blocks(&kernel, max_segments, 1);
    if !direct {
        runtime.launch(stream, &kernel, over_segments, stage(SS_STAGE_RESOLVE))?;
        runtime.launch(stream, &kernel, 1, stage(SS_STAGE_FINALIZE))?;
    }
    let with_width = |stage: u32, width: u64| SegmentedSortParams {
        stage,
        width,
        ..params
    };
    let status_of = |status, statistics, passes, tiles| SortStatus {
        status: SegmentedStatus::new(runtime, status, (SS_STATUS_TOTAL, SS_STATUS_TOTAL_BAD)),
        statistics,
        passes,
        tiles,
    };
    // A persistent grid of blocks that each take one batch, chunk or tile at a time.
    let block_items =
        |items: u64| runtime.grid_blocks(&kernel, items.saturating_mul(u64::from(threads)), 1);
    // BLOCK and RUNS hold a tile of entries in dynamic shared memory.
    let launch_tiles = |grid: u32, params: SegmentedSortParams| {
        runtime.launch_with_shared(
            stream,
            &kernel,
            grid,
            register_shared,
            params,
            LaunchOrder::AfterCompletion,
        )
    };
    match path {
        SortPath::RegisterUniform { span, .. } => {
            let batches = max_segments.div_ceil(block_tile / span);
            launch_tiles(block_items(batches), with_width(SS_STAGE_BLOCK, span))?;
            drop(guards);
            return Ok(status_of(status, statistics, 0, SortTiles::Host(0)));
        }
        SortPath::RegisterClasses { .. } => {
            let chunks = parts / chunk_parts;
            runtime.launch(stream, &kernel, over_segments, stage(SS_STAGE_PLACE))?;
            let float = matches!(
                K::KEY_TYPE,
                KeyType::F16 | KeyType::BF16 | KeyType::F32 | KeyType::F64
            );
            if value_bytes == 0 && float && largest > block_tile {
                // Keys-only long segments sort bare ranks unless a NaN is among their keys.
                runtime.launch(
                    stream,
                    &kernel,
                    block_items(chunks),
                    stage(SS_STAGE_NAN_SCAN),
                )?;
            }
            let items = max_segments.saturating_add(chunks);
            launch_tiles(block_items(items), stage(SS_STAGE_BLOCK))?;
            // The merge passes on the narrow kernel (its tile is a part): PARTITION a warp per
            // part, RUNS a block per part at a time.
            let narrow = if threads == BLOCK_THREADS {
                kernel.clone()
            } else {
                runtime.kernel(&KernelSpec::segmented_sort(K::KEY_TYPE, value_bytes))?
            };
            let over_parts = runtime.grid_blocks(&narrow, parts.saturating_mul(32), 1);
            let runs_grid =
                runtime.grid_blocks(&narrow, parts.saturating_mul(u64::from(BLOCK_THREADS)), 1);
            for (pass, &width) in widths.iter().enumerate() {
                let src = (pass % 2) as u32;
                let partition = SegmentedSortParams {
                    src,
                    ..with_width(SS_STAGE_PARTITION, width)
                };
                runtime.launch(stream, &narrow, over_parts, partition)?;
                let merge = SegmentedSortParams {
                    src,
                    pass: pass as u32,
                    ..with_width(SS_STAGE_RUNS, width)
                };
                runtime.launch_with_shared(
                    stream,
                    &narrow,
                    runs_grid,
                    register_shared_bytes(BLOCK_THREADS),
                    merge,
                    LaunchOrder::AfterCompletion,
                )?;
            }
            drop(guards);
            let passes = widths.len();
            return Ok(status_of(status, statistics, passes, SortTiles::Device));
        }
        SortPath::SharedSmall { span } => {
            let per_block = u64::from(SS_TILE) / span;
            let blocks = block_items(max_segments.div_ceil(per_block));
            runtime.launch(stream, &kernel, blocks, with_width(SS_STAGE_SMALL, span))?;
            drop(guards);
            return Ok(status_of(status, statistics, 0, SortTiles::Host(0)));
        }
        SortPath::Mergesort => {}
    }
    runtime.launch(stream, &kernel, over_keys, stage(SS_STAGE_FILL))?;
    let tile_blocks = runtime.grid_blocks(&kernel, tiles.saturating_mul(256), 1);
    runtime.launch(stream, &kernel, tile_blocks, stage(SS_STAGE_TILE))?;
    for (pass, &width) in widths.iter().enumerate() {
        let merge = SegmentedSortParams {
            stage: SS_STAGE_MERGE,
            width,
            src: (pass % 2) as u32,
            pass: pass as u32,
            ..params
        };
        runtime.launch(stream, &kernel, tile_blocks, merge)?;
    }
    let write = SegmentedSortParams {
        stage: SS_STAGE_WRITE,
        src: (widths.len() % 2) as u32,
        ..params
    };
    runtime.launch(stream, &kernel, over_keys, write)?;
    drop(guards);
    Ok(status_of(
        status,
        statistics,
        widths.len(),
        SortTiles::Host(tiles),
    ))
}
