// Family batched_topk, TIER 3: several blocks per segment, radix select over the segment
// (docs/design/batched_topk.md, "Multi-block tier").
namespace oxicub {

//
// Per segment, in global memory: `large_state` (BT_LARGE_WORDS u64: prefix, mask, remaining,
// done, boundary total, collected count), `large_histogram` (256 u64, cleared per pass), and
// per chunk of the segment the boundary count, then its exclusive prefix (`large_chunks`,
// chunks_per_segment u64). `large_selected` holds, per segment, the indices of the `written`
// selected items (out_stride entries per segment).
//   LARGE_INIT       one thread per segment: state reset (remaining = written).
//   LARGE_HISTOGRAM  grid (segment, chunk): histogram of digit `shift` over the candidates.
//   LARGE_PIVOT      one thread per segment: the pivot digit; narrows prefix/mask; early exit.
//   LARGE_COUNT      grid (segment, chunk): boundary items of the chunk.
//   LARGE_SCAN       a block per segment: exclusive scan of the chunk counts.
//   LARGE_COLLECT    grid (segment, chunk): items above the boundary (any order, by atomics)
//                    and the boundary items the tie-break keeps (by their boundary rank, in
//                    index order) into large_selected.
//   LARGE_SORT_INIT  (sorted output of sets larger than SORT_CAP) one thread per (segment,
//                    slot of sort_span): the rank of each selected item, padding past `written`.
//   LARGE_SORT_STEP  one compare-exchange step (size = shift, half = half) of a bitonic sort
//                    of every segment's sort_span slots in global memory, by (key, index).
//   LARGE_WRITE      a block per segment: sorts the selected indices (by key, then index) in
//                    shared memory when they fit (written <= SORT_CAP) and the output is
//                    sorted, unless they were sorted in global memory; writes the outputs.
constexpr u32 BT_L_PREFIX = 0;
constexpr u32 BT_L_MASK = 1;
constexpr u32 BT_L_REMAINING = 2;
constexpr u32 BT_L_DONE = 3;
constexpr u32 BT_L_BOUNDARY = 4;
constexpr u32 BT_L_ABOVE = 5;
constexpr u32 BT_L_ARRIVED = 6;  // histogram work items of this pass that have finished
static_assert(BT_L_ARRIVED < BT_LARGE_WORDS, "the state words fit a segment's BT_LARGE_WORDS");

// The pivot digit of pass `p.shift` from a segment's merged histogram, by the whole block
// (thread b looks at digit 255 - b, so an inclusive scan in thread order counts the items at
// or above each digit); clears the histogram for the next pass. Every thread of the block
// calls it.
template <u32 BLOCK_THREADS>
__device__ __forceinline__ void bt_large_pivot(const BatchedTopKParams& p, u64* state,
                                               u64* histogram, u64* warp_sums) {
    static_assert(BLOCK_THREADS == BT_BINS, "one thread per bin");
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    const u32 digit = BT_BINS - 1u - threadIdx.x;
    const u64 c = __ldcg(&histogram[digit]);
    histogram[digit] = 0;
    const u64 x = warp_inclusive_sum(c);
    if (lane == 31u) {
        warp_sums[warp] = x;
    }
    const u64 remaining = __ldcg(&state[BT_L_REMAINING]);
    __syncthreads();
    u64 below = 0;
    for (u32 w = 0; w < warp; ++w) {
        below += warp_sums[w];
    }
    const u64 at_or_above = x + below;
    const u64 above = at_or_above - c;
    if (above < remaining && at_or_above >= remaining) {
        // Exactly one digit: the largest with above + c >= remaining.
        const u64 left = remaining - above;
        state[BT_L_REMAINING] = left;
        state[BT_L_PREFIX] = __ldcg(&state[BT_L_PREFIX]) | ((u64)digit << p.shift);
        state[BT_L_MASK] = __ldcg(&state[BT_L_MASK]) | ((u64)(BT_BINS - 1) << p.shift);
        if (c == left || p.shift == 0) {
            state[BT_L_DONE] = 1;
        }
    }
    __syncthreads();
}

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int SORT_CAP>
__device__ __forceinline__ void bt_large(const BatchedTopKParams& p) {
    typedef typename Key::Bits Bits;
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    const u64 count = bt_bin_count(p, BT_TIER_LARGE);  // scratch is per position `slot`
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    u64* state_all = reinterpret_cast<u64*>(p.large_state);
    u64* histogram_all = reinterpret_cast<u64*>(p.large_histogram);
    u64* chunks_all = reinterpret_cast<u64*>(p.large_chunks);
    u64* selected_all = reinterpret_cast<u64*>(p.large_selected);
    u64* sort_ranks_all = reinterpret_cast<u64*>(p.large_ranks);
    const u64 chunks = p.chunks_per_segment;
    const u64 chunk_items = p.chunk_items;

    if (p.stage == BT_STAGE_LARGE_SORT_INIT || p.stage == BT_STAGE_LARGE_SORT_STEP) {
        // One thread per (segment, slot) of the global sort.
        const u64 span = p.sort_span;
        const u64 items = count * span;
        const u64 stride = grid_threads(BLOCK_THREADS);
        for (u64 e = global_thread_index(BLOCK_THREADS); e < items; e += stride) {
            const u64 slot = e / span;
            const u64 seg = bt_bin_segment(p, BT_TIER_LARGE, slot);
            const u64 i = e % span;
            u64 begin, size, written;
            u32 dir;
            if (!bt_descriptor(p, seg, BT_TIER_LARGE, &begin, &size, &written, &dir)) {
                continue;
            }
            u64* selected = selected_all + slot * p.selected_stride;
            u64* sort_ranks = sort_ranks_all + slot * span;
            if (p.stage == BT_STAGE_LARGE_SORT_INIT) {
                if (i < written) {
                    sort_ranks[i] = bt_rank<Key>(keys[begin + selected[i]], dir);
                } else {
                    sort_ranks[i] = 0;
                    selected[i] = BT_PAD;
                }
                continue;
            }
            const u64 partner = i ^ (u64)p.half;
            if (partner > i) {
                const bool best_first = (i & (u64)p.shift) == 0;
                const u64 ra = sort_ranks[i], ia = selected[i];
                const u64 rb = sort_ranks[partner], ib = selected[partner];
                const bool swap = best_first ? bt_better(rb, ib, ra, ia, false)
                                             : bt_better(ra, ia, rb, ib, false);
                if (swap) {
                    sort_ranks[i] = rb;
                    selected[i] = ib;
                    sort_ranks[partner] = ra;
                    selected[partner] = ia;
                }
            }
        }
        return;
    }

    if (p.stage == BT_STAGE_LARGE_INIT) {
        // One thread per (segment, bin): clears the bin; the first few also reset the state.
        const u64 stride = grid_threads(BLOCK_THREADS);
        for (u64 e = global_thread_index(BLOCK_THREADS); e < count * BT_BINS; e += stride) {
            const u64 slot = e / BT_BINS;
            const u64 seg = bt_bin_segment(p, BT_TIER_LARGE, slot);
            const u32 b = (u32)(e % BT_BINS);
            u64 begin, size, written;
            u32 dir;
            if (!bt_descriptor(p, seg, BT_TIER_LARGE, &begin, &size, &written, &dir)) {
                continue;
            }
            histogram_all[slot * BT_BINS + b] = 0;
            u64* state = state_all + slot * BT_LARGE_WORDS;
            if (b < BT_LARGE_WORDS) {
                u64 v = 0;
                if (b == BT_L_REMAINING) {
                    v = written;
                } else if (b == BT_L_DONE) {
                    v = written == size ? 1 : 0;
                }
                state[b] = v;
            }
        }
        return;
    }
    if (p.stage == BT_STAGE_LARGE_INIT || p.stage == BT_STAGE_LARGE_PIVOT) {
        // One thread per segment.
        const u64 stride = grid_threads(BLOCK_THREADS);
        for (u64 slot = global_thread_index(BLOCK_THREADS); slot < count; slot += stride) {
            const u64 seg = bt_bin_segment(p, BT_TIER_LARGE, slot);
            u64 begin, size, written;
            u32 dir;
            if (!bt_descriptor(p, seg, BT_TIER_LARGE, &begin, &size, &written, &dir)) {
                continue;
            }
            u64* state = state_all + slot * BT_LARGE_WORDS;
            u64* histogram = histogram_all + slot * BT_BINS;
            if (p.stage == BT_STAGE_LARGE_INIT) {
                state[BT_L_PREFIX] = 0;
                state[BT_L_MASK] = 0;
                state[BT_L_REMAINING] = written;
                state[BT_L_DONE] = written == size ? 1 : 0;
                state[BT_L_BOUNDARY] = 0;
                state[BT_L_ABOVE] = 0;
                state[BT_L_ARRIVED] = 0;
                for (u32 b = 0; b < BT_BINS; ++b) {
                    histogram[b] = 0;
                }
            } else {
                if (state[BT_L_DONE] != 0) {
                    continue;
                }
                u64 remaining = state[BT_L_REMAINING];
                u64 above = 0;
                u32 pivot = 0;
                for (int digit = (int)BT_BINS - 1; digit >= 0; --digit) {
                    const u64 c = histogram[digit];
                    if (above + c >= remaining) {
                        pivot = (u32)digit;
                        break;
                    }
                    above += c;
                }
                remaining -= above;
                state[BT_L_REMAINING] = remaining;
                state[BT_L_PREFIX] |= (u64)pivot << p.shift;
                state[BT_L_MASK] |= (u64)(BT_BINS - 1) << p.shift;
                if (histogram[pivot] == remaining || p.shift == 0) {
                    state[BT_L_DONE] = 1;
                }
                for (u32 b = 0; b < BT_BINS; ++b) {
                    histogram[b] = 0;
                }
            }
        }
        return;
    }

    // Grid-stride over (segment, chunk) work items; one block per work item at a time.
    __shared__ u32 block_counts[BT_BINS];
    __shared__ u32 warp_totals[BLOCK_THREADS / 32];
    __shared__ u64 chunk_base;
    __shared__ u32 last_arrival;
    __shared__ u64 warp_sums[BLOCK_THREADS / 32];
    if (p.stage == BT_STAGE_LARGE_SCAN) {
        // A block per segment: the exclusive scan of its chunk boundary counts, BLOCK_THREADS
        // chunks at a time (a single segment is cut into hundreds of small chunks).
        for (u64 slot = blockIdx.x; slot < count; slot += gridDim.x) {
            const u64 seg = bt_bin_segment(p, BT_TIER_LARGE, slot);
            u64 begin, size, written;
            u32 dir;
            if (!bt_descriptor(p, seg, BT_TIER_LARGE, &begin, &size, &written, &dir)) {
                continue;  // block-uniform
            }
            u64* chunk_counts = chunks_all + slot * chunks;
            u64 running = 0;
            for (u64 c0 = 0; c0 < chunks; c0 += BLOCK_THREADS) {
                const u64 c = c0 + threadIdx.x;
                const u64 v = c < chunks ? chunk_counts[c] : 0;
                u64 tile = 0;
                const u64 below = block_exclusive_sum<BLOCK_THREADS>(v, warp_sums, &tile);
                if (c < chunks) {
                    chunk_counts[c] = running + below;
                }
                running += tile;
            }
            if (threadIdx.x == 0) {
                state_all[slot * BT_LARGE_WORDS + BT_L_BOUNDARY] = running;
            }
        }
        return;
    }
    const u64 work_items = count * chunks;
    for (u64 work = blockIdx.x; work < work_items; work += gridDim.x) {
        const u64 slot = work / chunks;
        const u64 seg = bt_bin_segment(p, BT_TIER_LARGE, slot);
        const u64 chunk = work % chunks;
        u64 begin, size, written;
        u32 dir;
        if (!bt_descriptor(p, seg, BT_TIER_LARGE, &begin, &size, &written, &dir)) {
            continue;  // block-uniform
        }
        if (p.stage == BT_STAGE_LARGE_WRITE) {
            if (chunk != 0) {
                continue;
            }
            // Sort the selected indices of the segment, then write.
            __shared__ u64 ranks[SORT_CAP];
            __shared__ u64 indices[SORT_CAP];
            const u64* selected = selected_all + slot * p.selected_stride;
            const bool sorted = (p.flags & BT_SORTED) != 0;
            if (sizeof(Bits) <= 4 && sorted && size <= 0xFFFFFFFFull &&
                written <= (u64)SORT_CAP && (p.flags & BT_GLOBAL_SORT) == 0) {
                // (rank << 32 | ~index): one u64 per item, best first = by key, then by index.
                const u32 n = pow2_at_least(written);
                for (u32 j = threadIdx.x; j < n; j += BLOCK_THREADS) {
                    u64 packed = 0;
                    if ((u64)j < written) {
                        const u64 index = selected[j];
                        const u64 rank = bt_rank<Key>(keys[begin + index], dir);
                        packed = (rank << 32) | (u64)(0xFFFFFFFFu - (u32)index);
                    }
                    ranks[j] = packed;
                }
                __syncthreads();
                block_sort_keys<BLOCK_THREADS>(ranks, n, KeysDescending{});
                for (u32 j = threadIdx.x; (u64)j < written; j += BLOCK_THREADS) {
                    const u64 index = (u64)(0xFFFFFFFFu - (u32)ranks[j]);
                    bt_write<Key, VALUE_BYTES>(p, begin, index, seg * p.out_stride + j);
                }
                __syncthreads();
            } else if (written <= (u64)SORT_CAP && (p.flags & BT_GLOBAL_SORT) == 0) {
                const u32 n = pow2_at_least(written);
                for (u32 j = threadIdx.x; j < n; j += BLOCK_THREADS) {
                    const bool item = (u64)j < written;
                    const u64 index = item ? selected[j] : BT_PAD;
                    ranks[j] = item ? bt_rank<Key>(keys[begin + index], dir) : 0;
                    indices[j] = index;
                }
                __syncthreads();
                if (sorted) {
                    block_sort_pairs<BLOCK_THREADS>(ranks, indices, n, BtSelectionOrder{false});
                }
                for (u32 j = threadIdx.x; (u64)j < written; j += BLOCK_THREADS) {
                    bt_write<Key, VALUE_BYTES>(p, begin, indices[j], seg * p.out_stride + j);
                }
                __syncthreads();
            } else {
                // Sorted in global memory already, or unsorted output: as they are.
                for (u64 j = threadIdx.x; j < written; j += BLOCK_THREADS) {
                    bt_write<Key, VALUE_BYTES>(p, begin, selected[j], seg * p.out_stride + j);
                }
            }
            continue;
        }
        u64* state = state_all + slot * BT_LARGE_WORDS;
        if (p.stage == BT_STAGE_LARGE_HISTOGRAM && state[BT_L_DONE] != 0) {
            continue;
        }
        const u64 prefix = state[BT_L_PREFIX];
        const u64 mask = state[BT_L_MASK];
        const u64 lo = chunk * chunk_items;
        const u64 hi = lo + chunk_items < size ? lo + chunk_items : size;
        if (p.stage == BT_STAGE_LARGE_HISTOGRAM) {
            for (u32 b = threadIdx.x; b < BT_BINS; b += BLOCK_THREADS) {
                block_counts[b] = 0;
            }
            __syncthreads();
            // Four independent loads in flight per thread.
            for (u64 j0 = lo + threadIdx.x; j0 < hi; j0 += 4ull * BLOCK_THREADS) {
                Bits raw[4];
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const u64 j = j0 + (u64)u * BLOCK_THREADS;
                    raw[u] = j < hi ? keys[begin + j] : (Bits)0;
                }
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const u64 rank = bt_rank<Key>(raw[u], dir);
                    if (j0 + (u64)u * BLOCK_THREADS < hi && (rank & mask) == prefix) {
                        atomicAdd(&block_counts[(u32)(rank >> p.shift) & (BT_BINS - 1)], 1u);
                    }
                }
            }
            __syncthreads();
            u64* histogram = histogram_all + slot * BT_BINS;
            for (u32 b = threadIdx.x; b < BT_BINS; b += BLOCK_THREADS) {
                if (block_counts[b] != 0) {
                    atomicAdd(&histogram[b], (u64)block_counts[b]);
                }
            }
            // The last work item of the segment to finish picks the pivot (no separate launch).
            __threadfence();
            __syncthreads();
            if (threadIdx.x == 0) {
                const u64 arrived = atomicAdd(&state[BT_L_ARRIVED], 1ull);
                last_arrival = arrived + 1 == chunks ? 1u : 0u;
            }
            __syncthreads();
            if (last_arrival != 0) {
                __threadfence();
                if (threadIdx.x == 0) {
                    state[BT_L_ARRIVED] = 0;
                }
                bt_large_pivot<BLOCK_THREADS>(p, state, histogram, warp_sums);
            }
            __syncthreads();
            continue;
        }
        // LARGE_COUNT / LARGE_COLLECT: tiles of BLOCK_THREADS items in index order.
        u64* chunk_slot = chunks_all + slot * chunks + chunk;
        const u64 remaining = state[BT_L_REMAINING];
        const u64 boundary_total = state[BT_L_BOUNDARY];
        u64* selected = selected_all + slot * p.selected_stride;
        if (p.stage == BT_STAGE_LARGE_COUNT ||
            (p.stage == BT_STAGE_LARGE_COLLECT && boundary_total == remaining)) {
            // COUNT: the chunk's boundary items (no order needed). COLLECT when every boundary
            // item is kept: every item at or above the boundary, in any order (the output is
            // sorted by key and index afterwards, or unsorted).
            const bool count_only = p.stage == BT_STAGE_LARGE_COUNT;
            const u32 lane = threadIdx.x & 31u;
            u32 counted = 0;
            for (u64 j0 = lo + (threadIdx.x & ~31u) * 4ull; j0 < hi; j0 += 4ull * BLOCK_THREADS) {
                // Each warp takes 4 x 32 consecutive items; four loads in flight per thread.
                Bits raw[4];
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const u64 j = j0 + 32ull * (u64)u + lane;
                    raw[u] = j < hi ? keys[begin + j] : (Bits)0;
                }
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const u64 j = j0 + 32ull * (u64)u + lane;
                    const u64 rank = bt_rank<Key>(raw[u], dir);
                    const bool valid = j < hi;
                    if (count_only) {
                        counted += (valid && (rank & mask) == prefix) ? 1u : 0u;
                        continue;
                    }
                    const bool take = valid && (rank & mask) >= prefix;
                    const u64 at = warp_append(take, &state[BT_L_ABOVE]);
                    if (take) {
                        selected[at] = j;
                    }
                }
            }
            if (count_only) {
                if (threadIdx.x == 0) {
                    block_counts[0] = 0;
                }
                __syncthreads();
#if __CUDA_ARCH__ >= 800
                counted = __reduce_add_sync(0xFFFFFFFFu, counted);
#else
                for (int offset = 16; offset > 0; offset >>= 1) {
                    counted += __shfl_xor_sync(0xFFFFFFFFu, counted, offset);
                }
#endif
                if (lane == 0 && counted != 0) {
                    atomicAdd(&block_counts[0], counted);
                }
                __syncthreads();
                if (threadIdx.x == 0) {
                    *chunk_slot = block_counts[0];
                }
            }
            __syncthreads();
            continue;
        }
        if (threadIdx.x == 0) {
            chunk_base = p.stage == BT_STAGE_LARGE_COLLECT ? *chunk_slot : 0;
        }
        __syncthreads();
        u64 boundary_before = chunk_base;  // boundary items before this tile, in the segment
        for (u64 tile = lo; tile < hi; tile += BLOCK_THREADS) {
            const u64 j = tile + threadIdx.x;
            const bool valid = j < hi;
            const u64 rank = valid ? bt_rank<Key>(keys[begin + j], dir) : 0;
            const bool boundary = valid && (rank & mask) == prefix;
            u32 total = 0;
            const u32 below = block_flag_scan<BLOCK_THREADS>(boundary, warp_totals, &total);
            if (p.stage == BT_STAGE_LARGE_COLLECT) {
                const bool above = valid && (rank & mask) > prefix;
                const u64 at = warp_append(above, &state[BT_L_ABOVE]);
                if (above) {
                    selected[at] = j;
                }
                if (boundary) {
                    const u64 boundary_rank = boundary_before + below;
                    const u64 above_total = written - remaining;
                    if (prefer_larger) {
                        if (boundary_rank + remaining >= boundary_total) {
                            selected[above_total + boundary_rank - (boundary_total - remaining)] = j;
                        }
                    } else if (boundary_rank < remaining) {
                        selected[above_total + boundary_rank] = j;
                    }
                }
            }
            boundary_before += total;
        }
        if (p.stage == BT_STAGE_LARGE_COUNT && threadIdx.x == 0) {
            *chunk_slot = boundary_before;
        }
        __syncthreads();
    }
}

}  // namespace oxicub
