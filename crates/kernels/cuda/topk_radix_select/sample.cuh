// Family topk_radix_select, PART 2: the fast path's SAMPLE (docs/design/topk.md,
// "Sample and prefilter").
namespace oxicub {

// SAMPLE, compiled alone (PART 2, one block of 1024 threads, TOPK_SAMPLES / 1024 keys each):
// INIT, then the threshold T = the sample_rank-th best rank of TOPK_SAMPLES keys
// spread over the input (one per stratum of len / TOPK_SAMPLES keys, at a hashed offset). The
// ranks stay in registers (all loads of a thread in flight at once) and T is found by a radix
// select over them: one shared 256-bin histogram per 8-bit digit, MSB first.
template <class Key, u32 BLOCK_THREADS>
__device__ __forceinline__ void topk_sample(const TopKRadixSelectParams& params) {
    typedef typename Key::Bits Bits;
    constexpr u32 PER_THREAD = TOPK_SAMPLES / BLOCK_THREADS;
    static_assert(PER_THREAD * BLOCK_THREADS == TOPK_SAMPLES, "sample block size");
    __shared__ u32 bins[TOPK_BINS];
    __shared__ u32 warp_totals[BLOCK_THREADS / 32];
    __shared__ u64 pivot_digit;
    __shared__ u32 pivot_left;
    u64* state = reinterpret_cast<u64*>(params.state);
    if (blockIdx.x != 0) {
        return;
    }
    if (threadIdx.x == 0) {
        topk_init(params, state);
    }
    __syncthreads();
    if (state[TOPK_SLOT_DONE] != 0) {
        return;  // block-uniform
    }
    const Bits* keys = reinterpret_cast<const Bits*>(params.keys);
    const Bits flip = (Bits)params.flip;
    // >= 4 (the host samples only long inputs), and below 2^32 for len < 2^46: the hashed offset
    // within the stratum is a multiply-high by a 32-bit hash, not a 64-bit modulo.
    const u64 stride = params.len / TOPK_SAMPLES;
    Bits rank[PER_THREAD];
#pragma unroll
    for (u32 p = 0; p < PER_THREAD; ++p) {
        const u32 i = p * BLOCK_THREADS + threadIdx.x;
        const u64 offset = ((topk_mix(i) & 0xFFFFFFFFull) * stride) >> 32;
        rank[p] = keys[(u64)i * stride + offset];
    }
#pragma unroll
    for (u32 p = 0; p < PER_THREAD; ++p) {
        rank[p] = (Bits)(Key::to_radix(rank[p]) ^ flip);
    }
    u64 prefix = 0;
    u64 mask = 0;
    u32 remaining = (u32)params.sample_rank;  // 1 <= sample_rank <= TOPK_SAMPLES (host)
    for (int shift = (int)(8 * sizeof(Bits)) - (int)TOPK_DIGIT_BITS; shift >= 0;
         shift -= (int)TOPK_DIGIT_BITS) {
        for (u32 bin = threadIdx.x; bin < TOPK_BINS; bin += BLOCK_THREADS) {
            bins[bin] = 0;
        }
        __syncthreads();
        // One shared atomic per distinct digit and warp: the top digit is the same for most
        // samples, and an atomic per sample serialises on one bin (docs/design/topk.md,
        // "Sample and prefilter").
#pragma unroll
        for (u32 p = 0; p < PER_THREAD; ++p) {
            const bool in = ((u64)rank[p] & mask) == prefix;
            const u32 digit = in ? (u32)((u64)rank[p] >> shift) & (TOPK_BINS - 1) : TOPK_BINS;
            const u32 same = __match_any_sync(0xFFFFFFFFu, digit);
            if (in && (threadIdx.x & 31u) == (u32)__ffs(same) - 1) {
                atomicAdd(&bins[digit], (u32)__popc(same));
            }
        }
        __syncthreads();
        // Bin t of the scan is digit 255 - t (best first); the pivot is where the count from
        // the top first reaches `remaining`.
        const u32 count = threadIdx.x < TOPK_BINS ? bins[TOPK_BINS - 1 - threadIdx.x] : 0u;
        u32 total = 0;
        const u32 above = block_exclusive_sum<BLOCK_THREADS>(count, warp_totals, &total);
        if (threadIdx.x < TOPK_BINS && above < remaining && above + count >= remaining) {
            pivot_digit = TOPK_BINS - 1 - threadIdx.x;
            pivot_left = remaining - above;
        }
        __syncthreads();
        prefix |= pivot_digit << shift;
        mask |= (u64)(TOPK_BINS - 1) << shift;
        remaining = pivot_left;
        __syncthreads();  // pivot_* are rewritten by the next digit
    }
    if (threadIdx.x == 0) {
        state[TOPK_SLOT_THRESHOLD] = prefix;
        state[TOPK_SLOT_SAMPLED] = 1;
    }
}

}  // namespace oxicub
