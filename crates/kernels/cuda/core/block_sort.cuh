// oxicub core: bitonic sorts in shared memory by the whole block, in the order a comparator
// (a template argument, so the compare is inlined) defines.
namespace oxicub {

// Sorts the entries (ranks[i], indices[i]), i in [0, n) (n a power of two), so that entry a
// comes before entry b exactly when before(rank_a, index_a, rank_b, index_b) (a strict total
// order). Every thread of the block calls it; it ends in a block barrier.
template <u32 BLOCK_THREADS, class Before>
__device__ __forceinline__ void block_sort_pairs(u64* ranks, u64* indices, u32 n, Before before) {
    for (u32 size = 2; size <= n; size <<= 1) {
        for (u32 half = size >> 1; half > 0; half >>= 1) {
            for (u32 i = threadIdx.x; i < n; i += BLOCK_THREADS) {
                const u32 partner = i ^ half;
                if (partner > i) {
                    const bool best_first = (i & size) == 0;
                    const u64 ra = ranks[i], ia = indices[i];
                    const u64 rb = ranks[partner], ib = indices[partner];
                    const bool swap = best_first ? before(rb, ib, ra, ia) : before(ra, ia, rb, ib);
                    if (swap) {
                        ranks[i] = rb;
                        indices[i] = ib;
                        ranks[partner] = ra;
                        indices[partner] = ia;
                    }
                }
            }
            __syncthreads();
        }
    }
}

// The smallest power of two at least n (1 for n <= 1).
__device__ __forceinline__ u32 pow2_at_least(u64 n) {
    u32 p = 1;
    while ((u64)p < n) {
        p <<= 1;
    }
    return p;
}

// The descending order of u64 keys, as block_sort_keys's comparator: `misplaced(a, b, forward)`
// says whether a key `a` below a key `b` must be swapped, in a run sorted in this order
// (forward) or in reverse.
struct KeysDescending {
    __device__ __forceinline__ bool misplaced(u64 a, u64 b, bool forward) const {
        return forward ? a < b : a > b;
    }
};

// Sorts n (a power of two) u64 keys in shared memory into the order `order` defines (its
// `misplaced`, as KeysDescending's; a key packing its tie-break makes the order total). Every
// thread of the block calls it; it ends in a block barrier.
template <u32 BLOCK_THREADS, class Order>
__device__ __forceinline__ void block_sort_keys(u64* keys, u32 n, Order order) {
    for (u32 size = 2; size <= n; size <<= 1) {
        for (u32 half = size >> 1; half > 0; half >>= 1) {
            for (u32 q = threadIdx.x; q < n / 2; q += BLOCK_THREADS) {
                const u32 i = ((q & ~(half - 1u)) << 1) | (q & (half - 1u));
                const u32 partner = i + half;
                const bool forward = (i & size) == 0;
                const u64 a = keys[i];
                const u64 b = keys[partner];
                if (order.misplaced(a, b, forward)) {
                    keys[i] = b;
                    keys[partner] = a;
                }
            }
            __syncthreads();
        }
    }
}

}  // namespace oxicub
