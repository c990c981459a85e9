// Family batched_topk, TIER 4 (cluster): a thread-block cluster of CLUSTER CTAs (the spec's
// ITEMS) per segment, one launch per call (sm_90: the entry point carries __cluster_dims__).
//
// CTA r of the cluster owns items [r * chunk, r * chunk + chunk) of the segment (chunk =
// ceil(size / CLUSTER) rounded up to a 16-byte vector). Per segment (version c3, the
// single-problem top-k's sampled threshold inside one cluster):
//   1. Sample: each CTA ranks SAMPLES keys spread over its chunk; a radix select over the
//      cluster's samples (histograms summed through distributed shared memory, 16 bits) finds
//      a threshold at or below the m-th best sample, m chosen so that fewer than k keys reach
//      it only with negligible probability.
//   2. One streaming pass over the chunk from global memory: keys at or above the threshold
//      are appended in index order as (rank, index) to the CTA's shared memory (candidates);
//      the keys themselves are never stored on chip.
//   3. When the cluster's candidates hold at least k keys and no CTA's buffer overflowed,
//      the exact MSB-first radix select (8 bits a pass, one cluster barrier per pass, early
//      exit when the pivot bin holds exactly the remaining items) runs over the candidates
//      only; otherwise (adversarial inputs: all-equal keys, a sample that missed; or k = size)
//      over every key of the chunk, read again from global memory. Items above the boundary,
//      and the boundary items when all are kept, take output positions from a counter in
//      CTA 0 (remote atomics, warp-aggregated); exact ties at the k-th key are ranked in
//      index order (the boundary counts of the lower CTAs, then a block scan).
//   4. Unsorted output is written by every CTA at those positions. Sorted output (version c4:
//      the sort spread over the cluster): each CTA keeps its own selected (index, rank) pairs in
//      its buffers and sorts them (rank desc, index asc) in its dead candidate memory; an
//      item's output position is its place in its own CTA's sorted list plus, per other CTA,
//      the number of better items there (a binary search through distributed shared memory,
//      the searches of all CTAs interleaved).
//
// Dynamic shared memory per CTA (sized by the host): [candidates: cluster_candidates ranks,
// then as many u32 indices; the CTA's sort region aliases it] [index buffer: u32 per selected
// item, at cluster_index_offset] [rank buffer: a rank per selected item, at
// cluster_rank_offset]. Index math within a segment is 32-bit (the host caps segments at
// cluster_max_size < 2^32).
namespace oxicub {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

__device__ __forceinline__ u32 bt_cta_rank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ u32 bt_cluster_id() {
    u32 r;
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
    return r;
}

__device__ __forceinline__ u32 bt_cluster_count() {
    u32 r;
    asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
    return r;
}

// Every thread of every CTA of the cluster: shared-memory writes before it are visible to
// every CTA's reads after it.
__device__ __forceinline__ void bt_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The shared-memory address of `p` in CTA `rank` of the cluster.
__device__ __forceinline__ u32 bt_remote(const void* p, u32 rank) {
    u32 local;
    asm volatile("{\n\t.reg .u64 a;\n\tcvta.to.shared.u64 a, %1;\n\tcvt.u32.u64 %0, a;\n\t}"
                 : "=r"(local) : "l"(p));
    u32 remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    return remote;
}

__device__ __forceinline__ u32 bt_remote_load_u32(u32 addr) {
    u32 v;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

__device__ __forceinline__ u64 bt_remote_load_u64(u32 addr) {
    u64 v;
    asm volatile("ld.shared::cluster.u64 %0, [%1];" : "=l"(v) : "r"(addr) : "memory");
    return v;
}

__device__ __forceinline__ void bt_remote_store_u32(u32 addr, u32 v) {
    asm volatile("st.shared::cluster.u32 [%0], %1;" :: "r"(addr), "r"(v) : "memory");
}

__device__ __forceinline__ u32 bt_remote_add_u32(u32 addr, u32 v) {
    u32 old;
    asm volatile("atom.shared::cluster.add.u32 %0, [%1], %2;" : "=r"(old) : "r"(addr), "r"(v)
                 : "memory");
    return old;
}

// A key of any width from CTA `rank`'s shared memory.
template <class Bits>
__device__ __forceinline__ Bits bt_remote_load_key(const Bits* p, u32 rank) {
    const u32 addr = bt_remote(p, rank);
    if constexpr (sizeof(Bits) == 8) {
        u64 v;
        asm volatile("ld.shared::cluster.u64 %0, [%1];" : "=l"(v) : "r"(addr) : "memory");
        return (Bits)v;
    } else if constexpr (sizeof(Bits) == 4) {
        return (Bits)bt_remote_load_u32(addr);
    } else if constexpr (sizeof(Bits) == 2) {
        unsigned short v;
        asm volatile("ld.shared::cluster.u16 %0, [%1];" : "=h"(v) : "r"(addr) : "memory");
        return (Bits)v;
    } else {
        unsigned short v;
        asm volatile("ld.shared::cluster.u8 %0, [%1];" : "=h"(v) : "r"(addr) : "memory");
        return (Bits)v;
    }
}

// The rank in the narrowest word that holds it: u32 for keys of up to 32 bits.
template <int BYTES> struct BtRankWord { typedef u32 Type; };
template <> struct BtRankWord<8> { typedef u64 Type; };

template <class Key>
__device__ __forceinline__ typename BtRankWord<sizeof(typename Key::Bits)>::Type
bt_cluster_rank(typename Key::Bits raw, u32 dir) {
    typedef typename Key::Bits Bits;
    typedef typename BtRankWord<sizeof(Bits)>::Type R;
    const Bits flip = dir ? (Bits)~(Bits)0 : (Bits)0;
    return (R)(Bits)(Key::to_radix(raw) ^ flip);
}

// Key `e` of a 16-byte vector (e a compile-time constant after unrolling, so the vector stays
// in registers).
template <class Bits>
__device__ __forceinline__ Bits bt_vector_key(const uint4& w, u32 e) {
    const u32 words[4] = {w.x, w.y, w.z, w.w};
    if constexpr (sizeof(Bits) == 8) {
        return (Bits)((u64)words[2 * e] | ((u64)words[2 * e + 1] << 32));
    } else if constexpr (sizeof(Bits) == 4) {
        return (Bits)words[e];
    } else if constexpr (sizeof(Bits) == 2) {
        return (Bits)(words[e / 2] >> (16u * (e % 2)));
    } else {
        return (Bits)(words[e / 4] >> (8u * (e % 4)));
    }
}

__device__ __forceinline__ void bt_remote_store_rank(u32 addr, u32 v) {
    bt_remote_store_u32(addr, v);
}

__device__ __forceinline__ void bt_remote_store_rank(u32 addr, u64 v) {
    asm volatile("st.shared::cluster.u64 [%0], %1;" :: "r"(addr), "l"(v) : "memory");
}

// Exclusive scan of a u64 over the block (four 16-bit counters packed in it add lane-wise as
// long as no sum exceeds 16 bits); every thread of the block must call it. `*total` gets the
// block's sum.
template <u32 BLOCK_THREADS>
__device__ __forceinline__ u64 bt_block_scan_u64(u64 x, u64* warp_sums, u64* total) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    u64 inclusive = x;
#pragma unroll
    for (u32 offset = 1; offset < 32; offset <<= 1) {
        const u64 y = __shfl_up_sync(0xFFFFFFFFu, inclusive, offset);
        inclusive += lane >= offset ? y : 0ull;
    }
    if (lane == 31u) {
        warp_sums[warp] = inclusive;
    }
    __syncthreads();
    u64 below = 0;
    u64 sum = 0;
    for (u32 w = 0; w < BLOCK_THREADS / 32; ++w) {
        const u64 t = warp_sums[w];
        below += w < warp ? t : 0ull;
        sum += t;
    }
    __syncthreads();
    *total = sum;
    return below + inclusive - x;
}

// One CTA's shared state (static shared memory).
template <u32 WARPS>
struct BtClusterState {
    u32 histogram[2][BT_BINS];
    u32 warp_totals[WARPS];
    u64 warp_sums[WARPS];
    u32 pivot_digit;
    u32 pivot_left;
    u32 pivot_count;
    u32 position_counter;  // CTA 0's: the next unordered output position
    u32 candidates;        // this CTA's candidate count, read by the cluster
    u32 selected;          // sorted output: this CTA's selected items, read by the cluster
};

// Where an MSB-first radix select stopped: the items with (rank & mask) > prefix are taken,
// `remaining` of the `boundary_total` items with (rank & mask) == prefix too. `last_digit` in
// histogram[last_parity] is each CTA's count of those boundary items.
template <class R>
struct BtSelection {
    R prefix;
    R mask;
    u32 remaining;
    u32 boundary_total;
    u32 last_digit;
    u32 last_parity;
};

// The items of a CTA: its chunk of the segment in global memory (the exact path: every key).
template <class Key, class R>
struct BtGlobalItems {
    const typename Key::Bits* keys;  // the chunk's first key
    u32 lo;                          // its index in the segment
    u32 dir;
    __device__ __forceinline__ R rank(u32 j) const { return bt_cluster_rank<Key>(keys[j], dir); }
    __device__ __forceinline__ u32 index(u32 j) const { return lo + j; }
};

// The items of a CTA held on chip as (rank, index) in index order: candidates or samples.
template <class R>
struct BtSharedItems {
    const R* ranks;
    const u32* indices;
    __device__ __forceinline__ R rank(u32 j) const { return ranks[j]; }
    __device__ __forceinline__ u32 index(u32 j) const { return indices[j]; }
};

// MSB-first radix select, 8 bits a pass, of the `want` best of `total` items spread over the
// cluster (this CTA's: items 0..mine of `items`). Stops when the pivot bin holds exactly the
// remaining items, or after the pass at `last_shift`. Every thread of every CTA calls it with
// the same want, total and last_shift. histogram[parity] is zero on entry and on return
// (`parity` then names the other buffer). Counting is warp-aggregated by digit: the keys a
// select is run on share their leading digits (candidates above a threshold; f32 scores in
// [0, 1) share their top byte for half the keys), which same-address atomics serialise.
template <class R, u32 BITS, u32 BLOCK_THREADS, int CLUSTER, class Items, u32 WARPS>
__device__ __forceinline__ BtSelection<R> bt_cluster_select(const Items& items, u32 mine,
                                                            u32 total, u32 want, int last_shift,
                                                            BtClusterState<WARPS>& s,
                                                            u32& parity) {
    const u32 tid = threadIdx.x;
    const u32 lane = tid & 31u;
    const u32 warp = tid >> 5;
    BtSelection<R> sel;
    sel.prefix = 0;
    sel.mask = 0;
    sel.remaining = want;
    sel.boundary_total = total;
    sel.last_digit = 0;
    sel.last_parity = parity;
    bool done = want == total;
    for (int shift = (int)BITS - 8; !done && shift >= last_shift; shift -= 8) {
        u32* bins = s.histogram[parity];
        for (u32 base = 0; base < mine; base += BLOCK_THREADS) {
            const u32 j = base + tid;
            const R r = j < mine ? items.rank(j) : (R)0;
            const u32 digit = j < mine && (r & sel.mask) == sel.prefix
                ? (u32)(r >> shift) & (BT_BINS - 1u)
                : BT_BINS;
            const u32 peers = __match_any_sync(0xFFFFFFFFu, digit);
            if (digit < BT_BINS && lane == (u32)__ffs(peers) - 1u) {
                atomicAdd(&bins[digit], (u32)__popc(peers));
            }
        }
        __syncthreads();
        bt_cluster_sync();  // every CTA's histogram of this pass is complete
        // Thread t sums digit 255 - t over the cluster; an inclusive scan in thread order
        // counts the items at or above each digit.
        const u32 digit = BT_BINS - 1u - tid;
        u32 c = 0;
#pragma unroll
        for (u32 q = 0; q < (u32)CLUSTER; ++q) {
            c += bt_remote_load_u32(bt_remote(&bins[digit], q));
        }
        u32 x = c;
#pragma unroll
        for (u32 offset = 1; offset < 32; offset <<= 1) {
            const u32 y = __shfl_up_sync(0xFFFFFFFFu, x, offset);
            x += lane >= offset ? y : 0u;
        }
        if (lane == 31u) {
            s.warp_totals[warp] = x;
        }
        __syncthreads();
        u32 below = 0;
        for (u32 w = 0; w < warp; ++w) {
            below += s.warp_totals[w];
        }
        const u32 at_or_above = x + below;
        const u32 above = at_or_above - c;
        if (above < sel.remaining && at_or_above >= sel.remaining) {
            s.pivot_digit = digit;
            s.pivot_left = sel.remaining - above;
            s.pivot_count = c;
        }
        __syncthreads();
        sel.last_digit = s.pivot_digit;
        sel.remaining = s.pivot_left;
        sel.boundary_total = s.pivot_count;
        sel.prefix |= (R)sel.last_digit << shift;
        sel.mask |= (R)(BT_BINS - 1) << shift;
        sel.last_parity = parity;
        done = sel.boundary_total == sel.remaining || shift == 0;
        // The other buffer was last read by the other CTAs before this pass's barrier.
        parity ^= 1u;
        for (u32 b = tid; b < BT_BINS; b += BLOCK_THREADS) {
            s.histogram[parity][b] = 0;
        }
        __syncthreads();  // pivot_* and warp_totals are rewritten in the next pass
    }
    return sel;
}

// Writes the selected items of this CTA: unsorted output straight to the output, sorted
// output as (index, rank) appended to this CTA's own buffers (s.selected counts them; their
// order does not matter, the CTA sorts them). Unordered positions: [0, above_total) for the
// items above the boundary, and [above_total, written) for the boundary items too when every
// one is kept; exact ties at the k-th key are ranked in index order (the boundary items of
// the lower CTAs, then a block scan over this CTA's items, which are in index order).
template <class Key, class R, u32 BLOCK_THREADS, int VALUE_BYTES, class Items, u32 WARPS>
__device__ __forceinline__ void bt_cluster_collect(const BatchedTopKParams& p, const Items& items,
                                                   u32 mine, const BtSelection<R>& sel,
                                                   u32 written, u64 begin, u64 out_base,
                                                   BtClusterState<WARPS>& s, u32 index_addr,
                                                   u32 rank_addr) {
    const u32 tid = threadIdx.x;
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool sorted = (p.flags & BT_SORTED) != 0;
    // Sorted output appends to this CTA's buffers through its own counter.
    const u32 counter_addr =
        sorted ? bt_remote(&s.selected, bt_cta_rank()) : bt_remote(&s.position_counter, 0);
    auto reserve = [counter_addr](u32 n) { return bt_remote_add_u32(counter_addr, n); };
    const u32 above_total = written - sel.remaining;
    const bool ordered = sel.boundary_total != sel.remaining;
    auto emit = [&](u32 pos, u32 j, R r) {
        if (sorted) {
            bt_remote_store_u32(index_addr + 4u * pos, items.index(j));
            bt_remote_store_rank(rank_addr + (u32)sizeof(R) * pos, r);
        } else {
            bt_write<Key, VALUE_BYTES>(p, begin, (u64)items.index(j), out_base + pos);
        }
    };
    // Boundary items of the lower CTAs: their last histograms' pivot bins.
    u32 boundary_before = 0;
    if (ordered) {
        const u32 me = bt_cta_rank();
        for (u32 q = 0; q < me; ++q) {
            boundary_before +=
                bt_remote_load_u32(bt_remote(&s.histogram[sel.last_parity][sel.last_digit], q));
        }
    }
    const u32 skipped = sel.boundary_total - sel.remaining;  // boundary items not kept
    for (u32 tile = 0; tile < mine; tile += BLOCK_THREADS) {
        const u32 j = tile + tid;
        const bool valid = j < mine;
        const R r = valid ? items.rank(j) : (R)0;
        const R masked = r & sel.mask;
        const bool above = valid && (ordered ? masked > sel.prefix : masked >= sel.prefix);
        const u32 above_at = warp_append<u32>(above, 0xFFFFFFFFu, reserve);
        if (above) {
            emit(above_at, j, r);
        }
        if (ordered) {
            const bool boundary = valid && masked == sel.prefix;
            u32 count = 0;
            const u32 before = block_flag_scan<BLOCK_THREADS>(boundary, s.warp_totals, &count);
            const u32 rank = boundary_before + before;
            const bool keep =
                boundary && (prefer_larger ? rank >= skipped : rank < sel.remaining);
            if (sorted) {
                const u32 keep_at = warp_append<u32>(keep, 0xFFFFFFFFu, reserve);
                if (keep) {
                    emit(keep_at, j, r);
                }
            } else if (keep) {
                emit(above_total + (prefer_larger ? rank - skipped : rank), j, r);
            }
            boundary_before += count;
        }
    }
}

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int CLUSTER, int K_CAP>
__device__ __forceinline__ void bt_cluster(const BatchedTopKParams& p) {
    typedef typename Key::Bits Bits;
    typedef typename BtRankWord<sizeof(Bits)>::Type R;
    constexpr u32 BITS = 8u * (u32)sizeof(Bits);
    constexpr u32 VEC = 16u / (u32)sizeof(Bits);  // keys per 16-byte vector
    constexpr u32 UNROLL = 4;  // vectors in flight per thread (four 16-bit counts in a u64)
    constexpr u32 WARPS = BLOCK_THREADS / 32;
    constexpr u32 SAMPLES = 2u * BLOCK_THREADS;  // per CTA
    // The sample select stops after 16 bits: its threshold only has to be at or below the
    // m-th best sample, and 16 bits of an f32 leave ~0.4 % of [0.5, 1) per step.
    constexpr int SAMPLE_LAST_SHIFT = BITS > 16u ? (int)BITS - 16 : 0;
    static_assert(BLOCK_THREADS == BT_BINS, "one thread per bin in the pivot search");
    static_assert(VEC <= 16u && BLOCK_THREADS * VEC < 65536u, "16-bit counts per vector slot");

    extern __shared__ __align__(16) unsigned char bt_dynamic[];
    const u32 capacity = (u32)p.cluster_candidates;
    R* candidate_ranks = reinterpret_cast<R*>(bt_dynamic);
    u32* candidate_indices = reinterpret_cast<u32*>(bt_dynamic + (u64)capacity * sizeof(R));
    u32* index_buffer = reinterpret_cast<u32*>(bt_dynamic + p.cluster_index_offset);
    R* rank_buffer = reinterpret_cast<R*>(bt_dynamic + p.cluster_rank_offset);
    __shared__ BtClusterState<WARPS> s;
    __shared__ R samples[SAMPLES];
    __shared__ u32 counts[CLUSTER];  // sorted output: the other CTAs' selected items

    const u32 tid = threadIdx.x;
    const u32 me = bt_cta_rank();
    const bool sorted = (p.flags & BT_SORTED) != 0;
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    const u64 count = bt_count(p);
    u32 index_addr = 0;
    u32 rank_addr = 0;
    if (sorted) {
        index_addr = bt_remote(index_buffer, me);
        rank_addr = bt_remote(rank_buffer, me);
    }
    u32 parity = 0;
    for (u32 b = tid; b < 2u * BT_BINS; b += BLOCK_THREADS) {
        s.histogram[b / BT_BINS][b % BT_BINS] = 0;
    }

    for (u64 seg = bt_cluster_id(); seg < count; seg += bt_cluster_count()) {
        u64 begin, size64, written64;
        u32 dir;
        if (!bt_descriptor(p, seg, BT_TIER_CLUSTER, &begin, &size64, &written64, &dir)) {
            continue;  // cluster-uniform: every CTA reads the same descriptor
        }
        const u32 size = (u32)size64;  // <= cluster_max_size < 2^32
        const u32 written = (u32)written64;
        u32 chunk = (size + (u32)CLUSTER - 1) / (u32)CLUSTER;
        chunk = (chunk + VEC - 1) / VEC * VEC;
        const u32 lo = me * chunk;
        const u32 mine = size > lo ? min(chunk, size - lo) : 0u;
        const Bits* src = keys + begin + lo;
        const BtGlobalItems<Key, R> global_items{src, lo, dir};
        if (tid == 0) {
            s.position_counter = 0;  // first used after the cluster barrier below
            s.selected = 0;
        }

        // 1. Sample: SAMPLES keys spread over each chunk; the threshold is (the leading 16
        // bits of) the m-th best sample, m chosen so that fewer than `written` keys reach it
        // only with negligible probability: the samples among the `written` best keys are
        // binomial with mean e = samples * written / size, and m = e + 6 sqrt(e) + 4 lies
        // beyond its tail. Selecting everything skips it (the exact path takes every key).
        R threshold = 0;
        bool sampled = false;
        if (written != size) {
            u32 total_samples = 0;
            u32 my_samples = 0;
            for (u32 q = 0; q < (u32)CLUSTER; ++q) {
                const u32 q_lo = q * chunk;
                const u32 q_mine = size > q_lo ? min(chunk, size - q_lo) : 0u;
                const u32 n = min(SAMPLES, q_mine);
                total_samples += n;
                my_samples = q == me ? n : my_samples;
            }
            const float e = (float)total_samples * (float)written / (float)size;
            const float m = ceilf(e + 6.0f * sqrtf(e) + 4.0f);
            if (m < (float)total_samples) {
                for (u32 i = tid; i < my_samples; i += BLOCK_THREADS) {
                    const u32 j = (u32)((u64)i * mine / my_samples);
                    samples[i] = global_items.rank(j);
                }
                __syncthreads();
                const BtSharedItems<R> sample_items{samples, nullptr};
                const BtSelection<R> sel = bt_cluster_select<R, BITS, BLOCK_THREADS, CLUSTER>(
                    sample_items, my_samples, total_samples, (u32)m, SAMPLE_LAST_SHIFT, s,
                    parity);
                threshold = sel.prefix;
                sampled = true;
            }
        }

        // 2. One pass over the chunk from global memory (16-byte loads, UNROLL in flight per
        // thread when the chunk is aligned): keys at or above the threshold are appended, in
        // index order, as (rank, index) to this CTA's candidates (positions from a block scan
        // of per-thread counts, four vector slots packed in one u64).
        u32 appended = 0;  // block-uniform
        if (sampled) {
            const bool aligned = (((unsigned long long)src) & 15ull) == 0;
            const u32 vectors = aligned ? mine / VEC : 0u;
            const uint4* src4 = reinterpret_cast<const uint4*>(src);
            for (u32 base = 0; base < vectors; base += UNROLL * BLOCK_THREADS) {
                uint4 w[UNROLL];
#pragma unroll
                for (u32 u = 0; u < UNROLL; ++u) {
                    const u32 v = base + u * BLOCK_THREADS + tid;
                    w[u] = v < vectors ? __ldcs(src4 + v) : make_uint4(0u, 0u, 0u, 0u);
                }
                u32 flags[UNROLL];
                u64 counts = 0;
#pragma unroll
                for (u32 u = 0; u < UNROLL; ++u) {
                    flags[u] = 0;
                    if (base + u * BLOCK_THREADS + tid < vectors) {
#pragma unroll
                        for (u32 e = 0; e < VEC; ++e) {
                            const R r = bt_cluster_rank<Key>(bt_vector_key<Bits>(w[u], e), dir);
                            flags[u] |= r >= threshold ? 1u << e : 0u;
                        }
                    }
                    counts |= (u64)__popc(flags[u]) << (16u * u);
                }
                u64 total = 0;
                const u64 before = bt_block_scan_u64<BLOCK_THREADS>(counts, s.warp_sums, &total);
                u32 slot_base = appended;
#pragma unroll
                for (u32 u = 0; u < UNROLL; ++u) {
                    u32 pos = slot_base + ((u32)(before >> (16u * u)) & 0xFFFFu);
                    const u32 v = base + u * BLOCK_THREADS + tid;
#pragma unroll
                    for (u32 e = 0; e < VEC; ++e) {
                        if (flags[u] & (1u << e)) {
                            if (pos < capacity) {
                                candidate_ranks[pos] =
                                    bt_cluster_rank<Key>(bt_vector_key<Bits>(w[u], e), dir);
                                candidate_indices[pos] = lo + v * VEC + e;
                            }
                            ++pos;
                        }
                    }
                    slot_base += (u32)(total >> (16u * u)) & 0xFFFFu;
                }
                appended = slot_base;
            }
            for (u32 base = vectors * VEC; base < mine; base += BLOCK_THREADS) {
                const u32 j = base + tid;
                const R r = j < mine ? global_items.rank(j) : (R)0;
                const bool take = j < mine && r >= threshold;
                u32 total = 0;
                const u32 before = block_flag_scan<BLOCK_THREADS>(take, s.warp_totals, &total);
                if (take && appended + before < capacity) {
                    candidate_ranks[appended + before] = r;
                    candidate_indices[appended + before] = lo + j;
                }
                appended += total;
            }
        }
        if (tid == 0) {
            s.candidates = appended;
        }
        __syncthreads();
        // Every CTA's candidate count is published (and CTA 0's counter reset).
        bt_cluster_sync();
        u32 candidates = 0;
        bool overflow = false;
#pragma unroll
        for (u32 q = 0; q < (u32)CLUSTER; ++q) {
            const u32 c = bt_remote_load_u32(bt_remote(&s.candidates, q));
            candidates += c;
            overflow = overflow || c > capacity;
        }

        // 3. Exact selection among the candidates when they hold the `written` best (every
        // key at or above the threshold is one, so they do when there are at least `written`
        // of them and none was dropped); otherwise (adversarial inputs, or selecting all)
        // over every key of the chunk from global memory.
        const u64 out_base = seg * p.out_stride;
        if (sampled && !overflow && candidates >= written) {
            const BtSharedItems<R> items{candidate_ranks, candidate_indices};
            const BtSelection<R> sel = bt_cluster_select<R, BITS, BLOCK_THREADS, CLUSTER>(
                items, appended, candidates, written, 0, s, parity);
            bt_cluster_collect<Key, R, BLOCK_THREADS, VALUE_BYTES>(
                p, items, appended, sel, written, begin, out_base, s, index_addr, rank_addr);
        } else {
            const BtSelection<R> sel = bt_cluster_select<R, BITS, BLOCK_THREADS, CLUSTER>(
                global_items, mine, size, written, 0, s, parity);
            bt_cluster_collect<Key, R, BLOCK_THREADS, VALUE_BYTES>(
                p, global_items, mine, sel, written, begin, out_base, s, index_addr, rank_addr);
        }
        if (!sorted) {
            // CTA 0's counter, the histograms and the candidate counts are reused by the next
            // segment.
            bt_cluster_sync();
            continue;
        }

        // 4. Sorted output: each CTA sorts its own selected items (rank desc, index asc;
        // stable, so it serves both sorted orderings) in its candidate memory, which it no
        // longer reads; then every item's output position is its place in its CTA's list plus
        // the number of better items in each other CTA's list.
        __syncthreads();  // this CTA's buffers and s.selected are complete
        const u32 mine_selected = s.selected;
        const u32 n = bt_pow2_at_least(mine_selected);
        u64* sorted_items = reinterpret_cast<u64*>(bt_dynamic);
        if constexpr (sizeof(Bits) <= 4) {
            // (rank << 32 | ~index): descending order = by key, equal keys by index. Indices
            // are below 2^32 - 1, so a real item is never 0, the padding.
            for (u32 i = tid; i < n; i += BLOCK_THREADS) {
                sorted_items[i] = i < mine_selected
                    ? (((u64)rank_buffer[i] << 32) | (u64)(0xFFFFFFFFu - index_buffer[i]))
                    : 0ull;
            }
            __syncthreads();
            bt_block_sort_packed<BLOCK_THREADS>(sorted_items, n);
        } else {
            u64* indices = sorted_items + n;
            for (u32 i = tid; i < n; i += BLOCK_THREADS) {
                sorted_items[i] = i < mine_selected ? (u64)rank_buffer[i] : 0ull;
                indices[i] = i < mine_selected ? (u64)index_buffer[i] : BT_PAD;
            }
            __syncthreads();
            bt_block_sort<BLOCK_THREADS>(sorted_items, indices, n, false);
        }
        // Every CTA's sorted list and count are published (CTA 0's counter, the histograms
        // and the candidate counts are free for the next segment after the barrier below).
        bt_cluster_sync();
        // The other CTAs' counts (0 for this one: its own items are not searched) live in
        // shared memory, not registers (the kernel runs under a 64-register cap).
        if (tid < (u32)CLUSTER) {
            counts[tid] = tid == me ? 0u : bt_remote_load_u32(bt_remote(&s.selected, tid));
        }
        __syncthreads();
        u32 largest = 0;
#pragma unroll
        for (u32 q = 0; q < (u32)CLUSTER; ++q) {
            largest = max(largest, counts[q]);
        }
        const u32 steps = bt_pow2_at_least(largest);
        for (u32 i = tid; i < mine_selected; i += BLOCK_THREADS) {
            const u64 item = sorted_items[i];
            const u64 item_index = sizeof(Bits) <= 4 ? 0ull : sorted_items[n + i];
            // better[q]: how many of CTA q's items come before this one (a branchless lower
            // bound over a power-of-two range, entries past CTA q's count never better; the
            // CTAs' searches advance together, so their DSMEM loads overlap).
            u32 better[CLUSTER];
#pragma unroll
            for (u32 q = 0; q < (u32)CLUSTER; ++q) {
                better[q] = 0;
            }
            auto before = [&](u32 q, u32 at) -> bool {
                if (at >= counts[q]) {
                    return false;
                }
                const u32 remote = bt_remote(bt_dynamic, q);
                if constexpr (sizeof(Bits) <= 4) {
                    return bt_remote_load_u64(remote + 8u * at) > item;
                } else {
                    const u32 remote_n = bt_pow2_at_least(counts[q]);
                    const u64 r = bt_remote_load_u64(remote + 8u * at);
                    const u64 x = bt_remote_load_u64(remote + 8u * (remote_n + at));
                    return bt_better(r, x, item, item_index, false);
                }
            };
            for (u32 step = steps / 2; step > 0; step >>= 1) {
#pragma unroll
                for (u32 q = 0; q < (u32)CLUSTER; ++q) {
                    better[q] += before(q, better[q] + step - 1u) ? step : 0u;
                }
            }
            u32 pos = i;
#pragma unroll
            for (u32 q = 0; q < (u32)CLUSTER; ++q) {
                pos += better[q] + (before(q, better[q]) ? 1u : 0u);
            }
            const u64 index = sizeof(Bits) <= 4 ? (u64)(0xFFFFFFFFu - (u32)item) : item_index;
            bt_write<Key, VALUE_BYTES>(p, begin, index, out_base + pos);
        }
        // The other CTAs' searches read this CTA's sort region, which the next segment's
        // candidates overwrite (and a CTA's shared memory must outlive remote reads of it).
        bt_cluster_sync();
    }
}

#else

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int CLUSTER, int K_CAP>
__device__ __forceinline__ void bt_cluster(const BatchedTopKParams&) {
    // Thread-block clusters need sm_90; the host never selects this tier below it.
    __trap();
}

#endif

}  // namespace oxicub
