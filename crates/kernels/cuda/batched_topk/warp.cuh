// Family batched_topk, TIER 1 ("Warp tier"): the tier's entry, its direct paths (every
// segment alike) and its walk over the warp bin's list.
namespace oxicub {

// The direct path (every segment alike, checked on the host) for keys of at most 32 bits,
// segment numbers and the stride below 2^32 (checked by the caller), so the loop state is
// 32-bit: the bin, size, k, direction and load width are decided once, and each warp loads
// its next segment's keys before ranking the current one (two buffers in turn), so the loads
// of one segment are in flight while the warp works on the previous one. The segments the
// fast path declines are marked in a mask and done after each run of 32, outside the loop
// that holds the next segment's keys in registers.
template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int ITEMS, bool VECTOR>
__device__ __forceinline__ void bt_warp_direct(const BatchedTopKParams& p, u32 size, u32 written) {
    typedef typename Key::Bits Bits;
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = gridDim.x * (BLOCK_THREADS / 32);
    const u32 count = (u32)p.num_segments;
    const u32 stride = (u32)p.stride;
    const u32 dir = p.direction_value;
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    for (u32 run = blockIdx.x * (BLOCK_THREADS / 32) + (threadIdx.x >> 5); run < count;
         run += 32 * warps) {
        const u32 end = count - run > 32 * warps ? run + 32 * warps : count;
        u32 declined = 0;
        u32 bit = 1;
        u32 seg = run;
        u32 a[ITEMS];
        u32 b[ITEMS];
        bt_warp_load<Key, ITEMS, VECTOR>(keys + (u64)seg * stride, size, lane, a);
        while (true) {
            bool more = seg + warps < end;
            if (more) {
                bt_warp_load<Key, ITEMS, VECTOR>(keys + (u64)(seg + warps) * stride, size, lane, b);
            }
            if (!bt_warp32_segment<Key, VALUE_BYTES, ITEMS, VECTOR>(p, seg, (u64)seg * stride,
                                                                    size, written, dir, a)) {
                declined |= bit;
            }
            bit <<= 1;
            seg += warps;
            if (!more) {
                break;
            }
            more = seg + warps < end;
            if (more) {
                bt_warp_load<Key, ITEMS, VECTOR>(keys + (u64)(seg + warps) * stride, size, lane, a);
            }
            if (!bt_warp32_segment<Key, VALUE_BYTES, ITEMS, VECTOR>(p, seg, (u64)seg * stride,
                                                                    size, written, dir, b)) {
                declined |= bit;
            }
            bit <<= 1;
            seg += warps;
            if (!more) {
                break;
            }
        }
        while (declined != 0) {  // warp-uniform
            const u32 at = run + (u32)(__ffs(declined) - 1) * warps;
            declined &= declined - 1;
            bt_warp32_slow<Key, VALUE_BYTES, ITEMS>(p, at, (u64)at * stride, size, written, dir);
        }
    }
}

// The direct path for full segments of 32 * ITEMS 4-byte keys (ITEMS 4 or 8, vector loads in
// runs of 4 keys: bt_half_load), `written` <= 16, direction DIR: a pair of segments per warp
// (2P and 2P + 1, one per half, bt_warp32_pair).
// The next pair's keys are loaded as soon as the current pair's are ranked, so they are in
// flight through the whole pair (threshold, counts, appends, ranking, writes); keys and ranks
// are then live at once, which the split candidate entries (bt_append_if) make room for. The
// pair after next is prefetched into L2 at the same time.
// The halves declined are marked in a mask and done after each run of at most 15 pairs, a warp
// per segment (bt_warp32_slow). The mask starts as a sentinel bit that each pair shifts up by
// two (bt_warp32_pair): a run ends when the sentinel nears the top, and no per-run count, end
// or shift is carried through the loop (the block's `end` is fixed for the whole call): a
// loop that loaded after the appends and carried those kept ~12 values a pair in local memory;
// this one has none (docs/design/batched_topk.md, "Warp tier").
template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int ITEMS, u32 DIR>
__device__ __forceinline__ void bt_warp_direct_pairs(const BatchedTopKParams& p, u32 size,
                                                     u32 written) {
    constexpr int H = 2 * ITEMS;
    typedef typename Key::Bits Bits;
    const u32 lane = threadIdx.x & 31u;
    const u32 half = lane >> 4;
    const u32 hl = lane & 15u;
    constexpr u32 WARPS = BLOCK_THREADS / 32;
    const u32 count = (u32)p.num_segments;
    const u32 stride = (u32)p.stride;
    const u32 dir = DIR;
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    // Block b takes a contiguous range of the pairs (the caller keeps count + 32 * warps below
    // 2^32), the first `pairs % gridDim.x` blocks one more (placed round robin, so spread over
    // the SMs: 65536 rows, 528 blocks, each SM 248 or 249 pairs), and its warp w takes pairs
    // first + w, first + w + WARPS, ...: the block's reads move through its range together.
    // Interleaved pairs (all the warps reading one window of the rows that moves through the
    // whole buffer) and a contiguous range per warp were both slower
    // (docs/design/batched_topk.md, "Tried and dropped").
    const u32 pairs = count / 2u + (count & 1u);
    const u32 per_block = pairs / gridDim.x;
    const u32 extra = pairs % gridDim.x;
    const u32 first = blockIdx.x * per_block + min(blockIdx.x, extra);
    const u32 end = first + per_block + (blockIdx.x < extra ? 1u : 0u);
    u32 pair = first + (threadIdx.x >> 5);
    while (pair < end) {
        u32 declined = 1;  // the sentinel: at bit 2i before the run's i-th pair
        u32 raw[H];
        // The last pair of an odd count has no second segment: its half loads the last
        // segment again (valid memory, no branch around the loads) and writes nothing.
        bt_half_load<H / 4>(keys + (u64)min(2 * pair + half, count - 1) * stride, hl, raw);
        while (true) {
            u32 rank[H];
            const u32 m = bt_rank32_lane<Key, H, true>(raw, 0, size, dir, rank);
            const u32 next = pair + WARPS;
            // At most 15 pairs a run: the last one moves the sentinel to bit 30.
            const bool more = next < end && declined < (1u << 28);
            if (more) {
                bt_half_load<H / 4>(keys + (u64)min(2 * next + half, count - 1) * stride, hl, raw);
                // The pair after next into L2, one bulk prefetch a row by the half's first
                // lane (the registers hold only the next pair). A prefetch.global.L2 per
                // 128-byte line was slower: 16 instructions a pair, not 2
                // (docs/design/batched_topk.md, "Warp tier").
                const u32 after = 2 * (next + WARPS) + half;
                if (hl == 0u && next + WARPS < end && after < count) {
                    prefetch_l2(keys + (u64)after * stride, size * (u32)sizeof(Bits));
                }
            }
            const u32 seg = 2 * pair + half;
            bt_warp32_pair<Key, VALUE_BYTES, H>(p, seg, stride, written, seg < count, m, rank, dir,
                                                declined);
            if (!more) {
                break;
            }
            pair = next;
        }
        // `pair` is the run's last pair; bits 2j and 2j + 1 are the halves of the pair j
        // before it.
        u32 mask = declined ^ (1u << (31u - (u32)__clz(declined)));
        while (mask != 0) {  // warp-uniform
            const u32 bit = (u32)(__ffs(mask) - 1);
            mask &= mask - 1;
            const u32 at = 2 * (pair - (bit >> 1) * WARPS) + (bit & 1u);
            bt_warp32_slow<Key, VALUE_BYTES, ITEMS>(p, at, (u64)at * stride, size, written, dir);
        }
        pair += WARPS;
    }
}

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int ITEMS>
__device__ __forceinline__ void bt_warp(const BatchedTopKParams& p) {
    typedef typename Key::Bits Bits;
    const u32 lane = threadIdx.x & 31u;
    const u64 warps_per_block = BLOCK_THREADS / 32;
    const u64 total_warps = (u64)gridDim.x * warps_per_block;
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    if constexpr (sizeof(Bits) <= 4) {
        const u64 warps = total_warps;
        if ((p.flags & SEGMENT_DIRECT) && p.stride <= 0xFFFFFFFFull && warps <= 0xFFFFFFull &&
            p.num_segments <= 0xFFFFFFFFull - 32 * warps) {
            const u64 size = p.size_value;
            const u64 written = p.k_value < size ? p.k_value : size;
            if (written == 0 || bt_bin(p, size, written) != BT_TIER_WARP) {
                return;
            }
            // Every segment's start is keys + seg * stride: aligned when the first and the
            // stride are.
            const u64 stride_bytes = p.stride * sizeof(Bits);
            if (bt_warp_vector<Key, ITEMS>(keys, size) &&
                (stride_bytes & (ITEMS == 2 ? 7u : 15u)) == 0) {
                if constexpr (ITEMS % 4 == 0 && sizeof(Bits) == 4) {
                    // Two segments per warp pay off when every warp gets several pairs; with
                    // fewer ([16384x256]: ~2 per warp) the exposed load latency of each pair
                    // costs more than the halved instructions save, and loading the next pair
                    // a whole pair ahead is no faster there than a warp per segment
                    // (docs/design/batched_topk.md, "Warp tier").
                    if (written <= 16 && p.num_segments >= 8 * warps) {
                        // The direction as a constant: the rank is then one shift and one
                        // three-input logic operation per key (a runtime flip takes a third).
                        if (p.direction_value != 0) {
                            bt_warp_direct_pairs<Key, BLOCK_THREADS, VALUE_BYTES, ITEMS, 1>(
                                p, (u32)size, (u32)written);
                        } else {
                            bt_warp_direct_pairs<Key, BLOCK_THREADS, VALUE_BYTES, ITEMS, 0>(
                                p, (u32)size, (u32)written);
                        }
                        return;
                    }
                }
                bt_warp_direct<Key, BLOCK_THREADS, VALUE_BYTES, ITEMS, true>(p, (u32)size,
                                                                              (u32)written);
            } else {
                bt_warp_direct<Key, BLOCK_THREADS, VALUE_BYTES, ITEMS, false>(p, (u32)size,
                                                                               (u32)written);
            }
            return;
        }
    }
    const u64 count = bt_bin_count(p, BT_TIER_WARP);
    for (u64 at = (u64)blockIdx.x * warps_per_block + (threadIdx.x >> 5); at < count;
         at += total_warps) {
        const u64 seg = bt_bin_segment(p, BT_TIER_WARP, at);
        u64 begin, size, written;
        u32 dir;
        if (!bt_descriptor(p, seg, BT_TIER_WARP, &begin, &size, &written, &dir)) {
            continue;  // warp-uniform: every lane reads the same descriptor
        }
        if constexpr (sizeof(Bits) <= 4) {
            const Bits* src = keys + begin;
            u32 raw[ITEMS];
            bool done;
            if (bt_warp_vector<Key, ITEMS>(src, size)) {
                bt_warp_load<Key, ITEMS, true>(src, (u32)size, lane, raw);
                done = bt_warp32_segment<Key, VALUE_BYTES, ITEMS, true>(p, seg, begin, (u32)size,
                                                                       (u32)written, dir, raw);
            } else {
                bt_warp_load<Key, ITEMS, false>(src, (u32)size, lane, raw);
                done = bt_warp32_segment<Key, VALUE_BYTES, ITEMS, false>(p, seg, begin, (u32)size,
                                                                        (u32)written, dir, raw);
            }
            if (!done) {
                bt_warp32_slow<Key, VALUE_BYTES, ITEMS>(p, seg, begin, (u32)size, (u32)written,
                                                        dir);
            }
        } else {
            bt_warp_general<Key, VALUE_BYTES, ITEMS>(p, seg, begin, size, written, dir);
        }
    }
}

}  // namespace oxicub
