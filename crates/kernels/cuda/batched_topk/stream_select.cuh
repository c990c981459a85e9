// Family batched_topk, TIER 4 (stream): the selection among a block's items, by buckets
// (bt_bucket_select) or by an exact MSB-first radix select (bt_stream_exact).
namespace oxicub {

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
    const u32 m = pow2_at_least(written);
    if constexpr (sizeof(Bits) <= 4) {
        // (rank << 32 | ~index): descending order = by key, equal keys by index. Indices are
        // below 2^32 - 1, so a real item is never 0, the padding.
        for (u32 i = tid; i < m; i += BLOCK_THREADS) {
            sort_region[i] = i < written
                ? (((u64)rank_buffer[i] << 32) | (u64)(0xFFFFFFFFu - index_buffer[i]))
                : 0ull;
        }
        __syncthreads();
        block_sort_keys<BLOCK_THREADS>(sort_region, m, KeysDescending{});
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
        block_sort_pairs<BLOCK_THREADS>(sort_region, indices, m, BtSelectionOrder{false});
        for (u32 i = tid; i < written; i += BLOCK_THREADS) {
            bt_write_ranked<Key, VALUE_BYTES>(p, begin, indices[i], out_base + i,
                                              (R)sort_region[i], dir);
        }
    }
    __syncthreads();  // the sort region and counters are reused by the next segment
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
    // Whether bucket b holds a single rank (bt_bucket_write compares only indices there): every
    // bucket of a span below BT_BUCKETS (shift 0).
    __device__ __forceinline__ bool pure(u32) const { return shift == 0u; }
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
    squares = warp_sum(squares);  // one atomic a warp, not 1024 on one word
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
    store_words(starts, first);
    if (places != nullptr) {
        store_words(places, place);
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
//
// `index_ranks`, when given, holds for each slot of a one-rank bucket of more than
// BT_INDEX_RANKED items its item's `first_of_equal` (bt_cluster_index_ranks), so those items
// count nothing.
template <class Key, class R, int VALUE_BYTES, class Items, class Bucket>
__device__ __forceinline__ void bt_bucket_write(const BatchedTopKParams& p, const Items& copy,
                                                const u32* starts, u32 boundary_start,
                                                u32 selected_end, u32 written, u64 begin, u32 dir,
                                                u64 out_base, const Bucket& bucket, u32 j0,
                                                u32 step, const u32* index_ranks = nullptr) {
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
        if (bucket.pure(b) && index_ranks != nullptr && last - first > BT_INDEX_RANKED) {
            equal = last - first;
            first_of_equal = index_ranks[j];
        } else if (bucket.pure(b)) {
            // One rank in the bucket (heavy ties): only the indices are compared.
            equal = last - first;
            for (u32 t = first; t < last; ++t) {
                R rt;
                u32 it;
                copy.get(t, rt, it);
                first_of_equal += it < index ? 1u : 0u;
            }
        } else {
            for (u32 t = first; t < last; ++t) {
                R rt;
                u32 it;
                copy.get(t, rt, it);
                above += rt > r ? 1u : 0u;
                equal += rt == r ? 1u : 0u;
                first_of_equal += rt == r && it < index ? 1u : 0u;
            }
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
    take_words(fill, local);
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

}  // namespace oxicub
