// Family topk_radix_select: single-problem top-k by MSB-first radix select, as a sequence of
// stages of one kernel, launched back to back on one stream with no host round trip. All pass
// state lives in a small device array (`state`, u64 slots below). The rank of a key is its radix
// code XOR `flip` (all ones for min, zero for max), so a larger rank is always better.
//
// Stages (params.stage):
//   INIT              one thread: read k (host value or deferred pointer, clamped), reset state.
//   HISTOGRAM         per-block shared histogram of digit (rank >> shift) & 255 over candidates
//                     ((rank & mask) == prefix), merged into histogram[pass] with atomics.
//   PIVOT             one thread: scan the histogram from the best digit down, find the pivot
//                     bucket, narrow (prefix, mask), update `remaining`; early exit (done) when
//                     the pivot bucket's count equals `remaining`, or after the last digit.
//   COUNT_BOUNDARY    per tile: number of boundary items ((rank & mask) == prefix).
//   SCAN              one block: exclusive scan of per-tile counts in place; total -> state.
//   COUNT_SELECTED    per tile: number of selected items (above the boundary, or boundary items
//                     kept by the tie-break from their boundary rank in source-index order).
//   SCATTER_SELECTED  per tile: stable compaction of the selected items into the outputs, in
//                     source-index order.
//   COUNT_SPLIT       per tile over the selected items: number with rank bit `shift` set.
//   SCATTER_SPLIT     stable split by that bit (set first); one LSD pass of the sort of the k
//                     results (by rank, descending; equal ranks stay in source-index order).
// Every per-tile stage is a block-uniform loop over tiles of BLOCK_THREADS items (one per
// thread), with 64-bit indices. Counts per tile fit in 32 bits; offsets and totals are 64-bit.
namespace oxicub {

enum TopKStage {
    TOPK_INIT = 0,
    TOPK_HISTOGRAM = 1,
    TOPK_PIVOT = 2,
    TOPK_COUNT_BOUNDARY = 3,
    TOPK_SCAN = 4,
    TOPK_COUNT_SELECTED = 5,
    TOPK_SCATTER_SELECTED = 6,
    TOPK_COUNT_SPLIT = 7,
    TOPK_SCATTER_SPLIT = 8
};

enum TopKSlot {
    TOPK_SLOT_K = 0,
    TOPK_SLOT_PREFIX = 1,
    TOPK_SLOT_MASK = 2,
    TOPK_SLOT_REMAINING = 3,
    TOPK_SLOT_DONE = 4,
    TOPK_SLOT_BOUNDARY = 5,
    TOPK_SLOT_SELECTED = 6,
    TOPK_SLOT_ONES = 7
};

// params.flags
constexpr u32 TOPK_PREFER_LARGER = 1u;    // keep the boundary items with the larger indices
constexpr u32 TOPK_VALUES_ARE_INDEX = 2u; // write source indices instead of reading values
constexpr u32 TOPK_SOURCE_IS_TMP = 4u;    // split: read tmp_*, write out_* (else the reverse)
constexpr u32 TOPK_LEN_IS_SELECTED = 8u;  // the stage runs over the selected items
constexpr u32 TOPK_SCAN_BOUNDARY = 16u;   // scan: the boundary tile counts (else the other)

constexpr u32 TOPK_DIGIT_BITS = 8;
constexpr u32 TOPK_BINS = 1u << TOPK_DIGIT_BITS;

template <int VALUE_BYTES> struct TopKPayload { typedef u32 Type; };
template <> struct TopKPayload<8> { typedef u64 Type; };

// Exclusive scan of 0/1 flags over the block; every thread of the block must call it.
template <u32 BLOCK_THREADS>
__device__ __forceinline__ u32 topk_block_flag_scan(bool flag, u32* warp_totals, u32* total) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    const u32 ballot = __ballot_sync(0xFFFFFFFFu, flag);
    const u32 below = __popc(ballot & ((1u << lane) - 1u));
    if (lane == 0) {
        warp_totals[warp] = __popc(ballot);
    }
    __syncthreads();
    u32 offset = 0;
    u32 sum = 0;
    for (u32 w = 0; w < BLOCK_THREADS / 32; ++w) {
        const u32 t = warp_totals[w];
        offset += (w < warp) ? t : 0u;
        sum += t;
    }
    __syncthreads();
    *total = sum;
    return offset + below;
}

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES>
__device__ __forceinline__ void topk_radix_select(const TopKRadixSelectParams& params) {
    typedef typename Key::Bits Bits;
    typedef typename TopKPayload<VALUE_BYTES>::Type Payload;
    static_assert(BLOCK_THREADS % 32 == 0 && BLOCK_THREADS >= TOPK_BINS, "block size");

    __shared__ u32 block_counts[TOPK_BINS];
    __shared__ u32 warp_totals[BLOCK_THREADS / 32];
    __shared__ u64 scan_buffer[BLOCK_THREADS];

    u64* state = reinterpret_cast<u64*>(params.state);
    const Bits flip = (Bits)params.flip;
    const u32 stage = params.stage;

    if (stage == TOPK_INIT) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            u64 k = params.k_value;
            if (params.k_pointer != 0) {
                const i64 deferred = *reinterpret_cast<const i64*>(params.k_pointer);
                const i64 lo = (i64)params.k_min;
                const i64 hi = (i64)params.k_max;
                k = (u64)(deferred < lo ? lo : (deferred > hi ? hi : deferred));
            }
            if (k > params.len) {
                k = params.len;
            }
            state[TOPK_SLOT_K] = k;
            state[TOPK_SLOT_PREFIX] = 0;
            state[TOPK_SLOT_MASK] = 0;
            state[TOPK_SLOT_REMAINING] = k;
            state[TOPK_SLOT_DONE] = (k == 0 || k == params.len) ? 1 : 0;
            state[TOPK_SLOT_BOUNDARY] = 0;
            state[TOPK_SLOT_SELECTED] = 0;
            state[TOPK_SLOT_ONES] = 0;
        }
        return;
    }

    const Bits* keys = reinterpret_cast<const Bits*>(params.keys);
    u64* histogram = reinterpret_cast<u64*>(params.histogram);

    if (stage == TOPK_HISTOGRAM) {
        if (state[TOPK_SLOT_DONE] != 0) {
            return;  // block-uniform: every thread reads the same value
        }
        const u64 prefix = state[TOPK_SLOT_PREFIX];
        const u64 mask = state[TOPK_SLOT_MASK];
        for (u32 bin = threadIdx.x; bin < TOPK_BINS; bin += BLOCK_THREADS) {
            block_counts[bin] = 0;
        }
        __syncthreads();
        const u64 stride = grid_threads(BLOCK_THREADS);
        for (u64 i = global_thread_index(BLOCK_THREADS); i < params.len; i += stride) {
            const u64 rank = (u64)(Bits)(Key::to_radix(keys[i]) ^ flip);
            if ((rank & mask) == prefix) {
                atomicAdd(&block_counts[(u32)(rank >> params.shift) & (TOPK_BINS - 1)], 1u);
            }
        }
        __syncthreads();
        u64* pass_histogram = histogram + (u64)params.pass * TOPK_BINS;
        for (u32 bin = threadIdx.x; bin < TOPK_BINS; bin += BLOCK_THREADS) {
            const u32 count = block_counts[bin];
            if (count != 0) {
                atomicAdd(&pass_histogram[bin], (u64)count);
            }
        }
        return;
    }

    if (stage == TOPK_PIVOT) {
        if (blockIdx.x == 0 && threadIdx.x == 0 && state[TOPK_SLOT_DONE] == 0) {
            const u64* pass_histogram = histogram + (u64)params.pass * TOPK_BINS;
            u64 remaining = state[TOPK_SLOT_REMAINING];
            u64 above = 0;
            u32 pivot = 0;
            for (int digit = (int)TOPK_BINS - 1; digit >= 0; --digit) {
                const u64 count = pass_histogram[digit];
                if (above + count >= remaining) {
                    pivot = (u32)digit;
                    break;
                }
                above += count;
            }
            remaining -= above;
            state[TOPK_SLOT_REMAINING] = remaining;
            state[TOPK_SLOT_PREFIX] |= (u64)pivot << params.shift;
            state[TOPK_SLOT_MASK] |= (u64)(TOPK_BINS - 1) << params.shift;
            if (pass_histogram[pivot] == remaining || params.shift == 0) {
                state[TOPK_SLOT_DONE] = 1;
            }
        }
        return;
    }

    u64* tile_offsets = reinterpret_cast<u64*>(params.tile_offsets);
    u64* boundary_offsets = reinterpret_cast<u64*>(params.boundary_offsets);
    const u64 len =
        (params.flags & TOPK_LEN_IS_SELECTED) ? state[TOPK_SLOT_SELECTED] : params.len;
    const u64 num_tiles = (len + BLOCK_THREADS - 1) / BLOCK_THREADS;

    if (stage == TOPK_SCAN) {
        if (blockIdx.x != 0) {
            return;
        }
        u64* counts = (params.flags & TOPK_SCAN_BOUNDARY) ? boundary_offsets : tile_offsets;
        u64 running = 0;
        for (u64 base = 0; base < num_tiles; base += BLOCK_THREADS) {
            const u64 t = base + threadIdx.x;
            const u64 value = t < num_tiles ? counts[t] : 0;
            scan_buffer[threadIdx.x] = value;
            __syncthreads();
            for (u32 offset = 1; offset < BLOCK_THREADS; offset <<= 1) {
                const u64 add = threadIdx.x >= offset ? scan_buffer[threadIdx.x - offset] : 0;
                __syncthreads();
                scan_buffer[threadIdx.x] += add;
                __syncthreads();
            }
            if (t < num_tiles) {
                counts[t] = running + scan_buffer[threadIdx.x] - value;
            }
            running += scan_buffer[BLOCK_THREADS - 1];
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            state[params.scan_slot] = running;
        }
        return;
    }

    if (stage == TOPK_COUNT_BOUNDARY || stage == TOPK_COUNT_SELECTED ||
        stage == TOPK_SCATTER_SELECTED) {
        const u64 prefix = state[TOPK_SLOT_PREFIX];
        const u64 mask = state[TOPK_SLOT_MASK];
        const u64 remaining = state[TOPK_SLOT_REMAINING];
        const u64 boundary_total = state[TOPK_SLOT_BOUNDARY];
        const bool prefer_larger = (params.flags & TOPK_PREFER_LARGER) != 0;
        for (u64 tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
            const u64 i = tile * BLOCK_THREADS + threadIdx.x;
            const bool valid = i < len;
            const Bits raw = valid ? keys[i] : (Bits)0;
            const u64 masked = (u64)(Bits)(Key::to_radix(raw) ^ flip) & mask;
            const bool boundary = valid && masked == prefix;
            u32 total = 0;
            const u32 boundary_below = topk_block_flag_scan<BLOCK_THREADS>(boundary, warp_totals, &total);
            if (stage == TOPK_COUNT_BOUNDARY) {
                if (threadIdx.x == 0) {
                    boundary_offsets[tile] = total;
                }
                continue;
            }
            const u64 boundary_rank = boundary_offsets[tile] + boundary_below;
            const bool kept = prefer_larger ? boundary_rank + remaining >= boundary_total
                                            : boundary_rank < remaining;
            const bool selected = valid && (masked > prefix || (boundary && kept));
            const u32 selected_below = topk_block_flag_scan<BLOCK_THREADS>(selected, warp_totals, &total);
            if (stage == TOPK_COUNT_SELECTED) {
                if (threadIdx.x == 0) {
                    tile_offsets[tile] = total;
                }
                continue;
            }
            if (selected) {
                const u64 position = tile_offsets[tile] + selected_below;
                reinterpret_cast<Bits*>(params.out_keys)[position] = raw;
                if (VALUE_BYTES != 0) {
                    const Payload payload = (params.flags & TOPK_VALUES_ARE_INDEX)
                        ? (Payload)i
                        : reinterpret_cast<const Payload*>(params.values)[i];
                    reinterpret_cast<Payload*>(params.out_values)[position] = payload;
                }
            }
        }
        return;
    }

    if (stage == TOPK_COUNT_SPLIT || stage == TOPK_SCATTER_SPLIT) {
        const bool from_tmp = (params.flags & TOPK_SOURCE_IS_TMP) != 0;
        const Bits* src_keys = reinterpret_cast<const Bits*>(from_tmp ? params.tmp_keys : params.out_keys);
        Bits* dst_keys = reinterpret_cast<Bits*>(from_tmp ? params.out_keys : params.tmp_keys);
        const Payload* src_values =
            reinterpret_cast<const Payload*>(from_tmp ? params.tmp_values : params.out_values);
        Payload* dst_values = reinterpret_cast<Payload*>(from_tmp ? params.out_values : params.tmp_values);
        const u64 ones_total = state[TOPK_SLOT_ONES];
        for (u64 tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
            const u64 i = tile * BLOCK_THREADS + threadIdx.x;
            const bool valid = i < len;
            const Bits raw = valid ? src_keys[i] : (Bits)0;
            const u64 rank = (u64)(Bits)(Key::to_radix(raw) ^ flip);
            const bool one = valid && ((rank >> params.shift) & 1u) != 0;
            u32 total = 0;
            const u32 ones_below = topk_block_flag_scan<BLOCK_THREADS>(one, warp_totals, &total);
            if (stage == TOPK_COUNT_SPLIT) {
                if (threadIdx.x == 0) {
                    tile_offsets[tile] = total;
                }
                continue;
            }
            if (valid) {
                const u64 ones_before = tile_offsets[tile] + ones_below;
                const u64 position = one ? ones_before : ones_total + (i - ones_before);
                dst_keys[position] = raw;
                if (VALUE_BYTES != 0) {
                    dst_values[position] = src_values[i];
                }
            }
        }
        return;
    }
}

}  // namespace oxicub
