// Family batched_topk, TIER 1 (a warp per segment; docs/design/batched_topk.md, "Warp tier"):
// a lane's keys and ranks, the candidate slots of a warp and the appends to them, and the
// rounds of a warp arg-max.
namespace oxicub {

// bt_rank of a key of at most 32 bits, except that a float NaN keeps a code of its own (above
// the rank of +inf or below that of -inf, for either direction) rather than the one code every
// NaN has: 3 instructions per key instead of 6. A segment with a NaN (detected per segment by
// its highest and lowest rank) is canonicalised by bt_warp32_segment.
template <class Key>
__device__ __forceinline__ u32 bt_rank32_raw(typename Key::Bits raw, typename Key::Bits flip) {
    typedef typename Key::Bits Bits;
    if constexpr (Key::KEY_KIND == KIND_FLOAT) {
        constexpr int SHIFT = 32 - 8 * (int)sizeof(Bits);
        // All ones for a negative key: the transform inverts it, else sets its sign bit.
        const Bits negative = (Bits)((i32)((u32)raw << SHIFT) >> 31);
        return (u32)(Bits)(raw ^ (Bits)((Bits)(negative | Key::SIGN) ^ flip));
    } else {
        return (u32)(Bits)(Key::to_radix(raw) ^ flip);
    }
}

// Whether a segment of `size` keys at `src` is loaded with one or two vector loads per lane:
// 4-byte keys, exactly 32 * ITEMS of them, aligned to the load.
template <class Key, int ITEMS>
__device__ __forceinline__ bool bt_warp_vector(const typename Key::Bits* src, u64 size) {
    if constexpr (sizeof(typename Key::Bits) == 4 && (ITEMS % 4 == 0 || ITEMS == 2)) {
        constexpr u64 ALIGN = ITEMS == 2 ? 8 : 16;
        return size == 32ull * ITEMS && (((unsigned long long)src) & (ALIGN - 1)) == 0;
    } else {
        return false;
    }
}

// Lane `lane`'s keys of a segment of `size` keys at `src`: items lane*ITEMS .. lane*ITEMS+ITEMS-1
// as raw bits (absent items read as 0, and are never ranked). VECTOR: bt_warp_vector holds.
template <class Key, int ITEMS, bool VECTOR>
__device__ __forceinline__ void bt_warp_load(const typename Key::Bits* src, u32 size, u32 lane,
                                             u32 (&raw)[ITEMS]) {
    const u32 base = lane * (u32)ITEMS;
    if constexpr (VECTOR && ITEMS == 2) {
        const uint2 w = reinterpret_cast<const uint2*>(src + base)[0];
        raw[0] = w.x;
        raw[1] = w.y;
    } else if constexpr (VECTOR) {
#pragma unroll
        for (int v = 0; v < ITEMS / 4; ++v) {
            const uint4 w = reinterpret_cast<const uint4*>(src + base)[v];
            raw[4 * v + 0] = w.x;
            raw[4 * v + 1] = w.y;
            raw[4 * v + 2] = w.z;
            raw[4 * v + 3] = w.w;
        }
    } else {
#pragma unroll
        for (int t = 0; t < ITEMS; ++t) {
            raw[t] = base + (u32)t < size ? (u32)src[base + (u32)t] : 0u;
        }
    }
}

// Half-warp lane `hl`'s keys of a full segment of 64 * RUNS 4-byte keys at `src` (16-byte
// aligned): run v (0 .. RUNS - 1) is items 64v + 4hl .. 64v + 4hl + 3, one 16-byte load. Each
// load of the 16 lanes reads 256 consecutive bytes (a lane reading 16 consecutive items needs
// four loads of 16 bytes 64 apart: twice the sectors and four times the cache lines per load
// instruction through L1, the kernel's busiest unit). Streaming loads (evict first): every key
// is read once, and keeping them cached only displaced what was still to come (L2-only loads
// gained nothing; docs/design/batched_topk.md, "Warp tier").
template <int RUNS>
__device__ __forceinline__ void bt_half_load(const u32* src, u32 hl, u32 (&raw)[4 * RUNS]) {
#pragma unroll
    for (int v = 0; v < RUNS; ++v) {
        const uint4 w = __ldcs(reinterpret_cast<const uint4*>(src) + 16 * v + hl);
        raw[4 * v + 0] = w.x;
        raw[4 * v + 1] = w.y;
        raw[4 * v + 2] = w.z;
        raw[4 * v + 3] = w.w;
    }
}

// The warp tier's shared memory, one place for every instantiation of its functions: per warp
// (at most 8 per block) 32 candidate entries (when each half of the warp takes a segment,
// bt_warp32_pair, half h uses the 128 bytes of entries 16h .. 16h + 15 as two arrays of 16
// u32: ranks, then orders).
struct BtWarpScratch {
    u64 candidates[8][32];
};
__device__ __forceinline__ BtWarpScratch& bt_warp_scratch() {
    __shared__ __align__(16) BtWarpScratch scratch;
    return scratch;
}

// Stores (order ^ T, rank) at shared address `*at` and advances it when rank > above
// (= threshold - 1): predicated, not a branch per item (T a constant: the compiler would
// otherwise hoist every item's order out of the segment loop, into registers it has not got).
// SPLIT 0: one u64 (order low, rank high), `*at` advanced by 8. SPLIT > 0: two arrays of u32,
// the rank at `*at` and the order SPLIT bytes above it, `*at` advanced by 4: one more store
// per item, but the order needs no register paired with the rank's (a u64 store takes two
// adjacent registers, so every item's order was formed ahead into a register of its own:
// 16 more live registers through the appends). The compare is written as rank > above, not
// as the count's rank >= threshold: the compiler would otherwise keep the count's predicates
// as bits of a register (two instructions an item) to reuse them here.
template <u32 T, u32 SPLIT>
__device__ __forceinline__ void bt_append_if(u32* at, u32 rank, u32 above, u32 order) {
    if constexpr (SPLIT == 0) {
        asm volatile(
            "{\n\t.reg .pred p;\n\t.reg .b32 o;\n\t"
            "setp.gt.u32 p, %1, %2;\n\t"
            "xor.b32 o, %3, %4;\n\t"
            "@p st.shared.v2.u32 [%0], {o, %1};\n\t"
            "@p add.u32 %0, %0, 8;\n\t"
            "}"
            : "+r"(*at)
            : "r"(rank), "r"(above), "r"(order), "n"(T)
            : "memory");
    } else {
        asm volatile(
            "{\n\t.reg .pred p;\n\t.reg .b32 o;\n\t"
            "setp.gt.u32 p, %1, %2;\n\t"
            "xor.b32 o, %3, %4;\n\t"
            "@p st.shared.u32 [%0], %1;\n\t"
            "@p st.shared.u32 [%0+%5], o;\n\t"
            "@p add.u32 %0, %0, 4;\n\t"
            "}"
            : "+r"(*at)
            : "r"(rank), "r"(above), "r"(order), "n"(T), "n"(SPLIT)
            : "memory");
    }
}

// bt_append_if for items T .. N - 1 of a lane. Item t's index is base + offset(t), where
// offset(t) = t (VSTRIDE 0: a lane's items are consecutive) or (t / 4) * VSTRIDE + t % 4 (a
// lane's items are runs of 4, VSTRIDE apart: bt_half_load), and base has no bit in common
// with any offset; its order is then (base + offset) ^ flip = (base ^ flip) ^ offset (flip 0
// when the larger index wins a tie, else all ones). base ^ flip is formed as base * step + flip
// (step 1 or -1, bt_order_base): as an xor with the uniform flip, the compiler reassociates it
// with each item's constant and copies the flip into a register per item (two instructions an
// item instead of one).
template <u32 T, int N, u32 VSTRIDE, u32 SPLIT>
__device__ __forceinline__ void bt_append_items(u32* at, const u32 (&rank)[N], u32 above,
                                                u32 order) {
    constexpr u32 OFFSET = VSTRIDE == 0 ? T : (T / 4) * VSTRIDE + T % 4;
    bt_append_if<OFFSET, SPLIT>(at, rank[T], above, order);
    if constexpr ((int)T + 1 < N) {
        bt_append_items<T + 1, N, VSTRIDE, SPLIT>(at, rank, above, order);
    }
}

// (base ^ flip) for bt_append_items, flip = prefer_larger ? 0 : ~0.
__device__ __forceinline__ u32 bt_order_base(u32 base, bool prefer_larger) {
    return base * (prefer_larger ? 1u : ~0u) + (prefer_larger ? 0u : ~0u);
}

// pos + 1 when x > own, else pos (a predicated add, not a select and an add).
__device__ __forceinline__ u32 bt_count_above(u32 pos, u64 x, u64 own) {
    asm("{\n\t.reg .pred p;\n\t"
        "setp.gt.u64 p, %1, %2;\n\t"
        "@p add.u32 %0, %0, 1;\n\t"
        "}"
        : "+r"(pos)
        : "l"(x), "l"(own));
    return pos;
}

// count + 1 when rank >= threshold, else count: a predicated add whose predicate lives only
// here (the compiler otherwise keeps every item's compare in a register of packed bits, two
// instructions an item, to reuse it in the appends, which compare again anyway).
__device__ __forceinline__ u32 bt_count_at_least(u32 count, u32 rank, u32 threshold) {
    asm("{\n\t.reg .pred p;\n\t"
        "setp.ge.u32 p, %1, %2;\n\t"
        "@p add.u32 %0, %0, 1;\n\t"
        "}"
        : "+r"(count)
        : "r"(rank), "r"(threshold));
    return count;
}

// `written` rounds of a warp arg-max over 32-bit ranks (0 = taken or absent): one redux.sync
// max, one ballot and one shuffle per round. Index order is (lane, slot) order, so the lowest
// (highest) lane and slot holding the maximum is the item the tie-break prefers. Every rank of
// the top `written` must be above 0.
template <class Key, int VALUE_BYTES, int ITEMS>
__device__ __forceinline__ void bt_warp32_rounds(const BatchedTopKParams& p, u64 seg, u64 begin,
                                                 u32 written, u32 (&rank)[ITEMS]) {
    const u32 FULL = 0xFFFFFFFFu;
    const u32 lane = threadIdx.x & 31u;
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool stable = (p.flags & BT_STABLE) != 0;
    u32 kept_rank = 0;
    u32 kept_index = 0;
    for (u32 round = 0; round < written; ++round) {
        u32 m = rank[0];
#pragma unroll
        for (int t = 1; t < ITEMS; ++t) {
            m = max(m, rank[t]);
        }
        const u32 best = warp_max(m);
        const u32 holders = __ballot_sync(FULL, m == best);
        const u32 winner = prefer_larger ? 31u - (u32)__clz(holders) : (u32)__ffs(holders) - 1u;
        u32 slot = 0;
        if (prefer_larger) {
#pragma unroll
            for (int t = 0; t < ITEMS; ++t) {
                slot = rank[t] == best ? (u32)t : slot;
            }
        } else {
#pragma unroll
            for (int t = ITEMS - 1; t >= 0; --t) {
                slot = rank[t] == best ? (u32)t : slot;
            }
        }
        if (lane == winner) {
#pragma unroll
            for (int t = 0; t < ITEMS; ++t) {
                rank[t] = (u32)t == slot ? 0u : rank[t];
            }
        }
        const u32 won = __shfl_sync(FULL, slot, (int)winner);
        if (lane == round) {
            kept_rank = best;
            kept_index = winner * (u32)ITEMS + won;
        }
    }
    // Lane r holds the r-th item in selection order: sorted by key, ties as the tie-break
    // prefers. A stable order puts equal keys by index.
    u32 out_slot = lane;
    if (stable && prefer_larger) {
        out_slot = 0;
        for (u32 q = 0; q < written; ++q) {
            const u32 other_rank = __shfl_sync(FULL, kept_rank, (int)q);
            const u32 other_index = __shfl_sync(FULL, kept_index, (int)q);
            if (other_rank > kept_rank || (other_rank == kept_rank && other_index < kept_index)) {
                ++out_slot;
            }
        }
    }
    if (lane < written) {
        bt_write<Key, VALUE_BYTES>(p, begin, (u64)kept_index, seg * p.out_stride + out_slot);
    }
}

// A lane's ranks of its ITEMS keys (raw bits; items base .. base + ITEMS - 1 of a segment of
// `size`, absent ones rank 0; FULL_SEGMENT: all present) by bt_rank32_raw, a float NaN then
// canonicalised to bt_rank's one code when any lane of the warp holds one. Returns the lane's
// largest rank.
template <class Key, int ITEMS, bool FULL_SEGMENT>
__device__ __forceinline__ u32 bt_rank32_lane(const u32 (&raw)[ITEMS], u32 base, u32 size,
                                              u32 dir, u32 (&rank)[ITEMS]) {
    typedef typename Key::Bits Bits;
    const Bits flip = dir ? (Bits)~(Bits)0 : (Bits)0;
    u32 m = 0;
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
        const bool present = FULL_SEGMENT || base + (u32)t < size;
        rank[t] = present ? bt_rank32_raw<Key>((Bits)raw[t], flip) : 0u;
        m = max(m, rank[t]);
    }
    if constexpr (Key::KEY_KIND == KIND_FLOAT) {
        // Ranks above HI or below LO are NaNs (either direction: LO = ~HI).
        constexpr u32 HI = (u32)(Bits)(Key::INF | Key::SIGN);
        constexpr u32 LO = (u32)(Bits)~(Bits)HI;
        u32 low = ~0u;
#pragma unroll
        for (int t = 0; t < ITEMS; ++t) {
            const bool present = FULL_SEGMENT || base + (u32)t < size;
            low = min(low, present ? rank[t] : ~0u);
        }
        if (__any_sync(0xFFFFFFFFu, m > HI || low < LO)) {
            // Every NaN ranks as the one code bt_rank gives it (ties among NaNs by index).
            const u32 nan_rank = (u32)(Bits)~flip;
            m = 0;
#pragma unroll
            for (int t = 0; t < ITEMS; ++t) {
                const bool present = FULL_SEGMENT || base + (u32)t < size;
                if (present && (rank[t] > HI || rank[t] < LO)) {
                    rank[t] = nan_rank;
                }
                m = max(m, rank[t]);
            }
        }
    }
    return m;
}

}  // namespace oxicub
