// oxicub core: loads and stores: prefetches, bulk copies to shared memory and their mbarriers,
// the keys of a 16-byte vector, a register picked by a runtime index, a thread's words of a
// shared array as vectors.
namespace oxicub {

// A bulk prefetch of `bytes` (a multiple of 16) at `p` (16-byte aligned) into L2 (sm_90).
__device__ __forceinline__ void prefetch_l2(const void* p, u32 bytes) {
#if __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#endif
}

#if __CUDA_ARCH__ >= 900
// A CTA-scope mbarrier counting one arrival a phase (before any use, then a barrier).
__device__ __forceinline__ void mbarrier_init_one(u64* bar) {
    const u32 at = (u32)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(at) : "memory");
}

// The phase's one arrival on `bar`, which then completes once `bytes` more have landed.
__device__ __forceinline__ void mbarrier_expect_bytes(u64* bar, u32 bytes) {
    const u32 at = (u32)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(at), "r"(bytes)
                 : "memory");
}

// Waits until the phase of parity `phase` of `bar` completes; what it counted is then visible
// to this thread.
__device__ __forceinline__ void mbarrier_wait_parity(u64* bar, u32 phase) {
    const u32 at = (u32)__cvta_generic_to_shared(bar);
    asm volatile("{\n\t.reg .pred done;\n"
                 "MBAR_WAIT_%=:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
                 "@!done bra MBAR_WAIT_%=;\n}" ::"r"(at),
                 "r"(phase)
                 : "memory");
}

// A bulk copy of `bytes` (a multiple of 16) from global `src` to shared `dst` (both 16-byte
// aligned), counted on `bar`. The shared bytes' earlier generic accesses must be ordered before
// it (fence_proxy_async_shared after the block's barrier).
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, u32 bytes,
                                                    u64* bar) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
            "r"((u32)__cvta_generic_to_shared(dst)),
        "l"(src), "r"(bytes), "r"((u32)__cvta_generic_to_shared(bar))
        : "memory");
}

// Orders this thread's (and, after a barrier, the block's) generic accesses to shared memory
// before later async-proxy ones (a bulk copy into the same bytes).
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
#endif

// Key `e` of a 16-byte vector (e a compile-time constant after unrolling, so the vector stays
// in registers).
template <class Bits>
__device__ __forceinline__ Bits vector_key(const uint4& w, u32 e) {
    const u32 words[4] = {w.x, w.y, w.z, w.w};
    if constexpr (sizeof(Bits) == 8) {
        return (Bits)((u64)words[2 * e] | ((u64)words[2 * e + 1] << 32));
    } else if constexpr (sizeof(Bits) == 4) {
        return (Bits)words[e];
    } else if constexpr (sizeof(Bits) == 2) {
        return (Bits)(words[e / 2] >> (16u * (e % 2)));
    } else {
        return (Bits)(words[e / 4] >> (8u * (e % 4)));
    }
}

// a if `upper` is 0, else b. In asm: written as C++, the compiler recognises a select tree
// over an array as an indexed array and puts the array in local memory after all.
__device__ __forceinline__ u32 select_if(u32 upper, u32 a, u32 b) {
    u32 out;
    asm("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %3, 0;\n\tselp.b32 %0, %2, %1, p;\n\t}"
        : "=r"(out)
        : "r"(a), "r"(b), "r"(upper));
    return out;
}

// Word `i` (runtime) of w[FIRST, FIRST + COUNT) by a select tree of COUNT - 1 selects, no
// local memory (a runtime index into a register array would put the array there).
template <u32 FIRST, u32 COUNT, u32 N>
__device__ __forceinline__ u32 pick_word(const u32 (&w)[N], u32 i) {
    static_assert((COUNT & (COUNT - 1u)) == 0u && FIRST % COUNT == 0u, "aligned powers of two");
    if constexpr (COUNT == 1u) {
        return w[FIRST];
    } else {
        constexpr u32 HALF = COUNT / 2u;
        return select_if(i & HALF, pick_word<FIRST, HALF>(w, i),
                         pick_word<FIRST + HALF, HALF>(w, i));
    }
}

template <u32 N>
__device__ __forceinline__ u32 select_word(const u32 (&w)[N], u32 i) {
    return pick_word<0, N>(w, i);
}

// A thread's N consecutive words [tid N, (tid + 1) N) of a 16-byte aligned shared array, as
// vectors: a word at a time, lane l's word i sits N words from lane l + 1's, an N-way bank
// conflict on every access.
template <u32 N>
__device__ __forceinline__ void load_words(const u32* a, u32 (&w)[N]) {
    static_assert(N == 1 || N % 2 == 0, "whole vectors");
    if constexpr (N % 4 == 0) {
#pragma unroll
        for (u32 i = 0; i < N; i += 4) {
            const uint4 v = reinterpret_cast<const uint4*>(a)[(threadIdx.x * N + i) / 4];
            w[i] = v.x;
            w[i + 1] = v.y;
            w[i + 2] = v.z;
            w[i + 3] = v.w;
        }
    } else if constexpr (N == 2) {
        const uint2 v = reinterpret_cast<const uint2*>(a)[threadIdx.x];
        w[0] = v.x;
        w[1] = v.y;
    } else {
        w[0] = a[threadIdx.x];
    }
}

template <u32 N>
__device__ __forceinline__ void store_words(u32* a, const u32 (&w)[N]) {
    static_assert(N == 1 || N % 2 == 0, "whole vectors");
    if constexpr (N % 4 == 0) {
#pragma unroll
        for (u32 i = 0; i < N; i += 4) {
            reinterpret_cast<uint4*>(a)[(threadIdx.x * N + i) / 4] =
                make_uint4(w[i], w[i + 1], w[i + 2], w[i + 3]);
        }
    } else if constexpr (N == 2) {
        reinterpret_cast<uint2*>(a)[threadIdx.x] = make_uint2(w[0], w[1]);
    } else {
        a[threadIdx.x] = w[0];
    }
}

// load_words, then the words cleared (counters read once and reset for their next use).
template <u32 N>
__device__ __forceinline__ void take_words(u32* a, u32 (&w)[N]) {
    u32 zero[N];
#pragma unroll
    for (u32 i = 0; i < N; ++i) {
        zero[i] = 0;
    }
    load_words(a, w);
    store_words(a, zero);
}

}  // namespace oxicub
