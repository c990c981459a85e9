// Family batched_topk, TIER 4 (stream): the sample a segment's blocks draw, its threshold and
// the filter regions' slots (docs/design/batched_topk.md,
// "Stream tier: sample and threshold").
namespace oxicub {

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
        best = warp_max(best);  // one redux
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
    take_words(bins, local);  // read by this thread only
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
                                                             : vector_key<Bits>(w, e);
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
// an overflow sends the segment to the exact path over every key, ~10x slower). In a host
// simulation of the sample and the threshold at [64x131072] k=2048 this split fits every
// region of sorted and reversed rows, of one or five hot windows and of 96-99 % of AR(1)
// series with coefficients 0.99 to 0.9999, where an even split fits none of the sorted rows
// (docs/design/batched_topk.md, "Stream tier: filter and final selection"). `hits` is read
// only: every warp of the block computes its own region's slots.
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
    sums = warp_sum(sums);
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

}  // namespace oxicub
