// Family batched_topk, TIER 4 (streamed): several blocks per segment for segments of a few
// thousand keys up to a few hundred thousand with min(k, size) <= K_CAP, two launches and no
// host round trip:
//
//   PART 1 (filter)        a block per chunk of a segment (p.stream_chunk keys; the grid,
//                          at most one wave of resident blocks, strides over (list position,
//                          chunk) pairs). Every block of a segment draws the
//                          same sample of 16-byte vectors spread over the whole segment
//                          (BtStreamSample: at least 2048 keys) and finds the same
//                          threshold: a rank at or below the m-th best sample
//                          (bt_sample_threshold), m chosen so that fewer than k keys reach it
//                          only with negligible probability. One streaming pass over
//                          its chunk then appends the keys at or above the threshold, in index
//                          order, as (rank, index) to each warp's candidate slots in global
//                          memory (a segment's slots are shared out among its warps' regions
//                          by where the sample's best keys lie: bt_stream_slots), and each
//                          warp's record: its count (which may exceed its slots: an
//                          overflow), where its slots lie, its candidates' lowest and highest
//                          rank, and how many of them reach the threshold (the f32 / f64 hit
//                          test also passes NaNs below it).
//   PART 2 (final)         a block per segment: when no chunk overflowed and at least k
//                          candidates reach the threshold (every key that does is a candidate,
//                          so they hold the k best and every tie of the k-th), it loads the
//                          candidates into shared memory and selects and orders them by
//                          buckets (bt_bucket_select); inputs whose buckets degenerate (heavy
//                          ties, clustered keys) take the exact MSB-first radix select over the
//                          candidates, and segments whose sample missed (all-equal keys, k
//                          close to the size) the same select over every key of the segment,
//                          read from global memory (correct for any input).
//   PART 3 (cluster)       both in one launch for a direct call whose segments all fit on the
//                          device at once as clusters of two blocks (sm_90): the blocks keep
//                          their candidates in shared memory and select them there, handing
//                          each other counts and copies by DSMEM pushes (bt_stream_cluster,
//                          below).
//
// Why PART 1 + PART 2 and not only clusters: this tier's first form (NOTES-batched.md c1-c4)
// was a cluster of 8 blocks per segment with a chain of cluster barriers (sample passes, count
// exchanges, a sort across the cluster) that left the SMs latency-bound at 8 % of the DRAM
// bandwidth, and clusters that do not all fit at once run in waves. PART 3 keeps the filter's
// streaming, takes one cluster barrier per segment (its arrive at the start, its wait after the
// streaming) and two exchanges by pushes, and is used only when every segment's cluster is
// resident at once.
//
// Dynamic shared memory of the final selection (sized by the host): [candidates: stream_total ranks,
// then as many u32 indices; the exact path's sort region aliases it] [bucket copy at
// stream_sorted_offset: stream_sorted_cap ranks, then as many u32 indices] [bucket starts and
// fill counters at stream_bins_offset: BT_STARTS_WORDS + BT_BUCKETS u32] [index buffer at
// stream_index_offset: u32 per selected item] [rank buffer at stream_rank_offset]. Index math
// within a segment is 32-bit (the host caps segments at stream_max_size < 2^32).
namespace oxicub {

// The final's copy tasks: up to BT_STREAM_TASK candidates of one region each (BT_STREAM_LOADS
// per lane).
constexpr u32 BT_STREAM_LOADS = BT_STREAM_TASK / 32u;
constexpr u32 BT_BUCKET_LOG = 12;
// The bucket path ranks an item by comparing it with every item of its bucket: it is taken
// when the sum of the squared bucket sizes is at most this many comparisons per candidate.
constexpr u32 BT_BUCKET_WORK = 64;
// The same for the clustered kernel, whose other path is the exact one over every key of the
// segment in one block (~0.25 ms at 131072 keys): smooth rows (an AR(1) series, coefficient
// 0.99) crowd the open bucket 0 past 64 comparisons a candidate (70-91 measured) in ~1 row in
// 300. At 256 the largest bucket the check lets through is ~sqrt(256 n) (~1000 items at
// n = 4000): each of its items compares with the others, a few microseconds.
constexpr u32 BT_CLUSTER_BUCKET_WORK = 256;

// A warp's batch in the filter: UNROLL 16-byte vectors per lane (at most 32 keys, one hit bit
// each), loaded into registers and staged in shared memory (BATCH vectors per warp).
template <class Bits>
struct BtStreamBatch {
    static constexpr u32 VEC = 16u / (u32)sizeof(Bits);  // keys per 16-byte vector
    static constexpr u32 UNROLL = VEC <= 8u ? 4u : 2u;   // vectors per lane
    static constexpr u32 BATCH = UNROLL * 32u;           // vectors per warp
};

// The filter's sample: every block of a segment reads the same VECTORS 16-byte vectors per
// thread (the filter's 512 threads: 2048 keys of 4 or 8 bytes, 4096 of 2, 8192 of 1; twice that
// in the clustered kernel's 1024), in runs of CHUNK consecutive vectors (32 bytes: a DRAM
// burst, an L2 sector) spread evenly over the segment. Whole vectors rather than single keys:
// a sample of single keys made twice the L2 requests of the block's streaming pass (2048
// against ~1000 for a 128 KiB chunk), and those requests, all at the kernel's start, were the
// filter's critical path. Runs of two: a lone vector opens a DRAM row for 16 bytes, and the
// sample's arrival is the kernel's first wait (~3 us at [64x131072]). Not longer runs: the
// keys between two runs can all lie above the best sample (sorted or clustered rows), where
// the cluster's open bucket 0 takes them, and past a few hundred keys that bucket costs more
// than the bucket path allows (runs of 32 sent ascending rows to the exact path:
// NOTES-batched, twelfth session).
template <class Bits, u32 BLOCK_THREADS>
struct BtStreamSample {
    static constexpr u32 VEC = BtStreamBatch<Bits>::VEC;
    static constexpr u32 VECTORS = VEC >= 4u ? 1u : 4u / VEC;  // per thread
    static constexpr u32 PER_THREAD = VECTORS * VEC;         // keys per thread
    static constexpr u32 GROUPS = VECTORS * BLOCK_THREADS;    // vectors per segment
    static constexpr u32 CHUNK = 2u;                           // consecutive vectors per run
    static constexpr u32 RUNS = GROUPS / CHUNK;
    static_assert(GROUPS % CHUNK == 0, "whole runs");
    static_assert(PER_THREAD <= 32u, "one valid bit per sampled key");
};

// The rank in the narrowest word that holds it: u32 for keys of up to 32 bits.
template <int BYTES> struct BtRankWord { typedef u32 Type; };
template <> struct BtRankWord<8> { typedef u64 Type; };

template <class Key>
__device__ __forceinline__ typename BtRankWord<sizeof(typename Key::Bits)>::Type
bt_rank_word(typename Key::Bits raw, u32 dir) {
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

// a if `upper` is 0, else b. In asm: written as C++, the compiler recognises a select tree
// over an array as an indexed array and puts the array in local memory after all.
__device__ __forceinline__ u32 bt_select(u32 upper, u32 a, u32 b) {
    u32 out;
    asm("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %3, 0;\n\tselp.b32 %0, %2, %1, p;\n\t}"
        : "=r"(out)
        : "r"(a), "r"(b), "r"(upper));
    return out;
}

// Word `i` (runtime) of w[FIRST, FIRST + COUNT) by a select tree of COUNT - 1 selects, no
// local memory (a runtime index into a register array would put the array there).
template <u32 FIRST, u32 COUNT, u32 N>
__device__ __forceinline__ u32 bt_pick_word(const u32 (&w)[N], u32 i) {
    static_assert((COUNT & (COUNT - 1u)) == 0u && FIRST % COUNT == 0u, "aligned powers of two");
    if constexpr (COUNT == 1u) {
        return w[FIRST];
    } else {
        constexpr u32 HALF = COUNT / 2u;
        return bt_select(i & HALF, bt_pick_word<FIRST, HALF>(w, i),
                         bt_pick_word<FIRST + HALF, HALF>(w, i));
    }
}

template <u32 N>
__device__ __forceinline__ u32 bt_select_word(const u32 (&w)[N], u32 i) {
    return bt_pick_word<0, N>(w, i);
}

// Field `u` (FIELD bits) of a packed word.
template <u32 FIELD, class P>
__device__ __forceinline__ u32 bt_field(P packed, u32 u) {
    return (u32)(packed >> (FIELD * u)) & ((1u << FIELD) - 1u);
}

// The packed per-slot hit counts of a lane: a u32, or a u64 when the fields need it.
template <bool WIDE> struct BtPackedCounts { typedef u32 Type; };
template <> struct BtPackedCounts<true> { typedef u64 Type; };

// Per region of the filter, BT_STREAM_RECORD_WORDS u64 words: the candidates it found (more
// than its slots: an overflow) | its slots << 32, the lowest and the highest rank among those
// it kept (the final's bucket range), and how many of the candidates it found reach the
// threshold | its first slot (from the segment's first) << 32. The f32 / f64 hit test passes
// NaNs of any rank (RadixHitTest), so the candidates may hold keys below the threshold; only
// those that reach it prove that the candidates hold the k best.

// The lowest of the warp's `low` and the highest of its `high`, in every lane.
template <class R>
__device__ __forceinline__ void bt_warp_range(R& low, R& high) {
#pragma unroll
    for (u32 offset = 16; offset > 0; offset >>= 1) {
        const R l = __shfl_xor_sync(0xFFFFFFFFu, low, offset);
        const R h = __shfl_xor_sync(0xFFFFFFFFu, high, offset);
        low = l < low ? l : low;
        high = h > high ? h : high;
    }
}

// One block's shared state (static shared memory).
template <class R, u32 WARPS>
struct BtStreamState {
    u32 histogram[BT_BINS];
    u32 warp_totals[WARPS];
    R range_lo;            // final: the candidates' lowest rank
    R range_hi;            // ... and highest
    u32 region_hits[BT_STREAM_MAX_CTAS * BT_STREAM_FILTER_WARPS];  // filter: sample hits
    // Final: its copy tasks, each (its first candidate's place on chip, its candidates, its
    // first candidate's slot, 0).
    uint4 copy_task[BT_STREAM_MAX_TASKS];
    R sample_best;         // filter: the best sample
    u32 pivot_digit;
    u32 pivot_left;
    u32 pivot_count;
    u32 position_counter;  // exact path, unsorted output: the next position of an item above
    u32 selected;          // exact path, sorted output: the items in the buffers
    u32 boundary;          // bucket path: the bucket of the k-th item
    u32 work;              // bucket path: sum of the squared bucket sizes
    u32 reached;           // final: the candidates at or above the segment's threshold
    u32 dead;              // cluster: dead entries among them (bt_cluster_append)
    u32 hits_done;         // filter: the warps that counted their sample hits
    u32 own_selected;      // cluster: this block's candidates in the selected buckets
    uint2 peer_totals;     // cluster: the other block's (reached, dead), pushed by it
    u64 peer_counts_in;    // cluster: mbarrier, the other block's counts have landed
    u64 peer_copy_in;      // cluster: mbarrier, the other block's part of the copy has landed
};

// Where an MSB-first radix select stopped: the items with (rank & mask) > prefix are taken,
// `remaining` of the `boundary_total` items with (rank & mask) == prefix too.
template <class R>
struct BtSelection {
    R prefix;
    R mask;
    u32 remaining;
    u32 boundary_total;
};

// The keys of a segment in global memory, in index order (the exact path over every key).
template <class Key, class R>
struct BtGlobalItems {
    const typename Key::Bits* keys;  // the segment's first key
    u32 dir;
    __device__ __forceinline__ R rank(u32 j) const { return bt_rank_word<Key>(keys[j], dir); }
    __device__ __forceinline__ u32 index(u32 j) const { return j; }
};

// Items held on chip as (rank, index) in index order: the candidates.
template <class R>
struct BtSharedItems {
    const R* ranks;
    const u32* indices;
    __device__ __forceinline__ R rank(u32 j) const { return ranks[j]; }
    __device__ __forceinline__ u32 index(u32 j) const { return indices[j]; }
    __device__ __forceinline__ void get(u32 j, R& r, u32& i) const {
        r = ranks[j];
        i = indices[j];
    }
};

// Items as (rank, index) pairs of 4-byte ranks in shared memory: one 8-byte access an item.
struct BtPairItems {
    const uint2* pairs;
    __device__ __forceinline__ void get(u32 j, u32& r, u32& i) const {
        const uint2 v = pairs[j];
        r = v.x;
        i = v.y;
    }
};

// MSB-first radix select, 8 bits a pass, of the `want` best of the block's `n` items. Stops
// when the pivot bin holds exactly the remaining items, or after the pass at `last_shift`.
// s.histogram is zero on entry and on return. Counting is warp-aggregated by digit: the items
// a select runs on share their leading digits (candidates above a threshold; f32 scores in
// [0, 1) share their top byte for half the keys), which same-address atomics serialise.
template <class R, u32 BITS, u32 BLOCK_THREADS, class Items, u32 WARPS>
__device__ __forceinline__ BtSelection<R> bt_block_select(const Items& items, u32 n, u32 want,
                                                          int last_shift,
                                                          BtStreamState<R, WARPS>& s) {
    static_assert(BLOCK_THREADS >= BT_BINS, "one thread per bin in the pivot search");
    const u32 tid = threadIdx.x;
    const u32 lane = tid & 31u;
    const u32 warp = tid >> 5;
    BtSelection<R> sel;
    sel.prefix = 0;
    sel.mask = 0;
    sel.remaining = want;
    sel.boundary_total = n;
    bool done = want == n;
    for (int shift = (int)BITS - 8; !done && shift >= last_shift; shift -= 8) {
        for (u32 base = 0; base < n; base += BLOCK_THREADS) {
            const u32 j = base + tid;
            const R r = j < n ? items.rank(j) : (R)0;
            const u32 digit = j < n && (r & sel.mask) == sel.prefix
                ? (u32)(r >> shift) & (BT_BINS - 1u)
                : BT_BINS;
            const u32 peers = __match_any_sync(0xFFFFFFFFu, digit);
            if (digit < BT_BINS && lane == (u32)__ffs(peers) - 1u) {
                atomicAdd(&s.histogram[digit], (u32)__popc(peers));
            }
        }
        __syncthreads();
        // Thread t < 256 holds digit 255 - t; an inclusive scan in thread order counts the
        // items at or above each digit.
        const bool scans = tid < BT_BINS;
        const u32 digit = BT_BINS - 1u - (scans ? tid : 0u);
        const u32 c = scans ? s.histogram[digit] : 0u;
        const u32 x = warp_inclusive_sum(c);
        if (scans && lane == 31u) {
            s.warp_totals[warp] = x;
        }
        __syncthreads();
        if (scans) {
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
            s.histogram[digit] = 0;  // read by this thread only, above
        }
        __syncthreads();
        sel.remaining = s.pivot_left;
        sel.boundary_total = s.pivot_count;
        sel.prefix |= (R)s.pivot_digit << shift;
        sel.mask |= (R)(BT_BINS - 1) << shift;
        done = sel.boundary_total == sel.remaining || shift == 0;
        __syncthreads();  // pivot_* and warp_totals are rewritten in the next pass
    }
    return sel;
}

// The exact path: selects the `written` best of the block's `n` items (in index order) and
// writes them. Unsorted output goes straight to the output: items above the boundary at
// positions [0, written - remaining) from a counter, the kept boundary items after them in
// index order (exact ties at the k-th key are ranked in index order by a block scan). Sorted
// output appends (index, rank) to the buffers, sorts them (rank desc, index asc; stable, so it
// serves both sorted orderings) in `sort_region` (which may alias the items: they are dead by
// then) and writes them in that order.
template <class Key, class R, u32 BLOCK_THREADS, int VALUE_BYTES, class Items, u32 WARPS>
__device__ __forceinline__ void bt_stream_exact(const BatchedTopKParams& p, const Items& items,
                                                u32 n, u32 written, u64 begin, u32 dir,
                                                u64 out_base, BtStreamState<R, WARPS>& s,
                                                u32* index_buffer, R* rank_buffer,
                                                u64* sort_region) {
    typedef typename Key::Bits Bits;
    constexpr u32 BITS = 8u * (u32)sizeof(Bits);
    const u32 tid = threadIdx.x;
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool sorted = (p.flags & BT_SORTED) != 0;
    if (tid == 0) {
        s.position_counter = 0;
        s.selected = 0;
    }
    __syncthreads();
    const BtSelection<R> sel = bt_block_select<R, BITS, BLOCK_THREADS>(items, n, written, 0, s);
    u32* counter = sorted ? &s.selected : &s.position_counter;
    auto reserve = [counter](u32 count) { return atomicAdd(counter, count); };
    const u32 above_total = written - sel.remaining;
    const bool ordered = sel.boundary_total != sel.remaining;
    auto emit = [&](u32 pos, u32 j, R r) {
        if (sorted) {
            index_buffer[pos] = items.index(j);
            rank_buffer[pos] = r;
        } else {
            bt_write_ranked<Key, VALUE_BYTES>(p, begin, (u64)items.index(j), out_base + pos, r,
                                              dir);
        }
    };
    const u32 skipped = sel.boundary_total - sel.remaining;  // boundary items not kept
    u32 boundary_before = 0;
    for (u32 tile = 0; tile < n; tile += BLOCK_THREADS) {
        const u32 j = tile + tid;
        const bool valid = j < n;
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
    if (!sorted) {
        __syncthreads();  // the counters are reset by the next segment
        return;
    }
    __syncthreads();  // the buffers are complete (written items)
    const u32 m = bt_pow2_at_least(written);
    if constexpr (sizeof(Bits) <= 4) {
        // (rank << 32 | ~index): descending order = by key, equal keys by index. Indices are
        // below 2^32 - 1, so a real item is never 0, the padding.
        for (u32 i = tid; i < m; i += BLOCK_THREADS) {
            sort_region[i] = i < written
                ? (((u64)rank_buffer[i] << 32) | (u64)(0xFFFFFFFFu - index_buffer[i]))
                : 0ull;
        }
        __syncthreads();
        bt_block_sort_packed<BLOCK_THREADS>(sort_region, m);
        for (u32 i = tid; i < written; i += BLOCK_THREADS) {
            const u64 item = sort_region[i];
            const u64 index = (u64)(0xFFFFFFFFu - (u32)item);
            bt_write_ranked<Key, VALUE_BYTES>(p, begin, index, out_base + i, (R)(item >> 32), dir);
        }
    } else {
        u64* indices = sort_region + m;
        for (u32 i = tid; i < m; i += BLOCK_THREADS) {
            sort_region[i] = i < written ? (u64)rank_buffer[i] : 0ull;
            indices[i] = i < written ? (u64)index_buffer[i] : BT_PAD;
        }
        __syncthreads();
        bt_block_sort<BLOCK_THREADS>(sort_region, indices, m, false);
        for (u32 i = tid; i < written; i += BLOCK_THREADS) {
            bt_write_ranked<Key, VALUE_BYTES>(p, begin, indices[i], out_base + i,
                                              (R)sort_region[i], dir);
        }
    }
    __syncthreads();  // the sort region and counters are reused by the next segment
}

// A thread's N consecutive words [tid N, (tid + 1) N) of a 16-byte aligned shared array, as
// vectors: a word at a time, lane l's word i sits N words from lane l + 1's, an N-way bank
// conflict on every access (H100: ~0.5 us of the clustered kernel's bucket starts).
template <u32 N>
__device__ __forceinline__ void bt_load_words(const u32* a, u32 (&w)[N]) {
    static_assert(N == 1 || N % 2 == 0, "whole vectors");
    if constexpr (N % 4 == 0) {
#pragma unroll
        for (u32 i = 0; i < N; i += 4) {
            const uint4 v = reinterpret_cast<const uint4*>(a)[(threadIdx.x * N + i) / 4];
            w[i] = v.x;
            w[i + 1] = v.y;
            w[i + 2] = v.z;
            w[i + 3] = v.w;
        }
    } else if constexpr (N == 2) {
        const uint2 v = reinterpret_cast<const uint2*>(a)[threadIdx.x];
        w[0] = v.x;
        w[1] = v.y;
    } else {
        w[0] = a[threadIdx.x];
    }
}

template <u32 N>
__device__ __forceinline__ void bt_store_words(u32* a, const u32 (&w)[N]) {
    static_assert(N == 1 || N % 2 == 0, "whole vectors");
    if constexpr (N % 4 == 0) {
#pragma unroll
        for (u32 i = 0; i < N; i += 4) {
            reinterpret_cast<uint4*>(a)[(threadIdx.x * N + i) / 4] =
                make_uint4(w[i], w[i + 1], w[i + 2], w[i + 3]);
        }
    } else if constexpr (N == 2) {
        reinterpret_cast<uint2*>(a)[threadIdx.x] = make_uint2(w[0], w[1]);
    } else {
        a[threadIdx.x] = w[0];
    }
}

// bt_load_words, then the words cleared (counters read once and reset for their next use).
template <u32 N>
__device__ __forceinline__ void bt_take_words(u32* a, u32 (&w)[N]) {
    u32 zero[N];
#pragma unroll
    for (u32 i = 0; i < N; ++i) {
        zero[i] = 0;
    }
    bt_load_words(a, w);
    bt_store_words(a, zero);
}

// The shift that maps the distances [0, span] onto BT_BUCKETS buckets: span >> shift fits in
// BT_BUCKET_LOG bits.
template <class R>
__device__ __forceinline__ u32 bt_bucket_shift(R span) {
    constexpr u32 RANK_BITS = 8u * (u32)sizeof(R);
    const u32 span_bits = span == 0 ? 0u
        : RANK_BITS - (sizeof(R) == 8 ? (u32)__clzll((long long)span) : (u32)__clz((int)span));
    return span_bits > BT_BUCKET_LOG ? span_bits - BT_BUCKET_LOG : 0u;
}

// The buckets of the final selection over the ranks [lo, hi]: bucket b (0 = best) holds the
// ranks r with (r - lo) >> shift == BT_BUCKETS - 1 - b, so the buckets are ordered.
template <class R>
struct BtBuckets {
    R lo;
    u32 shift;
    __device__ __forceinline__ BtBuckets(R low, R high) : lo(low), shift(bt_bucket_shift(high - low)) {}
    __device__ __forceinline__ u32 operator()(R r) const {
        return BT_BUCKETS - 1u - (u32)((r - lo) >> shift);
    }
};

// The bucket path's starts: thread t holds the counts of buckets [t PER, (t + 1) PER) in
// `local`; starts[b] gets bucket b's first position (starts[BT_BUCKETS] the total), s.boundary
// the bucket of the `written`-th item and s.work the sum of the squared counts (zero on entry);
// places[b], when given, the start plus below[b - t PER] (the first place of this block's own
// items of the bucket), before the barrier. `starts` and `places` are 16-byte aligned. Ends in
// a block barrier.
template <u32 BLOCK_THREADS, u32 PER, class R, u32 WARPS>
__device__ __forceinline__ void bt_bucket_starts(const u32 (&local)[PER], u32 written,
                                                 BtStreamState<R, WARPS>& s, u32* starts,
                                                 u32* places = nullptr,
                                                 const u32* below = nullptr) {
    const u32 tid = threadIdx.x;
    u32 sum = 0;
    u32 squares = 0;
#pragma unroll
    for (u32 i = 0; i < PER; ++i) {
        sum += local[i];
        squares += local[i] * local[i];
    }
    squares = bt_warp_sum(squares);  // one atomic a warp, not 1024 on one word
    if ((tid & 31u) == 0u) {
        atomicAdd(&s.work, squares);
    }
    u32 all = 0;
    u32 start = block_exclusive_sum<BLOCK_THREADS>(sum, s.warp_totals, &all);
    u32 first[PER];
    u32 place[PER];
#pragma unroll
    for (u32 i = 0; i < PER; ++i) {
        first[i] = start;
        place[i] = places != nullptr ? start + below[i] : 0u;
        if (start <= written - 1u && written - 1u < start + local[i]) {
            s.boundary = tid * PER + i;
        }
        start += local[i];
    }
    bt_store_words(starts, first);
    if (places != nullptr) {
        bt_store_words(places, place);
    }
    if (tid == BLOCK_THREADS - 1u) {
        starts[BT_BUCKETS] = start;
    }
    __syncthreads();
}

// The bucket path's last step: items j0, j0 + step, ... below `selected_end` of the copy (the
// candidates of the buckets up to the boundary one, in bucket order from `starts`) are ranked
// and written. Each item compares itself with the items of its bucket: `above` have a better
// rank, `equal` the same (itself included), `first_of_equal` of those a smaller index. Its
// position is the bucket's start + above + first_of_equal; its rank's items take positions
// [group, group + equal), group = start + above. Items before the boundary bucket are all
// kept. In the boundary bucket, the group holding position k - 1 is the k-th rank's ties,
// `keep` of which are kept (the first or the last by index, as the tie-break says); groups
// before it are kept, groups after it dropped. So no item needs the k-th rank itself.
template <class Key, class R, int VALUE_BYTES, class Items, class Bucket>
__device__ __forceinline__ void bt_bucket_write(const BatchedTopKParams& p, const Items& copy,
                                                const u32* starts, u32 boundary_start,
                                                u32 selected_end, u32 written, u64 begin, u32 dir,
                                                u64 out_base, const Bucket& bucket, u32 j0,
                                                u32 step) {
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    for (u32 j = j0; j < selected_end; j += step) {
        R r;
        u32 index;
        copy.get(j, r, index);
        const u32 b = bucket(r);
        const u32 first = starts[b];
        const u32 last = starts[b + 1u];
        u32 above = 0;
        u32 equal = 0;
        u32 first_of_equal = 0;
        for (u32 t = first; t < last; ++t) {
            R rt;
            u32 it;
            copy.get(t, rt, it);
            above += rt > r ? 1u : 0u;
            equal += rt == r ? 1u : 0u;
            first_of_equal += rt == r && it < index ? 1u : 0u;
        }
        const u32 group = first + above;
        const u32 pos = group + first_of_equal;
        u32 out = pos;
        if (j >= boundary_start && group + equal > written) {
            if (group >= written) {
                continue;  // below the k-th rank
            }
            // The k-th rank's ties: `keep` of `equal` are kept.
            const u32 keep = written - group;
            if (prefer_larger ? first_of_equal < equal - keep : first_of_equal >= keep) {
                continue;
            }
            out = prefer_larger ? pos - (equal - keep) : pos;
        }
        bt_write_ranked<Key, VALUE_BYTES>(p, begin, (u64)index, out_base + out, r, dir);
    }
}

// The bucket path of the final selection: the `n` candidates (any order) hold the `written`
// best keys and every tie of the k-th, and `fill` holds their count per bucket. An item's
// position in the output (rank desc, index asc) is its bucket's start plus the number of better
// items in its bucket, counted by comparing with each of them. Exact ties at the k-th key all
// fall into the one boundary bucket, where the tie-break picks which are kept. Returns false,
// having written nothing, when the buckets are too uneven for that count (sum of squared sizes
// above BT_BUCKET_WORK per candidate) or the selected buckets do not fit the copy; the caller
// then takes the exact path. Sorted and unsorted output both get the sorted positions. On entry
// s.work is zero (the caller clears it in its own phases, saving a barrier).
template <class Key, class R, u32 BLOCK_THREADS, int VALUE_BYTES, u32 WARPS>
__device__ __forceinline__ bool bt_bucket_select(const BatchedTopKParams& p, const R* ranks,
                                                 const u32* indices, u32 n, u32 written,
                                                 u64 begin, u32 dir, u64 out_base,
                                                 BtStreamState<R, WARPS>& s,
                                                 const BtBuckets<R>& bucket, R* copy_ranks,
                                                 u32* copy_indices, u32 copy_cap, u32* starts,
                                                 u32* fill) {
    constexpr u32 PER_THREAD = BT_BUCKETS / BLOCK_THREADS;
    const u32 tid = threadIdx.x;
    // The counters are cleared for the scatter as they are read.
    u32 local[PER_THREAD];
    bt_take_words(fill, local);
    bt_bucket_starts<BLOCK_THREADS>(local, written, s, starts);
    const u32 boundary = s.boundary;
    const u32 boundary_start = starts[boundary];
    const u32 selected_end = starts[boundary + 1u];
    if (s.work > BT_BUCKET_WORK * n || selected_end > copy_cap) {
        return false;  // block-uniform: every thread read the same words after the barrier
    }
    // Scatter the items of the buckets up to the boundary into bucket order.
    for (u32 i = tid; i < n; i += BLOCK_THREADS) {
        const R r = ranks[i];
        const u32 b = bucket(r);
        if (b <= boundary) {
            const u32 at = starts[b] + atomicAdd(&fill[b], 1u);
            copy_ranks[at] = r;
            copy_indices[at] = indices[i];
        }
    }
    __syncthreads();
    bt_bucket_write<Key, R, VALUE_BYTES>(p, BtSharedItems<R>{copy_ranks, copy_indices}, starts,
                                         boundary_start, selected_end, written, begin, dir,
                                         out_base, bucket, tid, BLOCK_THREADS);
    __syncthreads();  // the state is reused by the next segment
    return true;
}

// The sample's threshold bins: a sample at distance d = best - rank below the best sample goes
// to bin (e - 5) * 64 + the 6 bits of d below its leading bit e (e >= 6; below 64, bin d):
// every bin spans at most 1/64 of its distances, and the bins are in distance order.
template <class R>
struct BtSampleBins {
    static constexpr u32 RANK_BITS = 8u * (u32)sizeof(R);
    static constexpr u32 COUNT = (RANK_BITS - 5u) * 64u;
    static constexpr u32 ALLOCATED = RANK_BITS == 32u ? 2048u : 4096u;  // a multiple of 256
    static_assert(COUNT <= ALLOCATED, "the bins fit");

    static __device__ __forceinline__ u32 leading_bit(R d) {
        return d == 0 ? 0u
            : RANK_BITS - 1u -
                (sizeof(R) == 8 ? (u32)__clzll((long long)d) : (u32)__clz((int)d));
    }
    static __device__ __forceinline__ u32 of(R d) {
        const u32 e = max(leading_bit(d), 5u);
        return (e - 5u) * 64u + ((u32)(d >> (max(e, 6u) - 6u)) & 63u);
    }
    // The largest distance of bin b.
    static __device__ __forceinline__ R largest(u32 b) {
        const u32 e = b / 64u + 5u;
        if (e == 5u) {
            return (R)b;
        }
        const u32 shift = e - 6u;
        return ((R)(64u + b % 64u) << shift) + (((R)1 << shift) - 1u);
    }
};

// A rank at or below the m-th best of the block's samples (PER_THREAD ranks per thread, valid
// where `valid` says; m at most their count), in one counting pass instead of a radix select's
// two: the best sample (a block max), then a histogram of the distances below it
// (BtSampleBins: 1/64 relative precision, so the threshold admits at most ~1.6 % more of the
// distance than the exact m-th sample), then the bin where the count reaches m. `bins` (shared,
// 16-byte aligned, BtSampleBins<R>::ALLOCATED words) and s.sample_best are zero on entry and on
// return; the best sample goes to *best_out when it is given.
template <class R, u32 BLOCK_THREADS, u32 PER_THREAD, u32 WARPS>
__device__ __forceinline__ R bt_sample_threshold(const R (&rank)[PER_THREAD], u32 valid, u32 m,
                                                 BtStreamState<R, WARPS>& s, u32* bins,
                                                 R* best_out = nullptr) {
    typedef BtSampleBins<R> Bins;
    constexpr u32 PER_BIN_THREAD = Bins::ALLOCATED / BLOCK_THREADS;
    const u32 tid = threadIdx.x;
    R best = 0;
#pragma unroll
    for (u32 u = 0; u < PER_THREAD; ++u) {
        best = (valid >> u) & 1u && rank[u] > best ? rank[u] : best;
    }
    if constexpr (sizeof(R) == 4) {
        best = bt_warp_max(best);  // one redux
    } else {
#pragma unroll
        for (u32 offset = 16; offset > 0; offset >>= 1) {
            const R other = __shfl_xor_sync(0xFFFFFFFFu, best, offset);
            best = other > best ? other : best;
        }
    }
    if ((tid & 31u) == 0) {
        atomicMax(&s.sample_best, best);
    }
    __syncthreads();
    best = s.sample_best;
#pragma unroll
    for (u32 u = 0; u < PER_THREAD; ++u) {
        if ((valid >> u) & 1u) {
            atomicAdd(&bins[Bins::of(best - rank[u])], 1u);
        }
    }
    __syncthreads();
    // Thread t owns bins [t * PER_BIN_THREAD, (t + 1) * PER_BIN_THREAD), in distance order.
    u32 local[PER_BIN_THREAD];
    bt_take_words(bins, local);  // read by this thread only
    u32 sum = 0;
#pragma unroll
    for (u32 i = 0; i < PER_BIN_THREAD; ++i) {
        sum += local[i];
    }
    if (tid == 0) {
        s.sample_best = 0;  // every thread read it before the barrier above
    }
    u32 total = 0;
    u32 before = block_exclusive_sum<BLOCK_THREADS>(sum, s.warp_totals, &total);
#pragma unroll
    for (u32 i = 0; i < PER_BIN_THREAD; ++i) {
        if (before < m && before + local[i] >= m) {
            s.pivot_digit = tid * PER_BIN_THREAD + i;
        }
        before += local[i];
    }
    __syncthreads();
    if (best_out != nullptr) {
        *best_out = best;
    }
    const R largest = Bins::largest(s.pivot_digit);
    return largest < best ? best - largest : (R)0;
}

// A segment's sample (BtStreamSample), the same in every block of the segment: its `groups`
// vectors spread over the segment's `segment_vectors` whole vectors, and whether it cuts.
// The samples among the `written` best keys are binomial with mean
// e = samples * written / size; m = e + 6 sqrt(e) + 4 lies beyond its tail, so fewer than
// `written` keys reach the m-th best sample only with negligible probability. A segment whose
// m would not be below its samples (k close to the size) is not sampled: its threshold is 0,
// every key.
template <class Bits, u32 BLOCK_THREADS>
struct BtSamplePlan {
    typedef BtStreamSample<Bits, BLOCK_THREADS> Sample;
    u32 segment_vectors;
    u32 groups;
    u32 m;
    bool sampled;
    __device__ __forceinline__ BtSamplePlan(u32 size, u32 written) {
        segment_vectors = size / Sample::VEC;  // whole vectors from the segment's first key
        groups = min(Sample::GROUPS, segment_vectors);
        const u32 count = groups * Sample::VEC;
        // Approximate division and root (single instructions, no slow paths): m needs no
        // more, and every block of a segment computes the same.
        float root;
        float reciprocal;
        asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(reciprocal) : "f"((float)size));
        const float expected = (float)count * (float)written * reciprocal;
        asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(root) : "f"(expected));
        const float m_float = ceilf(expected + 6.0f * root + 4.0f);
        sampled = written != size && m_float < (float)count;
        m = sampled ? (u32)m_float : 0u;
    }
};

// Draws this thread's share of a segment's sample (plan.sampled): vector u of the thread is
// group g = u * BLOCK_THREADS + tid. A segment of fewer than GROUPS vectors has every vector
// sampled (group g is vector g); a larger one has RUNS runs of CHUNK consecutive vectors
// spread evenly over it (group g is vector g % CHUNK of run g / CHUNK).
// Every block of the segment draws the same ones.
// Fills the vectors' positions and their raw keys (loads that may still be in flight: the
// ranks come from bt_sample_ranks, at their first use); returns the valid bits (key i of the
// thread valid when its group is below `groups`).
template <class Key, u32 BLOCK_THREADS>
__device__ __forceinline__ u32 bt_draw_sample(
    const typename Key::Bits* segment, const BtSamplePlan<typename Key::Bits, BLOCK_THREADS>& plan,
    u32 (&sample_vector)[BtStreamSample<typename Key::Bits, BLOCK_THREADS>::VECTORS],
    typename Key::Bits (&raw)[BtStreamSample<typename Key::Bits, BLOCK_THREADS>::PER_THREAD]) {
    typedef typename Key::Bits Bits;
    typedef BtStreamSample<Bits, BLOCK_THREADS> Sample;
    constexpr u32 VEC = Sample::VEC;
    const u32 tid = threadIdx.x;
    const u32 groups = plan.groups;
    const bool sample_aligned = (((unsigned long long)segment) & 15ull) == 0;
    const bool runs = groups == Sample::GROUPS;  // uniform; else groups == segment_vectors
    const u32 run_stride = plan.segment_vectors / Sample::RUNS;  // >= CHUNK when runs
#pragma unroll
    for (u32 u = 0; u < Sample::VECTORS; ++u) {
        const u32 g = u * BLOCK_THREADS + tid;
        const u32 v = g >= groups ? 0u
            : runs               ? g / Sample::CHUNK * run_stride + g % Sample::CHUNK
                                 : g;
        sample_vector[u] = v;
        uint4 w = make_uint4(0u, 0u, 0u, 0u);
        if (g < groups && sample_aligned) {
            w = reinterpret_cast<const uint4*>(segment)[v];
        }
#pragma unroll
        for (u32 e = 0; e < VEC; ++e) {
            raw[u * VEC + e] = g < groups && !sample_aligned ? segment[v * VEC + e]
                                                             : bt_vector_key<Bits>(w, e);
        }
    }
    u32 valid = 0;
#pragma unroll
    for (u32 i = 0; i < Sample::PER_THREAD; ++i) {
        valid |= ((i / VEC) * BLOCK_THREADS + tid < groups ? 1u : 0u) << i;
    }
    return valid;
}

// The ranks of the drawn sample's keys.
template <class Key, u32 N>
__device__ __forceinline__ void bt_sample_ranks(
    const typename Key::Bits (&raw)[N], u32 dir,
    typename BtRankWord<sizeof(typename Key::Bits)>::Type (&rank)[N]) {
#pragma unroll
    for (u32 i = 0; i < N; ++i) {
        rank[i] = bt_rank_word<Key>(raw[i], dir);
    }
}

// The filter regions of a segment of `size` keys: a warp's part of each chunk the filter runs.
__device__ __forceinline__ u32 bt_stream_regions(u32 size, u32 chunk) {
    return (size + chunk - 1u) / chunk * BT_STREAM_FILTER_WARPS;
}

// The slots of region `region` of a sampled segment's `regions`, from its `total` slots (the
// same in every block of the segment: the same sample, the same threshold): three quarters
// split evenly, the last quarter in proportion to the sample keys at or above the threshold
// that each region holds (hits[r]). Candidates crowd where the best keys are: sorted, smooth
// or clustered inputs put most of them in a few regions, which an even split overflows (and
// an overflow sends the segment to the exact path over every key, ~10x slower). A host
// simulation of the sample and the threshold at [64x131072] k=2048 (NOTES-batched, seventh
// session) fits every region of sorted and reversed rows, of one or five hot windows and of
// 96-99 % of AR(1) series with coefficients 0.99 to 0.9999 (the even split before, 512 slots
// per region: 0 % of the sorted rows, 2 % of AR(1) 0.999). `hits` is read only: every warp of
// the block computes its own region's slots.
__device__ __forceinline__ void bt_stream_slots(const u32* hits, u32 regions, u32 region,
                                                u32 total, u32* first, u32* count) {
    const u32 lane = threadIdx.x & 31u;
    // Hits are sample keys (at most 8192 < 2^16) and slots at most 4 * 8192 (the host's
    // budget), so the sums pack into one word and the products below fit 32 bits.
    u32 sums = 0;  // the hits before `region` | all hits << 16
    for (u32 r = lane; r < regions; r += 32u) {
        const u32 h = hits[r];
        sums += (r < region ? h : 0u) + (h << 16);
    }
    sums = bt_warp_sum(sums);
    const u32 below = sums & 0xFFFFu;
    const u32 all = sums >> 16;
    const u32 own = hits[region];
    const u32 base = total / 4u * 3u / regions;
    const u32 spread = total - base * regions;  // at least a quarter of the slots
    // Region r starts at r * base + spread * (hits before r) / all (monotone in r, and region
    // `regions` starts at most at `total`).
    const u32 start = region * base + (all ? spread * below / all : 0u);
    const u32 end = (region + 1u) * base + (all ? spread * (below + own) / all : 0u);
    *first = start;
    *count = end - start;
}

// The filter (PART 1), a block per (list position, chunk) work item. Each warp of the block
// streams its own contiguous part of the chunk in index order and appends its candidates to its
// own slots: no block barrier while the keys stream by, and the candidates of a segment, read
// in (chunk, warp) order, are in index order.
template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, class R, u32 WARPS>
__device__ __forceinline__ void bt_stream_filter(const BatchedTopKParams& p,
                                                 BtStreamState<R, WARPS>& s, u32* sample_bins,
                                                 uint4* stage) {
    typedef typename Key::Bits Bits;
    constexpr u32 VEC = BtStreamBatch<Bits>::VEC;
    constexpr u32 UNROLL = BtStreamBatch<Bits>::UNROLL;
    constexpr u32 BATCH = BtStreamBatch<Bits>::BATCH;
    static_assert(UNROLL * VEC <= 32u, "one hit bit per key of a lane's batch");
    const u32 tid = threadIdx.x;
    const u32 lane = tid & 31u;
    const u32 warp = tid >> 5;
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    const u64 ctas = p.stream_ctas;
    const u32 chunk = (u32)p.stream_chunk;
    const u32 part = chunk / WARPS;  // a warp's keys: a multiple of VEC (the host's chunks)
    // A region's slots on average (the stride of a segment's slots: regions x capacity), and
    // an unsampled region's.
    const u32 capacity = (u32)p.stream_candidates;
    const u64 work = bt_bin_count(p, BT_TIER_STREAM) * ctas;
    u32* const hits = s.region_hits;  // the sample keys at or above the threshold, per region
    auto clear_sample = [&]() {
        for (u32 b = tid; b < BtSampleBins<R>::ALLOCATED; b += BLOCK_THREADS) {
            sample_bins[b] = 0;
        }
        for (u32 r = tid; r < BT_STREAM_MAX_CTAS * WARPS; r += BLOCK_THREADS) {
            hits[r] = 0;
        }
        if (tid == 0) {
            s.hits_done = 0;
        }
    };
    clear_sample();
    if (tid == 0) {
        s.sample_best = 0;
    }
    __syncthreads();
    // The chunks of a segment are neighbouring items (neighbouring blocks share an SM's L1 for
    // the sample's loads: chunk-major items made [64x131072] 0.4 us slower). A grid smaller
    // than the items is coprime to ctas (the host's), so each block's items cycle through the
    // chunk numbers: ctas may exceed a segment's chunks (a loose size bound), and a grid that
    // is a multiple of it would leave the blocks of the higher chunk numbers without work.
    for (u64 w = blockIdx.x; w < work; w += gridDim.x) {
        const u64 slot = w / ctas;
        const u32 c = (u32)(w - slot * ctas);
        const u64 seg = bt_bin_segment(p, BT_TIER_STREAM, slot);
        u64 begin, size64, written64;
        u32 dir;
        if (!bt_descriptor(p, seg, BT_TIER_STREAM, &begin, &size64, &written64, &dir)) {
            continue;  // block-uniform; the final stage skips the segment too
        }
        const u32 size = (u32)size64;  // <= stream_max_size < 2^32
        const u32 written = (u32)written64;
        if (c * chunk >= size) {
            continue;  // the final stage reads the counts of ceil(size / chunk) chunks
        }
        const Bits* segment = keys + begin;
        // This warp's keys [lo, hi) of the segment.
        const u32 lo = min(size, c * chunk + warp * part);
        const u32 hi = min(size, c * chunk + (warp + 1u) * part);
        const Bits* src = segment + lo;
        const bool aligned = (((unsigned long long)src) & 15ull) == 0;
        const u32 vectors = aligned ? (hi - lo) / VEC : 0u;
        const uint4* src4 = reinterpret_cast<const uint4*>(src);

        // The threshold (0, every key, when the sample would not cut: k close to the size).
        typedef BtStreamSample<Bits, BLOCK_THREADS> Sample;
        R threshold = 0;
        // This warp's region (of the segment's `regions`) and its slots: an even share of the
        // segment's slots, or (sampled) a quarter of them spread over the regions by the
        // sample keys at or above the threshold that each region holds (bt_stream_slots).
        const u32 regions = bt_stream_regions(size, chunk);
        const u32 region_in_segment = c * WARPS + warp;
        u32 slot_first = region_in_segment * capacity;
        u32 slot_count = capacity;
        const BtSamplePlan<Bits, BLOCK_THREADS> plan(size, written);
        const bool sampled = plan.sampled;
        if (sampled) {
            if (w != blockIdx.x) {
                // Cleared for this work item once every warp has read the previous one's hits
                // and staged its last batch (the kernel's start cleared them for the first);
                // bt_sample_threshold's barriers order the clearing before the counts.
                __syncthreads();
                clear_sample();
            }
            u32 sample_vector[Sample::VECTORS];
            Bits raw[Sample::PER_THREAD];
            R rank[Sample::PER_THREAD];
            const u32 valid = bt_draw_sample<Key>(segment, plan, sample_vector, raw);
            bt_sample_ranks<Key>(raw, dir, rank);
            threshold = bt_sample_threshold<R, BLOCK_THREADS>(rank, valid, plan.m, s, sample_bins);
#pragma unroll
            for (u32 u = 0; u < Sample::VECTORS; ++u) {
                // Keys of vector u at or above the threshold (all in one region: part % VEC
                // == 0).
                u32 n = 0;
#pragma unroll
                for (u32 e = 0; e < VEC; ++e) {
                    const u32 i = u * VEC + e;
                    n += (valid >> i) & 1u && rank[i] >= threshold ? 1u : 0u;
                }
                if (n != 0) {
                    atomicAdd(&hits[sample_vector[u] * VEC / part], n);
                }
            }
            // No block barrier: each warp waits for the others' counts when it first needs its
            // slots, with its first batch's loads in flight. (At the kernel's start every block
            // is here at once, with DRAM idle: with a barrier and the slots worked out before
            // the first loads, the filter took 19.1 us at [64x131072] instead of 17.9.)
            __syncwarp();
            if (lane == 0) {
                __threadfence_block();
                atomicAdd(&s.hits_done, 1u);
            }
        }
        // Keys at or above the threshold (a superset for f32 and f64: RadixHitTest).
        const RadixHitTest<Key> hit((Bits)threshold, dir ? (Bits)~(Bits)0 : (Bits)0);

        const u64 region = w * WARPS + warp;
        const u64 segment_slots = slot * ctas * WARPS * capacity;
        R* const segment_ranks = reinterpret_cast<R*>(p.stream_ranks) + segment_slots;
        u32* const segment_indices = reinterpret_cast<u32*>(p.stream_indices) + segment_slots;
        R* out_ranks = segment_ranks + slot_first;
        u32* out_indices = segment_indices + slot_first;
        bool slots_known = !sampled;  // warp-uniform
        auto find_slots = [&]() {
            if (!slots_known) {
                while (*reinterpret_cast<volatile u32*>(&s.hits_done) < WARPS) {
                }
                __threadfence_block();
                bt_stream_slots(hits, regions, region_in_segment, capacity * (u32)ctas * WARPS,
                                &slot_first, &slot_count);
                out_ranks = segment_ranks + slot_first;
                out_indices = segment_indices + slot_first;
                slots_known = true;
            }
        };
        u32 appended = 0;  // warp-uniform
        R low = ~(R)0;     // the lowest and highest rank of this lane's candidates
        R high = 0;
        u32 reached = 0;   // this lane's candidates at or above the threshold
        auto put = [&](u32 pos, Bits raw, u32 index) {
            const R r = bt_rank_word<Key>(raw, dir);
            low = r < low ? r : low;
            high = r > high ? r : high;
            reached += r >= threshold ? 1u : 0u;
            if (pos < slot_count) {
                out_ranks[pos] = r;
                out_indices[pos] = index;
            }
        };
        // Appends in index order. Key e of lane l's vector slot u is key (base + 32 u + l) VEC
        // + e of the part, so the order is slot, lane, key: one warp scan per batch of the
        // lanes' hit counts per slot (packed in FIELD-bit fields, which no sum overflows),
        // then each lane walks its own hits (about 3 % of the keys), reading each key from
        // its staged vectors (in registers, a runtime index would put them in local memory)
        // and its slot's start by a select tree. (Listing the hits and writing them a lane per
        // hit, coalesced, was slower: [64x131072] 0.0283 ms against 0.0277.)
        constexpr u32 SLOT_MASK = (1u << VEC) - 1u;
        constexpr u32 FIELD = VEC * 32u < 256u ? 8u : 16u;
        typedef typename BtPackedCounts<(UNROLL * FIELD > 32u)>::Type P;
        // Once a batch is tested, a lane with hits stages its vectors in shared memory (its own
        // words: no warp barrier) and the registers take the next batch's loads, which are in
        // flight through the scan and the appends. (Before, the loads were issued at the top of
        // each batch, and the SM alternated between waiting and appending: [64x131072] filter
        // 18.2 -> 16.5 us. The next two batches in flight spill at 64 registers; the first
        // loaded during the sample's select, by cp.async into the stage, delays the sample.)
        uint4* const staged = stage + warp * BATCH + lane;
        uint4 v4[UNROLL];
        auto load_batch = [&](u32 base) {
#pragma unroll
            for (u32 u = 0; u < UNROLL; ++u) {
                const u32 v = base + u * 32u + lane;
                v4[u] = v < vectors ? __ldcs(src4 + v) : make_uint4(0u, 0u, 0u, 0u);
            }
        };
        if (vectors != 0) {
            load_batch(0);
        }
        for (u32 base = 0; base < vectors; base += BATCH) {  // warp-uniform
            find_slots();  // the first batch: its loads are in flight
            u32 flags = 0;  // bit u * VEC + e: key e of vector slot u
#pragma unroll
            for (u32 u = 0; u < UNROLL; ++u) {
                const bool valid = base + u * 32u + lane < vectors;
#pragma unroll
                for (u32 e = 0; e < VEC; ++e) {
                    flags |= (valid && hit(bt_vector_key<Bits>(v4[u], e)) ? 1u : 0u)
                        << (u * VEC + e);
                }
            }
            if (flags != 0) {
#pragma unroll
                for (u32 u = 0; u < UNROLL; ++u) {
                    staged[u * 32u] = v4[u];
                }
            }
            if (base + BATCH < vectors) {
                load_batch(base + BATCH);
            }
            if (!__any_sync(0xFFFFFFFFu, flags != 0)) {
                continue;
            }
            P counts = 0;
#pragma unroll
            for (u32 u = 0; u < UNROLL; ++u) {
                counts |= (P)__popc((flags >> (u * VEC)) & SLOT_MASK) << (FIELD * u);
            }
            const P inclusive = warp_inclusive_sum(counts);
            const P total = __shfl_sync(0xFFFFFFFFu, inclusive, 31);
            const P before = inclusive - counts;  // the lanes below, per slot
            // A hit's position: start[its slot] + this lane's hits below it (in any slot).
            u32 start[UNROLL];
            const u32 batch_first = appended;
            u32 at = appended;
            u32 own_below = 0;
#pragma unroll
            for (u32 u = 0; u < UNROLL; ++u) {
                start[u] = at + bt_field<FIELD>(before, u) - own_below;
                at += bt_field<FIELD>(total, u);
                own_below += bt_field<FIELD>(counts, u);
            }
            appended = at;
            const u32 first = lo + (base + lane) * VEC;  // key 0 of slot 0
            // Every key of the warp's batch a hit (sorted or clustered inputs, where a walk
            // over a lane's hits would take UNROLL x VEC rounds): key e of lane l's slot u goes
            // to batch_first + (32 u + l) VEC + e, written slot by slot.
            constexpr u32 ALL = UNROLL * VEC == 32u ? ~0u : (1u << (UNROLL * VEC)) - 1u;
            if (__all_sync(0xFFFFFFFFu, flags == ALL) && appended <= slot_count) {
#pragma unroll 1
                for (u32 u = 0; u < UNROLL; ++u) {
                    const uint4 w = staged[u * 32u];
                    const u32 to = batch_first + (u * 32u + lane) * VEC;
#pragma unroll
                    for (u32 e = 0; e < VEC; ++e) {
                        put(to + e, bt_vector_key<Bits>(w, e), first + u * 32u * VEC + e);
                    }
                }
                continue;
            }
            u32 rest = flags;
            while (rest != 0u) {
                const u32 b = (u32)__ffs(rest) - 1u;
                rest &= rest - 1u;
                const u32 u = b / VEC;
                const u32 pos = bt_select_word(start, u) + (u32)__popc(flags & ((1u << b) - 1u));
                const Bits key = reinterpret_cast<const Bits*>(staged + u * 32u)[b % VEC];
                put(pos, key, first + u * 32u * VEC + b % VEC);
            }
        }
        find_slots();
        // The keys past the vectors (an unaligned part, or a tail of fewer than VEC keys).
        for (u32 base = lo + vectors * VEC; base < hi; base += 32u) {  // warp-uniform
            const u32 j = base + lane;
            const Bits raw = j < hi ? segment[j] : (Bits)0;
            const bool take = j < hi && hit(raw);
            const u32 ballot = __ballot_sync(0xFFFFFFFFu, take);
            if (take) {
                put(appended + (u32)__popc(ballot & ((1u << lane) - 1u)), raw, j);
            }
            appended += (u32)__popc(ballot);
        }
        bt_warp_range(low, high);
        reached = bt_warp_sum(reached);
        if (lane == 0) {
            u64* record = reinterpret_cast<u64*>(p.stream_counts) + region * BT_STREAM_RECORD_WORDS;
            record[0] = appended | (u64)slot_count << 32;  // appended > slot_count: an overflow
            record[1] = (u64)low;
            record[2] = (u64)high;
            record[3] = reached | (u64)slot_first << 32;
        }
    }
#if __CUDA_ARCH__ >= 900
    // The final selection (a programmatic dependent launch) may be launched once every block
    // got here; it waits for this grid's completion before it reads what the filter wrote.
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The final selection (PART 2): a block per list position, 1024 threads (the selection is a
// chain of block barriers over a few thousand items: the wider the block, the shorter).
template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, class R, u32 WARPS>
__device__ __forceinline__ void bt_stream_final(const BatchedTopKParams& p,
                                                BtStreamState<R, WARPS>& s) {
    typedef typename Key::Bits Bits;
    constexpr u32 LOADS = BT_STREAM_LOADS;  // candidate loads in flight per lane
    static_assert(BT_STREAM_MAX_CTAS * BT_STREAM_FILTER_WARPS <= BLOCK_THREADS,
                  "a thread per candidate region");
    extern __shared__ __align__(16) unsigned char bt_dynamic[];
    const u32 tid = threadIdx.x;
    const u32 lane = tid & 31u;
    const u32 warp = tid >> 5;
    const u32 ctas = (u32)p.stream_ctas;
    const u32 chunk = (u32)p.stream_chunk;
    const u32 capacity = (u32)p.stream_candidates;  // a segment's slots: regions x capacity
    const u32 total_cap = (u32)p.stream_total;      // on chip
    R* cand_ranks = reinterpret_cast<R*>(bt_dynamic);
    u32* cand_indices = reinterpret_cast<u32*>(bt_dynamic + (u64)total_cap * sizeof(R));
    const u32 copy_cap = (u32)p.stream_sorted_cap;
    R* copy_ranks = reinterpret_cast<R*>(bt_dynamic + p.stream_sorted_offset);
    u32* copy_indices =
        reinterpret_cast<u32*>(bt_dynamic + p.stream_sorted_offset + (u64)copy_cap * sizeof(R));
    u32* starts = reinterpret_cast<u32*>(bt_dynamic + p.stream_bins_offset);
    u32* fill = starts + BT_STARTS_WORDS;
    u32* index_buffer = reinterpret_cast<u32*>(bt_dynamic + p.stream_index_offset);
    R* rank_buffer = reinterpret_cast<R*>(bt_dynamic + p.stream_rank_offset);
    u64* sort_region = reinterpret_cast<u64*>(bt_dynamic);
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    for (u32 b = tid; b < BT_BINS; b += BLOCK_THREADS) {
        s.histogram[b] = 0;
    }
#if __CUDA_ARCH__ >= 900
    // Launched as a programmatic dependent of the filter: wait for its completion (and its
    // writes) before reading them.
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    const u64 slots = bt_bin_count(p, BT_TIER_STREAM);
    __syncthreads();
    for (u64 slot = blockIdx.x; slot < slots; slot += gridDim.x) {
        const u64 seg = bt_bin_segment(p, BT_TIER_STREAM, slot);
        u64 begin, size64, written64;
        u32 dir;
        if (!bt_descriptor(p, seg, BT_TIER_STREAM, &begin, &size64, &written64, &dir)) {
            continue;  // block-uniform
        }
        const u32 size = (u32)size64;
        const u32 written = (u32)written64;
        // The regions of the chunks the filter ran, in (chunk, warp) order = index order.
        const u32 regions = bt_stream_regions(size, chunk);
        const u64 first_region = slot * ctas * BT_STREAM_FILTER_WARPS;
        // Thread r < regions reads region r's record: its counts and its ranks' range.
        u32 count = 0;
        u32 region_slots = 0;
        u32 region_first = 0;  // its first slot
        R low = ~(R)0;
        R high = 0;
        u32 reached = 0;
        if (tid < regions) {
            const u64* record = reinterpret_cast<const u64*>(p.stream_counts) +
                (first_region + tid) * BT_STREAM_RECORD_WORDS;
            const u64 counts = record[0];
            const u64 reach = record[3];
            count = (u32)counts;
            region_slots = (u32)(counts >> 32);
            low = (R)record[1];
            high = (R)record[2];
            reached = (u32)reach;
            region_first = (u32)(reach >> 32);
        }
        // The bucket path's counters, cleared here to save it barriers.
        for (u32 b = tid; b < BT_BUCKETS; b += BLOCK_THREADS) {
            fill[b] = 0;
        }
        if (tid == 0) {
            s.work = 0;
            s.reached = 0;
            s.range_lo = ~(R)0;
            s.range_hi = 0;
        }
        const bool overflow = __syncthreads_or(count > region_slots) != 0;
        bt_warp_range(low, high);
        reached = bt_warp_sum(reached);
        if (lane == 0 && warp * 32u < regions) {
            atomicMin(&s.range_lo, low);
            atomicMax(&s.range_hi, high);
            atomicAdd(&s.reached, reached);
        }
        // One scan for the regions' places on chip and their copy tasks (BT_STREAM_TASK
        // candidates each): kept candidates below bit 20 (at most 4 x 8192 in all: the host's
        // slots), tasks above.
        const u32 kept = min(count, region_slots);
        const u32 tasks = (kept + BT_STREAM_TASK - 1u) / BT_STREAM_TASK;
        u32 all = 0;
        const u32 at =
            block_exclusive_sum<BLOCK_THREADS>(kept | tasks << 20, s.warp_totals, &all);
        const u32 n = all & 0xFFFFFu;
        const u32 task_count = all >> 20;
        if (tid < regions) {
            const u32 to = at & 0xFFFFFu;
            const u32 from = region_first;
            for (u32 i = 0, t = at >> 20; i < tasks && t < BT_STREAM_MAX_TASKS; ++i, ++t) {
                const u32 base = i * BT_STREAM_TASK;
                s.copy_task[t] = make_uint4(to + base, min(kept - base, BT_STREAM_TASK),
                                            from + base, 0u);
            }
        }
        __syncthreads();
        // The candidates hold the k best (and every tie of the k-th) when at least `written`
        // of them reach the threshold: every key that does is a candidate. (The task bound
        // follows from n <= total_cap, the host's on-chip budget; checked all the same.)
        const bool complete = !overflow && s.reached >= written && n <= total_cap &&
            task_count <= BT_STREAM_MAX_TASKS;
        const u64 out_base = seg * p.out_stride;
        if (complete) {
            // Warp w copies tasks w, w + WARPS, ... (up to BT_STREAM_TASK candidates of a region
            // each) to their places (region order = index order) and counts each candidate in
            // its bucket. (A warp per region left the few regions that hold most of the
            // candidates of sorted or clustered rows to one warp each, a load round trip per 128
            // of them: [64x131072] ascending rows on an H100 0.0351 -> 0.0290-0.0296 ms.)
            const BtBuckets<R> bucket(s.range_lo, s.range_hi);
            const R* in_ranks = reinterpret_cast<const R*>(p.stream_ranks) +
                first_region * capacity;  // the segment's first slot
            const u32* in_indices = reinterpret_cast<const u32*>(p.stream_indices) +
                first_region * capacity;
            for (u32 t = warp; t < task_count; t += WARPS) {
                const uint4 task = s.copy_task[t];  // to, count, from
                R rk[LOADS];
                u32 x[LOADS];
#pragma unroll
                for (u32 u = 0; u < LOADS; ++u) {
                    const u32 j = u * 32u + lane;
                    if (j < task.y) {
                        rk[u] = in_ranks[task.z + j];
                        x[u] = in_indices[task.z + j];
                    }
                }
#pragma unroll
                for (u32 u = 0; u < LOADS; ++u) {
                    const u32 j = u * 32u + lane;
                    if (j < task.y) {
                        cand_ranks[task.x + j] = rk[u];
                        cand_indices[task.x + j] = x[u];
                        atomicAdd(&fill[bucket(rk[u])], 1u);
                    }
                }
            }
            __syncthreads();
            const bool done = bt_bucket_select<Key, R, BLOCK_THREADS, VALUE_BYTES>(
                p, cand_ranks, cand_indices, n, written, begin, dir, out_base, s, bucket,
                copy_ranks, copy_indices, copy_cap, starts, fill);
            if (!done) {
                const BtSharedItems<R> items{cand_ranks, cand_indices};
                bt_stream_exact<Key, R, BLOCK_THREADS, VALUE_BYTES>(
                    p, items, n, written, begin, dir, out_base, s, index_buffer, rank_buffer,
                    sort_region);
            }
        } else {
            const BtGlobalItems<Key, R> items{keys + begin, dir};
            bt_stream_exact<Key, R, BLOCK_THREADS, VALUE_BYTES>(
                p, items, size, written, begin, dir, out_base, s, index_buffer, rank_buffer,
                sort_region);
        }
        __syncthreads();
    }
}

// PART 3 (cluster): for a direct call whose segments are at most the clusters resident at once
// (the host's choice, sm_90 and later), a cluster of BT_CLUSTER_BLOCKS blocks of 1024 threads per
// segment does the filter and the final selection in one launch. Each block draws the segment's
// sample (the same one, so the same threshold and buckets), streams its half of the segment in
// register batches (each warp a contiguous part, the next batch in flight; the direction a
// compile-time constant there) and appends the keys at or above the threshold to its own
// shared memory, counting them in its own buckets (BtOpenBuckets; the f32 / f64 test's extra
// hits stay as dead entries, bt_cluster_append). Then each block pushes its counts into the
// other's shared memory (bt_push: st.async, counted on the receiver's mbarrier) and waits for
// the other's: when the candidates hold the k best (none overflowed, at least k of them), both
// find the same bucket starts, scatter their own candidates into their own copy and push them
// into the other's (a candidate's place: its bucket's start + the bucket's candidates in block
// 0 for block 1 + a local atomic), and once the other's part has landed each block ranks and
// writes half of the selection (bt_bucket_write). No cluster barrier follows the one at the
// start (the mbarriers' setup): a barrier's release waited for the memory system at each
// exchange, ~1 us of the kernel (H100, [64x131072]: 0.0226-0.0229 -> 0.0215-0.0220 ms).
// Otherwise (an overflow, a sample that missed, buckets too uneven) the first block runs the
// exact path over every key of the segment. Against PART 1 + PART 2 this drops the second
// launch, the final's wait for the filter's grid and its two global round trips (NOTES-batched,
// eleventh session).
//
// The kernel runs at 64 registers (1024 threads), where the streaming loop is written for the
// compiler: its state is induction variables and values kept in uniform registers (a direct
// call's segment comes from the parameters alone), because whatever the compiler could
// recompute it did, in every batch (NOTES-batched, twelfth session).
//
// Dynamic shared memory (the host's offsets): [candidates: stream_total ranks, then as many u32
// indices; the exact path's sort region aliases it] [copy at stream_sorted_offset: stream_total
// (rank, index) pairs for 4-byte ranks, else stream_total ranks then as many indices; the
// sample bins alias it, then the walk's stage while the keys stream (a batch per warp), and
// the exact path's index and rank buffers (stream_index_offset, stream_rank_offset) lie in it]
// [at stream_bins_offset: bucket counts, bucket starts (BT_STARTS_WORDS; the other block's
// counts land there first) and scatter positions, u32 each].

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
    __device__ __forceinline__ u32 operator()(R r) const {
        const R d = r >= top ? top - lo : r - lo;
        const u32 q = (u32)(d >> shift);
        return BT_BUCKETS - 1u - (q < BT_BUCKETS - 1u ? q : BT_BUCKETS - 1u);
    }
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
// them. A cluster barrier would do (its release waits for every store of the block to be
// visible: MEMBAR.ALL.GPU, ~0.5 us at the end of the streaming), and costs both blocks the
// slower one's time at each of the two exchanges.
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
    const u32 at = (u32)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(at) : "memory");
}

// The arrival on `bar`, which then completes once `bytes` more have landed (before or after).
__device__ __forceinline__ void bt_mbarrier_expect(u64* bar, u32 bytes) {
    const u32 at = (u32)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(at), "r"(bytes) : "memory");
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
                put(b, bt_rank_word<Key>(bt_vector_key<Bits>(v4[b / VEC], b % VEC), DIR));
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
            const Bits raw = (Bits)((u64)bt_select_word(words, 2u * b) |
                                    ((u64)bt_select_word(words, 2u * b + 1u) << 32));
            put(b, bt_rank_word<Key>(raw, DIR));
        }
    }
}

// This block's streaming pass for direction DIR (both directions are compiled and the segment's
// picks one, so the hit test and every rank lose the runtime flip): keys [lo, hi) of the
// segment (a warp's part), their vectors in register batches (the next batch in flight), the
// keys past the vectors one per lane.
template <class Key, class R, u32 DIR, u32 WARPS>
__device__ __forceinline__ void bt_cluster_stream(const typename Key::Bits* segment, u32 lo,
                                                  u32 hi, R threshold, BtStreamState<R, WARPS>& s,
                                                  u32 cap, R* cand_ranks, u32* cand_indices,
                                                  u32* fill, const BtOpenBuckets<R>& bucket,
                                                  uint4* stage) {
    typedef typename Key::Bits Bits;
    constexpr u32 VEC = BtStreamBatch<Bits>::VEC;
    constexpr u32 UNROLL = BtStreamBatch<Bits>::UNROLL;
    constexpr u32 BATCH = BtStreamBatch<Bits>::BATCH;
    const u32 lane = threadIdx.x & 31u;
    const Bits* src = segment + lo;
    const bool aligned = (((unsigned long long)src) & 15ull) == 0;
    const u32 vectors = aligned ? (hi - lo) / VEC : 0u;
    // Keys at or above the threshold (a superset for f32 and f64, ranked exactly on append).
    const RadixHitTest<Key, (int)DIR> hit((Bits)threshold, DIR ? (Bits)~(Bits)0 : (Bits)0);
    // The loop's state is three induction variables: the lane's next vector (`at`: vector u of
    // its batch is at[u * 32], an immediate offset), the index of its batch's first key, and
    // its vectors left (vector u valid while u * 32 < left). Computed from the warp's part in
    // every batch instead, the addresses cost ~50 instructions a batch.
    const uint4* at = reinterpret_cast<const uint4*>(src) + lane;
    stage += (threadIdx.x >> 5) * BATCH + lane;  // the lane's vector u at stage[u * 32]
    u32 first = lo + lane * VEC;
    int left = (int)vectors - (int)lane;
    // A vector past `left` is not loaded (its stale words are never read: its keys are not
    // hits), so a full batch spends nothing on zero fills.
    auto load_batch = [&](uint4(&v4)[UNROLL], const uint4* from, int from_left) {
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            if ((int)(u * 32u) < from_left) {
                v4[u] = __ldcs(from + u * 32u);
            }
        }
    };
    // One batch in `now` (the next, when there is one, loading into `later`).
    auto step = [&](uint4(&now)[UNROLL], uint4(&later)[UNROLL], u32 batches) {
        if (batches > 1u) {
            load_batch(later, at + BATCH, left - (int)BATCH);
        }
        u32 flags = 0;
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            const bool valid = (int)(u * 32u) < left;
#pragma unroll
            for (u32 e = 0; e < VEC; ++e) {
                if (valid && hit(bt_vector_key<Bits>(now[u], e))) {
                    flags |= 1u << (u * VEC + e);
                }
            }
        }
        bt_cluster_append<Key, R, DIR, UNROLL>(now, flags, first, threshold, s, cap, cand_ranks,
                                               cand_indices, fill, bucket, stage);
        at += BATCH;
        first += BATCH * VEC;
        left -= (int)BATCH;
    };
    // Two buffers that trade roles every batch (unrolled by two), so no batch is copied from
    // one to the other: with `cur = next` the compiler moved 16 registers a batch.
    uint4 even[UNROLL];
    uint4 odd[UNROLL];
    u32 batches = (vectors + BATCH - 1u) / BATCH;  // uniform
    if (batches != 0) {
        load_batch(even, at, left);
    }
    while (batches != 0) {
        step(even, odd, batches);
        if (--batches == 0) {
            break;
        }
        step(odd, even, batches);
        --batches;
    }
    // The keys past the vectors (an unaligned part, or a tail of fewer than VEC keys).
    for (u32 from = lo + vectors * VEC; from < hi; from += 32u) {  // warp-uniform
        const u32 j = from + lane;
        const R r = j < hi ? bt_rank_word<Key>(segment[j], DIR) : (R)0;
        const bool take = j < hi && r >= threshold;
        const u32 at = warp_append<u32>(take, 0xFFFFFFFFu,
                                        [&](u32 n) { return atomicAdd(&s.reached, n); });
        if (take) {
            bt_cluster_store<Key>(at, r, j, threshold, s, cap, cand_ranks, cand_indices, fill,
                                  bucket);
        }
    }
}

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, class R, u32 WARPS>
__device__ __forceinline__ void bt_stream_cluster(const BatchedTopKParams& p,
                                                  BtStreamState<R, WARPS>& s) {
#if __CUDA_ARCH__ >= 900
    typedef typename Key::Bits Bits;
    typedef BtStreamSample<Bits, BLOCK_THREADS> Sample;
    constexpr u32 VEC = BtStreamBatch<Bits>::VEC;
    constexpr u32 PER = BT_BUCKETS / BLOCK_THREADS;
    static_assert(PER == 4, "a thread's bucket counts are one 16-byte vector");
    extern __shared__ __align__(16) unsigned char bt_dynamic[];
    const u32 tid = threadIdx.x;
    const u32 lane = tid & 31u;
    const u32 warp = tid >> 5;
    const u32 rank_in_cluster = bt_cluster_rank();
    const u32 cap = (u32)p.stream_total;  // candidates per block
    R* cand_ranks = reinterpret_cast<R*>(bt_dynamic);
    u32* cand_indices = reinterpret_cast<u32*>(bt_dynamic + (u64)cap * sizeof(R));
    R* copy_ranks = reinterpret_cast<R*>(bt_dynamic + p.stream_sorted_offset);
    u32* copy_indices =
        reinterpret_cast<u32*>(bt_dynamic + p.stream_sorted_offset + (u64)cap * sizeof(R));
    u32* fill = reinterpret_cast<u32*>(bt_dynamic + p.stream_bins_offset);
    u32* starts = fill + BT_BUCKETS;
    u32* pos = starts + BT_STARTS_WORDS;
    u32* sample_bins = reinterpret_cast<u32*>(copy_ranks);  // dead before any scatter
    u32* index_buffer = reinterpret_cast<u32*>(bt_dynamic + p.stream_index_offset);
    R* rank_buffer = reinterpret_cast<R*>(bt_dynamic + p.stream_rank_offset);
    u64* sort_region = reinterpret_cast<u64*>(bt_dynamic);

    // The host launches this kernel for direct calls only, in clusters of BT_CLUSTER_BLOCKS
    // (cluster_launch): a wrong launch traps instead of selecting from the wrong keys. The
    // segment's values then come from the parameters alone, so the compiler keeps them in
    // uniform registers: the descriptor path's per-thread copies, live across the streaming
    // loop, pushed it past 64 registers.
    if ((p.flags & SEGMENT_DIRECT) == 0 || bt_cluster_blocks() != BT_CLUSTER_BLOCKS) {
        __trap();
    }
    // Both blocks of a cluster take the same segment, so every return below is cluster-uniform.
    const u64 seg = blockIdx.x / BT_CLUSTER_BLOCKS;
    if (seg >= p.num_segments) {
        return;
    }
    u64 begin, size64, written64;
    u32 dir;
    if (!bt_direct_descriptor(p, seg, BT_TIER_STREAM, &begin, &size64, &written64, &dir)) {
        return;
    }
    const u32 size = (u32)size64;  // <= stream_max_size < 2^32
    const u32 written = (u32)written64;
    const Bits* segment = reinterpret_cast<const Bits*>(p.keys) + begin;
    // The sample's loads first: clearing the shared memory below, and its barrier, overlap
    // their latency (the ranks come after the barrier). Drawn whether or not the plan samples
    // (a segment it does not is rare: k close to its size), so that they need not wait for
    // the plan's arithmetic.
    const BtSamplePlan<Bits, BLOCK_THREADS> plan(size, written);
    u32 sample_vector[Sample::VECTORS];
    Bits raw[Sample::PER_THREAD];
    const u32 valid = bt_draw_sample<Key>(segment, plan, sample_vector, raw);
    for (u32 b = tid; b < BtSampleBins<R>::ALLOCATED; b += BLOCK_THREADS) {
        sample_bins[b] = 0;
    }
    for (u32 b = tid; b < BT_BUCKETS; b += BLOCK_THREADS) {
        fill[b] = 0;
    }
    if (tid == 0) {
        s.sample_best = 0;
        s.reached = 0;
        s.dead = 0;
        s.work = 0;
        s.own_selected = 0;
        bt_mbarrier_init(&s.peer_counts_in);
        bt_mbarrier_init(&s.peer_copy_in);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    // The other block waits for this arrival before its first push here (after its stream).
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");

    // The threshold, as the filter's (0, every key, when the sample would not cut).
    R threshold = 0;
    R best = (R)(Bits)~(Bits)0;  // unsampled: the key width's best rank tops the buckets
    if (plan.sampled) {
        R rank[Sample::PER_THREAD];
        bt_sample_ranks<Key>(raw, dir, rank);
        {
            // The sample has arrived, and DRAM is idle while the threshold is computed: this
            // warp's first batch goes to L2 now (H200, [64x131072]: -0.7 us; half its part or
            // all of it: slower, the prefetches then delay the first loads). Its part is
            // computed here and again for the stream: kept live across the threshold, it
            // spilled.
            u32 first_lo, first_hi;
            bt_cluster_part<VEC, WARPS>(size, rank_in_cluster, warp, &first_lo, &first_hi);
            const Bits* from = segment + first_lo;
            const u32 vectors = (first_hi - first_lo) / VEC;
            if (lane == 0u && (((unsigned long long)from) & 15ull) == 0 && vectors != 0u) {
                prefetch_l2(from, 16u * min(vectors, BtStreamBatch<Bits>::BATCH));
            }
        }
        threshold = bt_sample_threshold<R, BLOCK_THREADS>(rank, valid, plan.m, s, sample_bins,
                                                          &best);
    }
    const BtOpenBuckets<R> bucket(threshold, best);

    u32 lo, hi;
    bt_cluster_part<VEC, WARPS>(size, rank_in_cluster, warp, &lo, &hi);
    // The walk's stage (keys of up to 4 bytes): a batch per warp in the copy, unused while the
    // keys stream (the host's layout, cluster_layout: BT_STREAM_CANDIDATES (rank, index) pairs).
    static_assert(sizeof(Bits) > 4 ||
                      WARPS * BtStreamBatch<Bits>::BATCH * 16u <= BT_STREAM_CANDIDATES * 8u,
                  "the walk's stage fits the copy region");
    uint4* stage = reinterpret_cast<uint4*>(copy_ranks);
    if (dir == 0u) {  // uniform
        bt_cluster_stream<Key, R, 0>(segment, lo, hi, threshold, s, cap, cand_ranks, cand_indices,
                                     fill, bucket, stage);
    } else {
        bt_cluster_stream<Key, R, 1>(segment, lo, hi, threshold, s, cap, cand_ranks, cand_indices,
                                     fill, bucket, stage);
    }
    __syncthreads();  // this block's candidates and bucket counts are complete
    // The other block's mbarriers are set up: its arrival came after their init.
    asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
    static_assert(BT_CLUSTER_BLOCKS == 2, "a block and its peer");
    const u32 peer = rank_in_cluster ^ 1u;

    // This block's counts and (reached, dead) to the other's `starts` and state; it waits for
    // them, and each of its threads reads its own words of `starts` before writing them.
    const uint4 own_fill = reinterpret_cast<const uint4*>(fill)[tid];
    {
        const u32 bar = bt_cluster_address(&s.peer_counts_in, peer);
        bt_push(bt_cluster_address(starts + PER * tid, peer), bar, own_fill);
        if (tid == 0) {
            bt_push(bt_cluster_address(&s.peer_totals, peer), bar, make_uint2(s.reached, s.dead));
            bt_mbarrier_expect(&s.peer_counts_in, BT_BUCKETS * 4u + 8u);
        }
    }
    bt_mbarrier_wait(&s.peer_counts_in);
    const uint4 peer_fill = reinterpret_cast<const uint4*>(starts)[tid];
    const uint2 peer_totals = s.peer_totals;  // (reached, dead)
    const bool overflow = s.reached > cap || peer_totals.x > cap;
    const u32 n = s.reached - s.dead + peer_totals.x - peer_totals.y;  // at or above the threshold
    const u32 own = min(s.reached, cap);
    bool fast = false;
    u32 boundary_start = 0;
    u32 selected_end = 0;
    // Every key at or above the threshold is a candidate: with at least k of them, they hold
    // the k best and every tie of the k-th.
    if (!overflow && n >= written) {
        const u32 own_counts[PER] = {own_fill.x, own_fill.y, own_fill.z, own_fill.w};
        const u32 peer_counts[PER] = {peer_fill.x, peer_fill.y, peer_fill.z, peer_fill.w};
        u32 local[PER];
        u32 below[PER];  // the bucket's candidates in block 0, for block 1's places
#pragma unroll
        for (u32 i = 0; i < PER; ++i) {
            local[i] = own_counts[i] + peer_counts[i];
            below[i] = rank_in_cluster == 1u ? peer_counts[i] : 0u;
        }
        bt_bucket_starts<BLOCK_THREADS>(local, written, s, starts, pos, below);
        const u32 boundary = s.boundary;
        boundary_start = starts[boundary];
        selected_end = starts[boundary + 1u];
        fast = s.work <= BT_CLUSTER_BUCKET_WORK * n && selected_end <= cap;
        if (fast) {
            // Each candidate of the selected buckets to its place in both blocks' copies:
            // (rank, index) pairs for 4-byte ranks (one 8-byte store a block, and one load
            // an item when ranking), two arrays for 8-byte ones.
            constexpr u32 ITEM_BYTES = sizeof(R) == 4 ? 8u : sizeof(R) + 4u;
            const u32 bar = bt_cluster_address(&s.peer_copy_in, peer);
            const u32 peer_ranks = bt_cluster_address(copy_ranks, peer);
            const u32 peer_indices = bt_cluster_address(copy_indices, peer);
            u32 selected = 0;
            for (u32 i = tid; i < own; i += BLOCK_THREADS) {
                const R r = cand_ranks[i];
                const u32 b = bucket(r);
                if (b <= boundary && r >= bucket.lo) {  // counted, not dead (bt_cluster_count)
                    const u32 at = atomicAdd(&pos[b], 1u);
                    const u32 index = cand_indices[i];
                    ++selected;
                    if constexpr (sizeof(R) == 4) {
                        const uint2 item = make_uint2(r, index);
                        reinterpret_cast<uint2*>(copy_ranks)[at] = item;
                        bt_push(peer_ranks + 8u * at, bar, item);
                    } else {
                        copy_ranks[at] = r;
                        copy_indices[at] = index;
                        bt_push(peer_ranks + 8u * at, bar, (u64)r);
                        bt_push(peer_indices + 4u * at, bar, index);
                    }
                }
            }
            selected = bt_warp_sum(selected);
            if (lane == 0u) {
                atomicAdd(&s.own_selected, selected);
            }
            __syncthreads();  // this block's part of its copy is complete
            if (tid == 0) {  // the other block's part, pushed by it
                bt_mbarrier_expect(&s.peer_copy_in, (selected_end - s.own_selected) * ITEM_BYTES);
            }
            bt_mbarrier_wait(&s.peer_copy_in);
        }
    }
    const u64 out_base = seg * p.out_stride;
    if (fast) {
        const u32 j0 = rank_in_cluster * BLOCK_THREADS + tid;
        constexpr u32 STEP = BT_CLUSTER_BLOCKS * BLOCK_THREADS;
        if constexpr (sizeof(R) == 4) {
            bt_bucket_write<Key, R, VALUE_BYTES>(
                p, BtPairItems{reinterpret_cast<const uint2*>(copy_ranks)}, starts, boundary_start,
                selected_end, written, begin, dir, out_base, bucket, j0, STEP);
        } else {
            bt_bucket_write<Key, R, VALUE_BYTES>(p, BtSharedItems<R>{copy_ranks, copy_indices},
                                                 starts, boundary_start, selected_end, written,
                                                 begin, dir, out_base, bucket, j0, STEP);
        }
    } else if (rank_in_cluster == 0) {
        for (u32 b = tid; b < BT_BINS; b += BLOCK_THREADS) {
            s.histogram[b] = 0;  // the exact path's select expects it clear (its first barrier)
        }
        const BtGlobalItems<Key, R> items{segment, dir};
        bt_stream_exact<Key, R, BLOCK_THREADS, VALUE_BYTES>(p, items, size, written, begin, dir,
                                                            out_base, s, index_buffer,
                                                            rank_buffer, sort_region);
    }
#endif
}

// PART 1: the filter (BT_STREAM_FILTER_THREADS threads); PART 2: the final selection; PART 3:
// both in one launch, a cluster per segment.
template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int K_CAP, int PART>
__device__ __forceinline__ void bt_stream(const BatchedTopKParams& p) {
    typedef typename BtRankWord<sizeof(typename Key::Bits)>::Type R;
    constexpr u32 WARPS = BLOCK_THREADS / 32;
    __shared__ BtStreamState<R, WARPS> s;
    if constexpr (PART == BT_STREAM_PART_FILTER) {
        static_assert(BLOCK_THREADS == BT_STREAM_FILTER_THREADS, "the filter's regions");
        // The sample bins and the batch stage share their words: the sample's select ends in a
        // block barrier before any warp stages a batch, and a work item that draws a sample
        // clears the bins again after a block barrier (static shared memory stays below
        // 48 KiB for 8-byte keys too).
        constexpr u32 STAGE_VECTORS = WARPS * BtStreamBatch<typename Key::Bits>::UNROLL * 32u;
        constexpr u32 BIN_VECTORS = BtSampleBins<R>::ALLOCATED / 4u;
        __shared__ uint4 words[STAGE_VECTORS > BIN_VECTORS ? STAGE_VECTORS : BIN_VECTORS];
        bt_stream_filter<Key, BLOCK_THREADS, VALUE_BYTES>(p, s, reinterpret_cast<u32*>(words),
                                                          words);
    } else if constexpr (PART == BT_STREAM_PART_FINAL) {
        bt_stream_final<Key, BLOCK_THREADS, VALUE_BYTES>(p, s);
    } else {
        bt_stream_cluster<Key, BLOCK_THREADS, VALUE_BYTES>(p, s);
    }
}

}  // namespace oxicub
