// Family topk_radix_select, PART 1: the fast path's PREFILTER (docs/design/topk.md,
// "Sample and prefilter").
namespace oxicub {

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
    // (the stage is bound by integer instructions: docs/design/topk.md,
    // "Sample and prefilter"). A warp with no hit skips the append.
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

}  // namespace oxicub
