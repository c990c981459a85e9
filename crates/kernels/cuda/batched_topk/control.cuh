// Family batched_topk, TIER 0: the control stages (INIT, RESOLVE, FINALIZE, or the three fused;
// FILL; a long-row split's CHUNK_OFFSET;
// docs/design/batched_topk.md, "Control stages").
namespace oxicub {

// Element `at` of an array of `bytes`-wide elements at `base` set to the low bits of `bits`.
__device__ __forceinline__ void bt_store_bits(u64 base, u64 at, u32 bytes, u64 bits) {
    switch (bytes) {
        case 1: reinterpret_cast<u8*>(base)[at] = (u8)bits; break;
        case 2: reinterpret_cast<u16*>(base)[at] = (u16)bits; break;
        case 4: reinterpret_cast<u32*>(base)[at] = (u32)bits; break;
        default: reinterpret_cast<u64*>(base)[at] = bits; break;
    }
}

// RESOLVE for segments first, first + stride, ...: describes, checks and bins each, and adds
// the valid sizes to the total. Every thread of the block calls it (it has block barriers).
__device__ __forceinline__ void bt_control_resolve(const BatchedTopKParams& p, u64* status,
                                                   u64 first, u64 stride) {
    const u64 count = status[SEGMENT_STATUS_COUNT];
    __shared__ u64 block_total;
    if (threadIdx.x == 0) {
        block_total = 0;
    }
    __syncthreads();
    u64* bins = reinterpret_cast<u64*>(p.bins);
    for (u64 seg = first; seg < count; seg += stride) {
        u64 begin = 0, size = 0, written = 0;
        u32 dir = 0;
        i64 value = 0;
        const u32 code = bt_resolve(p, seg, &begin, &size, &written, &dir, &value);
        segment_describe(p, seg, begin, size, written, (u64)dir, code == 0);
        if (code != 0) {
            atomicMin(&status[SEGMENT_STATUS_VIOLATION], (seg << 8) | (u64)code);
        } else {
            atomicAdd(&block_total, size);
        }
        // Append to the bin's list: one atomic per warp and bin (BT_LISTS = no bin).
        const u32 mine = (code == 0 && written != 0) ? bt_bin_index(bt_bin(p, size, written))
                                                     : BT_LISTS;
        segment_list_append<BT_LISTS, BtLists>(p, status, bins, mine, __activemask(), seg);
    }
    __syncthreads();
    if (threadIdx.x == 0 && block_total != 0) {
        atomicAdd(&status[BT_STATUS_TOTAL], block_total);
    }
}

// FINALIZE, by one thread: the offending value of the reported segment; the total's check.
__device__ __forceinline__ void bt_control_finalize(const BatchedTopKParams& p, u64* status) {
    const u64 violation = status[SEGMENT_STATUS_VIOLATION];
    if (violation != ~0ull) {
        u64 begin = 0, size = 0, written = 0;
        u32 dir = 0;
        i64 value = 0;
        bt_resolve(p, violation >> 8, &begin, &size, &written, &dir, &value);
        status[SEGMENT_STATUS_VALUE] = (u64)value;
    }
    const u64 total = status[BT_STATUS_TOTAL];
    if (total < p.total_min || total > p.total_max) {
        status[BT_STATUS_TOTAL_BAD] = 1;
    }
}

__device__ __forceinline__ void bt_control(const BatchedTopKParams& p, u32 block_threads) {
    u64* status = reinterpret_cast<u64*>(p.status);
    if (p.stage == BT_STAGE_INIT) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            segment_status_init(p, status, BT_STATUS_WORDS);
        }
        return;
    }
    if (p.stage == BT_STAGE_FILL) {
        // A direct call has no status words: its count is the host's.
        const u64 segments = p.status != 0 ? status[SEGMENT_STATUS_COUNT] : p.num_segments;
        const u32 lane = threadIdx.x & 31u;
        const u64 warps = grid_threads(block_threads) >> 5;
        const u32 key_bytes = p.fill_widths & 0xFFu;
        const u32 value_bytes = p.fill_widths >> 8;
        for (u64 seg = global_thread_index(block_threads) >> 5; seg < segments; seg += warps) {
            u64 begin = 0, size = 0, written = 0;
            u32 dir = 0;
            i64 value = 0;
            if (bt_resolve(p, seg, &begin, &size, &written, &dir, &value) != 0) {
                continue;  // an invalid segment writes nothing
            }
            for (u64 j = written + lane; j < p.fill_end; j += 32) {
                const u64 at = seg * p.out_stride + j;
                bt_store_bits(p.out_keys, at, key_bytes, p.fill_key);
                if (value_bytes != 0) {
                    bt_store_bits(p.out_values, at, value_bytes, p.fill_value);
                }
            }
        }
        return;
    }
    if (p.stage == BT_STAGE_CHUNK_OFFSET) {
        // A long-row split's candidates, k_value per chunk: candidate q belongs to chunk
        // q / k_value, the (q / k_value) % chunks_per_segment-th of its row, whose keys start
        // that many chunk_items into the row (docs/design/batched_topk.md, "Long rows").
        const u32 value_bytes = p.fill_widths >> 8;
        const u64 stride = grid_threads(block_threads);
        for (u64 q = global_thread_index(block_threads); q < p.num_keys; q += stride) {
            const u64 offset = ((q / p.k_value) % p.chunks_per_segment) * p.chunk_items;
            if (value_bytes == 4) {
                reinterpret_cast<u32*>(p.out_values)[q] += (u32)offset;
            } else {
                reinterpret_cast<u64*>(p.out_values)[q] += offset;
            }
        }
        return;
    }
    if (p.stage == BT_STAGE_RESOLVE) {
        bt_control_resolve(p, status, global_thread_index(block_threads),
                           grid_threads(block_threads));
        return;
    }
    if (p.stage == BT_STAGE_FINALIZE) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            bt_control_finalize(p, status);
        }
        return;
    }
    if (p.stage == BT_STAGE_CONTROL) {
        // The three stages in one block: __syncthreads orders the block's global writes and
        // atomics for its own threads, so no launch boundary is needed between them.
        if (threadIdx.x == 0) {
            segment_status_init(p, status, BT_STATUS_WORDS);
        }
        __syncthreads();
        bt_control_resolve(p, status, threadIdx.x, block_threads);
        __syncthreads();
        if (threadIdx.x == 0) {
            bt_control_finalize(p, status);
        }
        return;
    }
}

}  // namespace oxicub
