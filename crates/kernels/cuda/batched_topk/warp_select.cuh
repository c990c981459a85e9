// Family batched_topk, TIER 1 ("Warp tier"): one segment (or, in the direct pairs path, two)
// selected by a warp, and the paths for the segments the fast selection declines.
namespace oxicub {

// Keys of at most 32 bits (raw bits in `raw`, lane l holding items l*ITEMS ..; FULL: all
// 32 * ITEMS present). Every item of the top `written` is at or above the written-th largest
// lane maximum (the `written` best lane maxima are that many items at or above it), found by
// rounds of redux max that retire every lane holding the maximum at once. The items at or
// above it (a few more than `written` on most data) are ranked against each other by counting
// in 32 shared-memory slots per warp: (rank << 32 | index as the tie-break prefers) is one
// u64, larger = better. Returns false, having written nothing, when that threshold is rank 0
// (fewer than `written` lanes hold an item above the lowest rank, so absent items would
// count) or more than 32 items are at or above it (ties): the caller then takes
// bt_warp32_slow. No call in here: a call would make the compiler keep the caller's live
// values (the next segment's keys) in local memory around it.
template <class Key, int VALUE_BYTES, int ITEMS, bool FULL_SEGMENT>
__device__ __forceinline__ bool bt_warp32_segment(const BatchedTopKParams& p, u64 seg, u64 begin,
                                                  u32 size, u32 written, u32 dir,
                                                  const u32 (&raw)[ITEMS]) {
    const u32 FULL = 0xFFFFFFFFu;
    const u32 lane = threadIdx.x & 31u;
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool stable = (p.flags & BT_STABLE) != 0;
    const u32 base = lane * (u32)ITEMS;
    u32 rank[ITEMS];
    const u32 m = bt_rank32_lane<Key, ITEMS, FULL_SEGMENT>(raw, base, size, dir, rank);
    u32 threshold;
    if (written <= 4u) {
        // Rounds of redux max, each retiring every lane that holds the maximum (ties count
        // once per lane): ~11 instructions a round.
        u32 top = m;
        i32 left = (i32)written;
        do {
            threshold = warp_max(top);
            const bool holder = top == threshold;
            left -= __popc(__ballot_sync(FULL, holder));
            top = holder ? 0u : top;
        } while (left > 0);
    } else {
        // The lane maxima sorted best first across the warp (15 steps of one shuffle and one
        // min or max): cheaper than 5 or more rounds.
        threshold = __shfl_sync(FULL, warp_sort_desc<32>(m, lane), (int)written - 1);
    }
    if (threshold == 0) {
        return false;  // warp-uniform
    }
    u32 mine = 0;
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
        mine = bt_count_at_least(mine, rank[t], threshold);  // absent items rank 0
    }
    const u32 total = warp_sum(mine);
    if (total > 32u) {
        return false;  // warp-uniform
    }
    // Each lane appends its candidates after those of the lanes below it.
    BtWarpScratch& scratch = bt_warp_scratch();
    const u32 warp = (threadIdx.x >> 5) & 7u;
    u64* candidates = scratch.candidates[warp];
    const u32 first = warp_exclusive_sum<32>(mine, lane);
    u32 at = (u32)__cvta_generic_to_shared(candidates + first);
    const u32 order_flip = prefer_larger ? 0u : ~0u;
    bt_append_items<0, ITEMS, 0, 0>(&at, rank, threshold - 1u,
                                  bt_order_base(base, prefer_larger));
    // The ranking below reads 4 entries at a time: zeros up to a multiple of 4 rank below
    // every candidate (whose rank is at least threshold > 0).
    const u32 padded = (total + 3u) & ~3u;
    if (lane >= total && lane < padded) {
        candidates[lane] = 0;
    }
    __syncwarp();
    const u64 own = candidates[lane];
    u32 pos = 0;
#pragma unroll 1
    for (u32 q = 0; q < padded; q += 4) {
        const ulonglong2 a = reinterpret_cast<const ulonglong2*>(candidates + q)[0];
        const ulonglong2 b = reinterpret_cast<const ulonglong2*>(candidates + q)[1];
        pos = bt_count_above(pos, a.x, own);
        pos = bt_count_above(pos, a.y, own);
        pos = bt_count_above(pos, b.x, own);
        pos = bt_count_above(pos, b.y, own);
    }
    pos = lane < total ? pos : 32u;
    const u32 own_rank = (u32)(own >> 32);
    const u32 own_index = (u32)own ^ order_flip;
    u32 out_slot = pos;
    if (stable && prefer_larger) {
        // The selected items (at or above the written-th best) by key, then index.
        const u32 cut_lane = (u32)__ffs(__ballot_sync(FULL, pos + 1u == written)) - 1u;
        const u64 cut = __shfl_sync(FULL, own, (int)cut_lane);
        out_slot = 0;
        for (u32 q = 0; q < total; ++q) {
            const u64 other = candidates[q];
            const u32 other_rank = (u32)(other >> 32);
            const u32 other_index = (u32)other;  // prefer_larger: the index itself
            out_slot += (other >= cut && (other_rank > own_rank ||
                         (other_rank == own_rank && other_index < own_index))) ? 1u : 0u;
        }
    }
    if (pos < written) {
        bt_write<Key, VALUE_BYTES>(p, begin, (u64)own_index, seg * p.out_stride + out_slot);
    }
    __syncwarp();  // the entries are reused by the warp's next segment
    return true;
}

// Two full segments of 32 * ITEMS keys at once, one per half warp (lanes 16h .. 16h + 15 take
// this lane's `seg`, H = 2 * ITEMS keys per lane, ranked by bt_rank32_lane; `m` the lane's
// largest rank), `written` <= 16: bt_warp32_segment's method with every collective step (the
// threshold's sort, the counts, the ranking) done for both segments by the same warp
// instructions, and 16 candidate entries per half. A half with `valid` false has no segment
// (its lanes write nothing). Selected keys are written from their ranks (bt_write_ranked, direction `dir`), not read
// again. The halves declined (bit h: threshold of rank 0 or more than 16 items at or above
// it), having written nothing for them (bt_warp32_slow's), are shifted into `declined` as its
// two low bits: folded in at once, so no value of the decision stays live through the pair.
template <class Key, int VALUE_BYTES, int H>
__device__ __forceinline__ void bt_warp32_pair(const BatchedTopKParams& p, u32 seg, u32 stride,
                                               u32 written, bool valid, u32 m,
                                               const u32 (&rank)[H], u32 dir, u32& declined) {
    const u32 FULL = 0xFFFFFFFFu;
    const u32 lane = threadIdx.x & 31u;
    const u32 half = lane >> 4;
    const u32 hl = lane & 15u;
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool stable = (p.flags & BT_STABLE) != 0;
    // The written-th largest lane maximum of each half (lanes 16h .. 16h + 15 sorted apart).
    const u32 threshold =
        __shfl_sync(FULL, warp_sort_desc<16>(m, lane), (int)((lane & 16u) | (written - 1u)));
    u32 mine = 0;
#pragma unroll
    for (int t = 0; t < H; ++t) {
        mine = bt_count_at_least(mine, rank[t], threshold);
    }
    // Both halves' counts by one sum: half 1's in the upper 16 bits (each at most 256).
    const u32 total = (warp_sum(mine << (16u * half)) >> (16u * half)) & 0xFFFFu;
    const bool ok = valid && threshold != 0 && total <= 16u;  // uniform within a half
    const u32 refused = __ballot_sync(FULL, valid && !ok);
    declined = (declined << 2) | (refused & 1u) | ((refused >> 15) & 2u);
    if (!__any_sync(FULL, ok)) {
        return;  // warp-uniform
    }
    // Half h's 16 candidates: ranks at words 32h .. 32h + 15 of the warp's entries, their
    // orders 16 words above (bt_append_if's split form).
    BtWarpScratch& scratch = bt_warp_scratch();
    const u32 warp = (threadIdx.x >> 5) & 7u;
    u32* ranks = reinterpret_cast<u32*>(scratch.candidates[warp]) + 32u * half;
    u32* orders = ranks + 16;
    const u32 order_flip = prefer_larger ? 0u : ~0u;
    // Each lane appends its candidates after those of the lanes below it in its half.
    const u32 first = warp_exclusive_sum<16>(mine, lane);
    if (ok) {
        u32 at = (u32)__cvta_generic_to_shared(ranks + first);
        // Lane hl's items are 4v .. 4v + 3 of run v = 0 .. H/4 - 1: indices 64v + 4hl + j.
        bt_append_items<0, H, 64, 64>(&at, rank, threshold - 1u,
                                      bt_order_base(hl * 4u, prefer_larger));
    }
    // Zeros past a half's candidates rank below every candidate (whose rank is at least
    // threshold > 0): the ranking reads all 16 entries of its half, a fixed count unrolled (no
    // loop branch and no trip count live through the appends; the few extra compares cost less).
    // A declined half's entries are not used.
    if (hl >= total) {
        ranks[hl] = 0;
        orders[hl] = 0;
    }
    __syncwarp();
    const u32 own_rank = ranks[hl];
    const u32 own_order = orders[hl];
    const u64 own = (u64)own_rank << 32 | own_order;
    u32 pos = 0;
#pragma unroll
    for (u32 q = 0; q < 16; q += 4) {
        const uint4 r = reinterpret_cast<const uint4*>(ranks + q)[0];
        const uint4 o = reinterpret_cast<const uint4*>(orders + q)[0];
        pos = bt_count_above(pos, (u64)r.x << 32 | o.x, own);
        pos = bt_count_above(pos, (u64)r.y << 32 | o.y, own);
        pos = bt_count_above(pos, (u64)r.z << 32 | o.z, own);
        pos = bt_count_above(pos, (u64)r.w << 32 | o.w, own);
    }
    pos = ok && hl < total ? pos : 32u;
    const u32 own_index = own_order ^ order_flip;
    u32 out_slot = pos;
    if (stable && prefer_larger) {
        // The selected items (at or above the written-th best) by key, then index.
        const u32 cut_at = __ballot_sync(FULL, pos + 1u == written) & (0xFFFFu << (16u * half));
        const u32 cut_lane = (u32)__ffs(cut_at) - 1u;  // none in a declined half: unused
        const u64 cut = __shfl_sync(FULL, own, (int)(cut_lane & 31u));
        out_slot = 0;
        const u32 n = ok ? total : 0u;
        for (u32 q = 0; q < n; ++q) {
            const u32 other_rank = ranks[q];
            const u32 other_index = orders[q];  // prefer_larger: the index itself
            const u64 other = (u64)other_rank << 32 | other_index;
            out_slot += (other >= cut && (other_rank > own_rank ||
                         (other_rank == own_rank && other_index < own_index))) ? 1u : 0u;
        }
    }
    if (pos < written) {
        bt_write_ranked<Key, VALUE_BYTES>(p, (u64)seg * stride, (u64)own_index,
                                          (u64)seg * p.out_stride + out_slot, own_rank, dir);
    }
    __syncwarp();  // the entries are reused by the warp's next pair
}

// Any key type: `written` rounds of a warp arg-max over (u64 rank, index), keys strided over
// the lanes (j = lane + 32t). Wider keys, and the segments bt_warp32_slow gets.
template <class Key, int VALUE_BYTES, int ITEMS>
__device__ __forceinline__ void bt_warp_general(const BatchedTopKParams& p, u64 seg, u64 begin,
                                                u64 size, u64 written, u32 dir) {
    const u32 lane = threadIdx.x & 31u;
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool stable = (p.flags & BT_STABLE) != 0;
    const typename Key::Bits* keys = reinterpret_cast<const typename Key::Bits*>(p.keys);
    u64 rank[ITEMS];
    u32 alive = 0;
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
        const u64 j = (u64)lane + 32ull * (u64)t;
        rank[t] = 0;
        if (j < size) {
            rank[t] = bt_rank<Key>(keys[begin + j], dir);
            alive |= 1u << t;
        }
    }
    u64 kept_rank = 0;
    u64 kept_index = BT_PAD;
    for (u64 round = 0; round < written; ++round) {
        u64 best_rank = 0;
        u64 best_index = BT_PAD;
#pragma unroll
        for (int t = 0; t < ITEMS; ++t) {
            const u64 j = (u64)lane + 32ull * (u64)t;
            if (((alive >> t) & 1u) && bt_better(rank[t], j, best_rank, best_index, prefer_larger)) {
                best_rank = rank[t];
                best_index = j;
            }
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
            const u64 other_rank = __shfl_xor_sync(0xFFFFFFFFu, best_rank, offset);
            const u64 other_index = __shfl_xor_sync(0xFFFFFFFFu, best_index, offset);
            if (bt_better(other_rank, other_index, best_rank, best_index, prefer_larger)) {
                best_rank = other_rank;
                best_index = other_index;
            }
        }
        // Every lane holds the same winner (a strict total order over distinct indices).
        if (best_index != BT_PAD && (best_index & 31u) == lane) {
            alive &= ~(1u << (u32)(best_index >> 5));
        }
        if (round == lane) {
            kept_rank = best_rank;
            kept_index = best_index;
        }
    }
    // Lane r holds the r-th item in selection order (best first, ties as the tie-break
    // prefers): already sorted by key. A stable order puts equal keys by index.
    u64 slot = lane;
    if (stable && prefer_larger) {
        slot = 0;
        for (u64 q = 0; q < written; ++q) {
            const u64 other_rank = __shfl_sync(0xFFFFFFFFu, kept_rank, (int)q);
            const u64 other_index = __shfl_sync(0xFFFFFFFFu, kept_index, (int)q);
            if (other_rank > kept_rank || (other_rank == kept_rank && other_index < kept_index)) {
                ++slot;
            }
        }
    }
    if ((u64)lane < written) {
        bt_write<Key, VALUE_BYTES>(p, begin, kept_index, seg * p.out_stride + slot);
    }
}

// The segments bt_warp32_segment declines (keys of at most 32 bits): the 32-bit rounds when
// at least `written` items rank above 0 (many ties at the threshold), else the general path.
template <class Key, int VALUE_BYTES, int ITEMS>
__device__ __forceinline__ void bt_warp32_slow(const BatchedTopKParams& p, u64 seg, u64 begin,
                                               u32 size, u32 written, u32 dir) {
    const u32 lane = threadIdx.x & 31u;
    const typename Key::Bits* src = reinterpret_cast<const typename Key::Bits*>(p.keys) + begin;
    u32 rank[ITEMS];
    u32 nonzero = 0;
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
        const u32 j = lane * (u32)ITEMS + (u32)t;
        rank[t] = j < size ? (u32)bt_rank<Key>(src[j], dir) : 0u;
        nonzero += rank[t] != 0 ? 1u : 0u;
    }
    if (warp_sum(nonzero) >= written) {
        bt_warp32_rounds<Key, VALUE_BYTES, ITEMS>(p, seg, begin, written, rank);
    } else {
        bt_warp_general<Key, VALUE_BYTES, ITEMS>(p, seg, begin, size, written, dir);
    }
}

}  // namespace oxicub
