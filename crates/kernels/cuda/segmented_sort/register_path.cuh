// Family segmented_sort, the register path (docs/design/segmented_sort.md, "GPU: register
// path"): keys of at most 32 bits in segments of fewer than 2^32 keys. An entry packs a key's
// rank (the radix code, inverted for a descending segment) above its index within the segment,
// so one u64 comparison orders by key and then by input position (stable). Segments are binned
// by size class; a block sorts a batch of short segments of one class in registers, or one
// chunk of THREADS * SS_ITEMS keys (the tile) of a long segment; merge passes of merge-path tiles then join a
// long segment's chunks, a tile whose output comes from one run being a copy (the seed's early
// exit and its statistics).
namespace oxicub {

// The register path's sort and its tile for blocks of THREADS threads.
template <u32 THREADS>
using SsSort = RegisterSort<THREADS, SS_ITEMS>;

// A segment as the register path sees it: where it begins, its size, its rank flip; size 0 for
// none or an invalid one.
template <class Bits>
struct SsSegment {
    u64 begin;
    u64 size;
    Bits flip;
};

template <class Bits, class P>
__device__ __forceinline__ SsSegment<Bits> ss_segment(const P& p, u64 seg, u64 count) {
    SsSegment<Bits> s = {0, 0, (Bits)0};
    if (seg < count) {
        // The descriptor's four words in two vector loads (32-byte aligned).
        const ulonglong2* desc = reinterpret_cast<const ulonglong2*>(segment_descriptor(p, seg));
        const ulonglong2 place = desc[0];  // begin, size
        const ulonglong2 rest = desc[1];   // the order word, the flags
        if ((rest.y & SEGMENT_DESC_VALID) != 0) {
            s.begin = place.x;
            s.size = place.y;
            s.flip = rest.x ? (Bits)~(Bits)0 : (Bits)0;
        }
    }
    return s;
}

// A segment's class: 0 for none (empty, one key, or invalid), 1 to 14 for a short one (the log2
// of the smallest power of two holding it), SS_LONG_CLASS above TILE keys.
template <u32 TILE>
__device__ __forceinline__ u32 ss_class(u64 size) {
    static_assert(TILE <= (1u << (SS_LONG_CLASS - 1)), "every short class below the long one");
    if (size <= 1) {
        return 0;
    }
    if (size > TILE) {
        return SS_LONG_CLASS;
    }
    return 64u - (u32)__clzll((long long)(size - 1));
}

// The entry of key `raw` at index `index` of its segment.
template <class Key>
__device__ __forceinline__ u64 ss_entry(typename Key::Bits raw, typename Key::Bits flip, u64 index) {
    return ((u64)(u32)(typename Key::Bits)(Key::to_radix(raw) ^ flip) << 32) | index;
}

// Writes the key (and value, or index) that `entry` names to position `at` of the outputs; the
// segment begins at `begin`. A NaN's code names every NaN, so its bits are read back.
template <class Key, int VALUE_BYTES, class P>
__device__ __forceinline__ void ss_write(const P& p, u64 at, u64 begin, typename Key::Bits flip,
                                         u64 entry) {
    typedef typename Key::Bits Bits;
    const u64 index = entry & 0xffffffffull;
    const Bits code = (Bits)((Bits)(entry >> 32) ^ flip);
    Bits key;
    if (Key::KEY_KIND == KIND_FLOAT && code == Key::ALL_ONES) {
        key = reinterpret_cast<const Bits*>(p.keys)[begin + index];
    } else {
        key = Key::from_radix(code);
    }
    reinterpret_cast<Bits*>(p.out_keys)[at] = key;
    if (VALUE_BYTES != 0) {
        typedef typename ValueWord<VALUE_BYTES>::Type Word;
        Word* out_values = reinterpret_cast<Word*>(p.out_values);
        out_values[at] = (p.flags & SS_VALUES_INDEX)
                             ? (Word)index
                             : reinterpret_cast<const Word*>(p.values)[begin + index];
    }
}

// Writes what an entry of a merge pass names to position `at`: a u64 entry through ss_write;
// a u32 one is a bare rank (keys only, no NaN among the segment's keys: docs/design, "GPU:
// register path"), its key decoded.
template <class Key, int VALUE_BYTES, class P>
__device__ __forceinline__ void ss_write_entry(const P& p, u64 at, u64 begin,
                                               typename Key::Bits flip, u64 entry) {
    ss_write<Key, VALUE_BYTES>(p, at, begin, flip, entry);
}

template <class Key, int VALUE_BYTES, class P>
__device__ __forceinline__ void ss_write_entry(const P& p, u64 at, u64, typename Key::Bits flip,
                                               u32 rank) {
    typedef typename Key::Bits Bits;
    reinterpret_cast<Bits*>(p.out_keys)[at] = Key::from_radix((Bits)((Bits)rank ^ flip));
}

// The classes counted by a block in RESOLVE (a thread per segment, the warps in step): one
// vote per class and warp into shared counters, then one atomic per class and block.
struct SsClassCounts {
    u32 counts[16];
    unsigned long long chunks;   // the long segments' chunks
    unsigned long long parts;    // the long segments' parts (SS_PART entries)
    unsigned long long longest;  // the longest long segment
};

__device__ __forceinline__ SsClassCounts& ss_class_counts() {
    __shared__ SsClassCounts counts;
    return counts;
}

__device__ __forceinline__ void ss_clear_classes(SsClassCounts& c) {
    if (threadIdx.x < 16) {
        c.counts[threadIdx.x] = 0;
    }
    if (threadIdx.x == 0) {
        c.chunks = 0;
        c.parts = 0;
        c.longest = 0;
    }
    __syncthreads();
}

// Counts a valid segment of `size` keys (0 for none): every lane of the warp calls it.
template <u32 TILE>
__device__ __forceinline__ void ss_count_class(SsClassCounts& c, u64 size) {
    const u32 mine = ss_class<TILE>(size);
    for (u32 k = 1; k <= SS_LONG_CLASS; ++k) {
        const u32 votes = __popc(__ballot_sync(0xffffffffu, mine == k));
        if ((threadIdx.x & 31u) == 0 && votes != 0) {
            atomicAdd(&c.counts[k], votes);
        }
    }
    // The long segments' chunks and the longest, reduced over the warp first (one shared
    // atomic per warp, not per lane).
    u64 chunks = mine == SS_LONG_CLASS ? (size + TILE - 1) / TILE : 0;
    u64 parts = mine == SS_LONG_CLASS ? (size + SS_PART - 1) / SS_PART : 0;
    u64 longest = mine == SS_LONG_CLASS ? size : 0;
#pragma unroll
    for (u32 offset = 16; offset > 0; offset >>= 1) {
        chunks += __shfl_xor_sync(0xffffffffu, chunks, offset);
        parts += __shfl_xor_sync(0xffffffffu, parts, offset);
        const u64 other = __shfl_xor_sync(0xffffffffu, longest, offset);
        longest = other > longest ? other : longest;
    }
    if ((threadIdx.x & 31u) == 0 && chunks != 0) {
        atomicAdd(&c.chunks, (unsigned long long)chunks);
        atomicAdd(&c.parts, (unsigned long long)parts);
        atomicMax(&c.longest, (unsigned long long)longest);
    }
}

// The block's counts into the plan words (every thread of the block calls it).
template <class P>
__device__ __forceinline__ void ss_add_classes(const P& p, SsClassCounts& c) {
    u64* plan = reinterpret_cast<u64*>(p.plan);
    __syncthreads();
    if (threadIdx.x < 16 && c.counts[threadIdx.x] != 0) {
        atomicAdd(&plan[SS_PLAN_COUNT + threadIdx.x], (u64)c.counts[threadIdx.x]);
    }
    if (threadIdx.x == 0 && c.chunks != 0) {
        atomicAdd(&plan[SS_PLAN_CHUNKS], (u64)c.chunks);
        atomicAdd(&plan[SS_PLAN_PARTS], (u64)c.parts);
        atomicMax(&plan[SS_PLAN_MAX_LONG], (u64)c.longest);
    }
}

// PLACE: a thread per segment, the warps in step. A short segment is appended to its class's
// list; a long one gets its place and its chunks (one atomic on a packed word, so both grow in
// the same order and a chunk's owner is found by a binary search); a segment of one key is
// written here.
template <class Key, int VALUE_BYTES, u32 THREADS, class P>
__device__ __forceinline__ void ss_place(const P& p, u64 count) {
    constexpr u32 TILE = THREADS * SS_ITEMS;
    typedef typename Key::Bits Bits;
    u64* plan = reinterpret_cast<u64*>(p.plan);
    u64* list = reinterpret_cast<u64*>(p.segment_list);
    const u64 lane = threadIdx.x & 31u;
    const u64 stride = grid_threads(THREADS);
    for (u64 base = global_thread_index(THREADS) - lane; base < count; base += stride) {
        const u64 seg = base + lane;
        const SsSegment<Bits> s = ss_segment<Bits>(p, seg, count);
        const u32 c = ss_class<TILE>(s.size);
        if (s.size == 1) {
            const Bits raw = reinterpret_cast<const Bits*>(p.keys)[s.begin];
            ss_write<Key, VALUE_BYTES>(p, s.begin, s.begin, s.flip, ss_entry<Key>(raw, s.flip, 0));
        }
        for (u32 k = 1; k < SS_LONG_CLASS; ++k) {
            if (__ballot_sync(0xffffffffu, c == k) == 0) {
                continue;
            }
            const u64 at = warp_append(c == k, &plan[SS_PLAN_CURSOR + k]);
            if (c == k) {
                list[at] = seg;
            }
        }
        if (c == SS_LONG_CLASS) {
            const u64 chunks = (s.size + TILE - 1) / TILE;
            const u64 packed = atomicAdd(&plan[SS_PLAN_LONG], (1ull << 32) | chunks);
            const u64 j = packed >> 32;
            list[plan[SS_PLAN_LIST + SS_LONG_CLASS] + j] = seg;
            reinterpret_cast<u64*>(p.chunk_base)[j] = packed & 0xffffffffull;
        }
    }
}

// PLAN, by one thread (in FINALIZE): each class's list and first batch (a batch of class c holds
// TILE >> c segments), the cursors, and the statistics' tile count (the parts) and
// pass count (the passes the longest segment needs), after the p.passes launched passes' words.
template <u32 TILE, class P>
__device__ __forceinline__ void ss_plan(const P& p) {
    u64* plan = reinterpret_cast<u64*>(p.plan);
    u64 listed = 0, batches = 0;
    for (u32 c = 1; c <= SS_LONG_CLASS; ++c) {
        plan[SS_PLAN_LIST + c] = listed;
        plan[SS_PLAN_CURSOR + c] = listed;
        plan[SS_PLAN_BATCH + c] = batches;
        const u64 n = plan[SS_PLAN_COUNT + c];
        listed += n;
        if (c < SS_LONG_CLASS && n != 0) {
            const u64 per = TILE >> c;  // at least 1: a class holds at most TILE keys
            batches += (n + per - 1) / per;
        }
    }
    u64* statistics = reinterpret_cast<u64*>(p.statistics) + 2 * (u64)p.passes;
    statistics[0] = plan[SS_PLAN_PARTS];
    u64 passes = 0;
    for (u64 width = TILE; width < plan[SS_PLAN_MAX_LONG]; width <<= 1) {
        ++passes;
    }
    statistics[1] = passes;
}

// The long segment (its place j in the long list) that chunk `chunk` belongs to: the last
// whose first chunk is at most `chunk`. Every lane of the warp calls it with the same chunk:
// each round tests 32 places at once (a long list of 2^20 segments takes 4 rounds of loads).
template <class P>
__device__ __forceinline__ u64 ss_chunk_owner(const P& p, u64 chunk) {
    const u64* plan = reinterpret_cast<const u64*>(p.plan);
    const u64* base = reinterpret_cast<const u64*>(p.chunk_base);
    const u32 lane = threadIdx.x & 31u;
    // The number of long segments whose first chunk is at most `chunk`, in [lo, hi].
    u64 lo = 0, hi = plan[SS_PLAN_COUNT + SS_LONG_CLASS];
    while (hi - lo > 32) {
        const u64 span = hi - lo;
        const u64 m = lo + span * (lane + 1) / 33;  // strictly increasing in the lane
        const u32 at_most = (u32)__popc(__ballot_sync(0xffffffffu, base[m] <= chunk));
        const u64 new_lo = at_most == 0 ? lo : lo + span * at_most / 33 + 1;
        const u64 new_hi = at_most == 32 ? hi : lo + span * (at_most + 1) / 33;
        lo = new_lo;
        hi = new_hi;
    }
    const u64 m = lo + lane;
    const bool at_most = m < hi && base[m] <= chunk;
    return lo + (u64)__popc(__ballot_sync(0xffffffffu, at_most)) - 1;
}

// Whether the long segments' entries are bare u32 ranks: keys only, and no NaN among the long
// segments' keys (NAN_SCAN found none; integer keys have none). Otherwise u64 entries carry
// each key's index.
template <class Key, int VALUE_BYTES, class P>
__device__ __forceinline__ bool ss_rank_entries(const P& p) {
    return VALUE_BYTES == 0 &&
           (Key::KEY_KIND != KIND_FLOAT ||
            reinterpret_cast<const u64*>(p.plan)[SS_PLAN_NAN] == 0);
}

// NAN_SCAN (keys-only float sorts with long segments, before BLOCK): a block per chunk looks
// for a NaN among its keys and flags the plan.
template <class Key, u32 THREADS, class P>
__device__ __forceinline__ void ss_nan_scan(const P& p, u64 count) {
    typedef typename Key::Bits Bits;
    constexpr u32 TILE = THREADS * SS_ITEMS;
    u64* plan = reinterpret_cast<u64*>(p.plan);
    const u64* list = reinterpret_cast<const u64*>(p.segment_list);
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    const u64 chunks = plan[SS_PLAN_CHUNKS];
    for (u64 chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
        const u64 j = ss_chunk_owner(p, chunk);
        const SsSegment<Bits> s =
            ss_segment<Bits>(p, list[plan[SS_PLAN_LIST + SS_LONG_CLASS] + j], count);
        const u64 first = (chunk - reinterpret_cast<const u64*>(p.chunk_base)[j]) * TILE;
        const u64 last = first + TILE < s.size ? first + TILE : s.size;
        bool nan = false;
        for (u64 i = first + threadIdx.x; i < last; i += THREADS) {
            nan |= Key::to_radix(keys[s.begin + i]) == Key::ALL_ONES;
        }
        if (nan) {
            plan[SS_PLAN_NAN] = 1;
        }
    }
}

// BLOCK: a work item per block at a time. With one span for every segment (p.width), item b
// is the segments [b * per, (b + 1) * per) in order; otherwise the items are the classes'
// batches, then the long segments' chunks. Each run of `span` entries is one segment (padded
// with entries above every key); a chunk's sorted entries go to entries buffer 0, a short
// segment's keys to the outputs.
template <class Key, int VALUE_BYTES, u32 THREADS, class P>
__device__ __forceinline__ void ss_block(const P& p, u64 count, u64* shared) {
    constexpr u32 TILE = THREADS * SS_ITEMS;
    typedef typename Key::Bits Bits;
    const u64* plan = reinterpret_cast<const u64*>(p.plan);
    const u64* list = reinterpret_cast<const u64*>(p.segment_list);
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    const u32 t = threadIdx.x;
    const bool uniform = p.width != 0;
    u64 batches, items;
    if (uniform) {
        const u64 per = TILE / p.width;
        batches = (count + per - 1) / per;
        items = batches;
    } else {
        batches = plan[SS_PLAN_BATCH + SS_LONG_CLASS];
        items = batches + plan[SS_PLAN_CHUNKS];
    }
    for (u64 item = blockIdx.x; item < items; item += gridDim.x) {
        // The item: its span, and the segment of each of its runs.
        u32 span;
        u64 first = 0, last = 0;  // list positions (or segments, uniform) of the runs
        u64 chunk_start = 0;      // a chunk's first index within its segment
        bool chunk = false;
        SsSegment<Bits> long_segment = {0, 0, (Bits)0};
        if (uniform) {
            span = (u32)p.width;
            first = item * (TILE / span);
            last = count;
        } else if (item < batches) {
            u32 c = 1;
            while (c + 1 < SS_LONG_CLASS && plan[SS_PLAN_BATCH + c + 1] <= item) {
                ++c;
            }
            span = 1u << c;
            first = plan[SS_PLAN_LIST + c] + (item - plan[SS_PLAN_BATCH + c]) * (TILE >> c);
            last = plan[SS_PLAN_LIST + c] + plan[SS_PLAN_COUNT + c];
        } else {
            const u64 chunk_index = item - batches;
            const u64 j = ss_chunk_owner(p, chunk_index);
            const u64 seg = list[plan[SS_PLAN_LIST + SS_LONG_CLASS] + j];
            long_segment = ss_segment<Bits>(p, seg, count);
            chunk_start = (chunk_index - reinterpret_cast<const u64*>(p.chunk_base)[j]) *
                          TILE;
            chunk = true;
            span = TILE;
        }
        // The segment of run r (a chunk: its part of the long segment).
        auto run_segment = [&](u32 r) {
            if (chunk) {
                SsSegment<Bits> s = long_segment;
                s.begin += chunk_start;
                const u64 rest = s.size - chunk_start;
                s.size = rest < TILE ? rest : TILE;
                return s;
            }
            const u64 at = first + r;
            if (at >= last) {
                SsSegment<Bits> none = {0, 0, (Bits)0};
                return none;
            }
            if (p.flags & SS_DIRECT) {
                // Rows of one size, their count and order on the host: nothing to check, no
                // descriptors (RESOLVE did not run).
                SsSegment<Bits> row = {at * p.stride, p.size_value,
                                       p.order_value ? (Bits)~(Bits)0 : (Bits)0};
                return row;
            }
            SsSegment<Bits> s = ss_segment<Bits>(p, uniform ? at : list[at], count);
            if (s.size > span) {
                s.size = 0;  // above the bound the span was chosen for (reported invalid)
            }
            return s;
        };
        // A thread's entries lie in one run when span >= SS_ITEMS, else in SS_ITEMS / span
        // runs of consecutive items: each run's segment is read once.
        const u32 span_log = (u32)__ffs((int)span) - 1u;
        SsSegment<Bits> s = {0, 0, (Bits)0};
        u32 current = ~0u;
        if (VALUE_BYTES == 0 && (!chunk || ss_rank_entries<Key, VALUE_BYTES>(p))) {
            // Keys only: equal ranks are equal keys, so bare 32-bit ranks sort them (half the
            // registers, shared memory and compares of the entries), unless a NaN is in the
            // tile (its bits must come back in input order: the entries below). A long
            // segment's chunk takes ranks only when no long segment holds a NaN (NAN_SCAN).
            u32 ranks[SS_ITEMS];
            bool nan = false;
#pragma unroll
            for (u32 k = 0; k < SS_ITEMS; ++k) {
                u32 r;
                const u32 local = SsSort<THREADS>::striped(t, k, span_log, &r);
                if (r != current) {
                    s = run_segment(r);
                    current = r;
                }
                const Bits code = local < s.size ? Key::to_radix(keys[s.begin + local]) : (Bits)0;
                nan |= Key::KEY_KIND == KIND_FLOAT && local < s.size && code == Key::ALL_ONES;
                ranks[k] = local < s.size ? (u32)(Bits)(code ^ s.flip) : RegisterSort<THREADS, SS_ITEMS, u32>::PAD;
            }
            if (Key::KEY_KIND != KIND_FLOAT || !__syncthreads_or(nan)) {
                typedef RegisterSort<THREADS, SS_ITEMS, u32> RankSort;
                u32* shared_ranks = reinterpret_cast<u32*>(shared);
                RankSort::sort(ranks, shared_ranks, span);
                __syncthreads();
#pragma unroll
                for (u32 k = 0; k < SS_ITEMS; ++k) {
                    shared_ranks[RankSort::at(t, k)] = ranks[k];
                }
                __syncthreads();
                Bits* out_keys = reinterpret_cast<Bits*>(p.out_keys);
                current = span >= SS_ITEMS ? current : ~0u;  // one run: still in `s`
#pragma unroll
                for (u32 k = 0; k < SS_ITEMS; ++k) {
                    u32 r;
                    const u32 local = RankSort::striped(t, k, span_log, &r);
                    if (r != current) {
                        s = run_segment(r);
                        current = r;
                    }
                    if (local < s.size) {
                        const u32 rank = shared_ranks[RankSort::element((r << span_log) + local)];
                        if (chunk) {
                            reinterpret_cast<u32*>(p.entries)[s.begin + local] = rank;
                        } else {
                            out_keys[s.begin + local] =
                                Key::from_radix((Bits)((Bits)rank ^ s.flip));
                        }
                    }
                }
                if (chunk && t < TILE / SS_PART) {
                    // Buffer 1 holds nothing of the chunk's parts yet (merge passes, "dirty").
                    reinterpret_cast<u32*>(p.tile_dirty)[(item - batches) * (TILE / SS_PART) + t] = 1u;
                }
                __syncthreads();
                continue;
            }
            current = ~0u;
        }
        u64 e[SS_ITEMS];
#pragma unroll
        for (u32 k = 0; k < SS_ITEMS; ++k) {
            u32 r;
            const u32 local = SsSort<THREADS>::striped(t, k, span_log, &r);
            if (r != current) {
                s = run_segment(r);
                current = r;
            }
            e[k] = local < s.size ? ss_entry<Key>(keys[s.begin + local], s.flip, chunk_start + local)
                                  : ~0ull;
        }
        SsSort<THREADS>::sort(e, shared, span);
        __syncthreads();
#pragma unroll
        for (u32 k = 0; k < SS_ITEMS; ++k) {
            shared[SsSort<THREADS>::at(t, k)] = e[k];
        }
        __syncthreads();
        u64* entries = reinterpret_cast<u64*>(p.entries);
        if (chunk && t < TILE / SS_PART) {
            // Buffer 1 holds nothing of the chunk's parts yet (merge passes, "dirty").
            reinterpret_cast<u32*>(p.tile_dirty)[(item - batches) * (TILE / SS_PART) + t] = 1u;
        }
        current = span >= SS_ITEMS ? current : ~0u;  // one run: still in `s`
#pragma unroll
        for (u32 k = 0; k < SS_ITEMS; ++k) {
            u32 r;
            const u32 local = SsSort<THREADS>::striped(t, k, span_log, &r);
            if (r != current) {
                s = run_segment(r);
                current = r;
            }
            if (local < s.size) {
                const u64 entry = shared[SsSort<THREADS>::element((r << span_log) + local)];
                if (chunk) {
                    entries[s.begin + local] = entry;
                } else {
                    ss_write<Key, VALUE_BYTES>(p, s.begin + local, s.begin, s.flip, entry);
                }
            }
        }
        __syncthreads();
    }
}

// The merge pass of runs of `width` over a long segment's chunk q (output [q * TILE, ...)): its
// runs A = [a0, a0 + a_count) and B after it, and the chunk's start on the merge path.
struct SsChunkRuns {
    u64 a0, a_count, b_count, out0, out1;
};

__device__ __forceinline__ SsChunkRuns ss_chunk_runs(u64 size, u64 q, u64 width, u64 tile) {
    SsChunkRuns r;
    r.out0 = q * tile;
    r.out1 = r.out0 + tile < size ? r.out0 + tile : size;
    r.a0 = r.out0 / (2 * width) * (2 * width);
    const u64 rest = size - r.a0;
    r.a_count = rest < width ? rest : width;
    r.b_count = rest - r.a_count < width ? rest - r.a_count : width;
    return r;
}

// How many of the first `diag` outputs of merging a (a_count) and b (b_count) come from a: the
// merge path (entries are distinct), searched by policy S (core/balanced_path.cuh): a thread
// over shared memory, or a whole warp over global memory (GroupSearch<32>: every lane calls it
// with the same arguments, and a search of 2^17 entries takes 4 rounds of loads instead of 17
// dependent ones).
template <class S, class E>
__device__ __forceinline__ u64 ss_merge_path(const S& search, const E* a, u64 a_count,
                                             const E* b, u64 b_count, u64 diag) {
    const u64 lo = diag > b_count ? diag - b_count : 0;
    const u64 hi = diag < a_count ? diag : a_count;
    return search.first_false(lo, hi, [&](u64 m) { return a[m] < b[diag - 1 - m]; });
}

// PARTITION (a warp per part of a chunk of the pass): the part's start on the merge path of its
// two runs, and its segment and place in it, for RUNS (SS_PARTITION_WORDS words). A part past
// its segment's end (the last chunk's) gets size 0: RUNS passes over it.
template <u32 THREADS, class E, class P>
__device__ __forceinline__ void ss_partition(const P& p, u64 count) {
    typedef u64 Bits64;
    const u64* plan = reinterpret_cast<const u64*>(p.plan);
    const u64 width = p.width;
    if (width >= plan[SS_PLAN_MAX_LONG]) {
        return;  // every long segment is merged
    }
    const u64 parts = plan[SS_PLAN_CHUNKS] * p.chunk_parts;
    const u64* list = reinterpret_cast<const u64*>(p.segment_list);
    const E* src = reinterpret_cast<const E*>(p.entries) + (u64)p.src * p.num_keys;
    u64* partition = reinterpret_cast<u64*>(p.partition);
    const u64 warps = grid_threads(THREADS) / 32;
    for (u64 part = global_thread_index(THREADS) / 32; part < parts; part += warps) {
        const u64 chunk = part / p.chunk_parts;
        const u64 j = ss_chunk_owner(p, chunk);
        const SsSegment<Bits64> s =
            ss_segment<Bits64>(p, list[plan[SS_PLAN_LIST + SS_LONG_CLASS] + j], count);
        // The part's place among its segment's parts.
        const u64 q = (chunk - reinterpret_cast<const u64*>(p.chunk_base)[j]) * p.chunk_parts +
                      part % p.chunk_parts;
        const u64 size = q * SS_PART < s.size ? s.size : 0;
        u64 split = 0;
        if (width < size) {
            const SsChunkRuns r = ss_chunk_runs(size, q, width, SS_PART);
            const E* a = src + s.begin + r.a0;
            split = ss_merge_path(GroupSearch<32>(), a, r.a_count, a + r.a_count, r.b_count,
                                  r.out0 - r.a0);
        }
        if ((threadIdx.x & 31u) == 0) {
            // What RUNS needs of the part, in one place: one round of loads, not three.
            u64* words = partition + SS_PARTITION_WORDS * part;
            words[0] = split;
            words[1] = s.begin;
            words[2] = size;
            words[3] = (q << 1) | (s.flip != 0 ? 1ull : 0ull);
        }
    }
}

// RUNS: merge pass p.pass (runs of p.width, from entries buffer p.src), a part (SS_PART entries,
// this kernel's tile) per block at a time. A part whose outputs all come from one run is
// copied, or left alone when that run's interval is the part's own and both buffers hold it (a
// flag per part says whether they differ); any other is merged in shared memory. A segment
// whose runs this pass joins into one is written to the outputs.
template <class Key, int VALUE_BYTES, u32 THREADS, class E, class P>
__device__ __forceinline__ void ss_runs(const P& p, u64 count, E* shared) {
    constexpr u32 TILE = THREADS * SS_ITEMS;
    static_assert(TILE == SS_PART, "RUNS runs on the kernel whose tile is a part");
    typedef typename Key::Bits Bits;
    const u64* plan = reinterpret_cast<const u64*>(p.plan);
    const u64 width = p.width;
    if (width >= plan[SS_PLAN_MAX_LONG]) {
        return;
    }
    const u64 parts = plan[SS_PLAN_CHUNKS] * p.chunk_parts;
    const u64* partition = reinterpret_cast<const u64*>(p.partition);
    const E* src = reinterpret_cast<const E*>(p.entries) + (u64)p.src * p.num_keys;
    E* dst = reinterpret_cast<E*>(p.entries) + (u64)(p.src ^ 1u) * p.num_keys;
    u64* statistics = reinterpret_cast<u64*>(p.statistics) + 2 * (u64)p.pass;
    u32* dirty = reinterpret_cast<u32*>(p.tile_dirty);
    const u32 t = threadIdx.x;
    for (u64 part = blockIdx.x; part < parts; part += gridDim.x) {
        const u64* words = partition + SS_PARTITION_WORDS * part;
        SsSegment<Bits> s;
        s.begin = words[1];
        s.size = words[2];
        s.flip = (words[3] & 1) ? (Bits)~(Bits)0 : (Bits)0;
        if (width >= s.size) {
            continue;  // merged in an earlier pass, or past its segment's end
        }
        const u64 q = words[3] >> 1;
        const SsChunkRuns r = ss_chunk_runs(s.size, q, width, SS_PART);
        const bool final_pass = 2 * width >= s.size;
        // The part's share of A and of B: from its start on the merge path to the next part's
        // (or the end of the two runs).
        const u64 a_lo = words[0];
        const u64 a_hi = r.out1 == r.a0 + r.a_count + r.b_count ? r.a_count
                                                                  : words[SS_PARTITION_WORDS];
        const u64 b_lo = r.out0 - r.a0 - a_lo;
        const u64 total = r.out1 - r.out0;
        const u64 from_a = a_hi - a_lo;
        const E* a = src + s.begin + r.a0;
        const E* b = a + r.a_count;
        auto put = [&](u64 out, E entry) {
            if (final_pass) {
                ss_write_entry<Key, VALUE_BYTES>(p, s.begin + out, s.begin, s.flip, entry);
            } else {
                dst[s.begin + out] = entry;
            }
        };
        // Whether the two buffers hold the same entries over the part, read by every thread
        // before thread 0 rewrites it below.
        const bool differs = dirty[part] != 0;
        __syncthreads();
        if (from_a == 0 || from_a == total) {
            // One run's interval feeds the part: a copy. A stationary one (the interval is the
            // part's own: the seed's early exit) whose buffers agree is left alone, except in
            // the segment's last pass, which writes the outputs.
            const E* from = from_a == 0 ? b + b_lo : a + a_lo;
            const bool stationary = (u64)(from - (src + s.begin)) == r.out0;
            if (stationary && !differs && !final_pass) {
                continue;
            }
            for (u64 x = t; x < total; x += THREADS) {
                put(r.out0 + x, from[x]);
            }
            if (t == 0) {
                atomicAdd(&statistics[1], 1ull);
                dirty[part] = stationary ? 0u : 1u;
            }
            continue;
        }
        if (t == 0) {
            atomicAdd(&statistics[0], 1ull);
            dirty[part] = 1u;
        }
        // Both shares into shared memory, A's then B's, then ITEMS outputs a thread.
        for (u64 x = t; x < total; x += THREADS) {
            shared[x] = x < from_a ? a[a_lo + x] : b[b_lo + (x - from_a)];
        }
        __syncthreads();
        const u64 b_part = total - from_a;
        const u64 diag = (u64)t * SS_ITEMS < total ? (u64)t * SS_ITEMS : total;
        u64 ai = ss_merge_path(SerialSearch(), shared, from_a, shared + from_a, b_part, diag);
        u64 bi = diag - ai;
        E e[SS_ITEMS];
#pragma unroll
        for (u32 k = 0; k < SS_ITEMS; ++k) {
            const E va = ai < from_a ? shared[ai] : (E)~(E)0;
            const E vb = bi < b_part ? shared[from_a + bi] : (E)~(E)0;
            const bool take_a = bi >= b_part || (ai < from_a && va < vb);
            e[k] = take_a ? va : vb;
            ai += take_a ? 1 : 0;
            bi += take_a ? 0 : 1;
        }
        __syncthreads();
#pragma unroll
        for (u32 k = 0; k < SS_ITEMS; ++k) {
            shared[RegisterSort<THREADS, SS_ITEMS, E>::at(t, k)] = e[k];
        }
        __syncthreads();
#pragma unroll
        for (u32 k = 0; k < SS_ITEMS; ++k) {
            const u32 x = k * THREADS + t;
            if (x < total) {
                put(r.out0 + x, shared[RegisterSort<THREADS, SS_ITEMS, E>::element(x)]);
            }
        }
        __syncthreads();
    }
}

}  // namespace oxicub
