// Family batched_topk, TIER 2: a block per segment (docs/design/batched_topk.md,
// "Block tier").
namespace oxicub {

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int SORT_CAP>
__device__ __forceinline__ void bt_block(const BatchedTopKParams& p) {
    typedef typename Key::Bits Bits;
    __shared__ u64 ranks[SORT_CAP];
    __shared__ u64 indices[SORT_CAP];
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool stable = (p.flags & BT_STABLE) != 0;
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    const u64 count = bt_bin_count(p, BT_TIER_BLOCK);
    for (u64 at = blockIdx.x; at < count; at += gridDim.x) {
        const u64 seg = bt_bin_segment(p, BT_TIER_BLOCK, at);
        u64 begin, size, written;
        u32 dir;
        if (!bt_descriptor(p, seg, BT_TIER_BLOCK, &begin, &size, &written, &dir)) {
            continue;  // block-uniform
        }
        const u32 n = pow2_at_least(size);  // size <= block_max_size <= SORT_CAP
        for (u32 j = threadIdx.x; j < n; j += BLOCK_THREADS) {
            const bool item = (u64)j < size;
            ranks[j] = item ? bt_rank<Key>(keys[begin + j], dir) : 0;
            indices[j] = item ? (u64)j : BT_PAD;
        }
        __syncthreads();
        block_sort_pairs<BLOCK_THREADS>(ranks, indices, n, BtSelectionOrder{prefer_larger});
        if (stable && prefer_larger) {
            // The first `written` entries are the set; lay them out with equal keys by index.
            const u32 m = pow2_at_least(written);
            for (u32 j = (u32)written + threadIdx.x; j < m; j += BLOCK_THREADS) {
                indices[j] = BT_PAD;
            }
            __syncthreads();
            block_sort_pairs<BLOCK_THREADS>(ranks, indices, m, BtSelectionOrder{false});
        }
        for (u32 j = threadIdx.x; (u64)j < written; j += BLOCK_THREADS) {
            bt_write<Key, VALUE_BYTES>(p, begin, indices[j], seg * p.out_stride + j);
        }
        __syncthreads();  // the shared arrays are reused by the next segment
    }
}

}  // namespace oxicub
