// Family batched_topk, TIER 4 (cluster): a thread-block cluster of CLUSTER CTAs (the spec's
// ITEMS) per segment, one launch per call (sm_90: the entry point carries __cluster_dims__).
//
// CTA r of the cluster owns items [r * chunk, r * chunk + chunk) of the segment (chunk =
// ceil(size / CLUSTER) rounded up to a 16-byte vector) and loads them once from global
// memory into its dynamic shared memory, counting the top digit on the way. The MSB-first
// radix select then runs over the on-chip keys: each CTA counts its candidates' digit into a
// local 256-bin histogram, the cluster barrier publishes it, and every CTA sums the CLUSTER
// histograms through distributed shared memory and finds the same pivot digit (no launches,
// no global state). Early exit when the pivot bin holds exactly the remaining items. Then:
//   * items above the boundary, and the boundary items when all of them are kept, take
//     positions from a counter in CTA 0 (remote atomics, warp-aggregated);
//   * boundary items when only some are kept (exact ties at the k-th key): their rank in index
//     order is the boundary items of the lower CTAs (their last histograms' pivot bins) plus a
//     block scan over the CTA's items in index order; kept as the tie-break says.
// Unsorted output is written by every CTA at those positions. Sorted output: the selected
// indices go to CTA 0 (its index buffer), which fetches their keys from the owners' shared
// memory, sorts (rank desc, index asc) in its own key region and writes.
//
// Dynamic shared memory per CTA (sized by the host): [keys: max(chunk keys, the sort's
// entries)] [index buffer: cluster_max_k u32]. Index math within a segment is 32-bit (the
// host caps segments at cluster_max_size < 2^32).
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

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int CLUSTER, int K_CAP>
__device__ __forceinline__ void bt_cluster(const BatchedTopKParams& p) {
    typedef typename Key::Bits Bits;
    typedef typename BtRankWord<sizeof(Bits)>::Type R;
    constexpr u32 BITS = 8u * (u32)sizeof(Bits);
    constexpr u32 VEC = 16u / (u32)sizeof(Bits);  // keys per 16-byte vector
    constexpr u32 UNROLL = 4;
    constexpr u32 WARPS = BLOCK_THREADS / 32;
    static_assert(BLOCK_THREADS == BT_BINS, "one thread per bin in the pivot search");
    static_assert(K_CAP % BLOCK_THREADS == 0, "whole gather rounds");

    extern __shared__ __align__(16) unsigned char bt_dynamic[];
    Bits* local_keys = reinterpret_cast<Bits*>(bt_dynamic);
    u32* index_buffer = reinterpret_cast<u32*>(bt_dynamic + p.cluster_index_offset);
    __shared__ u32 histogram[2][BT_BINS];
    __shared__ u32 warp_totals[WARPS];
    __shared__ u32 pivot_digit;
    __shared__ u32 pivot_left;
    __shared__ u32 pivot_count;
    __shared__ u32 position_counter;  // CTA 0's: the next unordered output position

    const u32 tid = threadIdx.x;
    const u32 lane = tid & 31u;
    const u32 warp = tid >> 5;
    const u32 me = bt_cta_rank();
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool sorted = (p.flags & BT_SORTED) != 0;
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    const u64 count = bt_count(p);
    const u32 counter_addr = bt_remote(&position_counter, 0);
    u32 parity = 0;

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
        const bool select_all = written == size;

        for (u32 b = tid; b < BT_BINS; b += BLOCK_THREADS) {
            histogram[parity][b] = 0;
        }
        if (tid == 0) {
            position_counter = 0;
        }
        __syncthreads();

        // Load the chunk once (16-byte loads, UNROLL in flight per thread when the chunk is
        // aligned), counting the top digit of every key.
        {
            u32* bins = histogram[parity];
            const u32 shift = BITS - 8u;
            const Bits* src = keys + begin + lo;
            const bool aligned = (((unsigned long long)src) & 15ull) == 0;
            const u32 vectors = aligned ? mine / VEC : 0u;
            const uint4* src4 = reinterpret_cast<const uint4*>(src);
            uint4* dst4 = reinterpret_cast<uint4*>(local_keys);
            for (u32 v0 = tid; v0 < vectors; v0 += UNROLL * BLOCK_THREADS) {
                uint4 w[UNROLL];
#pragma unroll
                for (u32 u = 0; u < UNROLL; ++u) {
                    const u32 v = v0 + u * BLOCK_THREADS;
                    if (v < vectors) {
                        w[u] = __ldcs(src4 + v);
                    }
                }
#pragma unroll
                for (u32 u = 0; u < UNROLL; ++u) {
                    const u32 v = v0 + u * BLOCK_THREADS;
                    if (v < vectors) {
                        dst4[v] = w[u];
                        if (!select_all) {
#pragma unroll
                            for (u32 e = 0; e < VEC; ++e) {
                                const R r = bt_cluster_rank<Key>(bt_vector_key<Bits>(w[u], e), dir);
                                atomicAdd(&bins[(u32)(r >> shift) & (BT_BINS - 1)], 1u);
                            }
                        }
                    }
                }
            }
            for (u32 j = vectors * VEC + tid; j < mine; j += BLOCK_THREADS) {
                const Bits raw = src[j];
                local_keys[j] = raw;
                if (!select_all) {
                    const R r = bt_cluster_rank<Key>(raw, dir);
                    atomicAdd(&bins[(u32)(r >> shift) & (BT_BINS - 1)], 1u);
                }
            }
        }
        __syncthreads();

        // MSB-first radix select over the on-chip keys, 8 bits a pass.
        R prefix = 0;
        R mask = 0;
        u32 remaining = written;
        u32 boundary_total = size;  // items with (rank & mask) == prefix, over the segment
        u32 last_digit = 0;
        u32 last_parity = parity;
        bool done = select_all;
        for (int shift = (int)BITS - 8; !done && shift >= 0; shift -= 8) {
            u32* bins = histogram[parity];
            if (shift != (int)BITS - 8) {
                for (u32 j0 = tid; j0 < mine; j0 += UNROLL * BLOCK_THREADS) {
                    Bits raw[UNROLL];
#pragma unroll
                    for (u32 u = 0; u < UNROLL; ++u) {
                        const u32 j = j0 + u * BLOCK_THREADS;
                        raw[u] = j < mine ? local_keys[j] : (Bits)0;
                    }
#pragma unroll
                    for (u32 u = 0; u < UNROLL; ++u) {
                        const R r = bt_cluster_rank<Key>(raw[u], dir);
                        if (j0 + u * BLOCK_THREADS < mine && (r & mask) == prefix) {
                            atomicAdd(&bins[(u32)(r >> shift) & (BT_BINS - 1)], 1u);
                        }
                    }
                }
                __syncthreads();
            }
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
                warp_totals[warp] = x;
            }
            __syncthreads();
            u32 below = 0;
            for (u32 w = 0; w < warp; ++w) {
                below += warp_totals[w];
            }
            const u32 at_or_above = x + below;
            const u32 above = at_or_above - c;
            if (above < remaining && at_or_above >= remaining) {
                pivot_digit = digit;
                pivot_left = remaining - above;
                pivot_count = c;
            }
            __syncthreads();
            last_digit = pivot_digit;
            remaining = pivot_left;
            boundary_total = pivot_count;
            prefix |= (R)last_digit << shift;
            mask |= (R)(BT_BINS - 1) << shift;
            last_parity = parity;
            done = boundary_total == remaining || shift == 0;
            // The other buffer was last read by the other CTAs before this pass's barrier.
            parity ^= 1u;
            for (u32 b = tid; b < BT_BINS; b += BLOCK_THREADS) {
                histogram[parity][b] = 0;
            }
            __syncthreads();  // pivot_* and warp_totals are rewritten in the next pass
        }
        // CTA 0's counter was reset before the first barrier; when no pass ran there was none.
        if (select_all) {
            bt_cluster_sync();
        }

        // Collect. Unordered positions: [0, above_total) for the items above the boundary, and
        // [above_total, written) for the boundary items too when every one is kept.
        const u32 above_total = written - remaining;
        const bool ordered = boundary_total != remaining;
        const u64 out_base = seg * p.out_stride;
        u32 index_addr = 0;
        if (sorted) {
            index_addr = bt_remote(index_buffer, 0);
        }
        if (!ordered) {
            for (u32 j0 = warp * 32u; j0 < mine; j0 += BLOCK_THREADS) {
                const u32 j = j0 + lane;
                const bool take = j < mine &&
                    (bt_cluster_rank<Key>(local_keys[j], dir) & mask) >= prefix;
                const u32 lanes = __ballot_sync(0xFFFFFFFFu, take);
                if (lanes == 0) {
                    continue;
                }
                const u32 leader = (u32)__ffs(lanes) - 1u;
                u32 at = 0;
                if (lane == leader) {
                    at = bt_remote_add_u32(counter_addr, (u32)__popc(lanes));
                }
                at = __shfl_sync(0xFFFFFFFFu, at, (int)leader);
                if (take) {
                    const u32 pos = at + (u32)__popc(lanes & ((1u << lane) - 1u));
                    if (sorted) {
                        bt_remote_store_u32(index_addr + 4u * pos, lo + j);
                    } else {
                        bt_write<Key, VALUE_BYTES>(p, begin, (u64)(lo + j), out_base + pos);
                    }
                }
            }
        } else {
            // Boundary items of the lower CTAs: their last histograms' pivot bins.
            u32 boundary_before = 0;
            for (u32 q = 0; q < me; ++q) {
                boundary_before +=
                    bt_remote_load_u32(bt_remote(&histogram[last_parity][last_digit], q));
            }
            const u32 skipped = boundary_total - remaining;  // boundary items not kept
            for (u32 tile = 0; tile < mine; tile += BLOCK_THREADS) {
                const u32 j = tile + tid;
                const bool valid = j < mine;
                const R r = valid ? (bt_cluster_rank<Key>(local_keys[j], dir) & mask) : (R)0;
                const bool boundary = valid && r == prefix;
                const bool above = valid && r > prefix;
                u32 total = 0;
                const u32 before = block_flag_scan<BLOCK_THREADS>(boundary, warp_totals, &total);
                const u32 above_lanes = __ballot_sync(0xFFFFFFFFu, above);
                if (above_lanes != 0) {
                    const u32 leader = (u32)__ffs(above_lanes) - 1u;
                    u32 at = 0;
                    if (lane == leader) {
                        at = bt_remote_add_u32(counter_addr, (u32)__popc(above_lanes));
                    }
                    at = __shfl_sync(0xFFFFFFFFu, at, (int)leader);
                    if (above) {
                        const u32 pos = at + (u32)__popc(above_lanes & ((1u << lane) - 1u));
                        if (sorted) {
                            bt_remote_store_u32(index_addr + 4u * pos, lo + j);
                        } else {
                            bt_write<Key, VALUE_BYTES>(p, begin, (u64)(lo + j), out_base + pos);
                        }
                    }
                }
                if (boundary) {
                    const u32 rank = boundary_before + before;
                    const bool keep = prefer_larger ? rank >= skipped : rank < remaining;
                    if (keep) {
                        const u32 pos = above_total + (prefer_larger ? rank - skipped : rank);
                        if (sorted) {
                            bt_remote_store_u32(index_addr + 4u * pos, lo + j);
                        } else {
                            bt_write<Key, VALUE_BYTES>(p, begin, (u64)(lo + j), out_base + pos);
                        }
                    }
                }
                boundary_before += total;
            }
        }

        if (!sorted) {
            // CTA 0's counter and every histogram are reused by the next segment.
            bt_cluster_sync();
            continue;
        }
        bt_cluster_sync();  // every selected index is in CTA 0's buffer
        constexpr u32 ROUNDS = (u32)K_CAP / BLOCK_THREADS;
        constexpr bool PACKED = sizeof(Bits) <= 4;
        R gathered[ROUNDS];
        if (me == 0) {
            // Fetch each selected key from its owner's shared memory (into registers: CTA 0's
            // own keys are overwritten by the sort below).
#pragma unroll
            for (u32 t = 0; t < ROUNDS; ++t) {
                const u32 i = tid + t * BLOCK_THREADS;
                gathered[t] = 0;
                if (i < written) {
                    const u32 g = index_buffer[i];
                    const u32 owner = g / chunk;
                    const Bits raw = bt_remote_load_key(local_keys + (g - owner * chunk), owner);
                    gathered[t] = bt_cluster_rank<Key>(raw, dir);
                }
            }
        }
        bt_cluster_sync();  // the other CTAs may now reuse their keys' memory
        if (me != 0) {
            continue;
        }
        const u32 n = bt_pow2_at_least(written);
        if constexpr (PACKED) {
            // (rank << 32 | ~index): descending order = by key, equal keys by index.
            u64* packed = reinterpret_cast<u64*>(bt_dynamic);
#pragma unroll
            for (u32 t = 0; t < ROUNDS; ++t) {
                const u32 i = tid + t * BLOCK_THREADS;
                if (i < n) {
                    packed[i] = i < written
                        ? (((u64)gathered[t] << 32) | (u64)(0xFFFFFFFFu - index_buffer[i]))
                        : 0ull;
                }
            }
            __syncthreads();
            bt_block_sort_packed<BLOCK_THREADS>(packed, n);
            for (u32 j = tid; j < written; j += BLOCK_THREADS) {
                const u32 index = 0xFFFFFFFFu - (u32)packed[j];
                bt_write<Key, VALUE_BYTES>(p, begin, (u64)index, out_base + j);
            }
        } else {
            u64* ranks = reinterpret_cast<u64*>(bt_dynamic);
            u64* indices = ranks + n;
#pragma unroll
            for (u32 t = 0; t < ROUNDS; ++t) {
                const u32 i = tid + t * BLOCK_THREADS;
                if (i < n) {
                    ranks[i] = i < written ? (u64)gathered[t] : 0ull;
                    indices[i] = i < written ? (u64)index_buffer[i] : BT_PAD;
                }
            }
            __syncthreads();
            bt_block_sort<BLOCK_THREADS>(ranks, indices, n, false);
            for (u32 j = tid; j < written; j += BLOCK_THREADS) {
                bt_write<Key, VALUE_BYTES>(p, begin, indices[j], out_base + j);
            }
        }
        __syncthreads();  // the sort region is CTA 0's key memory for the next segment
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
