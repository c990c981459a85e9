// Family batched_topk, TIER 4 (stream), PART 3: the clustered kernel's building blocks: a
// block's part of the segment, its open buckets, the pushes between the two blocks of a cluster
// and the appends of the candidates to a block's shared memory (docs/design/batched_topk.md,
// "Stream tier: clustered launch").
namespace oxicub {

// This warp's part [*lo, *hi) of its block's half of a segment of `size` keys (multiples of
// VEC keys).
template <u32 VEC, u32 WARPS>
__device__ __forceinline__ void bt_cluster_part(u32 size, u32 rank_in_cluster, u32 warp, u32* lo,
                                                u32* hi) {
    const u32 half = ((size + 1u) / 2u + VEC - 1u) / VEC * VEC;
    const u32 block_lo = min(size, rank_in_cluster * half);
    const u32 block_hi = min(size, block_lo + half);
    const u32 part = ((block_hi - block_lo + WARPS - 1u) / WARPS + VEC - 1u) / VEC * VEC;
    *lo = min(block_hi, block_lo + warp * part);
    *hi = min(block_hi, *lo + part);
}

// Compile-time booleans for generic lambdas (NVRTC has no <type_traits>).
struct BtFalse { static constexpr bool value = false; };
struct BtTrue { static constexpr bool value = true; };

// The buckets of the cluster's selection: over the ranks [lo, top], those above `top` in bucket
// 0 (bucket 0 the best). The candidates' highest rank is not known while they are counted, so
// top is the best sample plus an eighth of its distance above the threshold (the keys above the
// best sample are few: about one sample's share of the segment).
template <class R>
struct BtOpenBuckets {
    R lo;
    R top;
    u32 shift;
    __device__ __forceinline__ BtOpenBuckets(R threshold, R best) : lo(threshold) {
        const R extra = (best - threshold) / 8u + 1u;
        top = best > (R)~(R)0 - extra ? (R)~(R)0 : best + extra;
        shift = bt_bucket_shift(top - lo);
    }
    // Bucket 0 is the open one: every rank at or above the top (and, at a shift above 0, the
    // ranks just below it whose distance rounds to the last bucket).
    __device__ __forceinline__ u32 operator()(R r) const {
        if (r >= top) {
            return 0u;
        }
        const u32 q = (u32)((r - lo) >> shift);
        return BT_BUCKETS - 1u - (q < BT_BUCKETS - 1u ? q : BT_BUCKETS - 1u);
    }
    // Whether bucket b holds a single rank (bt_bucket_write compares only indices there): at
    // shift 0 (top - lo < BT_BUCKETS) every bucket but the open bucket 0, since a rank below the
    // top is at most BT_BUCKETS - 2 above lo.
    __device__ __forceinline__ bool pure(u32 b) const { return shift == 0u && b != 0u; }
};

#if __CUDA_ARCH__ >= 900
__device__ __forceinline__ u32 bt_cluster_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// The blocks in this block's cluster.
__device__ __forceinline__ u32 bt_cluster_blocks() {
    u32 n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
}

// The shared::cluster address of `p` (this block's shared memory) in block `rank`.
__device__ __forceinline__ u32 bt_cluster_address(const void* p, u32 rank) {
    u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(r)
                 : "r"((u32)__cvta_generic_to_shared(p)), "r"(rank));
    return r;
}

// The blocks of a cluster hand each other data by pushes: st.async into the other block's
// shared memory, each counted in bytes on an mbarrier of the receiving block, which waits for
// them. A cluster barrier would do, but its release waits for every store of the block to be
// visible (MEMBAR.ALL.GPU, long after the streaming), and it costs both blocks the slower
// one's time at each of the two exchanges (docs/design/batched_topk.md,
// "Stream tier: clustered launch").
__device__ __forceinline__ void bt_push(u32 to, u32 bar, uint4 v) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32"
                 " [%0], {%1, %2, %3, %4}, [%5];"
                 :: "r"(to), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar) : "memory");
}
__device__ __forceinline__ void bt_push(u32 to, u32 bar, uint2 v) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32"
                 " [%0], {%1, %2}, [%3];"
                 :: "r"(to), "r"(v.x), "r"(v.y), "r"(bar) : "memory");
}
__device__ __forceinline__ void bt_push(u32 to, u32 bar, u64 v) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];"
                 :: "r"(to), "l"(v), "r"(bar) : "memory");
}
__device__ __forceinline__ void bt_push(u32 to, u32 bar, u32 v) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];"
                 :: "r"(to), "r"(v), "r"(bar) : "memory");
}

// An mbarrier of one arrival (the receiving block's thread 0, with the bytes it expects).
__device__ __forceinline__ void bt_mbarrier_init(u64* bar) {
    mbarrier_init_one(bar);
}

// The arrival on `bar`, which then completes once `bytes` more have landed (before or after).
__device__ __forceinline__ void bt_mbarrier_expect(u64* bar, u32 bytes) {
    mbarrier_expect_bytes(bar, bytes);
}

// Waits for the first phase of `bar`; the pushes it counted are then visible to this thread.
__device__ __forceinline__ void bt_mbarrier_wait(u64* bar) {
    const u32 at = (u32)__cvta_generic_to_shared(bar);
    asm volatile("{\n\t.reg .pred done;\n"
                 "BT_WAIT:\n\t"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], 0;\n\t"
                 "@!done bra BT_WAIT;\n}"
                 :: "r"(at) : "memory");
}
#endif

// Counts a stored candidate of rank r in its bucket, or, ranked below the threshold (only an
// extra hit of the f32 / f64 compare is), as a dead entry. The final's scatter takes exactly the
// counted ones (bucket at most the boundary, rank at least the threshold): the other block
// expects as many pushed items as its counts say, and would wait for a missing one forever.
template <class Key, class R, u32 WARPS>
__device__ __forceinline__ void bt_cluster_count(R r, R threshold, BtStreamState<R, WARPS>& s,
                                                 u32* fill, const BtOpenBuckets<R>& bucket) {
    if (!RadixHitTest<Key>::FLOAT_COMPARE || r >= threshold) {
        atomicAdd(&fill[bucket(r)], 1u);
    } else {
        atomicAdd(&s.dead, 1u);
    }
}

// Stores the candidate (r, index) at place `at` of the block's candidates (nothing past
// `cap`: an overflow) and counts it (bt_cluster_count).
template <class Key, class R, u32 WARPS>
__device__ __forceinline__ void bt_cluster_store(u32 at, R r, u32 index, R threshold,
                                                 BtStreamState<R, WARPS>& s, u32 cap,
                                                 R* cand_ranks, u32* cand_indices, u32* fill,
                                                 const BtOpenBuckets<R>& bucket) {
    if (at < cap) {
        cand_ranks[at] = r;
        cand_indices[at] = index;
        bt_cluster_count<Key>(r, threshold, s, fill, bucket);
    }
}

// Appends the lane's hits (bit u * VEC + e of `flags`: key e of vector u, index
// first + u * 32 * VEC + e) to the block's candidates, warp by warp (a warp scan, one atomic);
// s.reached counts every hit (past `cap`: an overflow, nothing stored). The flags come from
// RadixHitTest, a superset for f32 and f64 (NaNs, the other zero): each hit is ranked as it is
// stored, and one ranked below the threshold stays in its place as a dead entry (counted in
// s.dead, in no bucket; the scatter skips it), so the hits are walked once. Two forms, chosen
// per warp batch: a few hits (uniform scores: ~14 in a warp's 512 keys) are walked one by one;
// many (sorted or clustered rows, where a few warps hold every candidate) go through every key
// slot at once, so those warps do not walk 16 hits a lane. The walk, for keys of up to 4 bytes:
// the lane's vectors go to its words of `stage`, each lane stores its hits' raw keys and
// indices, and the warp then ranks and counts them a hit per lane; for 8-byte keys each key is
// picked from the lane's words by a select tree (a runtime index into registers would put them
// in local memory) and ranked by the lane that holds it.
// DIR is the direction (0 max, 1 min), a compile-time constant here: the flip of every rank
// folds away.
template <class Key, class R, u32 DIR, u32 UNROLL, u32 WARPS>
__device__ __forceinline__ void bt_cluster_append(const uint4 (&v4)[UNROLL], u32 flags, u32 first,
                                                  R threshold, BtStreamState<R, WARPS>& s,
                                                  u32 cap, R* cand_ranks, u32* cand_indices,
                                                  u32* fill, const BtOpenBuckets<R>& bucket,
                                                  uint4* stage) {
    typedef typename Key::Bits Bits;
    constexpr u32 VEC = BtStreamBatch<Bits>::VEC;
    constexpr u32 KEYS = UNROLL * VEC;
    constexpr u32 DENSE = 64;  // hits in a warp batch from which every slot is gone through
    const u32 lane = threadIdx.x & 31u;
    if (!__any_sync(0xFFFFFFFFu, flags != 0u)) {
        return;  // most warp batches of sorted or clustered rows
    }
    const u32 count = (u32)__popc(flags);
    const u32 inclusive = warp_inclusive_sum(count);
    const u32 hits = __shfl_sync(0xFFFFFFFFu, inclusive, 31);
    u32 base = 0;
    if (lane == 31u) {
        base = atomicAdd(&s.reached, inclusive);
    }
    u32 at = __shfl_sync(0xFFFFFFFFu, base, 31) + inclusive - count;
    auto put = [&](u32 b, R r) {
        bt_cluster_store<Key>(at, r, first + b / VEC * 32u * VEC + b % VEC, threshold, s, cap,
                              cand_ranks, cand_indices, fill, bucket);
        ++at;
    };
    if (hits > DENSE) {  // warp-uniform
#pragma unroll
        for (u32 b = 0; b < KEYS; ++b) {
            if ((flags >> b) & 1u) {
                put(b, bt_rank_word<Key>(vector_key<Bits>(v4[b / VEC], b % VEC), DIR));
            }
        }
    } else if constexpr (sizeof(Bits) <= 4) {
        // The lane's vectors in its own words of the stage (no other lane reads them, so no
        // barrier): each hit is one shared load instead of a select tree over 16 registers.
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            stage[u * 32u] = v4[u];
        }
        const Bits* keys = reinterpret_cast<const Bits*>(stage);
        // Each lane puts its hits' raw keys and indices at their places (its key b is at
        // offset b / VEC * 32 VEC + b % VEC of both its stage and its batch's first index);
        // then the warp ranks and counts them a hit per lane, so the rank and bucket steps run
        // once a warp batch instead of once per hit of the lane with the most.
        const u32 warp_first = at - (inclusive - count);
        auto place_hits = [&](auto checked) {
            u32 place = at;
            for (u32 rest = flags; rest != 0u;) {
                const u32 b = 31u - (u32)__clz(rest);  // the highest hit first
                rest ^= 1u << b;
                const u32 offset = b * 32u - b % VEC * 31u;  // b / VEC * 32 VEC + b % VEC
                if (!decltype(checked)::value || place < cap) {
                    cand_ranks[place] = (R)keys[offset];
                    cand_indices[place] = first + offset;
                }
                ++place;
            }
        };
        if (warp_first + hits <= cap) {  // warp-uniform: all but an overflowing batch
            place_hits(BtFalse{});
        } else {
            place_hits(BtTrue{});
        }
        __syncwarp();
        for (u32 j = lane; j < hits; j += 32u) {  // hits <= DENSE: one or two rounds
            const u32 q = warp_first + j;
            if (q < cap) {
                const R r = bt_rank_word<Key>((Bits)cand_ranks[q], DIR);
                cand_ranks[q] = r;
                bt_cluster_count<Key>(r, threshold, s, fill, bucket);
            }
        }
    } else {  // 8-byte keys
        u32 words[4u * UNROLL];
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            words[4u * u] = v4[u].x;
            words[4u * u + 1u] = v4[u].y;
            words[4u * u + 2u] = v4[u].z;
            words[4u * u + 3u] = v4[u].w;
        }
        for (u32 rest = flags; rest != 0u; rest &= rest - 1u) {
            const u32 b = (u32)__ffs(rest) - 1u;
            const Bits raw = (Bits)((u64)select_word(words, 2u * b) |
                                    ((u64)select_word(words, 2u * b + 1u) << 32));
            put(b, bt_rank_word<Key>(raw, DIR));
        }
    }
}

}  // namespace oxicub
