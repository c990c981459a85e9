// Family batched_topk, TIER 4 (stream), PART 1: the filter (docs/design/batched_topk.md,
// "Stream tier: filter and final selection").
namespace oxicub {

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
    // the sample's loads; chunk-major items were slower). A grid smaller than the items is
    // coprime to ctas (the host's), so each block's items cycle through the chunk numbers:
    // ctas may exceed a segment's chunks (a loose size bound), and a grid that is a multiple of
    // it would leave the blocks of the higher chunk numbers without work.
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
            // the first loads, the filter was slower; docs/design/batched_topk.md,
            // "Stream tier: filter and final selection".)
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
        // hit, coalesced, was slower; docs/design/batched_topk.md, "Tried and dropped".)
        constexpr u32 SLOT_MASK = (1u << VEC) - 1u;
        constexpr u32 FIELD = VEC * 32u < 256u ? 8u : 16u;
        typedef typename BtPackedCounts<(UNROLL * FIELD > 32u)>::Type P;
        // Once a batch is tested, a lane with hits stages its vectors in shared memory (its own
        // words: no warp barrier) and the registers take the next batch's loads, which are in
        // flight through the scan and the appends. (Loads issued at the top of each batch left
        // the SM alternating between waiting and appending; the next two batches in flight
        // spill at 64 registers; the first loaded during the sample's select, by cp.async into
        // the stage, delays the sample: docs/design/batched_topk.md,
        // "Stream tier: filter and final selection".)
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
                    flags |= (valid && hit(vector_key<Bits>(v4[u], e)) ? 1u : 0u)
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
                        put(to + e, vector_key<Bits>(w, e), first + u * 32u * VEC + e);
                    }
                }
                continue;
            }
            u32 rest = flags;
            while (rest != 0u) {
                const u32 b = (u32)__ffs(rest) - 1u;
                rest &= rest - 1u;
                const u32 u = b / VEC;
                const u32 pos = select_word(start, u) + (u32)__popc(flags & ((1u << b) - 1u));
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
        warp_range(low, high);
        reached = warp_sum(reached);
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

}  // namespace oxicub
