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
// start (the mbarriers' setup): a barrier's release waits for the memory system at each
// exchange (docs/design/batched_topk.md, "Tried and dropped"). Otherwise (an overflow, a
// sample that missed, buckets too uneven) the first block runs the exact path over every key
// of the segment. Against PART 1 + PART 2 this drops the second launch, the final's wait for
// the filter's grid and its two global round trips ("Stream tier: clustered launch").
//
// The kernel runs at 64 registers (1024 threads), where the streaming loop is written for the
// compiler: its state is induction variables and values kept in uniform registers (a direct
// call's segment comes from the parameters alone), because whatever the compiler could
// recompute it did, in every batch (docs/design/batched_topk.md,
// "Stream tier: clustered launch").
//
// Dynamic shared memory (the host's offsets): [candidates: stream_total ranks, then as many u32
// indices; the exact path's sort region aliases it] [copy at stream_sorted_offset: stream_total
// (rank, index) pairs for 4-byte ranks, else stream_total ranks then as many indices; the
// sample bins alias it, then the walk's stage while the keys stream (a batch per warp), and
// the exact path's index and rank buffers (stream_index_offset, stream_rank_offset) lie in it]
// [at stream_bins_offset: bucket counts, bucket starts (BT_STARTS_WORDS; the other block's
// counts land there first) and scatter positions, u32 each].
namespace oxicub {

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
                if (valid && hit(vector_key<Bits>(now[u], e))) {
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

// The index ranks of the large one-rank buckets (heavy ties: a span of ranks below BT_BUCKETS,
// shift 0) up to the boundary one, for bt_bucket_write: for each slot of a bucket of more than
// BT_INDEX_RANKED items, how many items of its bucket have a smaller index. Per such bucket (a
// few: the copy holds at most `cap` items): a bitmap of its indices (a bit per key of the
// segment), a block scan of the words' popcounts by thread groups, and each item's rank from
// the prefix and the bits below it: linear in the bucket and the segment, where comparing every
// pair costs the bucket's size squared (~2048^2 a bucket on rows whose k-th key ties with
// ~2048 others). `bitmap` (ceil(size / 32) words) and `index_ranks` (a word a slot) lie in the
// candidates' region, dead once this block's scatter is done; `list` in the scatter positions,
// dead too. Every thread of the block calls it; it ends in a block barrier.
template <u32 BLOCK_THREADS, class R, u32 WARPS>
__device__ __forceinline__ void bt_cluster_index_ranks(const uint2* copy, const u32* starts,
                                                       u32 boundary, u32 size,
                                                       BtStreamState<R, WARPS>& s, u32* bitmap,
                                                       u32* index_ranks, u32* list) {
    const u32 tid = threadIdx.x;
    const u32 words = (size + 31u) / 32u;
    const u32 per_thread = (words + BLOCK_THREADS - 1u) / BLOCK_THREADS;
    u32* group_below = list + BT_BUCKETS / 2u;  // a word per thread, after the list
    if (tid == 0) {
        list[0] = 0;
    }
    __syncthreads();
    for (u32 b = 1u + tid; b <= boundary; b += BLOCK_THREADS) {
        if (starts[b + 1u] - starts[b] > BT_INDEX_RANKED) {
            list[1u + atomicAdd(&list[0], 1u)] = b;
        }
    }
    __syncthreads();
    static_assert(BT_STREAM_CANDIDATES / (BT_INDEX_RANKED + 1u) + 1u <= BT_BUCKETS / 2u,
                  "the list of large buckets ends before group_below");
    const u32 large = list[0];  // at most cap / (BT_INDEX_RANKED + 1)
    for (u32 l = 0; l < large; ++l) {
        const u32 b = list[1u + l];
        const u32 first = starts[b];
        const u32 last = starts[b + 1u];
        for (u32 w = tid; w < words; w += BLOCK_THREADS) {
            bitmap[w] = 0;
        }
        __syncthreads();
        for (u32 j = first + tid; j < last; j += BLOCK_THREADS) {
            const u32 index = copy[j].y;
            atomicOr(&bitmap[index >> 5], 1u << (index & 31u));
        }
        __syncthreads();
        u32 count = 0;
        for (u32 i = 0; i < per_thread; ++i) {
            const u32 w = tid * per_thread + i;
            count += w < words ? __popc(bitmap[w]) : 0u;
        }
        u32 total = 0;
        group_below[tid] = block_exclusive_sum<BLOCK_THREADS>(count, s.warp_totals, &total);
        __syncthreads();
        for (u32 j = first + tid; j < last; j += BLOCK_THREADS) {
            const u32 index = copy[j].y;
            const u32 w = index >> 5;
            const u32 group = w / per_thread;
            u32 below = group_below[group];
            for (u32 v = group * per_thread; v < w; ++v) {
                below += __popc(bitmap[v]);
            }
            index_ranks[j] = below + __popc(bitmap[w] & ((1u << (index & 31u)) - 1u));
        }
        __syncthreads();  // the next bucket clears the bitmap
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

    // The host launches this kernel in clusters of BT_CLUSTER_BLOCKS (cluster_launch), for a
    // direct call or after the control stages (which bin the segments and write the status
    // this path reads): a wrong launch traps instead of selecting from the wrong keys. A
    // direct call's segment comes from the parameters alone, so the compiler keeps its
    // values in uniform registers (per-thread copies live across the streaming loop pushed
    // it past 64 registers); a listed one's are reloaded from shared memory after the loop.
    const bool direct = (p.flags & SEGMENT_DIRECT) != 0;
    if ((!direct && p.status == 0) || bt_cluster_blocks() != BT_CLUSTER_BLOCKS) {
        __trap();
    }
    // Both blocks of a cluster take the same segment, so every return below is cluster-uniform.
    const u64 slot = blockIdx.x / BT_CLUSTER_BLOCKS;
    u64 seg, begin, size64, written64;
    u32 dir;
    if (direct) {
        seg = slot;
        if (seg >= p.num_segments ||
            !bt_direct_descriptor(p, seg, BT_TIER_STREAM, &begin, &size64, &written64, &dir)) {
            return;
        }
    } else {
        // Cluster i takes position i of the stream tier's list.
        if (slot >= bt_bin_count(p, BT_TIER_STREAM)) {
            return;
        }
        seg = bt_bin_segment(p, BT_TIER_STREAM, slot);
        if (!bt_descriptor(p, seg, BT_TIER_STREAM, &begin, &size64, &written64, &dir)) {
            return;
        }
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
            // warp's first batch goes to L2 now (half its part or all of it: slower, the
            // prefetches then delay the first loads). Its part is computed here and again for
            // the stream: kept live across the threshold, it spilled.
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
        const u32 per_candidate = bucket.shift == 0u ? BT_CLUSTER_PURE_WORK : BT_CLUSTER_BUCKET_WORK;
        fast = s.work <= per_candidate * n && selected_end <= cap;
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
            selected = warp_sum(selected);
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
            const uint2* pairs = reinterpret_cast<const uint2*>(copy_ranks);
            // Heavy ties: one-rank buckets ranked by index in linear time, where the bitmap of
            // a segment's indices and a word a slot fit the candidates' region.
            const u32* index_ranks = nullptr;
            if (bucket.shift == 0u && (size + 31u) / 32u <= cap && selected_end <= cap) {
                u32* region = reinterpret_cast<u32*>(cand_ranks);  // 2 cap words
                bt_cluster_index_ranks<BLOCK_THREADS>(pairs, starts, s.boundary, size, s, region,
                                                      region + cap, pos);
                index_ranks = region + cap;
            }
            bt_bucket_write<Key, R, VALUE_BYTES>(p, BtPairItems{pairs}, starts, boundary_start,
                                                 selected_end, written, begin, dir, out_base,
                                                 bucket, j0, STEP, index_ranks);
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

}  // namespace oxicub
