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
//   SAMPLE            one block (compiled alone as PART 2, 1024 threads): INIT, then the rank of
//                     TOPK_SAMPLES keys spread over the input, held in registers; the threshold
//                     T is the sample_rank-th best, found by a radix select in shared memory. The
//                     host chooses sample_rank so that fewer than k keys reach T with probability
//                     below 1e-15; about sample_rank * len / TOPK_SAMPLES keys reach it.
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
//   RANK_BUCKET/RANK_PLACE/RANK_COUNT/RANK_SCATTER: the rank sort of the rank buffer: each
//                     item's output position is the number of items better than it (rank
//                     descending, equal ranks by source index ascending; all distinct, so
//                     positions are unique and deterministic). BUCKET counts the items per bucket
//                     of leading rank bits (monotone in the rank; its last block scans the
//                     counts), PLACE groups the items by bucket, COUNT compares each item only
//                     with the items in its tile's buckets, by a grid of (item tile x chunk) work
//                     units, and adds the items of the better buckets; SCATTER writes the outputs.
//                     The tie-break drops the surplus boundary items (smaller or larger indices).
//                     In mode 0 with a sorted contract, SCATTER_SELECTED fills the rank buffer
//                     instead of the outputs and the same stages sort it.
namespace oxicub {

// The stages, state slots, flags and sizes shared with the host are generated from the Rust
// list (families/topk_radix_select.rs) ahead of this header.

constexpr u32 TOPK_UNROLL = 4;            // 16-byte loads in flight per thread in PREFILTER
constexpr u32 TOPK_RANK_CHUNK = 2048;     // items compared per RANK_COUNT work unit


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

// The largest `value` of the flagged lanes of a converged warp, folded into *slot.
__device__ __forceinline__ void topk_warp_max(bool flag, u64 value, u64* slot) {
    if (!__any_sync(0xFFFFFFFFu, flag)) {
        return;
    }
    u64 best = flag ? value : 0;
    for (u32 d = 16; d > 0; d >>= 1) {
        const u64 other = __shfl_xor_sync(0xFFFFFFFFu, best, d);
        best = other > best ? other : best;
    }
    if ((threadIdx.x & 31u) == 0) {
        atomicMax(slot, best);
    }
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
        const u32 inclusive = warp_inclusive_sum(hits);
        const u32 total = __shfl_sync(0xFFFFFFFFu, inclusive, 31);
        if (hits != 0) {
            take(written + inclusive - hits);
        }
        written += total;
    };
    // The grid is at most the resident threads, so offsets within a batch fit in 32 bits.
    const u32 stride32 = (u32)stride;
    // Tests one batch (UNROLL vectors per thread, `stride` apart, from vector `base`) and
    // appends its hits: one bit per key (UNROLL * VEC <= 16), the transform done once per key
    // (ncu showed the stage bound by integer instructions). A warp with no hit skips the append.
    Bits lo[2];
    Bits width[2];
    radix_hit_intervals<Key>(threshold, flip, lo, width);
    auto test_append = [&](const Lanes(&batch)[UNROLL], u64 base, bool full) {
        if (full) {
            // Whole batches: first only whether any key of the warp's batch hits (about one in
            // 4..16 warp-batches does at k <= 16384), by the intervals.
            bool any = false;
#pragma unroll
            for (u32 u = 0; u < UNROLL; ++u) {
#pragma unroll
                for (u32 j = 0; j < VEC; ++j) {
                    const Bits raw = batch[u].b[j];
                    any |= ((Bits)(raw - lo[0]) <= width[0]) | ((Bits)(raw - lo[1]) <= width[1]);
                }
            }
            if (!__any_sync(0xFFFFFFFFu, any)) {
                return;
            }
        }
        // One bit per key of the batch, from the transform itself.
        u32 hit_mask = 0;
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            const bool valid = full || base + u * stride + me < vectors;
#pragma unroll
            for (u32 j = 0; j < VEC; ++j) {
                const bool hit = valid && (Bits)(Key::to_radix(batch[u].b[j]) ^ flip) >= threshold;
                hit_mask |= (hit ? 1u : 0u) << (u * VEC + j);
            }
        }
        if (__any_sync(0xFFFFFFFFu, hit_mask != 0)) {
            append(__popc(hit_mask), [&](u64 slot) {
                const u64 first = head + (base + me) * VEC;
                Bits* at_key = seg_keys + slot;
                u64* at_index = seg_index + slot;
                const u32 room = slot < cap ? (u32)(cap - slot < UNROLL * VEC ? cap - slot : UNROLL * VEC) : 0u;
                u32 n = 0;
#pragma unroll
                for (u32 u = 0; u < UNROLL; ++u) {
#pragma unroll
                    for (u32 j = 0; j < VEC; ++j) {
                        if (hit_mask & (1u << (u * VEC + j))) {
                            if (n < room) {
                                at_key[n] = batch[u].b[j];
                                at_index[n] = first + (u32)(u * stride32 * VEC + j);
                            }
                            ++n;
                        }
                    }
                }
            });
        }
    };
    // Whole batches first, with no bounds tests; the next batch's loads are issued before this
    // batch is tested and appended, so every warp keeps UNROLL 16-byte loads in flight through
    // its compute (software pipelining in registers; the last batch reloads itself).
    const u64 span = stride * UNROLL;
    const u64 whole = vectors / span;
    if (whole != 0) {
        Lanes lanes[UNROLL];
        const uint4* from = vec + me;
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            lanes[u].v = from[u * stride32];
        }
        for (u64 b = 0; b < whole; ++b) {  // warp-uniform
            const u64 base = b * span;
            const uint4* next_from = vec + (b + 1 < whole ? base + span : base) + me;
            Lanes next[UNROLL];
#pragma unroll
            for (u32 u = 0; u < UNROLL; ++u) {
                next[u].v = next_from[u * stride32];
            }
            test_append(lanes, base, true);
#pragma unroll
            for (u32 u = 0; u < UNROLL; ++u) {
                lanes[u] = next[u];
            }
        }
    }
    {
        // The last, partial batch (each load tested).
        const u64 base = whole * span;
        Lanes lanes[UNROLL];
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            const u64 v = base + u * stride + me;
            lanes[u].v = v < vectors ? vec[v] : make_uint4(0, 0, 0, 0);
        }
        test_append(lanes, base, false);
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

// SAMPLE, compiled alone (PART 2, one block of 1024 threads, TOPK_SAMPLES / 1024 keys each):
// INIT, then the threshold T = the sample_rank-th best rank of TOPK_SAMPLES keys
// spread over the input (one per stratum of len / TOPK_SAMPLES keys, at a hashed offset). The
// ranks stay in registers (all loads of a thread in flight at once) and T is found by a radix
// select over them: one shared 256-bin histogram per 8-bit digit, MSB first.
template <class Key, u32 BLOCK_THREADS>
__device__ __forceinline__ void topk_sample(const TopKRadixSelectParams& params) {
    typedef typename Key::Bits Bits;
    constexpr u32 PER_THREAD = TOPK_SAMPLES / BLOCK_THREADS;
    static_assert(PER_THREAD * BLOCK_THREADS == TOPK_SAMPLES, "sample block size");
    __shared__ u32 bins[TOPK_BINS];
    __shared__ u32 warp_totals[BLOCK_THREADS / 32];
    __shared__ u64 pivot_digit;
    __shared__ u32 pivot_left;
    u64* state = reinterpret_cast<u64*>(params.state);
    if (blockIdx.x != 0) {
        return;
    }
    if (threadIdx.x == 0) {
        topk_init(params, state);
    }
    __syncthreads();
    if (state[TOPK_SLOT_DONE] != 0) {
        return;  // block-uniform
    }
    const Bits* keys = reinterpret_cast<const Bits*>(params.keys);
    const Bits flip = (Bits)params.flip;
    // >= 4 (the host samples only long inputs), and below 2^32 for len < 2^46: the hashed offset
    // within the stratum is a multiply-high by a 32-bit hash, not a 64-bit modulo.
    const u64 stride = params.len / TOPK_SAMPLES;
    Bits rank[PER_THREAD];
#pragma unroll
    for (u32 p = 0; p < PER_THREAD; ++p) {
        const u32 i = p * BLOCK_THREADS + threadIdx.x;
        const u64 offset = ((topk_mix(i) & 0xFFFFFFFFull) * stride) >> 32;
        rank[p] = keys[(u64)i * stride + offset];
    }
#pragma unroll
    for (u32 p = 0; p < PER_THREAD; ++p) {
        rank[p] = (Bits)(Key::to_radix(rank[p]) ^ flip);
    }
    u64 prefix = 0;
    u64 mask = 0;
    u32 remaining = (u32)params.sample_rank;  // 1 <= sample_rank <= TOPK_SAMPLES (host)
    for (int shift = (int)(8 * sizeof(Bits)) - (int)TOPK_DIGIT_BITS; shift >= 0;
         shift -= (int)TOPK_DIGIT_BITS) {
        for (u32 bin = threadIdx.x; bin < TOPK_BINS; bin += BLOCK_THREADS) {
            bins[bin] = 0;
        }
        __syncthreads();
        // One shared atomic per distinct digit and warp: the top digit is the same for most
        // samples (ncu: 30 us with one atomic per sample, serialized on one bin).
#pragma unroll
        for (u32 p = 0; p < PER_THREAD; ++p) {
            const bool in = ((u64)rank[p] & mask) == prefix;
            const u32 digit = in ? (u32)((u64)rank[p] >> shift) & (TOPK_BINS - 1) : TOPK_BINS;
            const u32 same = __match_any_sync(0xFFFFFFFFu, digit);
            if (in && (threadIdx.x & 31u) == (u32)__ffs(same) - 1) {
                atomicAdd(&bins[digit], (u32)__popc(same));
            }
        }
        __syncthreads();
        // Bin t of the scan is digit 255 - t (best first); the pivot is where the count from
        // the top first reaches `remaining`.
        const u32 count = threadIdx.x < TOPK_BINS ? bins[TOPK_BINS - 1 - threadIdx.x] : 0u;
        u32 total = 0;
        const u32 above = block_exclusive_sum<BLOCK_THREADS>(count, warp_totals, &total);
        if (threadIdx.x < TOPK_BINS && above < remaining && above + count >= remaining) {
            pivot_digit = TOPK_BINS - 1 - threadIdx.x;
            pivot_left = remaining - above;
        }
        __syncthreads();
        prefix |= pivot_digit << shift;
        mask |= (u64)(TOPK_BINS - 1) << shift;
        remaining = pivot_left;
        __syncthreads();  // pivot_* are rewritten by the next digit
    }
    if (threadIdx.x == 0) {
        state[TOPK_SLOT_THRESHOLD] = prefix;
        state[TOPK_SLOT_SAMPLED] = 1;
    }
}

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int PART>
__device__ __forceinline__ void topk_radix_select(const TopKRadixSelectParams& params) {
    typedef typename Key::Bits Bits;
    typedef typename ValuePayload<VALUE_BYTES>::Type Payload;
    static_assert(BLOCK_THREADS % 32 == 0 && BLOCK_THREADS >= TOPK_BINS, "block size");
    static_assert(BLOCK_THREADS <= 1024, "block size");
    if (PART == TOPK_PART_PREFILTER) {
        if (params.stage == TOPK_STAGE_PREFILTER) {
            topk_prefilter<Key, BLOCK_THREADS>(params);
        }
        return;
    }
    if (PART == TOPK_PART_SAMPLE) {
        if (params.stage == TOPK_STAGE_SAMPLE) {
            topk_sample<Key, BLOCK_THREADS>(params);
        }
        return;
    }

    __shared__ u32 block_counts[TOPK_BINS];
    __shared__ u32 warp_totals[BLOCK_THREADS / 32];
    __shared__ u64 scan_buffer[BLOCK_THREADS];
    __shared__ u64 tile_a[BLOCK_THREADS];
    __shared__ u64 tile_b[BLOCK_THREADS];
    __shared__ u64 block_base;

    u64* state = reinterpret_cast<u64*>(params.state);
    const Bits flip = (Bits)params.flip;
    const u32 stage = params.stage;

    if (stage == TOPK_STAGE_INIT) {
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
    const bool mode_fast = stage > TOPK_STAGE_INIT && state[TOPK_SLOT_MODE] == 1;
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

    if (stage == TOPK_STAGE_DECIDE) {
        if (blockIdx.x == 0 && threadIdx.x == 0 && state[TOPK_SLOT_SAMPLED] != 0 &&
            state[TOPK_SLOT_DONE] == 0) {
            const u64 count = state[TOPK_SLOT_CANDIDATES];
            if (count >= state[TOPK_SLOT_K] && count <= params.cand_cap) {
                state[TOPK_SLOT_MODE] = 1;
            }
        }
        return;
    }

    if (stage == TOPK_STAGE_HISTOGRAM) {
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

    if (stage == TOPK_STAGE_PIVOT) {
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

    if (stage == TOPK_STAGE_FINAL) {
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
                const u64 slot = warp_append(above, &state[TOPK_SLOT_ABOVE]);
                if (above) {
                    write_out(slot, raw, cand_index[at]);
                }
                const u64 ticket = warp_append(boundary, &state[TOPK_SLOT_TICKETS]);
                if (boundary && ticket < remaining) {
                    write_out(k - remaining + ticket, raw, cand_index[at]);
                }
            } else {
                const bool keep = above || boundary;
                topk_warp_max(keep, (u64)(Bits)(Key::to_radix(raw) ^ flip), &state[TOPK_SLOT_MAX_RANK]);
                const u64 slot = warp_append(keep, &state[TOPK_SLOT_RANKED]);
                if (keep && slot < params.rank_cap) {
                    rank_keys[slot] = raw;
                    rank_index[slot] = cand_index[at];
                }
            }
        });
        return;
    }

    if (stage == TOPK_STAGE_RANK_BUCKET || stage == TOPK_STAGE_RANK_PLACE || stage == TOPK_STAGE_RANK_COUNT ||
        stage == TOPK_STAGE_RANK_SCATTER) {
        if (old_path ? !rank_sort : direct) {
            return;
        }
        // The rank sort. Each item's output position is the number of items better than it
        // (rank descending, equal ranks by source index ascending: all distinct, so positions
        // are unique and deterministic). Comparing every pair cost ~90 us at k = 16384, so the
        // items are first grouped by bucket, a monotone function of the rank (best bucket
        // first): an item is then compared only with the items of its own tile's buckets, and
        // every item before those buckets is better.
        const u64 items = old_path ? state[TOPK_SLOT_SELECTED] : state[TOPK_SLOT_RANKED];
        u64* positions = reinterpret_cast<u64*>(params.rank_pos);  // zeroed
        u64* placed = positions + params.rank_cap;  // bucket << 32 | slot within the bucket
        u32* bucket_count = reinterpret_cast<u32*>(histogram + sizeof(Bits) * TOPK_BINS);
        u32* bucket_start = bucket_count + TOPK_RANK_BUCKETS;
        // The grouped items reuse the candidate buffer (no longer read; at least rank_cap).
        Bits* grouped_keys = cand_keys;
        u64* grouped_index = cand_index;
        // Every item's rank is in [prefix, max rank]: the buckets split that span evenly.
        const u64 low = state[TOPK_SLOT_PREFIX];
        const u64 high = state[TOPK_SLOT_MAX_RANK];
        const u64 span = high > low ? high - low : 0;
        const u32 width = span == 0 ? 0u : 64u - (u32)__clzll((long long)span);
        const u32 bucket_shift = width > TOPK_RANK_BUCKET_BITS ? width - TOPK_RANK_BUCKET_BITS : 0u;
        auto bucket_of = [&](Bits raw) -> u32 {
            const u64 rank = (u64)(Bits)(Key::to_radix(raw) ^ flip);
            const u64 b = rank <= low ? 0 : (rank - low) >> bucket_shift;
            return TOPK_RANK_BUCKETS - 1 - (u32)(b < TOPK_RANK_BUCKETS - 1 ? b : TOPK_RANK_BUCKETS - 1);
        };
        const u64 stride = grid_threads(BLOCK_THREADS);
        if (stage == TOPK_STAGE_RANK_BUCKET) {
            for (u64 i = global_thread_index(BLOCK_THREADS); i < items; i += stride) {
                const u32 b = bucket_of(rank_keys[i]);
                placed[i] = ((u64)b << 32) | atomicAdd(&bucket_count[b], 1u);
            }
            // The last block: exclusive scan of the bucket counts into bucket_start.
            __threadfence();
            __syncthreads();
            __shared__ bool last_bucketing;
            if (threadIdx.x == 0) {
                last_bucketing = atomicAdd(&state[TOPK_SLOT_BUCKETED], 1ull) == (u64)gridDim.x - 1;
            }
            __syncthreads();
            if (!last_bucketing) {
                return;
            }
            __threadfence();
            constexpr u32 PER = TOPK_RANK_BUCKETS / BLOCK_THREADS;
            static_assert(PER * BLOCK_THREADS == TOPK_RANK_BUCKETS, "rank buckets");
            // L2 reads (the other blocks' atomics are there), all in flight at once.
            u32 c[PER];
#pragma unroll
            for (u32 p = 0; p < PER; ++p) {
                c[p] = __ldcg(&bucket_count[threadIdx.x * PER + p]);
            }
            u32 sum = 0;
#pragma unroll
            for (u32 p = 0; p < PER; ++p) {
                sum += c[p];
            }
            u32 total = 0;
            u32 running = block_exclusive_sum<BLOCK_THREADS>(sum, warp_totals, &total);
#pragma unroll
            for (u32 p = 0; p < PER; ++p) {
                bucket_start[threadIdx.x * PER + p] = running;
                running += c[p];
            }
            return;
        }
        if (stage == TOPK_STAGE_RANK_PLACE) {
            for (u64 i = global_thread_index(BLOCK_THREADS); i < items; i += stride) {
                const u64 at = placed[i];
                const u64 to = bucket_start[at >> 32] + (at & 0xFFFFFFFFull);
                grouped_keys[to] = rank_keys[i];
                grouped_index[to] = rank_index[i];
            }
            return;
        }
        if (stage == TOPK_STAGE_RANK_SCATTER) {
            const u64 k = state[TOPK_SLOT_K];
            const u64 above = k - state[TOPK_SLOT_REMAINING];
            const u64 drop = items - k;  // surplus boundary items (fast path only)
            const bool prefer_larger = (params.flags & TOPK_PREFER_LARGER) != 0;
            for (u64 i = global_thread_index(BLOCK_THREADS); i < items; i += stride) {
                u64 p = positions[i];
                if (prefer_larger && !old_path && p >= above) {
                    if (p < above + drop) {
                        continue;
                    }
                    p -= drop;
                }
                if (p < k) {
                    write_out(p, grouped_keys[i], grouped_index[i]);
                }
            }
            return;
        }
        // RANK_COUNT over the grouped items, by (tile of BLOCK_THREADS items x chunk of the
        // items in the tile's buckets) work units.
        const bool packed = sizeof(Bits) <= 4 && params.len < (1ull << 32);
        const u64 tiles = (items + BLOCK_THREADS - 1) / BLOCK_THREADS;
        const u64 chunks = (items + TOPK_RANK_CHUNK - 1) / TOPK_RANK_CHUNK;
        for (u64 unit = blockIdx.x; unit < tiles * chunks; unit += gridDim.x) {
            const u64 tile = unit / chunks;
            const u64 chunk = unit % chunks;
            const u64 first = tile * BLOCK_THREADS;
            const u64 last = (first + BLOCK_THREADS < items ? first + BLOCK_THREADS : items) - 1;
            const u32 first_bucket = bucket_of(grouped_keys[first]);
            const u32 last_bucket = bucket_of(grouped_keys[last]);
            const u64 range_start = bucket_start[first_bucket];
            const u64 range_end = (u64)bucket_start[last_bucket] + bucket_count[last_bucket];
            const u64 begin = range_start + chunk * TOPK_RANK_CHUNK;
            if (begin >= range_end) {
                continue;  // block-uniform
            }
            const u64 end = begin + TOPK_RANK_CHUNK < range_end ? begin + TOPK_RANK_CHUNK : range_end;
            const u64 i = first + threadIdx.x;
            const bool valid = i < items;
            const u64 my_rank = valid ? (u64)(Bits)(Key::to_radix(grouped_keys[i]) ^ flip) : 0;
            const u64 my_index = valid ? grouped_index[i] : ~0ull;
            const u64 my_packed = (my_rank << 32) | (0xFFFFFFFFull - (my_index & 0xFFFFFFFFull));
            u32 better = 0;
            for (u64 j0 = begin; j0 < end; j0 += BLOCK_THREADS) {
                const u64 j = j0 + threadIdx.x;
                const bool other = j < end;
                const u64 r = other ? (u64)(Bits)(Key::to_radix(grouped_keys[j]) ^ flip) : 0;
                const u64 x = other ? grouped_index[j] : ~0ull;
                if (packed) {
                    tile_a[threadIdx.x] = other ? (r << 32) | (0xFFFFFFFFull - x) : 0;
                } else {
                    tile_a[threadIdx.x] = r;
                    tile_b[threadIdx.x] = x;
                }
                __syncthreads();
                // Padding (0, or rank 0 with index ~0) is never better.
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
            // Every item before the tile's buckets is better (counted once, by chunk 0).
            const u64 add = better + (chunk == 0 ? range_start : 0);
            if (valid && add != 0) {
                atomicAdd(&positions[i], add);
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

    if (stage == TOPK_STAGE_SCAN) {
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

    if (stage == TOPK_STAGE_COUNT_BOUNDARY || stage == TOPK_STAGE_COUNT_SELECTED ||
        stage == TOPK_STAGE_SCATTER_SELECTED) {
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
            if (stage == TOPK_STAGE_COUNT_BOUNDARY) {
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
            if (stage == TOPK_STAGE_COUNT_SELECTED) {
                if (threadIdx.x == 0) {
                    tile_offsets[tile] = total;
                }
                continue;
            }
            if (rank_sort) {
                topk_warp_max(selected, rank, &state[TOPK_SLOT_MAX_RANK]);
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

    if (stage == TOPK_STAGE_COUNT_SPLIT || stage == TOPK_STAGE_SCATTER_SPLIT) {
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
            if (stage == TOPK_STAGE_COUNT_SPLIT) {
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
