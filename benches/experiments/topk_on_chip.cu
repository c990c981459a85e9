// A measured-and-dropped experiment for issue 6 (NOTES-batched.md, "eleventh session"): can the
// stream tier's [64x131072] k=2048 reach its targets if the final selection runs on chip, in the
// blocks that streamed the keys, with no second launch and no global round trip? Standalone CUDA,
// f32 keys, max, sorted output (rank desc, index asc), uniform or ascending rows; not part of the
// library or its build. Every variant is checked against a CPU top-k of every row.
//
//   row_topk      one block of 1024 threads per row: the row streams through a shared-memory ring
//                 filled by bulk copies (cp.async.bulk, one mbarrier per stage, the last warp to
//                 leave a stage refills it); the threshold comes from a sample of one 16-byte
//                 vector per thread gathered first; candidates and their bucket counts stay in
//                 shared memory and the block runs the bucket selection.
//   cluster_topk  a cluster of CLUSTER blocks per row, each streaming its chunk in register
//                 batches (every warp a contiguous part, as the library's filter) and counting
//                 its candidates into buckets shared by the cluster (same sample, same buckets);
//                 then either the leader pulls the others' counts and candidates over DSMEM and
//                 selects (PUSH = false), or every block reads the counts, scatters its own
//                 candidates into every block's copy and ranks its share (PUSH = true).
//                 PRE (WHICH=1..4): the first one or two batches of the streaming pass loaded before
//                 the threshold is known (1, 2: before the sample; 3, 4: once the sample has
//                 arrived), so DRAM works while the block waits on the sample. Measured: no
//                 faster (1 batch at the sample: -0.2 us) or slower (NOTES-batched, twelfth session).
//   mode 0 = all, 3 = no final selection, 2 = streaming and a count only: their differences place
//   the time. There is no fallback: a row whose candidates overflow or miss is counted in `fails`.
//
// Build and run on a GPU machine (the device tool: carry the folder holding it):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90,code=sm_90 -o topk_on_chip topk_on_chip.cu
//   WHICH=rcp ./topk_on_chip 64 131072 2048     (r: row_topk, c: cluster pull, p: cluster push,
//                                                 1-4: push with PRE; ASC=1: ascending rows)
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

typedef uint32_t u32;
typedef uint64_t u64;

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);           \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

__host__ __device__ __forceinline__ u32 f2rank(u32 b) { return b ^ ((b >> 31) ? 0xFFFFFFFFu : 0x80000000u); }
__host__ __device__ __forceinline__ u32 rank2bits(u32 r) { return (r & 0x80000000u) ? (r ^ 0x80000000u) : ~r; }

__device__ __forceinline__ u32 smem_addr(const void* p) { return (u32)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_init(u64* bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(u64* bar, u32 bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, u32 bytes, u64* bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            smem_addr(dst)),
        "l"(src), "r"(bytes), "r"(smem_addr(bar))
        : "memory");
}
__device__ __forceinline__ bool mbar_try(u64* bar, u32 parity) {
    u32 ok;
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(ok)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
    return ok != 0;
}
__device__ __forceinline__ void mbar_wait(u64* bar, u32 parity) {
    while (!mbar_try(bar, parity)) {
    }
}


__device__ __forceinline__ u32 cluster_ctarank() {
    u32 r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ void cluster_sync_all() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The shared::cluster address of `p` (this CTA's shared memory) in CTA `rank` of the cluster.
__device__ __forceinline__ u32 dsmem(const void* p, u32 rank) {
    u32 r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(smem_addr(p)), "r"(rank));
    return r;
}
template <class T>
__device__ __forceinline__ T* dsmem_ptr(T* p, u32 rank) {
    u64 r;
    asm volatile("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"(p), "r"(rank));
    return reinterpret_cast<T*>(r);
}
__device__ __forceinline__ u32 ld_dsmem(u32 addr) {
    u32 v;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

template <u32 THREADS>
__device__ __forceinline__ u32 block_exclusive_sum(u32 x, u32* warp_totals, u32* total) {
    const u32 lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    u32 inc = x;
#pragma unroll
    for (u32 o = 1; o < 32; o <<= 1) {
        u32 y = __shfl_up_sync(~0u, inc, o);
        inc += lane >= o ? y : 0u;
    }
    if (lane == 31) warp_totals[warp] = inc;
    __syncthreads();
    constexpr u32 WARPS = THREADS / 32;
    u32 t = lane < WARPS ? warp_totals[lane] : 0u;
    u32 scan = t;
#pragma unroll
    for (u32 o = 1; o < WARPS; o <<= 1) {
        u32 y = __shfl_up_sync(~0u, scan, o);
        scan += lane >= o ? y : 0u;
    }
    u32 below = __shfl_sync(~0u, scan - t, warp);
    *total = __shfl_sync(~0u, scan, WARPS - 1);
    return below + inc - x;
}

// Sample bins: distance d below the best sample -> bin (e-5)*64 + 6 bits below the leading bit.
__device__ __forceinline__ u32 lead(u32 d) { return d == 0 ? 0u : 31u - (u32)__clz((int)d); }
__device__ __forceinline__ u32 bin_of(u32 d) {
    u32 e = max(lead(d), 5u);
    return (e - 5u) * 64u + ((d >> (max(e, 6u) - 6u)) & 63u);
}
__device__ __forceinline__ u32 bin_largest(u32 b) {
    u32 e = b / 64u + 5u;
    if (e == 5u) return b;
    u32 sh = e - 6u;
    return ((64u + b % 64u) << sh) + ((1u << sh) - 1u);
}

constexpr u32 BUCKETS = 4096;
constexpr u32 SAMPLE_BINS = 2048;

struct Shared {
    u64 full[16];
    u32 consumed[16];
    u32 warp_totals[32];
    u32 best;
    u32 pivot;
    u32 count;  // candidates appended
    u32 boundary;
    u32 work;
};

// The sample: one 16-byte vector per thread, spread evenly over the row.
template <u32 THREADS>
__device__ __forceinline__ float4 load_sample(const float* row, u32 n) {
    const u32 nvec = n / 4;
    const u32 v = (u32)(((u64)threadIdx.x * nvec) / THREADS + (nvec / THREADS) / 2);
    return reinterpret_cast<const float4*>(row)[v];
}

// The threshold: a rank at or below the m-th best of the block's samples (within 1/64 of its
// distance below the best sample), m = e + 6 sqrt(e) + 4 for e the samples expected among the k
// best. s.best and `bins` are zero on entry.
template <u32 THREADS, class Arrived>
__device__ __forceinline__ void sample_threshold(const float4& sv, u32 n, u32 k, Shared& s, u32* bins, u32* thr,
                                                 u32* best_out, Arrived arrived) {
    const u32 tid = threadIdx.x, lane = tid & 31u;
    const u32 r4[4] = {f2rank(__float_as_uint(sv.x)), f2rank(__float_as_uint(sv.y)),
                       f2rank(__float_as_uint(sv.z)), f2rank(__float_as_uint(sv.w))};
    const float e = 4.0f * THREADS * (float)k / (float)n;
    const u32 m = (u32)ceilf(e + 6.0f * sqrtf(e) + 4.0f);
    u32 best = max(max(r4[0], r4[1]), max(r4[2], r4[3]));
#pragma unroll
    for (u32 o = 16; o > 0; o >>= 1) best = max(best, __shfl_xor_sync(~0u, best, o));
    if (lane == 0) atomicMax(&s.best, best);
    __syncthreads();
    arrived();  // the sample is in registers: loads issued from here do not delay it
    best = s.best;
#pragma unroll
    for (u32 i = 0; i < 4; ++i) atomicAdd(&bins[bin_of(best - r4[i])], 1u);
    __syncthreads();
    constexpr u32 PER = SAMPLE_BINS / THREADS;
    u32 local[PER], sum = 0;
#pragma unroll
    for (u32 i = 0; i < PER; ++i) {
        local[i] = bins[tid * PER + i];
        sum += local[i];
    }
    u32 total;
    u32 before = block_exclusive_sum<THREADS>(sum, s.warp_totals, &total);
#pragma unroll
    for (u32 i = 0; i < PER; ++i) {
        if (before < m && before + local[i] >= m) s.pivot = tid * PER + i;
        before += local[i];
    }
    __syncthreads();
    const u32 largest = bin_largest(s.pivot);
    *thr = m < 4 * THREADS && largest < best ? best - largest : 0u;
    *best_out = best;
}

// The buckets of the final selection over [thr, best + (best - thr) / 8] (bucket 0 the best);
// ranks above that go to bucket 0.
struct Buckets {
    u32 thr, top, shift;
    __device__ Buckets(u32 threshold, u32 best) : thr(threshold) {
        const u64 top64 = (u64)best + (best - threshold) / 8 + 1;
        top = top64 > 0xFFFFFFFFull ? 0xFFFFFFFFu : (u32)top64;
        const u32 range = top - thr;
        const u32 bits = range == 0 ? 0u : 32u - (u32)__clz((int)range);
        shift = bits > 12 ? bits - 12 : 0u;
    }
    __device__ __forceinline__ u32 operator()(u32 r) const {
        const u32 d = r >= top ? top - thr : r - thr;
        return BUCKETS - 1u - min(d >> shift, BUCKETS - 1u);
    }
};

// Clears the block's counters, the sample bins and the bucket counts, finds the threshold and
// returns the buckets over it. Every thread of the block calls it.
template <u32 THREADS, class Arrived = void (*)()>
__device__ __forceinline__ Buckets sample_buckets(const float4& sv, u32 n, u32 k, Shared& s, u32* bins, u32* fill,
                                                  u32* thr, Arrived arrived = [] {}) {
    const u32 tid = threadIdx.x;
    if (tid == 0) {
        s.best = 0;
        s.count = 0;
        s.work = 0;
    }
    for (u32 b = tid; b < SAMPLE_BINS; b += THREADS) bins[b] = 0;
    for (u32 b = tid; b < BUCKETS; b += THREADS) fill[b] = 0;
    __syncthreads();
    u32 best;
    sample_threshold<THREADS>(sv, n, k, s, bins, thr, &best, arrived);
    return Buckets(*thr, best);
}

// Appends the lane's hits (bit i of `flags`: rank rk[i], index index_of(i)) to the block's
// candidates, in warp order, and counts each in its bucket. Every lane of the warp calls it.
template <u32 N, class Index>
__device__ __forceinline__ void append_hits(const u32 (&rk)[N], u32 flags, Shared& s, u32* cand_rank,
                                            u32* cand_idx, u32 cap, u32* fill, const Buckets& bucket,
                                            Index index_of) {
    const u32 lane = threadIdx.x & 31u;
    if (!__any_sync(~0u, flags != 0)) return;
    const u32 cnt = __popc(flags);
    u32 inc = cnt;
#pragma unroll
    for (u32 o = 1; o < 32; o <<= 1) {
        u32 y = __shfl_up_sync(~0u, inc, o);
        inc += lane >= o ? y : 0u;
    }
    u32 base = 0;
    if (lane == 31) base = atomicAdd(&s.count, inc);
    base = __shfl_sync(~0u, base, 31) + inc - cnt;
#pragma unroll
    for (u32 i = 0; i < N; ++i) {
        if ((flags >> i) & 1u) {
            if (base < cap) {
                cand_rank[base] = rk[i];
                cand_idx[base] = index_of(i);
                atomicAdd(&fill[bucket(rk[i])], 1u);
            }
            ++base;
        }
    }
}

// Thread t holds the counts of buckets [t PER, (t + 1) PER) in `local` (and in `below` the items
// of each that lie in blocks before this one): the buckets' starts, pos[b] = start + below (if
// pos), s.boundary (the bucket of the k-th item) and s.work (sum of the squared counts; zero on
// entry). Ends in a block barrier.
template <u32 THREADS, u32 PER>
__device__ __forceinline__ void bucket_starts(const u32 (&local)[PER], const u32 (&below)[PER], u32* pos, u32 k,
                                              Shared& s, u32* starts) {
    const u32 tid = threadIdx.x;
    u32 sum = 0, squares = 0;
#pragma unroll
    for (u32 i = 0; i < PER; ++i) {
        sum += local[i];
        squares += local[i] * local[i];
    }
    squares = __reduce_add_sync(~0u, squares);
    if ((tid & 31u) == 0) atomicAdd(&s.work, squares);
    u32 all;
    u32 start = block_exclusive_sum<THREADS>(sum, s.warp_totals, &all);
#pragma unroll
    for (u32 i = 0; i < PER; ++i) {
        const u32 b = tid * PER + i;
        starts[b] = start;
        if (pos) pos[b] = start + below[i];
        if (start <= k - 1u && k - 1u < start + local[i]) s.boundary = b;
        start += local[i];
    }
    if (tid == THREADS - 1) starts[BUCKETS] = start;
    __syncthreads();
}

// Copies the candidates [tid, count) step THREADS of `rank` / `idx` (local or another block's)
// whose bucket is at most `boundary` into bucket order: starts[b] + the next of fill[b].
template <u32 THREADS>
__device__ __forceinline__ void scatter(const u32* rank, const u32* idx, u32 count, const Buckets& bucket,
                                        u32 boundary, const u32* starts, u32* fill, u32* copy_rank, u32* copy_idx) {
    for (u32 i = threadIdx.x; i < count; i += THREADS) {
        const u32 r = rank[i];
        const u32 b = bucket(r);
        if (b <= boundary) {
            const u32 at = starts[b] + atomicAdd(&fill[b], 1u);
            copy_rank[at] = r;
            copy_idx[at] = idx[i];
        }
    }
}

// Items j0, j0 + step, ... below selected_end of the bucket-ordered copy: each counts the better
// items of its bucket (and the equal ones with a smaller index) for its position, and is written
// when it is among the k best (ties at the k-th to the smaller index).
__device__ __forceinline__ void rank_and_write(const u32* copy_rank, const u32* copy_idx, const u32* starts,
                                               u32 boundary_start, u32 selected_end, u32 k, const Buckets& bucket,
                                               float* ok, u32* oi, u32 j0, u32 step) {
    for (u32 j = j0; j < selected_end; j += step) {
        const u32 r = copy_rank[j];
        const u32 index = copy_idx[j];
        const u32 b = bucket(r);
        const u32 first = starts[b], last = starts[b + 1u];
        u32 above = 0, equal = 0, first_of_equal = 0;
        for (u32 t = first; t < last; ++t) {
            const u32 rt = copy_rank[t];
            above += rt > r;
            equal += rt == r;
            first_of_equal += rt == r && copy_idx[t] < index;
        }
        const u32 group = first + above;
        const u32 p = group + first_of_equal;
        if (j >= boundary_start && group + equal > k) {
            if (group >= k) continue;
            if (first_of_equal >= k - group) continue;
        }
        ok[p] = __uint_as_float(rank2bits(r));
        oi[p] = index;
    }
}

constexpr u32 MODE2_THRESHOLD = 0xBF7D70A4u;  // the rank of 0.99f: mode 2 counts ~1 % of the keys

// STAGE_KEYS keys per stage (THREADS * 4 * VPT), STAGES in the ring, CAP candidates.
template <u32 THREADS, u32 VPT, u32 STAGES, u32 CAP>
__global__ void __launch_bounds__(THREADS, 1)
row_topk(const float* __restrict__ keys, u32 n, u32 k, float* out_keys, u32* out_idx, u32* fails, int mode) {
    constexpr u32 STAGE_KEYS = THREADS * 4 * VPT;
    constexpr u32 STAGE_BYTES = STAGE_KEYS * 4;
    constexpr u32 WARPS = THREADS / 32;
    constexpr u32 PER = BUCKETS / THREADS;
    extern __shared__ __align__(128) unsigned char dyn[];
    __shared__ Shared s;
    float4* ring = reinterpret_cast<float4*>(dyn);                        // STAGES * STAGE_BYTES
    u32* cand_rank = reinterpret_cast<u32*>(dyn + STAGES * STAGE_BYTES);  // CAP
    u32* cand_idx = cand_rank + CAP;                                      // CAP
    u32* fill = cand_idx + CAP;                                           // BUCKETS
    u32* starts = fill + BUCKETS;                                         // BUCKETS + 1
    u32* bins = cand_rank;  // sample bins alias the candidates (dead before the first append)
    u32* copy_rank = reinterpret_cast<u32*>(dyn);  // after the stream: the ring
    u32* copy_idx = copy_rank + CAP;

    const u32 tid = threadIdx.x, lane = tid & 31u;
    const u32 row = blockIdx.x;
    const float* src = keys + (u64)row * n;
    const u32 nstages = n / STAGE_KEYS;  // prototype: n a multiple of STAGE_KEYS

    // Sample gathers first, so they are ahead of the bulk copies in the memory queues.
    const float4 sv = load_sample<THREADS>(src, n);
    if (tid == 0) {
        for (u32 i = 0; i < STAGES; ++i) {
            mbar_init(&s.full[i], 1);
            s.consumed[i] = 0;
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        for (u32 i = 0; i < STAGES && i < nstages; ++i) {
            mbar_expect_tx(&s.full[i], STAGE_BYTES);
            bulk_g2s(ring + (u64)i * (STAGE_BYTES / 16), src + (u64)i * STAGE_KEYS, STAGE_BYTES, &s.full[i]);
        }
    }
    u32 thr;
    const Buckets bucket = sample_buckets<THREADS>(sv, n, k, s, bins, fill, &thr);

    for (u32 st = 0; st < nstages; ++st) {
        const u32 slot = st % STAGES;
        mbar_wait(&s.full[slot], (st / STAGES) & 1u);
        const float4* stage = ring + (u64)slot * (STAGE_BYTES / 16);
        u32 rk[4 * VPT];
#pragma unroll
        for (u32 q = 0; q < VPT; ++q) {
            const float4 w = stage[q * THREADS + tid];
            rk[4 * q + 0] = f2rank(__float_as_uint(w.x));
            rk[4 * q + 1] = f2rank(__float_as_uint(w.y));
            rk[4 * q + 2] = f2rank(__float_as_uint(w.z));
            rk[4 * q + 3] = f2rank(__float_as_uint(w.w));
        }
        u32 flags = 0;
#pragma unroll
        for (u32 i = 0; i < 4 * VPT; ++i) flags |= (rk[i] >= (mode == 2 ? MODE2_THRESHOLD : thr) ? 1u : 0u) << i;
        __syncwarp();
        if (lane == 0) {
            // Release the slot (its keys are in registers); the last warp refills it.
            __threadfence_block();
            const u32 old = atomicAdd(&s.consumed[slot], 1u);
            if (old == WARPS - 1) {
                s.consumed[slot] = 0;
                const u32 next = st + STAGES;
                if (next < nstages) {
                    mbar_expect_tx(&s.full[slot], STAGE_BYTES);
                    bulk_g2s(ring + (u64)slot * (STAGE_BYTES / 16), src + (u64)next * STAGE_KEYS, STAGE_BYTES,
                             &s.full[slot]);
                }
            }
        }
        if (mode == 2) {
            if (flags) atomicAdd(&s.count, (u32)__popc(flags));
            continue;
        }
        append_hits(rk, flags, s, cand_rank, cand_idx, CAP, fill, bucket,
                    [&](u32 i) { return st * STAGE_KEYS + ((i / 4) * THREADS + tid) * 4 + (i % 4); });
    }
    __syncthreads();
    const u32 nc = s.count;
    if (mode == 2 || mode == 3) {
        if (tid == 0) atomicAdd(fails, nc);
        return;
    }
    if (nc > CAP || nc < k) {
        if (tid == 0) atomicAdd(fails, 1u);
        return;  // prototype: the fallback is not here
    }
    u32 local[PER], below[PER];
#pragma unroll
    for (u32 i = 0; i < PER; ++i) {
        local[i] = fill[tid * PER + i];
        fill[tid * PER + i] = 0;
        below[i] = 0;
    }
    bucket_starts<THREADS>(local, below, nullptr, k, s, starts);
    const u32 boundary = s.boundary;
    const u32 boundary_start = starts[boundary];
    const u32 selected_end = starts[boundary + 1u];
    if (s.work > 64u * nc) {
        if (tid == 0) atomicAdd(fails, 1u << 16);
        return;
    }
    scatter<THREADS>(cand_rank, cand_idx, nc, bucket, boundary, starts, fill, copy_rank, copy_idx);
    __syncthreads();
    rank_and_write(copy_rank, copy_idx, starts, boundary_start, selected_end, k, bucket, out_keys + (u64)row * k,
                   out_idx + (u64)row * k, tid, THREADS);
}

// CLUSTER blocks per row (one cluster), each streaming its chunk in register batches (every warp
// a contiguous part) and appending its candidates and bucket counts to its own shared memory
// (every block draws the same sample, so all use the same threshold and buckets). After one
// cluster barrier, PUSH = false: the leader pulls the others' counts and candidates over DSMEM and
// selects while the others wait at a second barrier; PUSH = true: every block reads all counts,
// scatters its own candidates into every block's copy, and after a second barrier each block ranks
// and writes its share of the selection.
template <u32 THREADS, u32 CLUSTER, u32 CAP, bool PUSH, u32 PRE>
__global__ void __launch_bounds__(THREADS, 1)
cluster_topk(const float* __restrict__ keys, u32 n, u32 k, float* out_keys, u32* out_idx, u32* fails, int mode) {
    constexpr u32 WARPS = THREADS / 32;
    constexpr u32 UNROLL = 4;  // float4 per lane per batch
    constexpr u32 PER = BUCKETS / THREADS;
    static_assert(PER == 4, "a thread's bucket counts are one 16-byte vector");
    extern __shared__ __align__(128) unsigned char dyn[];
    __shared__ Shared s;
    u32* cand_rank = reinterpret_cast<u32*>(dyn);  // CAP
    u32* cand_idx = cand_rank + CAP;                // CAP
    u32* fill = cand_idx + CAP;                     // BUCKETS
    u32* copy_rank = fill + BUCKETS;                // CAP
    u32* copy_idx = copy_rank + CAP;                // CAP
    u32* starts = copy_idx + CAP;                   // BUCKETS + 1
    u32* pos = starts + BUCKETS + 1;                // BUCKETS (push: next position per bucket)
    u32* bins = copy_rank;                          // sample bins alias the copy

    const u32 crank = cluster_ctarank();
    const u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const u32 row = blockIdx.x / CLUSTER;
    const float* src = keys + (u64)row * n;
    const u32 chunk = n / CLUSTER;
    const u32 part = chunk / WARPS;  // keys per warp
    const u32 lo = crank * chunk + warp * part;
    const float4* src4 = reinterpret_cast<const float4*>(src + lo);
    const float4 sv = load_sample<THREADS>(src, n);
    // PRE 1, 2: that many batches of the streaming pass are loaded before the sample's threshold
    // is known (PRE 3, 4: 1, 2 batches, once the sample has arrived), so DRAM works while the
    // block waits on the sample.
    const u32 batches = part / 4 / (UNROLL * 32);
    float4 cur[UNROLL], nxt[UNROLL];
    auto early = [&] {
        if (PRE == 1 || PRE == 2 || PRE == 3 || PRE == 4) {
#pragma unroll
            for (u32 u = 0; u < UNROLL; ++u) cur[u] = __ldcs(src4 + u * 32 + lane);
        }
        if ((PRE == 2 || PRE == 4) && batches > 1) {
#pragma unroll
            for (u32 u = 0; u < UNROLL; ++u) nxt[u] = __ldcs(src4 + UNROLL * 32 + u * 32 + lane);
        }
    };
    if (PRE == 1 || PRE == 2) early();
    u32 thr;
    const Buckets bucket = sample_buckets<THREADS>(sv, n, k, s, bins, fill, &thr, [&] {
        if (PRE == 3 || PRE == 4) early();
    });
    const u32 hit_min = mode == 2 ? MODE2_THRESHOLD : thr;

    if (PRE == 0) {
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) cur[u] = __ldcs(src4 + u * 32 + lane);
    }
    for (u32 b = 0; b < batches; ++b) {
        if (b + 1 < batches && !((PRE == 2 || PRE == 4) && b == 0)) {
#pragma unroll
            for (u32 u = 0; u < UNROLL; ++u) nxt[u] = __ldcs(src4 + (b + 1) * UNROLL * 32 + u * 32 + lane);
        }
        u32 rk[4 * UNROLL];
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) {
            rk[4 * u + 0] = f2rank(__float_as_uint(cur[u].x));
            rk[4 * u + 1] = f2rank(__float_as_uint(cur[u].y));
            rk[4 * u + 2] = f2rank(__float_as_uint(cur[u].z));
            rk[4 * u + 3] = f2rank(__float_as_uint(cur[u].w));
        }
        u32 flags = 0;
#pragma unroll
        for (u32 i = 0; i < 4 * UNROLL; ++i) flags |= (rk[i] >= hit_min ? 1u : 0u) << i;
        if (mode == 2) {
            if (flags) atomicAdd(&s.count, (u32)__popc(flags));
        } else {
            append_hits(rk, flags, s, cand_rank, cand_idx, CAP, fill, bucket, [&](u32 i) {
                return lo + 4 * (b * UNROLL * 32 + (i / 4) * 32 + lane) + (i % 4);
            });
        }
#pragma unroll
        for (u32 u = 0; u < UNROLL; ++u) cur[u] = nxt[u];
    }
    cluster_sync_all();  // every block's candidates and counts are complete and visible
    if (mode == 2 || mode == 3) {
        if (tid == 0) atomicAdd(fails, s.count);
        cluster_sync_all();
        return;
    }
    // Every block's count and bucket counts (below: those of the blocks before this one).
    // Lane c of each warp reads block c's count (one remote load a warp, not one a thread).
    const u32 lane_count = lane < CLUSTER ? *dsmem_ptr(&s.count, lane) : 0u;
    u32 counts[CLUSTER];
    u32 nc = 0;
    bool over = false;
#pragma unroll
    for (u32 c = 0; c < CLUSTER; ++c) {
        counts[c] = __shfl_sync(~0u, lane_count, c);
        over |= counts[c] > CAP;
        nc += counts[c];
    }
    const bool selects = PUSH || crank == 0;
    u32 local[PER], below[PER];
#pragma unroll
    for (u32 i = 0; i < PER; ++i) local[i] = below[i] = 0;
    if (selects) {
#pragma unroll
        for (u32 c = 0; c < CLUSTER; ++c) {
            // This thread's PER counts of block c as one 16-byte load.
            const uint4 f4 = reinterpret_cast<const uint4*>(dsmem_ptr(fill, c))[tid];
            const u32 f[PER] = {f4.x, f4.y, f4.z, f4.w};
#pragma unroll
            for (u32 i = 0; i < PER; ++i) {
                local[i] += f[i];
                below[i] += c < crank ? f[i] : 0u;
            }
        }
    }
    if (PUSH) {
        bucket_starts<THREADS>(local, below, pos, k, s, starts);
    } else if (crank == 0) {
        // fill is the leader's scatter counter from here on; the others' are read above only.
#pragma unroll
        for (u32 i = 0; i < PER; ++i) fill[tid * PER + i] = 0;
        bucket_starts<THREADS>(local, below, nullptr, k, s, starts);
    }
    const u32 boundary = s.boundary;
    const u32 boundary_start = starts[boundary];
    const u32 selected_end = starts[boundary + 1u];
    const bool fast = selects && !over && nc >= k && s.work <= 64u * nc && selected_end <= CAP;
    if (selects && !fast && crank == 0 && tid == 0) atomicAdd(fails, 1u);
    if (PUSH && fast) {
        // Scatter this block's candidates into every block's copy.
        u32* remote_rank[CLUSTER];
        u32* remote_idx[CLUSTER];
#pragma unroll
        for (u32 c = 0; c < CLUSTER; ++c) {
            remote_rank[c] = dsmem_ptr(copy_rank, c);
            remote_idx[c] = dsmem_ptr(copy_idx, c);
        }
        for (u32 i = tid; i < s.count; i += THREADS) {
            const u32 r = cand_rank[i];
            const u32 b = bucket(r);
            if (b <= boundary) {
                const u32 at = atomicAdd(&pos[b], 1u);
                const u32 x = cand_idx[i];
#pragma unroll
                for (u32 c = 0; c < CLUSTER; ++c) {
                    remote_rank[c][at] = r;
                    remote_idx[c][at] = x;
                }
            }
        }
        cluster_sync_all();  // every copy is complete; no block touches another's memory after this
        rank_and_write(copy_rank, copy_idx, starts, boundary_start, selected_end, k, bucket,
                       out_keys + (u64)row * k, out_idx + (u64)row * k, crank * THREADS + tid, CLUSTER * THREADS);
        return;
    }
    if (!PUSH && fast) {
        // The leader gathers every block's candidates into its copy.
#pragma unroll
        for (u32 c = 0; c < CLUSTER; ++c) {
            scatter<THREADS>(dsmem_ptr(cand_rank, c), dsmem_ptr(cand_idx, c), counts[c], bucket, boundary, starts,
                             fill, copy_rank, copy_idx);
        }
        __syncthreads();
        rank_and_write(copy_rank, copy_idx, starts, boundary_start, selected_end, k, bucket,
                       out_keys + (u64)row * k, out_idx + (u64)row * k, tid, THREADS);
    }
    cluster_sync_all();  // the leader has read the others' shared memory
}

// Pure streaming with plain 16-byte loads, G CTAs per row (for the bandwidth ceiling).
__global__ void stream_ldg(const float4* __restrict__ keys, u64 nvec, u32* out) {
    u32 c = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += (u64)gridDim.x * blockDim.x) {
        float4 w = __ldcs(keys + i);
        c += (w.x > 0.99f) + (w.y > 0.99f) + (w.z > 0.99f) + (w.w > 0.99f);
    }
    if (c == 0xFFFFFFFF) out[0] = c;
}

__global__ void gen_ascending(float* x, u64 count, u32 n, u64 seed) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (u64)gridDim.x * blockDim.x) {
        x[i] = (float)((i % n) + (seed % 7)) / (float)n;
    }
}
__global__ void gen_uniform(float* x, u64 count, u64 seed) {
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (u64)gridDim.x * blockDim.x) {
        u64 z = (i + seed * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
        z ^= z >> 31;
        z *= 0x94D049BB133111EBull;
        z ^= z >> 29;
        x[i] = (float)(z >> 40) * (1.0f / 16777216.0f);
    }
}

// The median of `reps` runs, each between two events, enqueued back to back with no host
// synchronisation between them (as bench-gpu times: a run's launch overlaps the run before).
template <class F>
static float time_median(int reps, F&& f) {
    std::vector<cudaEvent_t> ev(2 * reps);
    for (auto& e : ev) CK(cudaEventCreate(&e));
    for (int i = 0; i < 10; ++i) f(i);
    CK(cudaDeviceSynchronize());
    for (int i = 0; i < reps; ++i) {
        CK(cudaEventRecord(ev[2 * i]));
        f(i);
        CK(cudaEventRecord(ev[2 * i + 1]));
    }
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    std::vector<float> t(reps);
    for (int i = 0; i < reps; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
    for (auto& e : ev) CK(cudaEventDestroy(e));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

template <class K>
static void run_kernel(K kern, u32 grid, u32 threads, size_t smem, const char* name, float** bufs, int nbuf, u32 rows,
                       u32 n, u32 k, float* ok, u32* oi, u32* fails, double floor_ms, bool check, u32 cluster = 1);

template <u32 THREADS, u32 VPT, u32 STAGES, u32 CAP>
static void run_variant(const char* name, float** bufs, int nbuf, u32 rows, u32 n, u32 k, float* ok, u32* oi,
                        u32* fails, double floor_ms, bool check) {
    auto kern = row_topk<THREADS, VPT, STAGES, CAP>;
    const size_t smem = (size_t)STAGES * THREADS * 4 * VPT * 4 + (2 * CAP + 2 * BUCKETS + 1) * 4;
    run_kernel(kern, rows, THREADS, smem, name, bufs, nbuf, rows, n, k, ok, oi, fails, floor_ms, check);
}

template <u32 THREADS, u32 CLUSTER, u32 CAP, bool PUSH, u32 PRE = 0>
static void run_cluster(const char* name, float** bufs, int nbuf, u32 rows, u32 n, u32 k, float* ok, u32* oi,
                        u32* fails, double floor_ms, bool check) {
    auto kern = cluster_topk<THREADS, CLUSTER, CAP, PUSH, PRE>;
    const size_t smem = (size_t)(4 * CAP + 3 * BUCKETS + 1) * 4;
    run_kernel(kern, rows * CLUSTER, THREADS, smem, name, bufs, nbuf, rows, n, k, ok, oi, fails, floor_ms, check,
               CLUSTER);
}

template <class K>
static void run_kernel(K kern, u32 grid, u32 threads, size_t smem, const char* name, float** bufs, int nbuf, u32 rows,
                       u32 n, u32 k, float* ok, u32* oi, u32* fails, double floor_ms, bool check, u32 cluster) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    if (cluster > 1) {
        int clusters = 0;
        CK(cudaOccupancyMaxActiveClusters(&clusters, kern, &cfg));
        printf("%s: %d active clusters at most\n", name, clusters);
    }
    auto launch = [&](const float* in, int mode) {
        CK(cudaLaunchKernelEx(&cfg, kern, in, n, k, ok, oi, fails, mode));
    };
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    for (int mode : {0, 3, 2}) {
        CK(cudaMemset(fails, 0, 4));
        CK(cudaMemset(ok, 0xFF, (size_t)rows * k * 4));
        CK(cudaMemset(oi, 0xFF, (size_t)rows * k * 4));
        float ms = time_median(200, [&](int i) { launch(bufs[i % nbuf], mode); });
        u32 f;
        CK(cudaMemcpy(&f, fails, 4, cudaMemcpyDeviceToHost));
        printf("%-28s mode %d smem %6zu: %.4f ms (%.2fx floor) fails/count %u\n", name, mode, smem, ms, ms / floor_ms, f);
    }
    if (!check) return;
    // Check rows of buffer 0 against the CPU.
    CK(cudaMemset(ok, 0xFF, (size_t)rows * k * 4));
    CK(cudaMemset(oi, 0xFF, (size_t)rows * k * 4));
    CK(cudaMemset(fails, 0, 4));
    launch(bufs[0], 0);
    CK(cudaDeviceSynchronize());
    u32 f0;
    CK(cudaMemcpy(&f0, fails, 4, cudaMemcpyDeviceToHost));
    printf("  check run fails %u\n", f0);
    std::vector<float> in((size_t)rows * n), gk((size_t)rows * k);
    std::vector<u32> gi((size_t)rows * k);
    CK(cudaMemcpy(in.data(), bufs[0], in.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gk.data(), ok, gk.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(gi.data(), oi, gi.size() * 4, cudaMemcpyDeviceToHost));
    u32 bad = 0;
    for (u32 r = 0; r < rows; ++r) {
        std::vector<u32> idx(n);
        for (u32 i = 0; i < n; ++i) idx[i] = i;
        const float* x = in.data() + (size_t)r * n;
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](u32 a, u32 b) {
            return x[a] > x[b] || (x[a] == x[b] && a < b);
        });
        for (u32 j = 0; j < k; ++j) {
            if (gi[(size_t)r * k + j] != idx[j] || gk[(size_t)r * k + j] != x[idx[j]]) {
                if (bad < 5) printf("  row %u pos %u: got %u %g want %u %g\n", r, j, gi[(size_t)r * k + j],
                                    gk[(size_t)r * k + j], idx[j], x[idx[j]]);
                ++bad;
            }
        }
    }
    printf("  check %s: %u mismatches\n", name, bad);
}

int main(int argc, char** argv) {
    const u32 rows = argc > 1 ? atoi(argv[1]) : 64, n = argc > 2 ? atoi(argv[2]) : 131072, k = argc > 3 ? atoi(argv[3]) : 2048;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    const u64 count = (u64)rows * n;
    const int nbuf = (int)std::max<u64>(4, (3ull * prop.l2CacheSize) / (count * 4) + 2);
    std::vector<float*> bufs(nbuf);
    for (int i = 0; i < nbuf; ++i) {
        CK(cudaMalloc(&bufs[i], count * 4));
        if (getenv("ASC")) {
            gen_ascending<<<1024, 256>>>(bufs[i], count, n, 1000 + i);
        } else {
            gen_uniform<<<1024, 256>>>(bufs[i], count, 1000 + i);
        }
    }
    // Copy bandwidth (read + write) on 256 MiB.
    float *ca, *cb;
    const size_t cbytes = 256ull << 20;
    CK(cudaMalloc(&ca, cbytes));
    CK(cudaMalloc(&cb, cbytes));
    float cms = time_median(50, [&](int) { CK(cudaMemcpyAsync(cb, ca, cbytes, cudaMemcpyDeviceToDevice)); });
    const double gbs = 2.0 * cbytes / (cms * 1e6);
    const double floor_ms = ((double)count * 4 + (double)rows * k * 8) / (gbs * 1e6);
    printf("copy %.0f GB/s; [%ux%u] k=%u floor %.4f ms, %d input buffers\n", gbs, rows, n, k, floor_ms, nbuf);
    float* ok;
    u32 *oi, *fails;
    CK(cudaMalloc(&ok, (size_t)rows * k * 4));
    CK(cudaMalloc(&oi, (size_t)rows * k * 4));
    CK(cudaMalloc(&fails, 4));
    for (u32 ctas : {64u, 128u, 132u, 264u, 528u}) {
        float ms = time_median(200, [&](int i) {
            stream_ldg<<<ctas, 1024>>>(reinterpret_cast<const float4*>(bufs[i % nbuf]), count / 4, fails);
        });
        printf("stream_ldg %4u ctas: %.4f ms (%.2fx floor, %.0f GB/s)\n", ctas, ms, ms / floor_ms, count * 4 / (ms * 1e6));
    }
    const char* which = getenv("WHICH") ? getenv("WHICH") : "c";
    if (strchr(which, 'r')) run_variant<1024, 2, 4, 6144>("row 1024t 32K x4", bufs.data(), nbuf, rows, n, k, ok, oi, fails, floor_ms, true);
    if (strchr(which, 'c')) run_cluster<1024, 2, 8192, false>("cluster 2x1024t pull", bufs.data(), nbuf, rows, n, k, ok, oi, fails, floor_ms, true);
    if (strchr(which, 'p')) run_cluster<1024, 2, 8192, true>("cluster 2x1024t push", bufs.data(), nbuf, rows, n, k, ok, oi, fails, floor_ms, true);
    if (strchr(which, '1')) run_cluster<1024, 2, 8192, true, 1>("cluster push, 1 batch early", bufs.data(), nbuf, rows, n, k, ok, oi, fails, floor_ms, true);
    if (strchr(which, '2')) run_cluster<1024, 2, 8192, true, 2>("cluster push, 2 batches early", bufs.data(), nbuf, rows, n, k, ok, oi, fails, floor_ms, true);
    if (strchr(which, '3')) run_cluster<1024, 2, 8192, true, 3>("cluster push, 1 batch at sample", bufs.data(), nbuf, rows, n, k, ok, oi, fails, floor_ms, true);
    if (strchr(which, '4')) run_cluster<1024, 2, 8192, true, 4>("cluster push, 2 batches at sample", bufs.data(), nbuf, rows, n, k, ok, oi, fails, floor_ms, true);

    return 0;
}
