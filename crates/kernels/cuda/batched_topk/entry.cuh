// Family batched_topk: the entry of every instantiation, by TIER (and, for the stream tier,
// by PART).
namespace oxicub {

// PART 1: the filter (BT_STREAM_FILTER_THREADS threads); PART 2: the final selection; PART 3:
// both in one launch, a cluster per segment.
template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int K_CAP, int PART>
__device__ __forceinline__ void bt_stream(const BatchedTopKParams& p) {
    typedef typename BtRankWord<sizeof(typename Key::Bits)>::Type R;
    constexpr u32 WARPS = BLOCK_THREADS / 32;
    __shared__ BtStreamState<R, WARPS> s;
    if constexpr (PART == BT_STREAM_PART_FILTER) {
        static_assert(BLOCK_THREADS == BT_STREAM_FILTER_THREADS, "the filter's regions");
        // The sample bins and the batch stage share their words: the sample's select ends in a
        // block barrier before any warp stages a batch, and a work item that draws a sample
        // clears the bins again after a block barrier (static shared memory stays below
        // 48 KiB for 8-byte keys too).
        constexpr u32 STAGE_VECTORS = WARPS * BtStreamBatch<typename Key::Bits>::UNROLL * 32u;
        constexpr u32 BIN_VECTORS = BtSampleBins<R>::ALLOCATED / 4u;
        __shared__ uint4 words[STAGE_VECTORS > BIN_VECTORS ? STAGE_VECTORS : BIN_VECTORS];
        bt_stream_filter<Key, BLOCK_THREADS, VALUE_BYTES>(p, s, reinterpret_cast<u32*>(words),
                                                          words);
    } else if constexpr (PART == BT_STREAM_PART_FINAL) {
        bt_stream_final<Key, BLOCK_THREADS, VALUE_BYTES>(p, s);
    } else {
        bt_stream_cluster<Key, BLOCK_THREADS, VALUE_BYTES>(p, s);
    }
}

template <class Key, u32 BLOCK_THREADS, int TIER, int VALUE_BYTES, int ITEMS, int SORT_CAP>
__device__ __forceinline__ void batched_topk(const BatchedTopKParams& params) {
    static_assert(BLOCK_THREADS % 32 == 0, "block size");
    if constexpr (TIER == BT_KERNEL_CONTROL) {
        bt_control(params, BLOCK_THREADS);
    } else if constexpr (TIER == BT_KERNEL_WARP) {
        static_assert(ITEMS == 1 || ITEMS == 2 || ITEMS == 4 || ITEMS == 8,
                      "warp tier: ITEMS per lane");
        static_assert(BLOCK_THREADS <= 256, "warp tier: candidates for at most 8 warps");
        bt_warp<Key, BLOCK_THREADS, VALUE_BYTES, ITEMS>(params);
    } else if constexpr (TIER == BT_KERNEL_BLOCK) {
        bt_block<Key, BLOCK_THREADS, VALUE_BYTES, SORT_CAP>(params);
    } else if constexpr (TIER == BT_KERNEL_LARGE) {
        bt_large<Key, BLOCK_THREADS, VALUE_BYTES, SORT_CAP>(params);
    } else {
        bt_stream<Key, BLOCK_THREADS, VALUE_BYTES, SORT_CAP, ITEMS>(params);
    }
}

}  // namespace oxicub
