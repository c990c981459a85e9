// oxicub common definitions. Compiled by NVRTC with no system or CUDA headers:
// everything used here is a builtin type or intrinsic.
namespace oxicub {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;

// Index of this thread in a 1-D grid, in 64 bits so grid-stride loops never overflow.
__device__ __forceinline__ u64 global_thread_index(u32 block_threads) {
    return (u64)blockIdx.x * (u64)block_threads + (u64)threadIdx.x;
}

// Number of threads in a 1-D grid, in 64 bits.
__device__ __forceinline__ u64 grid_threads(u32 block_threads) {
    return (u64)gridDim.x * (u64)block_threads;
}

// The unsigned word that carries a 4- or 8-byte value (or source index) through a kernel: values
// are moved as bits, never interpreted.
template <int VALUE_BYTES> struct ValuePayload { typedef u32 Type; };
template <> struct ValuePayload<8> { typedef u64 Type; };

// Warp-aggregated append: every lane of `mask` calls it; the flagged lanes get consecutive
// positions from `reserve(count)`, which the first flagged lane calls once for the warp (an
// atomic on some counter) and which returns the first reserved position.
template <class T, class Reserve>
__device__ __forceinline__ T warp_append(bool flag, u32 mask, Reserve reserve) {
    const u32 lane = threadIdx.x & 31u;
    const u32 ballot = __ballot_sync(mask, flag);
    T base = 0;
    if (ballot != 0) {
        const u32 leader = (u32)__ffs(ballot) - 1u;
        if (lane == leader) {
            base = reserve((T)__popc(ballot));
        }
        base = __shfl_sync(mask, base, (int)leader);
    }
    return base + (T)__popc(ballot & ((1u << lane) - 1u));
}

// warp_append for a converged warp and a u64 counter in global memory.
__device__ __forceinline__ u64 warp_append(bool flag, u64* counter) {
    return warp_append<u64>(flag, 0xFFFFFFFFu, [counter](u64 n) { return atomicAdd(counter, n); });
}

// Inclusive sum of `x` over the lanes of a converged warp: lane i gets the sum of lanes 0..i
// (u32, u64 or packed narrow counters, as block_exclusive_sum).
template <class T>
__device__ __forceinline__ T warp_inclusive_sum(T x) {
    const u32 lane = threadIdx.x & 31u;
#pragma unroll
    for (u32 offset = 1; offset < 32; offset <<= 1) {
        const T y = __shfl_up_sync(0xFFFFFFFFu, x, offset);
        x += lane >= offset ? y : (T)0;
    }
    return x;
}

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

// A bulk prefetch of `bytes` (a multiple of 16) at `p` (16-byte aligned) into L2 (sm_90).
__device__ __forceinline__ void prefetch_l2(const void* p, u32 bytes) {
#if __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

}  // namespace oxicub
