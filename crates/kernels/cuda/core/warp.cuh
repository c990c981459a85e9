// oxicub core: warp-wide primitives (a converged warp unless a mask is given).
namespace oxicub {

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

// The exclusive prefix sum of `v` over each group of WIDTH lanes (16 or 32; `lane` the lane
// in the warp): log2(WIDTH) shuffles. Where each lane's candidates go: a shared-memory atomic
// on one counter is serialised over the lanes (16 or 32 passes through the shared-memory
// pipeline, the kernel's busiest unit).
template <u32 WIDTH>
__device__ __forceinline__ u32 warp_exclusive_sum(u32 v, u32 lane) {
    u32 inclusive = v;
#pragma unroll
    for (u32 d = 1; d < WIDTH; d <<= 1) {
        const u32 other = __shfl_up_sync(0xFFFFFFFFu, inclusive, d, WIDTH);
        inclusive += (lane & (WIDTH - 1)) >= d ? other : 0u;
    }
    return inclusive - v;
}

// `v` of every lane sorted descending within each group of WIDTH lanes (16 or 32): lane i of
// a group gets the group's (i+1)-th largest. A bitonic network; in a block of `size` lanes
// sorted one way, the lower lane of each pair keeps the maximum when the block sorts
// descending (its `size` bit clear; every block of the last stage, size = WIDTH).
template <u32 WIDTH>
__device__ __forceinline__ u32 warp_sort_desc(u32 v, u32 lane) {
#pragma unroll
    for (u32 size = 2; size <= WIDTH; size <<= 1) {
#pragma unroll
        for (u32 j = size >> 1; j > 0; j >>= 1) {
            const u32 other = __shfl_xor_sync(0xFFFFFFFFu, v, (int)j);
            const bool keep_max =
                size == WIDTH ? (lane & j) == 0 : ((lane & j) == 0) == ((lane & size) == 0);
            v = keep_max ? max(v, other) : min(v, other);
        }
    }
    return v;
}

// The largest `x` of the warp, in every lane.
__device__ __forceinline__ u32 warp_max(u32 x) {
#if __CUDA_ARCH__ >= 800
    return __reduce_max_sync(0xFFFFFFFFu, x);
#else
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        x = max(x, __shfl_xor_sync(0xFFFFFFFFu, x, offset));
    }
    return x;
#endif
}

// The sum of `x` over the warp, in every lane.
__device__ __forceinline__ u32 warp_sum(u32 x) {
#if __CUDA_ARCH__ >= 800
    return __reduce_add_sync(0xFFFFFFFFu, x);
#else
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        x += __shfl_xor_sync(0xFFFFFFFFu, x, offset);
    }
    return x;
#endif
}

// The lowest of the warp's `low` and the highest of its `high`, in every lane.
template <class R>
__device__ __forceinline__ void warp_range(R& low, R& high) {
#pragma unroll
    for (u32 offset = 16; offset > 0; offset >>= 1) {
        const R l = __shfl_xor_sync(0xFFFFFFFFu, low, offset);
        const R h = __shfl_xor_sync(0xFFFFFFFFu, high, offset);
        low = l < low ? l : low;
        high = h > high ? h : high;
    }
}

}  // namespace oxicub
