//! The launch plan of a batched top-k call, as pure functions of its shape (no buffers, no
//! device): whether the call is direct, which tiers run, the flags, the scratch of every tier
//! and the launches in stream order (docs/design/batched_topk.md, "Tiers" and
//! "Control stages"), on a device with given limits (the stream tier and its clustered launch
//! only where their shared memory and clusters fit). The launcher ([`super::launch`])
//! allocates what the plan sizes, binds the pointers and makes the launches; the only choice it
//! adds is the device's resident clusters: whether the clustered stream launch planned
//! ([`LaunchPlan::cluster`]) takes every segment at once.

use super::constants::*;
use super::kernels::BatchedKernel;
use super::layout::{cluster_layout, stream_layout, ClusterLayout, StreamLayout};
use super::tiers::BatchedTiers;
use crate::device::DeviceLimits;
use crate::radix::KeyType;
use crate::segments::{
    SEGMENT_COUNT_DEFERRED, SEGMENT_DESC_WORDS, SEGMENT_DIRECT, SEGMENT_OFFSETS,
    SEGMENT_SIZES_PER_SEGMENT, SEGMENT_VALUE_POINTERS,
};
use crate::{KernelError, KernelSpec};

/// Where the segments are, without their buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LayoutShape {
    /// Segment `i` starts at `i * stride`; `size` when every segment has that size (else sizes
    /// per segment).
    Strided { stride: u64, size: Option<u64> },
    /// Begin and end offsets per segment.
    Offsets,
    /// A device address per segment; `max_size` bounds the segments.
    Listed { max_size: u64 },
}

/// Where the values come from, without their buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValuesShape {
    /// Keys only.
    None,
    /// One buffer of values.
    Copy,
    /// The index within the segment.
    Index,
    /// A value address per segment (listed layout).
    Listed,
}

/// A call as the plan sees it: the host values and bounds of [`super::BatchedTopKPlan`] (each
/// per-segment or deferred parameter as `None`), the keys and the values.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallShape {
    pub(crate) layout: LayoutShape,
    /// `k` when it is one host value.
    pub(crate) k: Option<u64>,
    /// The direction when it is one host value.
    pub(crate) direction: Option<u32>,
    /// The number of segments when it is on the host.
    pub(crate) num_segments: Option<u64>,
    pub(crate) num_segments_bounds: (u64, u64),
    pub(crate) size_bounds: (u64, u64),
    pub(crate) k_bounds: (u64, u64),
    pub(crate) total_bounds: (u64, u64),
    pub(crate) direction_mask: u32,
    pub(crate) out_stride: u64,
    pub(crate) per_segment_max: u64,
    /// The tiers the caller compiled (from the bounds of every key width).
    pub(crate) tiers: BatchedTiers,
    pub(crate) warp_items: u32,
    pub(crate) prefer_larger: bool,
    pub(crate) sorted: bool,
    pub(crate) stable: bool,
    /// A segment whose `k` is above its size is invalid, not clamped.
    pub(crate) reject_k_above_size: bool,
    /// The keys a segment may address.
    pub(crate) num_keys: u64,
    /// The key type.
    pub(crate) key: KeyType,
    pub(crate) values: ValuesShape,
    /// Bytes of a value (0 for keys only): the kernels' `VALUE_BYTES`.
    pub(crate) value_bytes: u8,
}

impl CallShape {
    /// Bytes of a key.
    pub(crate) fn key_bytes(&self) -> u32 {
        self.key.bits() / 8
    }

    /// The spec of one of the call's kernels.
    fn spec(&self, kernel: BatchedKernel) -> KernelSpec {
        KernelSpec::batched_topk(self.key, self.value_bytes, kernel)
    }

    /// The most segments the call launches for: the host count, or a deferred count's bound.
    pub(crate) fn max_segments(&self) -> u64 {
        self.num_segments.unwrap_or(self.num_segments_bounds.1)
    }

    /// The most items the outputs must hold.
    pub(crate) fn out_len(&self) -> u64 {
        let max_segments = self.max_segments();
        if max_segments == 0 || self.per_segment_max == 0 {
            0
        } else {
            (max_segments - 1)
                .saturating_mul(self.out_stride)
                .saturating_add(self.per_segment_max)
        }
    }

    /// Whether the host can check every segment before launching: strided layout, size, `k`,
    /// direction and number of segments each one host value. Then every segment is alike, so
    /// the checks the control stages make per segment are made here once (for the last
    /// segment, the one that reaches furthest); when they pass, the tiers read the values from
    /// the parameters (no control stages, no descriptors, no status to read back). When they
    /// fail, the general path runs and reports the violation as usual.
    pub(crate) fn is_direct(&self) -> bool {
        let LayoutShape::Strided {
            stride,
            size: Some(size),
        } = self.layout
        else {
            return false;
        };
        let (Some(k), Some(dir), Some(n)) = (self.k, self.direction, self.num_segments) else {
            return false;
        };
        let size_ok = size >= self.size_bounds.0 && size <= self.size_bounds.1 && size <= stride;
        // A refused k above the size is reported from the device (no direct call has status).
        let k_ok =
            k >= self.k_bounds.0 && k <= self.k_bounds.1 && !(self.reject_k_above_size && k > size);
        let dir_ok = dir <= 1 && (self.direction_mask >> dir) & 1 == 1;
        let end = n
            .checked_sub(1)
            .and_then(|last| last.checked_mul(stride))
            .and_then(|b| b.checked_add(size));
        let fits = matches!(end, Some(e) if e <= self.num_keys && e <= i64::MAX as u64);
        // The kernels hold these as signed 64-bit values.
        let small = size <= i64::MAX as u64 && k <= i64::MAX as u64;
        n > 0 && size_ok && k_ok && dir_ok && fits && small
    }

    /// The tiers the call runs: the compiled tiers less what the key width's bounds exclude.
    pub(crate) fn effective_tiers(&self) -> BatchedTiers {
        let clamp = |v: u64| v.min(i64::MAX as u64) as i64;
        let sizes = (clamp(self.size_bounds.0), clamp(self.size_bounds.1));
        let k = (clamp(self.k_bounds.0), clamp(self.k_bounds.1));
        // The width-independent bounds may have asked for the multi-block tier only because of
        // wider keys; the width's own bounds decide. What the call lacks is never added.
        self.tiers
            .and(BatchedTiers::for_key_bounds(self.key_bytes(), sizes, k))
    }

    /// The flags of every launch.
    pub(crate) fn flags(&self, direct: bool, global_sort: bool) -> u32 {
        let mut flags = match self.values {
            ValuesShape::Index => BT_VALUES_ARE_INDEX,
            ValuesShape::Listed => SEGMENT_VALUE_POINTERS,
            ValuesShape::None | ValuesShape::Copy => 0,
        };
        match self.layout {
            LayoutShape::Strided { size: None, .. } => flags |= SEGMENT_SIZES_PER_SEGMENT,
            LayoutShape::Strided { .. } => {}
            LayoutShape::Offsets | LayoutShape::Listed { .. } => flags |= SEGMENT_OFFSETS,
        }
        let set = |condition: bool, flag: u32| if condition { flag } else { 0 };
        flags
            | set(self.k.is_none(), BT_K_PER_SEGMENT)
            | set(self.direction.is_none(), BT_DIR_PER_SEGMENT)
            | set(self.num_segments.is_none(), SEGMENT_COUNT_DEFERRED)
            | set(self.prefer_larger, BT_PREFER_LARGER)
            | set(self.stable, BT_STABLE)
            | set(self.sorted, BT_SORTED)
            | set(global_sort, BT_GLOBAL_SORT)
            | set(direct, SEGMENT_DIRECT)
            | set(self.reject_k_above_size, BT_REJECT_K_ABOVE_SIZE)
    }

    /// Whether the segments of a direct call (all alike) go to the stream tier: the order of
    /// the device's bt_bin. Only which launches are made depends on it; each kernel still
    /// takes just the segments of its own tier.
    fn direct_bin_is_stream(&self, tiers: BatchedTiers, stream: &StreamLayout) -> bool {
        let (
            LayoutShape::Strided {
                size: Some(size), ..
            },
            Some(k),
        ) = (self.layout, self.k)
        else {
            return false;
        };
        let written = k.min(size);
        let warp = tiers.contains(BatchedTiers::WARP)
            && size <= u64::from(self.warp_items) * 32
            && written <= WARP_MAX_K as u64;
        let block = tiers.contains(BatchedTiers::BLOCK) && size <= SORT_CAP as u64;
        !warp && !block && size <= stream.max_size && written <= STREAM_MAX_K as u64
    }
}

/// The sizes, flags and parameter values of a call's launches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LaunchPlan {
    /// Every segment alike and checked on the host ([`CallShape::is_direct`]).
    pub(crate) direct: bool,
    /// The tiers that run.
    pub(crate) tiers: BatchedTiers,
    /// The flags of every launch.
    pub(crate) flags: u32,
    /// The most segments launched for.
    pub(crate) max_segments: u64,
    /// The multi-block tier sorts its selected sets in global memory, `sort_span` slots each.
    pub(crate) global_sort: bool,
    pub(crate) sort_span: u64,
    /// The multi-block tier's keys per chunk (one block's work item) and chunks per segment.
    pub(crate) chunk_items: u64,
    pub(crate) chunks: u64,
    /// The largest segment the call may have.
    pub(crate) largest: u64,
    /// Positions of the multi-block and stream lists (the multi-block tier's scratch).
    pub(crate) large_capacity: u64,
    /// Positions of the stream list.
    pub(crate) stream_capacity: u64,
    /// Segments with stream scratch.
    pub(crate) stream_slots: u64,
    /// The stream tier's layout.
    pub(crate) stream: StreamLayout,
    /// The clustered stream launch's layout, when the call may take it (a call with the
    /// stream tier, on a device that launches clusters and fits its blocks: a cluster per
    /// segment of a direct call whose segments go to that tier, else a cluster per position
    /// of its list, `stream_slots`); the launcher asks the device whether every cluster is
    /// resident.
    pub(crate) cluster: Option<ClusterLayout>,
    /// Distance between segments in the multi-block tier's selected indices.
    pub(crate) selected_stride: u64,
    /// The most items one segment writes.
    pub(crate) per_segment_max: u64,
    /// Keys per lane of the warp tier.
    pub(crate) warp_items: u32,
}

/// The scratch of a call besides its descriptors ([`LaunchPlan::descriptor_words`]), in `u64`
/// words (0: none allocated, pointer 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Scratch {
    pub(crate) bins: u64,
    pub(crate) large_state: u64,
    pub(crate) large_histogram: u64,
    pub(crate) large_chunks: u64,
    pub(crate) large_selected: u64,
    pub(crate) large_ranks: u64,
    pub(crate) stream_ranks: u64,
    pub(crate) stream_indices: u64,
    pub(crate) stream_counts: u64,
}

/// One launch, in stream order; `C` is what the clustered launch needs (the launcher's
/// prepared kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step<C> {
    /// `kernel` on the device's grid for `items` threads' items (at most a wave of blocks; the
    /// kernels stride over the rest).
    Items {
        kernel: BatchedKernel,
        items: u64,
        stage: u32,
        shift: u32,
        half: u32,
    },
    /// The clustered stream launch: a cluster per segment.
    Cluster(C),
    /// The stream filter: a block per (list position, chunk), `items` of them, up to a wave
    /// of blocks, lowered by [`stride_coprime`] with `ctas`.
    StreamFilter { items: u64, ctas: u64 },
    /// The stream final selection: `blocks` blocks with the layout's dynamic shared memory,
    /// launched as a programmatic dependent of the filter.
    StreamFinal { blocks: u32, shared_bytes: u32 },
}

/// Plans a call on a device with `device`'s limits: `None` when it has no segment (a host
/// count of 0), so nothing is launched (a general call still reports an empty status). The one
/// error: a sorted output larger than the global sort handles.
pub(crate) fn plan(
    shape: &CallShape,
    device: &DeviceLimits,
) -> Result<Option<LaunchPlan>, KernelError> {
    let direct = shape.is_direct();
    let max_segments = shape.max_segments();
    if max_segments == 0 && shape.num_segments.is_some() {
        return Ok(None);
    }
    let largest = match shape.layout {
        LayoutShape::Listed { max_size } => shape.size_bounds.1.min(max_size),
        _ => shape.size_bounds.1.min(shape.num_keys),
    };
    let uniform_size = match shape.layout {
        LayoutShape::Strided { size, .. } => size,
        _ => None,
    };
    let stream_shape = |tiers: BatchedTiers, slots: u64| {
        let key_bytes = u64::from(shape.key_bytes());
        stream_layout(
            key_bytes,
            tiers,
            uniform_size,
            largest,
            shape.per_segment_max,
            slots,
        )
    };
    // The stream tier where its kernels fit the device, else the multi-block tier takes its
    // segments (docs/design/batched_topk.md, "Stream tier").
    let mut tiers = shape.effective_tiers();
    // The stream tier's kernels also exist for long rows a direct call splits (the launcher's
    // `split_rows`, before this plan); a call none of whose segments the tier takes skips it.
    let smallest = match shape.layout {
        LayoutShape::Strided {
            size: Some(size), ..
        } => size,
        _ => shape.size_bounds.0,
    };
    if smallest > BatchedTiers::stream_max_size(shape.key_bytes()) as u64 {
        tiers = tiers.without(BatchedTiers::STREAM);
    }
    if tiers.contains(BatchedTiers::STREAM) {
        let final_shared = stream_shape(tiers, 0).shared_bytes;
        let fits = device.fits(&shape.spec(BatchedKernel::StreamFilter), 0)
            && device.fits(&shape.spec(BatchedKernel::StreamFinal), final_shared);
        if !fits {
            tiers = tiers.without(BatchedTiers::STREAM).or(BatchedTiers::LARGE);
        }
    }
    let large = tiers.contains(BatchedTiers::LARGE);
    // Sorted sets larger than a block sorts in shared memory are sorted in global memory.
    let global_sort = large && shape.sorted && shape.per_segment_max > SORT_CAP as u64;
    let sort_span = if global_sort {
        shape.per_segment_max.next_power_of_two()
    } else {
        0
    };
    if sort_span > u64::from(u32::MAX) {
        return Err(KernelError::InvalidSpec {
            kernel: "batched_topk (several blocks per segment)".to_owned(),
            reason: format!(
                "sorted output of {} items per segment is more than the global sort handles",
                shape.per_segment_max
            ),
        });
    }
    // The several-blocks tier's scratch, per position in its bin: at most every segment, and
    // at most as many as the TotalItems guarantee leaves room for (each of its segments holds
    // more than the tiers before it take).
    let large_capacity = if direct {
        max_segments
    } else {
        let smallest = if shape.tiers.contains(BatchedTiers::BLOCK) {
            SORT_CAP as u64 + 1
        } else if shape.tiers.contains(BatchedTiers::WARP) {
            (WARP_MAX_K as u64 + 1).min(u64::from(shape.warp_items) * 32 + 1)
        } else {
            1
        };
        let smallest = smallest.max(shape.size_bounds.0).max(1);
        max_segments.min(shape.total_bounds.1 / smallest)
    };
    // The multi-block tier's chunks: CHUNK_ITEMS keys a block, halved down to MIN_CHUNK_ITEMS
    // while its grid would have fewer than LARGE_BLOCKS_TARGET blocks, so that a few long
    // segments spread over every SM (one segment of 2^20 keys: 64 blocks of 16384 -> 512 of
    // 2048; each histogram pass is latency-bound on the blocks it has).
    let (chunk_items, chunks) = if large {
        let mut chunk_items = CHUNK_ITEMS;
        while chunk_items > MIN_CHUNK_ITEMS
            && large_capacity.saturating_mul(largest.div_ceil(chunk_items)) < LARGE_BLOCKS_TARGET
        {
            chunk_items /= 2;
        }
        (chunk_items, largest.div_ceil(chunk_items).max(1))
    } else {
        (CHUNK_ITEMS, 0)
    };
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
    let stream = stream_shape(tiers, stream_slots);
    // The stream tier's segments, when all of them fit on the device at once as clusters,
    // take the one clustered launch, where the device launches clusters (sm_90) and its
    // blocks' shared memory fits ("Stream tier: clustered launch"); it needs no scratch. A
    // direct call's clusters take its segments (when they bin to the stream tier), another
    // call's the positions of the stream tier's list that the control stages made.
    let stream_clustered = stream_tier
        && shape.per_segment_max > 0
        && stream_slots > 0
        && (!direct || shape.direct_bin_is_stream(tiers, &stream));
    let cluster = stream_clustered
        .then(|| {
            let selected = shape.per_segment_max.min(STREAM_MAX_K as u64);
            cluster_layout(u64::from(shape.key_bytes()), selected)
        })
        .filter(|layout| {
            let spec = shape.spec(BatchedKernel::StreamCluster);
            device.clusters && device.fits(&spec, layout.shared_bytes)
        });
    let selected_stride = if global_sort {
        sort_span
    } else {
        shape.out_stride
    };
    Ok(Some(LaunchPlan {
        direct,
        tiers,
        flags: shape.flags(direct, global_sort),
        max_segments,
        global_sort,
        sort_span,
        chunk_items,
        chunks,
        largest,
        large_capacity,
        stream_capacity,
        stream_slots,
        stream,
        cluster,
        selected_stride,
        per_segment_max: shape.per_segment_max,
        warp_items: shape.warp_items,
    }))
}

impl LaunchPlan {
    /// Segments with multi-block scratch.
    /// The multi-block tier's chunk-count words for `segments` list positions: at least what
    /// the launches index (`segments * chunks`), sized so that it never shrinks as the segment
    /// count grows (a workspace measured for a call holds every call of fewer segments):
    /// `segments` times the full chunks, or, when smaller chunks were cut (their grid stays
    /// below twice LARGE_BLOCKS_TARGET), twice that target.
    fn chunk_count_words(&self, segments: u64) -> u64 {
        if segments == 0 {
            return 0;
        }
        let full = segments.saturating_mul(self.largest.div_ceil(CHUNK_ITEMS).max(1));
        full.max(2 * LARGE_BLOCKS_TARGET)
    }

    fn large_segments(&self) -> u64 {
        if self.tiers.contains(BatchedTiers::LARGE) {
            self.large_capacity
        } else {
            0
        }
    }

    /// The descriptors' words: none for a direct call.
    pub(crate) fn descriptor_words(&self) -> u64 {
        if self.direct {
            0
        } else {
            self.max_segments
                .saturating_mul(u64::from(SEGMENT_DESC_WORDS))
        }
    }

    /// The scratch besides the descriptors; the stream tier's is not needed when the launch is
    /// `clustered`.
    pub(crate) fn scratch(&self, clustered: bool) -> Scratch {
        let large_segments = self.large_segments();
        let stream_scratch = |words: u64| if clustered { 0 } else { words };
        let bins = if self.direct {
            0
        } else {
            self.max_segments
                .saturating_mul(2)
                .saturating_add(self.large_capacity)
                .saturating_add(self.stream_capacity)
        };
        let selected = if self.tiers.contains(BatchedTiers::LARGE) {
            large_segments.saturating_mul(self.selected_stride)
        } else {
            0
        };
        Scratch {
            bins,
            large_state: large_segments.saturating_mul(u64::from(BT_LARGE_WORDS)),
            large_histogram: large_segments.saturating_mul(u64::from(BT_BINS)),
            large_chunks: self.chunk_count_words(large_segments),
            large_selected: selected,
            large_ranks: if self.global_sort { selected } else { 0 },
            stream_ranks: stream_scratch(self.stream.rank_words),
            stream_indices: stream_scratch(self.stream.index_words),
            stream_counts: stream_scratch(self.stream.count_words),
        }
    }

    /// The launches in stream order for keys of `key_bits` bits; the stream tier takes the
    /// clustered launch when the device offers one (`cluster`, for a plan with
    /// [`LaunchPlan::cluster`]).
    pub(crate) fn steps<C>(&self, key_bits: u32, cluster: Option<C>) -> Vec<Step<C>> {
        let items =
            |kernel: BatchedKernel, items: u64, stage: u32, shift: u32, half: u32| Step::Items {
                kernel,
                items,
                stage,
                shift,
                half,
            };
        let threads = u64::from(BLOCK_THREADS);
        let control = BatchedKernel::Control;
        let mut steps = Vec::new();
        if !self.direct {
            if self.max_segments <= BT_FUSED_CONTROL_SEGMENTS {
                steps.push(items(control, threads, BT_STAGE_CONTROL, 0, 0));
            } else {
                steps.push(items(control, 1, BT_STAGE_INIT, 0, 0));
                steps.push(items(control, self.max_segments, BT_STAGE_RESOLVE, 0, 0));
                steps.push(items(control, 1, BT_STAGE_FINALIZE, 0, 0));
            }
        }
        if self.per_segment_max == 0 {
            return steps;
        }
        if self.tiers.contains(BatchedTiers::WARP) {
            let warp = BatchedKernel::Warp {
                items: self.warp_items,
            };
            let lanes = self.max_segments.saturating_mul(32);
            steps.push(items(warp, lanes, BT_STAGE_SELECT, 0, 0));
        }
        if self.tiers.contains(BatchedTiers::BLOCK) {
            let block_threads = self.max_segments.saturating_mul(threads);
            steps.push(items(
                BatchedKernel::Block,
                block_threads,
                BT_STAGE_SELECT,
                0,
                0,
            ));
        }
        if let Some(cluster) = cluster {
            steps.push(Step::Cluster(cluster));
        } else if self.tiers.contains(BatchedTiers::STREAM) {
            // The filter, a block per (list position, chunk) up to as many as are resident at
            // once (the blocks stride over the rest, so calls with more chunks than one wave,
            // which tests make, run its grid-stride path), then the final selection, a block
            // per list position.
            steps.push(Step::StreamFilter {
                items: self.stream_slots.saturating_mul(self.stream.ctas),
                ctas: self.stream.ctas,
            });
            steps.push(Step::StreamFinal {
                blocks: self.stream_slots.clamp(1, STREAM_MAX_GRID) as u32,
                shared_bytes: self.stream.shared_bytes,
            });
        }
        if self.tiers.contains(BatchedTiers::LARGE) {
            // Grids over the large bin's positions (the kernels stride over what they find).
            let large = BatchedKernel::Large;
            let segments = self.large_segments();
            let work = segments.saturating_mul(self.chunks).saturating_mul(threads);
            let bins = segments.saturating_mul(u64::from(BT_BINS));
            steps.push(items(large, bins, BT_STAGE_LARGE_INIT, 0, 0));
            for pass in 0..key_bits / 8 {
                let shift = key_bits - 8 * (pass + 1);
                // The last work item of each segment picks the pivot (BT_STAGE_LARGE_PIVOT's
                // job).
                steps.push(items(large, work, BT_STAGE_LARGE_HISTOGRAM, shift, 0));
            }
            steps.push(items(large, work, BT_STAGE_LARGE_COUNT, 0, 0));
            // A block per segment scans its chunk counts.
            let scans = segments.saturating_mul(threads);
            steps.push(items(large, scans, BT_STAGE_LARGE_SCAN, 0, 0));
            steps.push(items(large, work, BT_STAGE_LARGE_COLLECT, 0, 0));
            if self.global_sort {
                let slots = segments.saturating_mul(self.sort_span);
                steps.push(items(large, slots, BT_STAGE_LARGE_SORT_INIT, 0, 0));
                let mut size = 2u64;
                while size <= self.sort_span {
                    let mut half = size / 2;
                    while half > 0 {
                        let step = BT_STAGE_LARGE_SORT_STEP;
                        steps.push(items(large, slots, step, size as u32, half as u32));
                        half /= 2;
                    }
                    size *= 2;
                }
            }
            steps.push(items(large, work, BT_STAGE_LARGE_WRITE, 0, 0));
        }
        steps
    }
}

/// The filter's grid: `wave` blocks (at most one per item), lowered when it strides over more
/// items to the largest count coprime to `ctas`, so that block b's items b, b + grid, ... cycle
/// through the chunk numbers (item = list position x ctas + chunk) instead of repeating one.
pub(crate) fn stride_coprime(wave: u32, items: u64, ctas: u64) -> u32 {
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

#[cfg(test)]
pub(crate) mod tests;
