// Family batched_topk, TIER 4 (stream), PART 2: the final selection
// (docs/design/batched_topk.md, "Stream tier: filter and final selection").
namespace oxicub {

// The final selection (PART 2): a block per list position, 1024 threads (the selection is a
// chain of block barriers over a few thousand items: the wider the block, the shorter).
template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, class R, u32 WARPS>
__device__ __forceinline__ void bt_stream_final(const BatchedTopKParams& p,
                                                BtStreamState<R, WARPS>& s) {
    typedef typename Key::Bits Bits;
    constexpr u32 LOADS = BT_STREAM_LOADS;  // candidate loads in flight per lane
    static_assert(BT_STREAM_MAX_CTAS * BT_STREAM_FILTER_WARPS <= BLOCK_THREADS,
                  "a thread per candidate region");
    extern __shared__ __align__(16) unsigned char bt_dynamic[];
    const u32 tid = threadIdx.x;
    const u32 lane = tid & 31u;
    const u32 warp = tid >> 5;
    const u32 ctas = (u32)p.stream_ctas;
    const u32 chunk = (u32)p.stream_chunk;
    const u32 capacity = (u32)p.stream_candidates;  // a segment's slots: regions x capacity
    const u32 total_cap = (u32)p.stream_total;      // on chip
    R* cand_ranks = reinterpret_cast<R*>(bt_dynamic);
    u32* cand_indices = reinterpret_cast<u32*>(bt_dynamic + (u64)total_cap * sizeof(R));
    const u32 copy_cap = (u32)p.stream_sorted_cap;
    R* copy_ranks = reinterpret_cast<R*>(bt_dynamic + p.stream_sorted_offset);
    u32* copy_indices =
        reinterpret_cast<u32*>(bt_dynamic + p.stream_sorted_offset + (u64)copy_cap * sizeof(R));
    u32* starts = reinterpret_cast<u32*>(bt_dynamic + p.stream_bins_offset);
    u32* fill = starts + BT_STARTS_WORDS;
    u32* index_buffer = reinterpret_cast<u32*>(bt_dynamic + p.stream_index_offset);
    R* rank_buffer = reinterpret_cast<R*>(bt_dynamic + p.stream_rank_offset);
    u64* sort_region = reinterpret_cast<u64*>(bt_dynamic);
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    for (u32 b = tid; b < BT_BINS; b += BLOCK_THREADS) {
        s.histogram[b] = 0;
    }
#if __CUDA_ARCH__ >= 900
    // Launched as a programmatic dependent of the filter: wait for its completion (and its
    // writes) before reading them.
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    const u64 slots = bt_bin_count(p, BT_TIER_STREAM);
    __syncthreads();
    for (u64 slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        const u64 seg = bt_bin_segment(p, BT_TIER_STREAM, slot);
        u64 begin, size64, written64;
        u32 dir;
        if (!bt_descriptor(p, seg, BT_TIER_STREAM, &begin, &size64, &written64, &dir)) {
            continue;  // block-uniform
        }
        const u32 size = (u32)size64;
        const u32 written = (u32)written64;
        // The regions of the chunks the filter ran, in (chunk, warp) order = index order.
        const u32 regions = bt_stream_regions(size, chunk);
        const u64 first_region = slot * ctas * BT_STREAM_FILTER_WARPS;
        // Thread r < regions reads region r's record: its counts and its ranks' range.
        u32 count = 0;
        u32 region_slots = 0;
        u32 region_first = 0;  // its first slot
        R low = ~(R)0;
        R high = 0;
        u32 reached = 0;
        if (tid < regions) {
            const u64* record = reinterpret_cast<const u64*>(p.stream_counts) +
                (first_region + tid) * BT_STREAM_RECORD_WORDS;
            const u64 counts = record[0];
            const u64 reach = record[3];
            count = (u32)counts;
            region_slots = (u32)(counts >> 32);
            low = (R)record[1];
            high = (R)record[2];
            reached = (u32)reach;
            region_first = (u32)(reach >> 32);
        }
        // The bucket path's counters, cleared here to save it barriers.
        for (u32 b = tid; b < BT_BUCKETS; b += BLOCK_THREADS) {
            fill[b] = 0;
        }
        if (tid == 0) {
            s.work = 0;
            s.reached = 0;
            s.range_lo = ~(R)0;
            s.range_hi = 0;
        }
        const bool overflow = __syncthreads_or(count > region_slots) != 0;
        warp_range(low, high);
        reached = warp_sum(reached);
        if (lane == 0 && warp * 32u < regions) {
            atomicMin(&s.range_lo, low);
            atomicMax(&s.range_hi, high);
            atomicAdd(&s.reached, reached);
        }
        // One scan for the regions' places on chip and their copy tasks (BT_STREAM_TASK
        // candidates each): kept candidates below bit 20 (at most 4 x 8192 in all: the host's
        // slots), tasks above.
        const u32 kept = min(count, region_slots);
        const u32 tasks = (kept + BT_STREAM_TASK - 1u) / BT_STREAM_TASK;
        u32 all = 0;
        const u32 at =
            block_exclusive_sum<BLOCK_THREADS>(kept | tasks << 20, s.warp_totals, &all);
        const u32 n = all & 0xFFFFFu;
        const u32 task_count = all >> 20;
        if (tid < regions) {
            const u32 to = at & 0xFFFFFu;
            const u32 from = region_first;
            for (u32 i = 0, t = at >> 20; i < tasks && t < BT_STREAM_MAX_TASKS; ++i, ++t) {
                const u32 base = i * BT_STREAM_TASK;
                s.copy_task[t] = make_uint4(to + base, min(kept - base, BT_STREAM_TASK),
                                            from + base, 0u);
            }
        }
        __syncthreads();
        // The candidates hold the k best (and every tie of the k-th) when at least `written`
        // of them reach the threshold: every key that does is a candidate. (The task bound
        // follows from n <= total_cap, the host's on-chip budget; checked all the same.)
        const bool complete = !overflow && s.reached >= written && n <= total_cap &&
            task_count <= BT_STREAM_MAX_TASKS;
        const u64 out_base = seg * p.out_stride;
        if (complete) {
            // Warp w copies tasks w, w + WARPS, ... (up to BT_STREAM_TASK candidates of a region
            // each) to their places (region order = index order) and counts each candidate in
            // its bucket. (A warp per region left the few regions that hold most of the
            // candidates of sorted or clustered rows to one warp each, a load round trip per 128
            // of them; docs/design/batched_topk.md,
            // "Stream tier: filter and final selection".)
            const BtBuckets<R> bucket(s.range_lo, s.range_hi);
            const R* in_ranks = reinterpret_cast<const R*>(p.stream_ranks) +
                first_region * capacity;  // the segment's first slot
            const u32* in_indices = reinterpret_cast<const u32*>(p.stream_indices) +
                first_region * capacity;
            for (u32 t = warp; t < task_count; t += WARPS) {
                const uint4 task = s.copy_task[t];  // to, count, from
                R rk[LOADS];
                u32 x[LOADS];
#pragma unroll
                for (u32 u = 0; u < LOADS; ++u) {
                    const u32 j = u * 32u + lane;
                    if (j < task.y) {
                        rk[u] = in_ranks[task.z + j];
                        x[u] = in_indices[task.z + j];
                    }
                }
#pragma unroll
                for (u32 u = 0; u < LOADS; ++u) {
                    const u32 j = u * 32u + lane;
                    if (j < task.y) {
                        cand_ranks[task.x + j] = rk[u];
                        cand_indices[task.x + j] = x[u];
                        atomicAdd(&fill[bucket(rk[u])], 1u);
                    }
                }
            }
            __syncthreads();
            const bool done = bt_bucket_select<Key, R, BLOCK_THREADS, VALUE_BYTES>(
                p, cand_ranks, cand_indices, n, written, begin, dir, out_base, s, bucket,
                copy_ranks, copy_indices, copy_cap, starts, fill);
            if (!done) {
                const BtSharedItems<R> items{cand_ranks, cand_indices};
                bt_stream_exact<Key, R, BLOCK_THREADS, VALUE_BYTES>(
                    p, items, n, written, begin, dir, out_base, s, index_buffer, rank_buffer,
                    sort_region);
            }
        } else {
            const BtGlobalItems<Key, R> items{keys + begin, dir};
            bt_stream_exact<Key, R, BLOCK_THREADS, VALUE_BYTES>(
                p, items, size, written, begin, dir, out_base, s, index_buffer, rank_buffer,
                sort_region);
        }
        __syncthreads();
    }
}

}  // namespace oxicub
