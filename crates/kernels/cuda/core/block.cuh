// oxicub core: block-wide scans (every thread of the block calls them).
namespace oxicub {

// Exclusive sum of `x` over the block (u32 or u64; several narrow counters packed in one word
// add lane-wise as long as no sum overflows its field); every thread of the block must call it.
// `warp_totals` is shared memory of BLOCK_THREADS / 32 words; `*total` gets the block's sum.
template <u32 BLOCK_THREADS, class T>
__device__ __forceinline__ T block_exclusive_sum(T x, T* warp_totals, T* total) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    const T inclusive = warp_inclusive_sum(x);
    if (lane == 31u) {
        warp_totals[warp] = inclusive;
    }
    __syncthreads();
    // Every warp scans the warp totals (lane w holds warp w's): a few shuffles instead of a
    // loop over them per thread.
    constexpr u32 WARPS = BLOCK_THREADS / 32;
    static_assert(WARPS <= 32, "one lane per warp");
    const T t = lane < WARPS ? warp_totals[lane] : (T)0;
    T scan = t;
#pragma unroll
    for (u32 offset = 1; offset < WARPS; offset <<= 1) {
        const T y = __shfl_up_sync(0xFFFFFFFFu, scan, offset);
        scan += lane >= offset ? y : (T)0;
    }
    const T below = __shfl_sync(0xFFFFFFFFu, scan - t, warp);
    *total = __shfl_sync(0xFFFFFFFFu, scan, WARPS - 1);
    __syncthreads();
    return below + inclusive - x;
}

// Exclusive scan of 0/1 flags over the block; every thread of the block must call it.
// `warp_totals` is shared memory of BLOCK_THREADS / 32 words; `*total` gets the block's count.
template <u32 BLOCK_THREADS>
__device__ __forceinline__ u32 block_flag_scan(bool flag, u32* warp_totals, u32* total) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    const u32 ballot = __ballot_sync(0xFFFFFFFFu, flag);
    const u32 below = __popc(ballot & ((1u << lane) - 1u));
    if (lane == 0) {
        warp_totals[warp] = __popc(ballot);
    }
    __syncthreads();
    u32 offset = 0;
    u32 sum = 0;
    for (u32 w = 0; w < BLOCK_THREADS / 32; ++w) {
        const u32 t = warp_totals[w];
        offset += (w < warp) ? t : 0u;
        sum += t;
    }
    __syncthreads();
    *total = sum;
    return offset + below;
}

}  // namespace oxicub
