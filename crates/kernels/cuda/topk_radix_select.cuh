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
//
// The fast path (mode 1), decided on the device:
//   SAMPLE            one block: rank of TOPK_SAMPLES keys spread over the input, sorted in
//                     shared memory; the threshold T is the sample_rank-th best, chosen by the
//                     host so that about sample_rank * len / TOPK_SAMPLES keys reach it.
//   PREFILTER         the one full read of the input (16-byte loads, several in flight per
//                     thread; compiled alone as PART 1): every key with rank >= T goes, with its
//                     64-bit index, into its warp's own segment of the candidate buffer, counted
//                     in a register (no atomics, no barriers). The last block to finish DECIDEs:
//                     mode 1 iff no segment overflowed and k <= candidates; otherwise mode 0 (the
//                     stages above re-read the input: the fallback).
//   HISTOGRAM         as above, over the candidate buffer in mode 1 (a warp per segment); the
//                     last block of each pass finds the pivot (no PIVOT launch).
//   FINAL             over the candidate buffer: the direct path (no determinism, unsorted) writes
//                     the selected items straight to the outputs (atomic slots; boundary items by
//                     ticket); the other contracts append every item at or above the pivot bucket
//                     to the rank buffer (at most rank_cap items; more falls back to mode 0).
//   RANK_COUNT/RANK_SCATTER: the rank sort of the rank buffer: each item's output position is the
//                     number of items better than it (rank descending, equal ranks by source
//                     index ascending; all distinct, so positions are unique and deterministic),
//                     counted by a grid of (item tile x chunk) work units. The tie-break drops the
//                     surplus boundary items (smaller or larger indices). In mode 0 with a sorted
//                     contract, SCATTER_SELECTED fills the rank buffer instead of the outputs and
//                     the same two stages sort it.
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
    TOPK_SCATTER_SPLIT = 8,
    TOPK_SAMPLE = 9,
    TOPK_PREFILTER = 10,
    TOPK_DECIDE = 11,
    TOPK_FINAL = 12,
    TOPK_RANK_COUNT = 13,
    TOPK_RANK_SCATTER = 14
};

enum TopKSlot {
    TOPK_SLOT_K = 0,
    TOPK_SLOT_PREFIX = 1,
    TOPK_SLOT_MASK = 2,
    TOPK_SLOT_REMAINING = 3,
    TOPK_SLOT_DONE = 4,
    TOPK_SLOT_BOUNDARY = 5,
    TOPK_SLOT_SELECTED = 6,
    TOPK_SLOT_ONES = 7,
    TOPK_SLOT_THRESHOLD = 8,   // rank threshold T of the fast path
    TOPK_SLOT_CANDIDATES = 9,  // keys with rank >= T (may exceed the buffer capacity)
    TOPK_SLOT_MODE = 10,       // 1: fast path over the candidate buffer; 0: over the input
    TOPK_SLOT_RANKED = 11,     // items appended to the rank buffer by FINAL
    TOPK_SLOT_ABOVE = 12,      // direct path: slots taken by items above the pivot bucket
    TOPK_SLOT_TICKETS = 13,    // direct path: boundary tickets handed out
    TOPK_SLOT_SAMPLED = 14,    // SAMPLE ran
    TOPK_SLOT_PREFILTERED = 15, // PREFILTER blocks done
    TOPK_SLOT_FINISHED = 16,   // 8 slots: blocks of HISTOGRAM pass p that have merged
    TOPK_STATE_SLOTS = 24
};

// params.flags
constexpr u32 TOPK_PREFER_LARGER = 1u;    // keep the boundary items with the larger indices
constexpr u32 TOPK_VALUES_ARE_INDEX = 2u; // write source indices instead of reading values
constexpr u32 TOPK_SOURCE_IS_TMP = 4u;    // split: read tmp_*, write out_* (else the reverse)
constexpr u32 TOPK_LEN_IS_SELECTED = 8u;  // the stage runs over the selected items
constexpr u32 TOPK_SCAN_BOUNDARY = 16u;   // scan: the boundary tile counts (else the other)
constexpr u32 TOPK_DIRECT = 32u;          // no determinism, unsorted: FINAL writes the outputs
constexpr u32 TOPK_RANK_SORT = 64u;       // the result is sorted by the rank sort (else unsorted)

constexpr u32 TOPK_SAMPLES = 2048;        // keys sampled for the threshold
constexpr u32 TOPK_UNROLL = 4;            // 16-byte loads in flight per thread in PREFILTER
constexpr u32 TOPK_RANK_CHUNK = 2048;     // items compared per RANK_COUNT work unit

constexpr u32 TOPK_DIGIT_BITS = 8;
constexpr u32 TOPK_BINS = 1u << TOPK_DIGIT_BITS;


// Reads k (host value or deferred pointer, clamped) and resets the pass state. One thread.
__device__ __forceinline__ void topk_init(const TopKRadixSelectParams& params, u64* state) {
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
    for (u32 slot = TOPK_SLOT_BOUNDARY; slot < TOPK_STATE_SLOTS; ++slot) {
        state[slot] = 0;
    }
}

// The pivot of pass `pass` from its merged histogram: narrows (prefix, mask), updates
// `remaining`; done when the pivot bucket's count equals `remaining`, or after the last digit.
// Every thread of one block calls it (one bin per thread, a scan from the best digit down),
// after every block of the pass has merged its counts.
template <u32 BLOCK_THREADS>
__device__ __forceinline__ void topk_pivot(const TopKRadixSelectParams& params, u64* state,
                                           u64* scan) {
    const volatile u64* pass_histogram =
        reinterpret_cast<const volatile u64*>(params.histogram) + (u64)params.pass * TOPK_BINS;
    const u32 t = threadIdx.x;
    const u64 count = t < TOPK_BINS ? pass_histogram[TOPK_BINS - 1 - t] : 0;
    const u64 remaining = state[TOPK_SLOT_REMAINING];
    scan[t] = count;
    __syncthreads();
    for (u32 offset = 1; offset < BLOCK_THREADS; offset <<= 1) {
        const u64 add = t >= offset ? scan[t - offset] : 0;
        __syncthreads();
        scan[t] += add;
        __syncthreads();
    }
    const u64 inclusive = scan[t];
    const u64 above = inclusive - count;
    if (t < TOPK_BINS && above < remaining && inclusive >= remaining) {
        const u64 pivot = TOPK_BINS - 1 - t;
        const u64 left = remaining - above;
        state[TOPK_SLOT_REMAINING] = left;
        state[TOPK_SLOT_PREFIX] |= pivot << params.shift;
        state[TOPK_SLOT_MASK] |= (u64)(TOPK_BINS - 1) << params.shift;
        if (count == left || params.shift == 0) {
            state[TOPK_SLOT_DONE] = 1;
        }
    }
}

// Exclusive sum of v over the block; *total gets the sum. Every thread must call it.
template <u32 BLOCK_THREADS>
__device__ __forceinline__ u32 topk_block_exclusive_sum(u32 v, u32* warp_totals, u32* total) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    u32 inclusive = v;
    for (u32 d = 1; d < 32; d <<= 1) {
        const u32 up = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
        inclusive += lane >= d ? up : 0u;
    }
    if (lane == 31) {
        warp_totals[warp] = inclusive;
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
    return offset + inclusive - v;
}

// One slot per flagged lane of a converged warp from a global counter (one atomic per warp).
__device__ __forceinline__ u64 topk_warp_append(bool flag, u64* counter) {
    const u32 lane = threadIdx.x & 31u;
    const u32 ballot = __ballot_sync(0xFFFFFFFFu, flag);
    u64 base = 0;
    if (ballot != 0) {
        const u32 leader = __ffs(ballot) - 1;
        if (lane == leader) {
            base = atomicAdd(counter, (u64)__popc(ballot));
        }
        base = __shfl_sync(0xFFFFFFFFu, base, leader);
    }
    return base + __popc(ballot & ((1u << lane) - 1u));
}

__device__ __forceinline__ u64 topk_mix(u64 x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// PREFILTER, compiled alone (PART 1) so that its registers, not the other stages', set how many
// blocks stay resident while it streams the input.
template <class Key, u32 BLOCK_THREADS>
__device__ __forceinline__ void topk_prefilter(const TopKRadixSelectParams& params) {
    typedef typename Key::Bits Bits;
    u64* state = reinterpret_cast<u64*>(params.state);
    const Bits flip = (Bits)params.flip;
    const Bits* keys = reinterpret_cast<const Bits*>(params.keys);
    Bits* cand_keys = reinterpret_cast<Bits*>(params.cand_keys);
    u64* cand_index = reinterpret_cast<u64*>(params.cand_index);
    if (state[TOPK_SLOT_SAMPLED] == 0) {
        return;
    }
    // Each warp writes its candidates to its own segment of cand_cap slots, counting in a
    // register: no atomics and no barriers while the input streams by.
    const u32 lane = threadIdx.x & 31u;
    const u64 segment = global_thread_index(BLOCK_THREADS) >> 5;
    const u64 cap = params.cand_cap;
    Bits* seg_keys = cand_keys + segment * cap;
    u64* seg_index = cand_index + segment * cap;
    u64 written = 0;  // warp-uniform
    const Bits threshold = (Bits)state[TOPK_SLOT_THRESHOLD];
    constexpr u32 VEC = 16 / sizeof(Bits);
    constexpr u32 UNROLL = VEC >= 8 ? 1 : TOPK_UNROLL;  // at most 16 keys per thread
    static_assert(UNROLL * VEC <= 32, "the batch's hit mask is one u32");
    // Keys before the first 16-byte boundary and after the last whole vector: warp 0.
    const u64 misalign = (u64)(16 - (params.keys & 15)) & 15;
    const u64 head_items = misalign / sizeof(Bits);
    const u64 head = head_items < params.len ? head_items : params.len;
    const u64 vectors = (params.len - head) / VEC;
    const u64 tail = head + vectors * VEC;
    const uint4* vec = reinterpret_cast<const uint4*>(keys + head);
    const u64 stride = grid_threads(BLOCK_THREADS);
    const u64 me = global_thread_index(BLOCK_THREADS);
    union Lanes {
        uint4 v;
        Bits b[VEC];
    };
    // Appends this lane's `hits` items (chosen by `take`) for the whole warp.
    auto append = [&](u32 hits, auto&& take) {
        u32 inclusive = hits;
#pragma unroll
        for (u32 d = 1; d < 32; d <<= 1) {
            const u32 up = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
            inclusive += lane >= d ? up : 0u;
        }
        const u32 total = __shfl_sync(0xFFFFFFFFu, inclusive, 31);
        if (hits != 0) {
            take(written + inclusive - hits);
        }
        written += total;
    };
    // The next batch's loads are issued before this batch is tested and appended, so every warp
    // keeps UNROLL 16-byte loads in flight through its compute (software pipelining in registers):
    // without it each warp idled the memory system while it scanned and appended.
    auto load_batch = [&](Lanes(&dst)[UNROLL], u64 batch_base) {
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            const u64 v = batch_base + u * stride + me;
            dst[u].v = v < vectors ? vec[v] : make_uint4(0, 0, 0, 0);
        }
    };
    Lanes lanes[UNROLL];
    load_batch(lanes, 0);
    for (u64 base = 0; base < vectors; base += stride * UNROLL) {  // warp-uniform
        Lanes next[UNROLL];
        load_batch(next, base + stride * UNROLL);
        // One bit per key of the batch (UNROLL * VEC <= 16), tested once: ncu showed this stage
        // instruction-bound when the append re-derived every key's radix code, in a loop that
        // nearly every batch enters (some lane almost always has a hit).
        u32 hit_mask = 0;
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            const bool valid = base + u * stride + me < vectors;
#pragma unroll
            for (u32 j = 0; j < VEC; ++j) {
                const bool hit = valid && (Bits)(Key::to_radix(lanes[u].b[j]) ^ flip) >= threshold;
                hit_mask |= (hit ? 1u : 0u) << (u * VEC + j);
            }
        }
        if (__any_sync(0xFFFFFFFFu, hit_mask != 0)) {
            append(__popc(hit_mask), [&](u64 slot) {
#pragma unroll
                for (u32 u = 0; u < UNROLL; ++u) {
                    const u64 v = base + u * stride + me;
#pragma unroll
                    for (u32 j = 0; j < VEC; ++j) {
                        if (hit_mask & (1u << (u * VEC + j))) {
                            if (slot < cap) {
                                seg_keys[slot] = lanes[u].b[j];
                                seg_index[slot] = head + v * VEC + j;
                            }
                            ++slot;
                        }
                    }
                }
            });
        }
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            lanes[u] = next[u];
        }
    }
    if (me < 32) {
        // At most VEC - 1 keys at each end.
        const u64 ends = head + (params.len - tail);
        const u64 i = me < head ? me : tail + (me - head);
        const bool valid = me < ends;
        const Bits raw = valid ? keys[i] : (Bits)0;
        const bool hit = valid && (Bits)(Key::to_radix(raw) ^ flip) >= threshold;
        append(hit ? 1u : 0u, [&](u64 slot) {
            if (slot < cap) {
                seg_keys[slot] = raw;
                seg_index[slot] = i;
            }
        });
    }
    u64* counts = reinterpret_cast<u64*>(params.cand_counts);
    if (lane == 0) {
        counts[segment] = written;
    }
    // DECIDE, by the last block to finish: mode 1 iff no segment overflowed and k <= candidates.
    __shared__ bool last_block;
    __shared__ u64 block_sums[BLOCK_THREADS / 32];
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        last_block = atomicAdd(&state[TOPK_SLOT_PREFILTERED], 1ull) == (u64)gridDim.x - 1;
    }
    __syncthreads();
    if (!last_block) {
        return;
    }
    __threadfence();
    u64 sum = 0;
    u64 overflow = 0;
    const volatile u64* seen = counts;
    for (u64 w = threadIdx.x; w < params.cand_segments; w += BLOCK_THREADS) {
        const u64 n = seen[w];
        sum += n;
        overflow += n > cap ? 1 : 0;
    }
    for (u32 d = 16; d > 0; d >>= 1) {
        sum += __shfl_down_sync(0xFFFFFFFFu, sum, d);
        overflow += __shfl_down_sync(0xFFFFFFFFu, overflow, d);
    }
    if (lane == 0) {
        block_sums[threadIdx.x >> 5] = sum;
        block_sums[threadIdx.x >> 5] |= overflow != 0 ? (1ull << 63) : 0;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        u64 candidates = 0;
        bool overflowed = false;
        for (u32 w = 0; w < BLOCK_THREADS / 32; ++w) {
            candidates += block_sums[w] & ~(1ull << 63);
            overflowed = overflowed || (block_sums[w] >> 63) != 0;
        }
        state[TOPK_SLOT_CANDIDATES] = candidates;
        state[TOPK_SLOT_MODE] = (!overflowed && candidates >= state[TOPK_SLOT_K]) ? 1 : 0;
    }
}

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int PART>
__device__ __forceinline__ void topk_radix_select(const TopKRadixSelectParams& params) {
    typedef typename Key::Bits Bits;
    typedef typename ValuePayload<VALUE_BYTES>::Type Payload;
    static_assert(BLOCK_THREADS % 32 == 0 && BLOCK_THREADS >= TOPK_BINS, "block size");
    if (PART == 1) {
        if (params.stage == TOPK_PREFILTER) {
            topk_prefilter<Key, BLOCK_THREADS>(params);
        }
        return;
    }

    __shared__ u32 block_counts[TOPK_BINS];
    __shared__ u32 warp_totals[BLOCK_THREADS / 32];
    __shared__ u64 scan_buffer[BLOCK_THREADS];
    __shared__ u64 sample[TOPK_SAMPLES];
    __shared__ u64 tile_a[BLOCK_THREADS];
    __shared__ u64 tile_b[BLOCK_THREADS];
    __shared__ u64 block_base;

    u64* state = reinterpret_cast<u64*>(params.state);
    const Bits flip = (Bits)params.flip;
    const u32 stage = params.stage;

    if (stage == TOPK_INIT) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            topk_init(params, state);
        }
        return;
    }

    const Bits* keys = reinterpret_cast<const Bits*>(params.keys);
    u64* histogram = reinterpret_cast<u64*>(params.histogram);
    Bits* cand_keys = reinterpret_cast<Bits*>(params.cand_keys);
    u64* cand_index = reinterpret_cast<u64*>(params.cand_index);
    Bits* rank_keys = reinterpret_cast<Bits*>(params.rank_keys);
    u64* rank_index = reinterpret_cast<u64*>(params.rank_index);
    const bool mode_fast = stage > TOPK_INIT && state[TOPK_SLOT_MODE] == 1;
    const u32 lane = threadIdx.x & 31u;
    // The candidate buffer: one segment of cand_cap slots per PREFILTER warp, seg_count[s] used.
    const u64* seg_count = reinterpret_cast<const u64*>(params.cand_counts);
    const u64 seg_cap = params.cand_cap;
    const u64 segments = params.cand_segments;
    // Calls f(valid, raw key, slot) for every candidate, in warp-uniform steps: one warp per
    // segment at a time, 32 candidates per step.
    auto for_each_candidate = [&](auto&& f) {
        const u64 warps = grid_threads(BLOCK_THREADS) >> 5;
        for (u64 segment = global_thread_index(BLOCK_THREADS) >> 5; segment < segments;
             segment += warps) {
            const u64 n = seg_count[segment];  // at most seg_cap in mode 1
            for (u64 j0 = 0; j0 < n; j0 += 32) {
                const u64 j = j0 + lane;
                const bool valid = j < n;
                const u64 at = segment * seg_cap + j;
                f(valid, valid ? cand_keys[at] : (Bits)0, at);
            }
        }
    };
    const bool rank_sort = (params.flags & TOPK_RANK_SORT) != 0;
    const bool direct = (params.flags & TOPK_DIRECT) != 0;

    if (stage == TOPK_SAMPLE) {
        // INIT, then the sample, in one launch (block 0 only).
        if (blockIdx.x != 0) {
            return;
        }
        if (threadIdx.x == 0) {
            topk_init(params, state);
        }
        __syncthreads();
        if (state[TOPK_SLOT_DONE] != 0) {
            return;
        }
        const u64 stride = params.len / TOPK_SAMPLES;  // >= 1: the host samples only long inputs
        for (u32 i = threadIdx.x; i < TOPK_SAMPLES; i += BLOCK_THREADS) {
            const u64 at = (u64)i * stride + topk_mix(i) % stride;
            sample[i] = (u64)(Bits)(Key::to_radix(keys[at]) ^ flip);
        }
        __syncthreads();
        // Bitonic sort, best (largest rank) first.
        for (u32 size = 2; size <= TOPK_SAMPLES; size <<= 1) {
            for (u32 half = size >> 1; half > 0; half >>= 1) {
                for (u32 t = threadIdx.x; t < TOPK_SAMPLES / 2; t += BLOCK_THREADS) {
                    const u32 lo = 2 * t - (t & (half - 1));
                    const u32 hi = lo + half;
                    const bool descending = (lo & size) == 0;
                    const u64 a = sample[lo];
                    const u64 b = sample[hi];
                    if (descending ? a < b : a > b) {
                        sample[lo] = b;
                        sample[hi] = a;
                    }
                }
                __syncthreads();
            }
        }
        if (threadIdx.x == 0) {
            state[TOPK_SLOT_THRESHOLD] = sample[params.sample_rank - 1];
            state[TOPK_SLOT_SAMPLED] = 1;
        }
        return;
    }

    if (stage == TOPK_DECIDE) {
        if (blockIdx.x == 0 && threadIdx.x == 0 && state[TOPK_SLOT_SAMPLED] != 0 &&
            state[TOPK_SLOT_DONE] == 0) {
            const u64 count = state[TOPK_SLOT_CANDIDATES];
            if (count >= state[TOPK_SLOT_K] && count <= params.cand_cap) {
                state[TOPK_SLOT_MODE] = 1;
            }
        }
        return;
    }

    if (stage == TOPK_HISTOGRAM) {
        if (state[TOPK_SLOT_DONE] != 0) {
            return;  // block-uniform: every thread reads the same value
        }
        const u64 prefix = state[TOPK_SLOT_PREFIX];
        const u64 mask = state[TOPK_SLOT_MASK];
        const bool fast = mode_fast;
        for (u32 bin = threadIdx.x; bin < TOPK_BINS; bin += BLOCK_THREADS) {
            block_counts[bin] = 0;
        }
        __syncthreads();
        if (fast) {
            // Candidates share their top digits: one shared atomic per distinct digit and warp.
            for_each_candidate([&](bool valid, Bits raw, u64) {
                const u64 rank = (u64)(Bits)(Key::to_radix(raw) ^ flip);
                const bool in = valid && (rank & mask) == prefix;
                const u32 digit = (u32)(rank >> params.shift) & (TOPK_BINS - 1);
                const u32 in_lanes = __ballot_sync(0xFFFFFFFFu, in);
                if (in_lanes == 0) {
                    return;
                }
                const u32 leader = (u32)__ffs(in_lanes) - 1;
                const u32 lead_digit = __shfl_sync(0xFFFFFFFFu, digit, leader);
                if (__ballot_sync(0xFFFFFFFFu, in && digit == lead_digit) == in_lanes) {
                    if (lane == leader) {
                        atomicAdd(&block_counts[digit], (u32)__popc(in_lanes));
                    }
                } else if (in) {
                    atomicAdd(&block_counts[digit], 1u);
                }
            });
        } else {
            const u64 stride = grid_threads(BLOCK_THREADS);
            for (u64 i = global_thread_index(BLOCK_THREADS); i < params.len; i += stride) {
                const u64 rank = (u64)(Bits)(Key::to_radix(keys[i]) ^ flip);
                if ((rank & mask) == prefix) {
                    atomicAdd(&block_counts[(u32)(rank >> params.shift) & (TOPK_BINS - 1)], 1u);
                }
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
        // The last block to merge finds the pivot (no separate launch).
        __threadfence();
        __syncthreads();
        __shared__ bool last_block;
        if (threadIdx.x == 0) {
            const u64 ticket = atomicAdd(&state[TOPK_SLOT_FINISHED + params.pass], 1ull);
            last_block = ticket == (u64)gridDim.x - 1;
        }
        __syncthreads();
        if (last_block) {
            __threadfence();
            topk_pivot<BLOCK_THREADS>(params, state, scan_buffer);
        }
        return;
    }

    if (stage == TOPK_PIVOT) {
        if (blockIdx.x == 0 && state[TOPK_SLOT_DONE] == 0) {
            topk_pivot<BLOCK_THREADS>(params, state, scan_buffer);
        }
        return;
    }

    // Writes one selected item (key, and its value or source index) to the outputs.
    auto write_out = [&](u64 position, Bits raw, u64 index) {
        reinterpret_cast<Bits*>(params.out_keys)[position] = raw;
        if (VALUE_BYTES != 0) {
            const Payload payload = (params.flags & TOPK_VALUES_ARE_INDEX)
                ? (Payload)index
                : reinterpret_cast<const Payload*>(params.values)[index];
            reinterpret_cast<Payload*>(params.out_values)[position] = payload;
        }
    };
    // Mode 0, or the rank buffer overflowed: the input-order stages below run.
    const bool old_path =
        !mode_fast || (!direct && state[TOPK_SLOT_RANKED] > params.rank_cap);

    if (stage == TOPK_FINAL) {
        if (!mode_fast) {
            return;
        }
        const u64 prefix = state[TOPK_SLOT_PREFIX];
        const u64 mask = state[TOPK_SLOT_MASK];
        const u64 remaining = state[TOPK_SLOT_REMAINING];
        const u64 k = state[TOPK_SLOT_K];
        for_each_candidate([&](bool valid, Bits raw, u64 at) {
            const u64 masked = (u64)(Bits)(Key::to_radix(raw) ^ flip) & mask;
            const bool above = valid && masked > prefix;
            const bool boundary = valid && masked == prefix;
            if (direct) {
                const u64 slot = topk_warp_append(above, &state[TOPK_SLOT_ABOVE]);
                if (above) {
                    write_out(slot, raw, cand_index[at]);
                }
                const u64 ticket = topk_warp_append(boundary, &state[TOPK_SLOT_TICKETS]);
                if (boundary && ticket < remaining) {
                    write_out(k - remaining + ticket, raw, cand_index[at]);
                }
            } else {
                const bool keep = above || boundary;
                const u64 slot = topk_warp_append(keep, &state[TOPK_SLOT_RANKED]);
                if (keep && slot < params.rank_cap) {
                    rank_keys[slot] = raw;
                    rank_index[slot] = cand_index[at];
                }
            }
        });
        return;
    }

    if (stage == TOPK_RANK_COUNT || stage == TOPK_RANK_SCATTER) {
        if (old_path ? !rank_sort : direct) {
            return;
        }
        const u64 items = old_path ? state[TOPK_SLOT_SELECTED] : state[TOPK_SLOT_RANKED];
        u64* positions = reinterpret_cast<u64*>(params.rank_pos);
        if (stage == TOPK_RANK_SCATTER) {
            const u64 k = state[TOPK_SLOT_K];
            const u64 above = k - state[TOPK_SLOT_REMAINING];
            const u64 drop = items - k;  // surplus boundary items (fast path only)
            const bool prefer_larger = (params.flags & TOPK_PREFER_LARGER) != 0;
            for (u64 i = global_thread_index(BLOCK_THREADS); i < items;
                 i += grid_threads(BLOCK_THREADS)) {
                u64 p = positions[i];
                if (prefer_larger && !old_path && p >= above) {
                    if (p < above + drop) {
                        continue;
                    }
                    p -= drop;
                }
                if (p < k) {
                    write_out(p, rank_keys[i], rank_index[i]);
                }
            }
            return;
        }
        // Position = number of items better: rank descending, then source index ascending.
        const bool packed = sizeof(Bits) <= 4 && params.len < (1ull << 32);
        const u64 tiles = (items + BLOCK_THREADS - 1) / BLOCK_THREADS;
        const u64 chunks = (items + TOPK_RANK_CHUNK - 1) / TOPK_RANK_CHUNK;
        for (u64 unit = blockIdx.x; unit < tiles * chunks; unit += gridDim.x) {
            const u64 tile = unit / chunks;
            const u64 chunk = unit % chunks;
            const u64 i = tile * BLOCK_THREADS + threadIdx.x;
            const bool valid = i < items;
            const u64 my_rank = valid ? (u64)(Bits)(Key::to_radix(rank_keys[i]) ^ flip) : 0;
            const u64 my_index = valid ? rank_index[i] : ~0ull;
            const u64 my_packed = (my_rank << 32) | (0xFFFFFFFFull - (my_index & 0xFFFFFFFFull));
            u32 better = 0;
            const u64 chunk_end = (chunk + 1) * TOPK_RANK_CHUNK;
            const u64 end = chunk_end < items ? chunk_end : items;
            for (u64 j0 = chunk * TOPK_RANK_CHUNK; j0 < end; j0 += BLOCK_THREADS) {
                const u64 j = j0 + threadIdx.x;
                const bool other = j < end;
                const u64 r = other ? (u64)(Bits)(Key::to_radix(rank_keys[j]) ^ flip) : 0;
                const u64 x = other ? rank_index[j] : ~0ull;
                if (packed) {
                    tile_a[threadIdx.x] = other ? (r << 32) | (0xFFFFFFFFull - x) : 0;
                } else {
                    tile_a[threadIdx.x] = r;
                    tile_b[threadIdx.x] = x;
                }
                __syncthreads();
                if (packed) {
#pragma unroll 16
                    for (u32 t = 0; t < BLOCK_THREADS; ++t) {
                        better += tile_a[t] > my_packed ? 1u : 0u;
                    }
                } else {
                    for (u32 t = 0; t < BLOCK_THREADS; ++t) {
                        const u64 r2 = tile_a[t];
                        better += (r2 > my_rank || (r2 == my_rank && tile_b[t] < my_index)) ? 1u : 0u;
                    }
                }
                __syncthreads();
            }
            if (valid && better != 0) {
                atomicAdd(&positions[i], (u64)better);
            }
        }
        return;
    }

    if (!old_path) {
        return;  // the input-order stages below are the fallback
    }
    const u64 threshold = mode_fast ? state[TOPK_SLOT_THRESHOLD] : 0;

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
            const u64 rank = (u64)(Bits)(Key::to_radix(raw) ^ flip);
            const u64 masked = rank & mask;
            // In mode 1 the select ran over the keys at or above the threshold only.
            const bool boundary = valid && masked == prefix && rank >= threshold;
            u32 total = 0;
            const u32 boundary_below = block_flag_scan<BLOCK_THREADS>(boundary, warp_totals, &total);
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
            const u32 selected_below = block_flag_scan<BLOCK_THREADS>(selected, warp_totals, &total);
            if (stage == TOPK_COUNT_SELECTED) {
                if (threadIdx.x == 0) {
                    tile_offsets[tile] = total;
                }
                continue;
            }
            if (selected) {
                const u64 position = tile_offsets[tile] + selected_below;
                if (rank_sort) {
                    rank_keys[position] = raw;  // sorted next by RANK_COUNT / RANK_SCATTER
                    rank_index[position] = i;
                } else {
                    write_out(position, raw, i);
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
            const u32 ones_below = block_flag_scan<BLOCK_THREADS>(one, warp_totals, &total);
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
