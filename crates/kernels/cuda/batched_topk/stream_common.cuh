// Family batched_topk, TIER 4 (streamed): several blocks per segment for segments of a few
// thousand keys up to a few hundred thousand with min(k, size) <= K_CAP, two launches and no
// host round trip (docs/design/batched_topk.md, "Stream tier"):
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
//                          stream_cluster.cuh).
//
// Why PART 1 + PART 2 and not only clusters: a cluster of 8 blocks per segment with a chain of
// cluster barriers (sample passes, count exchanges, a sort across the cluster) left the SMs
// latency-bound far below the DRAM bandwidth, and clusters that do not all fit at once run in
// waves (docs/design/batched_topk.md, "Tried and dropped"). PART 3 keeps the filter's
// streaming, takes one cluster barrier per segment (its arrive at the start, its wait after the
// streaming) and two exchanges by pushes, and is used only when every segment's cluster is
// resident at once ("Stream tier: clustered launch").
//
// Dynamic shared memory of the final selection (sized by the host): [candidates: stream_total
// ranks, then as many u32 indices; the exact path's sort region aliases it] [bucket copy at
// stream_sorted_offset: stream_sorted_cap ranks, then as many u32 indices] [bucket starts and
// fill counters at stream_bins_offset: BT_STARTS_WORDS + BT_BUCKETS u32] [index buffer at
// stream_index_offset: u32 per selected item] [rank buffer at stream_rank_offset]. Index math
// within a segment is 32-bit (the host caps segments at stream_max_size < 2^32).
namespace oxicub {

// The final's copy tasks: up to BT_STREAM_TASK candidates of one region each (BT_STREAM_LOADS
// per lane).
constexpr u32 BT_STREAM_LOADS = BT_STREAM_TASK / 32u;
constexpr u32 BT_BUCKET_LOG = 12;
static_assert((1u << BT_BUCKET_LOG) == BT_BUCKETS, "BT_BUCKET_LOG is log2 of BT_BUCKETS");
// The bucket path ranks an item by comparing it with every item of its bucket: it is taken
// when the sum of the squared bucket sizes is at most this many comparisons per candidate.
constexpr u32 BT_BUCKET_WORK = 64;
// The same for the clustered kernel, whose other path is the exact one over every key of the
// segment in one block (0.25-0.5 ms at 131072 keys). Heavy ties put the candidates in a few
// buckets: bf16 rows (a few buckets of ~256 at k = 512: ~270 comparisons a candidate), 64
// values sharing their top 26 bits (2 buckets of ~2048 at k = 2048: ~2050), smooth rows (an
// AR(1) series, coefficient 0.99: the open bucket 0 at 70-91 in about one row in 300). The
// bucket path's work is spread over the cluster's 2048 threads, n / 2048 x the ratio
// comparisons each: at 2048 a candidate and n = 16384, ~16 K of ~6 instructions; a pure bucket
// (one rank, shift 0: heavy ties) compares only indices, ~3 instructions, so it may take twice
// that. Both bounds keep the worst case near the exact path's cost and the common tie-heavy
// rows far below it (docs/design/batched_topk.md, "Stream tier: clustered launch").
constexpr u32 BT_CLUSTER_BUCKET_WORK = 2048;
constexpr u32 BT_CLUSTER_PURE_WORK = 4096;
// One-rank buckets of more items than this are ranked by index in linear time in the clustered
// kernel (bt_cluster_index_ranks: a bitmap of the bucket's indices and its prefix counts), not
// by comparing every pair.
constexpr u32 BT_INDEX_RANKED = 64;

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
// sample's arrival is the kernel's first wait. Not longer runs: the keys between two runs can
// all lie above the best sample (sorted or clustered rows), where the cluster's open bucket 0
// takes them, and past a few hundred keys that bucket costs more than the bucket path allows
// (runs of 32 sent ascending rows to the exact path; docs/design/batched_topk.md,
// "Stream tier: sample and threshold" and "Tried and dropped").
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

}  // namespace oxicub
