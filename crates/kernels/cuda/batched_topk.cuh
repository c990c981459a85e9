// Family batched_topk: top-k of many independent segments, each with its own size, k and
// direction. One template, specialised by TIER; a call launches, in stream order:
//
//   TIER 0 (control), stage INIT      one thread: the number of segments (host value, or a
//                                     deferred i64 clamped into its bounds, flagged when out of
//                                     them); resets the status words.
//   TIER 0 (control), stage RESOLVE   one thread per segment: resolves begin, size, k and
//                                     direction, makes every per-segment check (the same checks
//                                     in the same order as the host backend) and writes the
//                                     segment's descriptor; an invalid segment records
//                                     (segment << 8 | code) with atomicMin, so the smallest
//                                     invalid segment is reported, and is skipped later.
//   TIER 0 (control), stage FINALIZE  one thread: the offending value of the reported segment.
//   TIER 1 (warp)                     one warp per segment: keys in registers (ITEMS per lane).
//                                     Keys of up to 32 bits: a threshold (the k-th largest lane
//                                     maximum: a warp bitonic sort of the 32 lane maxima, or
//                                     rounds of redux max for k <= 4), the few items at or above
//                                     it appended to 32 shared-memory slots per warp (at
//                                     places from a shuffle scan of the lanes' counts) and
//                                     ranked by counting; the direct path loads a warp's next
//                                     segment before ranking the current one. Direct calls with
//                                     full segments of 128 or 256 4-byte keys and k <= 16: a
//                                     segment per half warp (2 * ITEMS keys per lane, loaded in
//                                     runs of 4 so each load is coalesced, 16 slots per half),
//                                     every collective step done for both segments at once,
//                                     the direction a compile-time constant, selected keys
//                                     written from their ranks. Segments with more than 32 (16)
//                                     such items (ties) or a threshold of rank 0: k rounds of
//                                     redux max, else (and wider keys) k rounds of a warp
//                                     arg-max over (rank, tie-break index).
//   TIER 2 (block)                    one block per segment: the segment's (rank, index) pairs
//                                     bitonic-sorted in shared memory (SORT_CAP entries).
//   TIER 3 (blocks)                   several blocks per segment: MSB-first radix select with
//                                     per-segment histograms merged on the device (stages
//                                     below), the selected indices collected, then sorted per
//                                     segment.
//   TIER 4 (stream)                   several blocks per segment, two launches: a filter that
//                                     streams each chunk once against a sampled threshold and
//                                     keeps the candidates, then a block per segment that
//                                     selects and orders them; or, for a direct call of no more
//                                     segments than clusters fit at once (sm_90), one launch of
//                                     a two-block cluster per segment that does both on chip
//                                     (batched_topk_stream.cuh).
//
// The listed layout (segments at their own device addresses, the seeds' iterator of
// iterators) is the offsets layout over a keys base of 0: begin/end are element addresses
// (address / sizeof(Key)), so `keys + begin` is the segment's own address; values, when
// copied, come from a per-segment address list (SEGMENT_VALUE_POINTERS).
//
// A direct call (SEGMENT_DIRECT: strided layout, size, k, direction and count each one host value,
// all checked on the host) launches no control stage: the tiers take the segment count and
// every segment's begin, size, k and direction from the parameters, and no status is written.
//
// RESOLVE bins the segments by compaction: each segment that writes something is appended to
// the list of its bin (bt_bin: the same predicate for every segment, from the caps in the
// parameters), so a call with mixed sizes sends each segment to exactly one tier and each
// tier walks only its own list; the several-blocks tier keeps its scratch per list position,
// sized from the TotalItems guarantee. (A direct call has one shape, hence one bin, no lists.) The rank of a key is its radix code XOR flip (all ones for min), so a
// larger rank is better; ties at the boundary are broken by index within the segment (the
// smaller unless BT_PREFER_LARGER). Indices and offsets are 64-bit.
namespace oxicub {

// The stages, flags, bins, status and descriptor words and violation codes shared with the host
// are generated from the Rust lists (segments.rs, families/batched_topk.rs) ahead of this header.

constexpr u64 BT_PAD = ~0ull;  // index of a padding entry: worse than every item


// `a` comes before `b` in the selection order: a larger rank, or an equal rank and the index
// the tie-break prefers. Padding entries come last.
__device__ __forceinline__ bool bt_better(u64 rank_a, u64 index_a, u64 rank_b, u64 index_b,
                                          bool prefer_larger) {
    if (index_a == BT_PAD) {
        return false;
    }
    if (index_b == BT_PAD) {
        return true;
    }
    if (rank_a != rank_b) {
        return rank_a > rank_b;
    }
    return prefer_larger ? index_a > index_b : index_a < index_b;
}

// Resolves segment `seg` (< the number of segments) and checks it; returns 0 or a violation
// code (with the offending value in *value).
__device__ __forceinline__ u32 bt_resolve(const BatchedTopKParams& p, u64 seg, u64* begin_out,
                                          u64* size_out, u64* written_out, u32* dir_out,
                                          i64* value) {
    const u32 f = p.flags;
    u64 begin;
    u64 size;
    if (f & SEGMENT_OFFSETS) {
        const i64 b = reinterpret_cast<const i64*>(p.begin_offsets)[seg];
        const i64 e = reinterpret_cast<const i64*>(p.end_offsets)[seg];
        if (b < 0 || b > e) {
            *value = b;
            return VIOLATION_OFFSETS_OUT_OF_ORDER;
        }
        if ((u64)e > p.num_keys) {
            *value = e;
            return VIOLATION_PAST_BUFFER;
        }
        const i64 s = e - b;
        if (s < (i64)p.size_min || s > (i64)p.size_max) {
            *value = s;
            return VIOLATION_SIZE_OUT_OF_BOUNDS;
        }
        begin = (u64)b;
        size = (u64)s;
    } else {
        const i64 s = (f & SEGMENT_SIZES_PER_SEGMENT) ? reinterpret_cast<const i64*>(p.sizes)[seg]
                                                 : (i64)p.size_value;
        if (s < (i64)p.size_min || s > (i64)p.size_max) {
            *value = s;
            return VIOLATION_SIZE_OUT_OF_BOUNDS;
        }
        if ((u64)s > p.stride) {
            *value = s;
            return VIOLATION_SIZE_ABOVE_STRIDE;
        }
        const u64 high = __umul64hi(seg, p.stride);
        const u64 b = seg * p.stride;
        const u64 e = b + (u64)s;
        if (high != 0 || e < b || e > p.num_keys) {
            const bool saturated = high != 0 || e < b || e > 0x7FFFFFFFFFFFFFFFull;
            *value = saturated ? (i64)0x7FFFFFFFFFFFFFFFll : (i64)e;
            return VIOLATION_PAST_BUFFER;
        }
        begin = b;
        size = (u64)s;
    }
    const i64 k = (f & BT_K_PER_SEGMENT) ? reinterpret_cast<const i64*>(p.ks)[seg] : (i64)p.k_value;
    if (k < (i64)p.k_min || k > (i64)p.k_max) {
        *value = k;
        return VIOLATION_K_OUT_OF_BOUNDS;
    }
    u32 dir = p.direction_value;
    if (f & BT_DIR_PER_SEGMENT) {
        const u32 d = reinterpret_cast<const u8*>(p.directions)[seg];
        if (d > 1 || ((p.direction_mask >> d) & 1u) == 0) {
            *value = (i64)d;
            return VIOLATION_DIRECTION_NOT_COMPILED;
        }
        dir = d;
    }
    *begin_out = begin;
    *size_out = size;
    *written_out = (u64)k < size ? (u64)k : size;
    *dir_out = dir;
    return 0;
}

// The bin of a segment: exactly one of the tiers this call runs.
__device__ __forceinline__ u32 bt_bin(const BatchedTopKParams& p, u64 size, u64 written) {
    if ((p.tiers & BT_TIER_WARP) && size <= p.warp_max_size && written <= p.warp_max_k) {
        return BT_TIER_WARP;
    }
    if ((p.tiers & BT_TIER_BLOCK) && size <= p.block_max_size) {
        return BT_TIER_BLOCK;
    }
    if ((p.tiers & BT_TIER_STREAM) && size <= p.stream_max_size && written <= p.stream_max_k) {
        return BT_TIER_STREAM;
    }
    return BT_TIER_LARGE;
}

// Segment `seg` of a direct call (SEGMENT_DIRECT): every value comes from the parameters, checked
// on the host (every segment is valid and alike); false when it is not in `bin` or writes
// nothing.
__device__ __forceinline__ bool bt_direct_descriptor(const BatchedTopKParams& p, u64 seg,
                                                     u32 bin, u64* begin, u64* size,
                                                     u64* written, u32* dir) {
    *begin = seg * p.stride;
    *size = p.size_value;
    *written = p.k_value < p.size_value ? p.k_value : p.size_value;
    *dir = p.direction_value;
    return *written != 0 && bt_bin(p, *size, *written) == bin;
}

// Reads a segment's descriptor; false when it is invalid, not in `bin`, or writes nothing.
__device__ __forceinline__ bool bt_descriptor(const BatchedTopKParams& p, u64 seg, u32 bin,
                                              u64* begin, u64* size, u64* written, u32* dir) {
    if (p.flags & SEGMENT_DIRECT) {
        return bt_direct_descriptor(p, seg, bin, begin, size, written, dir);
    }
    const u64* desc = reinterpret_cast<const u64*>(p.descriptors) + seg * SEGMENT_DESC_WORDS;
    const u64 flags = desc[3];
    if ((flags & SEGMENT_DESC_VALID) == 0) {
        return false;
    }
    *begin = desc[0];
    *size = desc[1];
    *written = desc[2];
    *dir = (u32)(flags & 1u);
    return *written != 0 && bt_bin(p, *size, *written) == bin;
}

template <class Key>
__device__ __forceinline__ u64 bt_rank(typename Key::Bits raw, u32 dir) {
    typedef typename Key::Bits Bits;
    const Bits flip = dir ? (Bits)~(Bits)0 : (Bits)0;
    return (u64)(Bits)(Key::to_radix(raw) ^ flip);
}

// Writes the value of the item at index `index` of the segment starting at `begin` to output
// slot `slot` (nothing for keys only).
template <int VALUE_BYTES>
__device__ __forceinline__ void bt_write_value(const BatchedTopKParams& p, u64 begin, u64 index,
                                               u64 slot) {
    typedef typename ValuePayload<VALUE_BYTES>::Type Payload;
    if (VALUE_BYTES != 0) {
        Payload payload;
        if (p.flags & BT_VALUES_ARE_INDEX) {
            payload = (Payload)index;
        } else if (p.flags & SEGMENT_VALUE_POINTERS) {
            // Listed layout: each segment's values have their own address. Every caller
            // writes slot seg * out_stride + j with j < out_stride, so the segment is the
            // quotient (a division only on this path; writes are k per segment).
            const u64 seg = slot / p.out_stride;
            const Payload* values =
                reinterpret_cast<const Payload*>(reinterpret_cast<const u64*>(p.values)[seg]);
            payload = values[index];
        } else {
            payload = reinterpret_cast<const Payload*>(p.values)[begin + index];
        }
        reinterpret_cast<Payload*>(p.out_values)[slot] = payload;
    }
}

// Writes the item at index `index` of the segment starting at `begin` to output slot `slot`.
template <class Key, int VALUE_BYTES>
__device__ __forceinline__ void bt_write(const BatchedTopKParams& p, u64 begin, u64 index,
                                         u64 slot) {
    typedef typename Key::Bits Bits;
    reinterpret_cast<Bits*>(p.out_keys)[slot] =
        reinterpret_cast<const Bits*>(p.keys)[begin + index];
    bt_write_value<VALUE_BYTES>(p, begin, index, slot);
}

// bt_write for an item whose rank (bt_rank for direction `dir`) is known: the key is rebuilt
// from it, not read, except a float NaN (every NaN has one rank; the output keeps the input's
// bits).
template <class Key, int VALUE_BYTES, class R>
__device__ __forceinline__ void bt_write_ranked(const BatchedTopKParams& p, u64 begin, u64 index,
                                                u64 slot, R rank, u32 dir) {
    typedef typename Key::Bits Bits;
    const Bits code = (Bits)((Bits)rank ^ (dir ? (Bits)~(Bits)0 : (Bits)0));
    if (Key::KEY_KIND == KIND_FLOAT && code == Key::ALL_ONES) {
        bt_write<Key, VALUE_BYTES>(p, begin, index, slot);
        return;
    }
    reinterpret_cast<Bits*>(p.out_keys)[slot] = Key::from_radix(code);
    bt_write_value<VALUE_BYTES>(p, begin, index, slot);
}

__device__ __forceinline__ u64 bt_count(const BatchedTopKParams& p) {
    if (p.flags & SEGMENT_DIRECT) {
        return p.num_segments;
    }
    return reinterpret_cast<const u64*>(p.status)[SEGMENT_STATUS_COUNT];
}

// Binning by compaction: RESOLVE appends every segment that writes something to the list of
// its bin (p.bins: the warp list and the block list, each p.bin_capacity long, then the large
// list, p.large_capacity long, then the stream list, p.stream_capacity long), so a tier walks
// only its own segments and the tiers with scratch per segment (large, stream) index it by the
// position in their list (sized from the TotalItems guarantee, not from the number of
// segments). A direct call has no lists: every segment is in the one bin its shape selects.
__device__ __forceinline__ u32 bt_bin_index(u32 bin) {
    return bin == BT_TIER_WARP ? 0u
        : (bin == BT_TIER_BLOCK ? 1u : (bin == BT_TIER_LARGE ? 2u : 3u));
}

// The capacity of list `index` (bt_bin_index): the large and stream lists are sized from
// TotalItems.
__device__ __forceinline__ u64 bt_list_capacity(const BatchedTopKParams& p, u32 index) {
    return index == 2u ? p.large_capacity : (index == 3u ? p.stream_capacity : p.bin_capacity);
}

// Where list `index` starts in p.bins.
__device__ __forceinline__ u64 bt_list_start(const BatchedTopKParams& p, u32 index) {
    return (u64)(index < 2u ? index : 2u) * p.bin_capacity + (index == 3u ? p.large_capacity : 0ull);
}

// The number of segments in `bin` (a tier reads it after RESOLVE, in stream order).
__device__ __forceinline__ u64 bt_bin_count(const BatchedTopKParams& p, u32 bin) {
    if (p.flags & SEGMENT_DIRECT) {
        return p.num_segments;  // bt_descriptor still skips them when the shape is not `bin`
    }
    const u64 appended =
        reinterpret_cast<const u64*>(p.status)[SEGMENT_STATUS_LISTS + bt_bin_index(bin)];
    const u64 capacity = bt_list_capacity(p, bt_bin_index(bin));
    // Past the capacity only when the TotalItems guarantee is broken (reported).
    return appended < capacity ? appended : capacity;
}

// The segment at position `i` of `bin`'s list.
__device__ __forceinline__ u64 bt_bin_segment(const BatchedTopKParams& p, u32 bin, u64 i) {
    if (p.flags & SEGMENT_DIRECT) {
        return i;
    }
    return reinterpret_cast<const u64*>(p.bins)[bt_list_start(p, bt_bin_index(bin)) + i];
}

// ---- Tier 0: control stages ----

__device__ __forceinline__ void bt_control(const BatchedTopKParams& p, u32 block_threads) {
    u64* status = reinterpret_cast<u64*>(p.status);
    if (p.stage == BT_STAGE_INIT) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            u64 count = p.num_segments;
            status[SEGMENT_STATUS_COUNT_BAD] = 0;
            status[SEGMENT_STATUS_COUNT_VALUE] = 0;
            if (p.flags & SEGMENT_COUNT_DEFERRED) {
                const i64 n = *reinterpret_cast<const i64*>(p.num_segments_ptr);
                const i64 lo = (i64)p.num_segments_min;
                const i64 hi = (i64)p.num_segments_max;
                if (n < lo || n > hi) {
                    status[SEGMENT_STATUS_COUNT_BAD] = 1;
                    status[SEGMENT_STATUS_COUNT_VALUE] = (u64)n;
                }
                count = (u64)(n < lo ? lo : (n > hi ? hi : n));
            }
            status[SEGMENT_STATUS_COUNT] = count;
            status[SEGMENT_STATUS_VIOLATION] = ~0ull;
            status[SEGMENT_STATUS_VALUE] = 0;
            for (u32 w = SEGMENT_STATUS_LISTS; w <= BT_STATUS_TOTAL_BAD; ++w) {
                status[w] = 0;
            }
        }
        return;
    }
    const u64 count = status[SEGMENT_STATUS_COUNT];
    if (p.stage == BT_STAGE_RESOLVE) {
        __shared__ u64 block_total;
        if (threadIdx.x == 0) {
            block_total = 0;
        }
        __syncthreads();
        u64* bins = reinterpret_cast<u64*>(p.bins);
        const u64 stride = grid_threads(block_threads);
        for (u64 seg = global_thread_index(block_threads); seg < count; seg += stride) {
            u64 begin = 0, size = 0, written = 0;
            u32 dir = 0;
            i64 value = 0;
            const u32 code = bt_resolve(p, seg, &begin, &size, &written, &dir, &value);
            u64* desc = reinterpret_cast<u64*>(p.descriptors) + seg * SEGMENT_DESC_WORDS;
            desc[0] = begin;
            desc[1] = size;
            desc[2] = written;
            desc[3] = (u64)dir | (code == 0 ? SEGMENT_DESC_VALID : 0ull);
            if (code != 0) {
                atomicMin(&status[SEGMENT_STATUS_VIOLATION], (seg << 8) | (u64)code);
            } else {
                atomicAdd(&block_total, size);
            }
            // Append to the bin's list: one atomic per warp and bin (BT_LISTS = no bin).
            const u32 mine = (code == 0 && written != 0) ? bt_bin_index(bt_bin(p, size, written))
                                                         : BT_LISTS;
            const u32 active = __activemask();
#pragma unroll
            for (u32 b = 0; b < BT_LISTS; ++b) {
                u64* appended = &status[SEGMENT_STATUS_LISTS + b];
                const u64 at = warp_append<u64>(mine == b, active,
                                                [appended](u64 n) { return atomicAdd(appended, n); });
                if (mine == b && at < bt_list_capacity(p, b)) {
                    bins[bt_list_start(p, b) + at] = seg;
                }
            }
        }
        __syncthreads();
        if (threadIdx.x == 0 && block_total != 0) {
            atomicAdd(&status[BT_STATUS_TOTAL], block_total);
        }
        return;
    }
    if (p.stage == BT_STAGE_FINALIZE) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
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
        return;
    }
}

// ---- Tier 1: a warp per segment ----

// bt_rank of a key of at most 32 bits, except that a float NaN keeps a code of its own (above
// the rank of +inf or below that of -inf, for either direction) rather than the one code every
// NaN has: 3 instructions per key instead of 6. A segment with a NaN (detected per segment by
// its highest and lowest rank) is canonicalised by bt_warp32_segment.
template <class Key>
__device__ __forceinline__ u32 bt_rank32_raw(typename Key::Bits raw, typename Key::Bits flip) {
    typedef typename Key::Bits Bits;
    if constexpr (Key::KEY_KIND == KIND_FLOAT) {
        constexpr int SHIFT = 32 - 8 * (int)sizeof(Bits);
        // All ones for a negative key: the transform inverts it, else sets its sign bit.
        const Bits negative = (Bits)((i32)((u32)raw << SHIFT) >> 31);
        return (u32)(Bits)(raw ^ (Bits)((Bits)(negative | Key::SIGN) ^ flip));
    } else {
        return (u32)(Bits)(Key::to_radix(raw) ^ flip);
    }
}

// Whether a segment of `size` keys at `src` is loaded with one or two vector loads per lane:
// 4-byte keys, exactly 32 * ITEMS of them, aligned to the load.
template <class Key, int ITEMS>
__device__ __forceinline__ bool bt_warp_vector(const typename Key::Bits* src, u64 size) {
    if constexpr (sizeof(typename Key::Bits) == 4 && (ITEMS % 4 == 0 || ITEMS == 2)) {
        constexpr u64 ALIGN = ITEMS == 2 ? 8 : 16;
        return size == 32ull * ITEMS && (((unsigned long long)src) & (ALIGN - 1)) == 0;
    } else {
        return false;
    }
}

// Lane `lane`'s keys of a segment of `size` keys at `src`: items lane*ITEMS .. lane*ITEMS+ITEMS-1
// as raw bits (absent items read as 0, and are never ranked). VECTOR: bt_warp_vector holds.
template <class Key, int ITEMS, bool VECTOR>
__device__ __forceinline__ void bt_warp_load(const typename Key::Bits* src, u32 size, u32 lane,
                                             u32 (&raw)[ITEMS]) {
    const u32 base = lane * (u32)ITEMS;
    if constexpr (VECTOR && ITEMS == 2) {
        const uint2 w = reinterpret_cast<const uint2*>(src + base)[0];
        raw[0] = w.x;
        raw[1] = w.y;
    } else if constexpr (VECTOR) {
#pragma unroll
        for (int v = 0; v < ITEMS / 4; ++v) {
            const uint4 w = reinterpret_cast<const uint4*>(src + base)[v];
            raw[4 * v + 0] = w.x;
            raw[4 * v + 1] = w.y;
            raw[4 * v + 2] = w.z;
            raw[4 * v + 3] = w.w;
        }
    } else {
#pragma unroll
        for (int t = 0; t < ITEMS; ++t) {
            raw[t] = base + (u32)t < size ? (u32)src[base + (u32)t] : 0u;
        }
    }
}

// Half-warp lane `hl`'s keys of a full segment of 64 * RUNS 4-byte keys at `src` (16-byte
// aligned): run v (0 .. RUNS - 1) is items 64v + 4hl .. 64v + 4hl + 3, one 16-byte load. Each
// load of the 16 lanes reads 256 consecutive bytes (a lane reading 16 consecutive items needs
// four loads of 16 bytes 64 apart: twice the sectors and four times the cache lines per load
// instruction through L1, the kernel's busiest unit). Streaming loads (evict first): every key
// is read once, and keeping them cached only displaced what was still to come ([65536x256] on
// an H100 0.0331-0.0342 -> 0.0306-0.0315 ms; L2-only loads, __ldcg, gained nothing; an H200
// unchanged).
template <int RUNS>
__device__ __forceinline__ void bt_half_load(const u32* src, u32 hl, u32 (&raw)[4 * RUNS]) {
#pragma unroll
    for (int v = 0; v < RUNS; ++v) {
        const uint4 w = __ldcs(reinterpret_cast<const uint4*>(src) + 16 * v + hl);
        raw[4 * v + 0] = w.x;
        raw[4 * v + 1] = w.y;
        raw[4 * v + 2] = w.z;
        raw[4 * v + 3] = w.w;
    }
}

// The warp tier's shared memory, one place for every instantiation of its functions: per warp
// (at most 8 per block) 32 candidate entries (when each half of the warp takes a segment,
// bt_warp32_pair, half h uses the 128 bytes of entries 16h .. 16h + 15 as two arrays of 16
// u32: ranks, then orders).
struct BtWarpScratch {
    u64 candidates[8][32];
};
__device__ __forceinline__ BtWarpScratch& bt_warp_scratch() {
    __shared__ __align__(16) BtWarpScratch scratch;
    return scratch;
}

// Stores (order ^ T, rank) at shared address `*at` and advances it when rank > above
// (= threshold - 1): predicated, not a branch per item (T a constant: the compiler would
// otherwise hoist every item's order out of the segment loop, into registers it has not got).
// SPLIT 0: one u64 (order low, rank high), `*at` advanced by 8. SPLIT > 0: two arrays of u32,
// the rank at `*at` and the order SPLIT bytes above it, `*at` advanced by 4: one more store
// per item, but the order needs no register paired with the rank's (a u64 store takes two
// adjacent registers, so every item's order was formed ahead into a register of its own:
// 16 more live registers through the appends). The compare is written as rank > above, not
// as the count's rank >= threshold: the compiler would otherwise keep the count's predicates
// as bits of a register (two instructions an item) to reuse them here.
template <u32 T, u32 SPLIT>
__device__ __forceinline__ void bt_append_if(u32* at, u32 rank, u32 above, u32 order) {
    if constexpr (SPLIT == 0) {
        asm volatile(
            "{\n\t.reg .pred p;\n\t.reg .b32 o;\n\t"
            "setp.gt.u32 p, %1, %2;\n\t"
            "xor.b32 o, %3, %4;\n\t"
            "@p st.shared.v2.u32 [%0], {o, %1};\n\t"
            "@p add.u32 %0, %0, 8;\n\t"
            "}"
            : "+r"(*at)
            : "r"(rank), "r"(above), "r"(order), "n"(T)
            : "memory");
    } else {
        asm volatile(
            "{\n\t.reg .pred p;\n\t.reg .b32 o;\n\t"
            "setp.gt.u32 p, %1, %2;\n\t"
            "xor.b32 o, %3, %4;\n\t"
            "@p st.shared.u32 [%0], %1;\n\t"
            "@p st.shared.u32 [%0+%5], o;\n\t"
            "@p add.u32 %0, %0, 4;\n\t"
            "}"
            : "+r"(*at)
            : "r"(rank), "r"(above), "r"(order), "n"(T), "n"(SPLIT)
            : "memory");
    }
}

// bt_append_if for items T .. N - 1 of a lane. Item t's index is base + offset(t), where
// offset(t) = t (VSTRIDE 0: a lane's items are consecutive) or (t / 4) * VSTRIDE + t % 4 (a
// lane's items are runs of 4, VSTRIDE apart: bt_half_load), and base has no bit in common
// with any offset; its order is then (base + offset) ^ flip = (base ^ flip) ^ offset (flip 0
// when the larger index wins a tie, else all ones). base ^ flip is formed as base * step + flip
// (step 1 or -1, bt_order_base): as an xor with the uniform flip, the compiler reassociates it
// with each item's constant and copies the flip into a register per item (two instructions an
// item instead of one).
template <u32 T, int N, u32 VSTRIDE, u32 SPLIT>
__device__ __forceinline__ void bt_append_items(u32* at, const u32 (&rank)[N], u32 above,
                                                u32 order) {
    constexpr u32 OFFSET = VSTRIDE == 0 ? T : (T / 4) * VSTRIDE + T % 4;
    bt_append_if<OFFSET, SPLIT>(at, rank[T], above, order);
    if constexpr ((int)T + 1 < N) {
        bt_append_items<T + 1, N, VSTRIDE, SPLIT>(at, rank, above, order);
    }
}

// The exclusive prefix sum of `v` over each group of WIDTH lanes (16 or 32; `lane` the lane
// in the warp): log2(WIDTH) shuffles. Where each lane's candidates go: a shared-memory atomic
// on one counter is serialised over the lanes (16 or 32 passes through the shared-memory
// pipeline, the kernel's busiest unit).
template <u32 WIDTH>
__device__ __forceinline__ u32 bt_exclusive_scan(u32 v, u32 lane) {
    u32 inclusive = v;
#pragma unroll
    for (u32 d = 1; d < WIDTH; d <<= 1) {
        const u32 other = __shfl_up_sync(0xFFFFFFFFu, inclusive, d, WIDTH);
        inclusive += (lane & (WIDTH - 1)) >= d ? other : 0u;
    }
    return inclusive - v;
}

// (base ^ flip) for bt_append_items, flip = prefer_larger ? 0 : ~0.
__device__ __forceinline__ u32 bt_order_base(u32 base, bool prefer_larger) {
    return base * (prefer_larger ? 1u : ~0u) + (prefer_larger ? 0u : ~0u);
}

// `v` of every lane sorted descending within each group of WIDTH lanes (16 or 32): lane i of
// a group gets the group's (i+1)-th largest. A bitonic network; in a block of `size` lanes
// sorted one way, the lower lane of each pair keeps the maximum when the block sorts
// descending (its `size` bit clear; every block of the last stage, size = WIDTH).
template <u32 WIDTH>
__device__ __forceinline__ u32 bt_warp_sort_desc(u32 v, u32 lane) {
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

// pos + 1 when x > own, else pos (a predicated add, not a select and an add).
__device__ __forceinline__ u32 bt_count_above(u32 pos, u64 x, u64 own) {
    asm("{\n\t.reg .pred p;\n\t"
        "setp.gt.u64 p, %1, %2;\n\t"
        "@p add.u32 %0, %0, 1;\n\t"
        "}"
        : "+r"(pos)
        : "l"(x), "l"(own));
    return pos;
}

// count + 1 when rank >= threshold, else count: a predicated add whose predicate lives only
// here (the compiler otherwise keeps every item's compare in a register of packed bits, two
// instructions an item, to reuse it in the appends, which compare again anyway).
__device__ __forceinline__ u32 bt_count_at_least(u32 count, u32 rank, u32 threshold) {
    asm("{\n\t.reg .pred p;\n\t"
        "setp.ge.u32 p, %1, %2;\n\t"
        "@p add.u32 %0, %0, 1;\n\t"
        "}"
        : "+r"(count)
        : "r"(rank), "r"(threshold));
    return count;
}

__device__ __forceinline__ u32 bt_warp_max(u32 x) {
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

__device__ __forceinline__ u32 bt_warp_sum(u32 x) {
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

// `written` rounds of a warp arg-max over 32-bit ranks (0 = taken or absent): one redux.sync
// max, one ballot and one shuffle per round. Index order is (lane, slot) order, so the lowest
// (highest) lane and slot holding the maximum is the item the tie-break prefers. Every rank of
// the top `written` must be above 0.
template <class Key, int VALUE_BYTES, int ITEMS>
__device__ __forceinline__ void bt_warp32_rounds(const BatchedTopKParams& p, u64 seg, u64 begin,
                                                 u32 written, u32 (&rank)[ITEMS]) {
    const u32 FULL = 0xFFFFFFFFu;
    const u32 lane = threadIdx.x & 31u;
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool stable = (p.flags & BT_STABLE) != 0;
    u32 kept_rank = 0;
    u32 kept_index = 0;
    for (u32 round = 0; round < written; ++round) {
        u32 m = rank[0];
#pragma unroll
        for (int t = 1; t < ITEMS; ++t) {
            m = max(m, rank[t]);
        }
        const u32 best = bt_warp_max(m);
        const u32 holders = __ballot_sync(FULL, m == best);
        const u32 winner = prefer_larger ? 31u - (u32)__clz(holders) : (u32)__ffs(holders) - 1u;
        u32 slot = 0;
        if (prefer_larger) {
#pragma unroll
            for (int t = 0; t < ITEMS; ++t) {
                slot = rank[t] == best ? (u32)t : slot;
            }
        } else {
#pragma unroll
            for (int t = ITEMS - 1; t >= 0; --t) {
                slot = rank[t] == best ? (u32)t : slot;
            }
        }
        if (lane == winner) {
#pragma unroll
            for (int t = 0; t < ITEMS; ++t) {
                rank[t] = (u32)t == slot ? 0u : rank[t];
            }
        }
        const u32 won = __shfl_sync(FULL, slot, (int)winner);
        if (lane == round) {
            kept_rank = best;
            kept_index = winner * (u32)ITEMS + won;
        }
    }
    // Lane r holds the r-th item in selection order: sorted by key, ties as the tie-break
    // prefers. A stable order puts equal keys by index.
    u32 out_slot = lane;
    if (stable && prefer_larger) {
        out_slot = 0;
        for (u32 q = 0; q < written; ++q) {
            const u32 other_rank = __shfl_sync(FULL, kept_rank, (int)q);
            const u32 other_index = __shfl_sync(FULL, kept_index, (int)q);
            if (other_rank > kept_rank || (other_rank == kept_rank && other_index < kept_index)) {
                ++out_slot;
            }
        }
    }
    if (lane < written) {
        bt_write<Key, VALUE_BYTES>(p, begin, (u64)kept_index, seg * p.out_stride + out_slot);
    }
}

// A lane's ranks of its ITEMS keys (raw bits; items base .. base + ITEMS - 1 of a segment of
// `size`, absent ones rank 0; FULL_SEGMENT: all present) by bt_rank32_raw, a float NaN then
// canonicalised to bt_rank's one code when any lane of the warp holds one. Returns the lane's
// largest rank.
template <class Key, int ITEMS, bool FULL_SEGMENT>
__device__ __forceinline__ u32 bt_rank32_lane(const u32 (&raw)[ITEMS], u32 base, u32 size,
                                              u32 dir, u32 (&rank)[ITEMS]) {
    typedef typename Key::Bits Bits;
    const Bits flip = dir ? (Bits)~(Bits)0 : (Bits)0;
    u32 m = 0;
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
        const bool present = FULL_SEGMENT || base + (u32)t < size;
        rank[t] = present ? bt_rank32_raw<Key>((Bits)raw[t], flip) : 0u;
        m = max(m, rank[t]);
    }
    if constexpr (Key::KEY_KIND == KIND_FLOAT) {
        // Ranks above HI or below LO are NaNs (either direction: LO = ~HI).
        constexpr u32 HI = (u32)(Bits)(Key::INF | Key::SIGN);
        constexpr u32 LO = (u32)(Bits)~(Bits)HI;
        u32 low = ~0u;
#pragma unroll
        for (int t = 0; t < ITEMS; ++t) {
            const bool present = FULL_SEGMENT || base + (u32)t < size;
            low = min(low, present ? rank[t] : ~0u);
        }
        if (__any_sync(0xFFFFFFFFu, m > HI || low < LO)) {
            // Every NaN ranks as the one code bt_rank gives it (ties among NaNs by index).
            const u32 nan_rank = (u32)(Bits)~flip;
            m = 0;
#pragma unroll
            for (int t = 0; t < ITEMS; ++t) {
                const bool present = FULL_SEGMENT || base + (u32)t < size;
                if (present && (rank[t] > HI || rank[t] < LO)) {
                    rank[t] = nan_rank;
                }
                m = max(m, rank[t]);
            }
        }
    }
    return m;
}

// Keys of at most 32 bits (raw bits in `raw`, lane l holding items l*ITEMS ..; FULL: all
// 32 * ITEMS present). Every item of the top `written` is at or above the written-th largest
// lane maximum (the `written` best lane maxima are that many items at or above it), found by
// rounds of redux max that retire every lane holding the maximum at once. The items at or
// above it (a few more than `written` on most data) are ranked against each other by counting
// in 32 shared-memory slots per warp: (rank << 32 | index as the tie-break prefers) is one
// u64, larger = better. Returns false, having written nothing, when that threshold is rank 0
// (fewer than `written` lanes hold an item above the lowest rank, so absent items would
// count) or more than 32 items are at or above it (ties): the caller then takes
// bt_warp32_slow. No call in here: a call would make the compiler keep the caller's live
// values (the next segment's keys) in local memory around it.
template <class Key, int VALUE_BYTES, int ITEMS, bool FULL_SEGMENT>
__device__ __forceinline__ bool bt_warp32_segment(const BatchedTopKParams& p, u64 seg, u64 begin,
                                                  u32 size, u32 written, u32 dir,
                                                  const u32 (&raw)[ITEMS]) {
    const u32 FULL = 0xFFFFFFFFu;
    const u32 lane = threadIdx.x & 31u;
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool stable = (p.flags & BT_STABLE) != 0;
    const u32 base = lane * (u32)ITEMS;
    u32 rank[ITEMS];
    const u32 m = bt_rank32_lane<Key, ITEMS, FULL_SEGMENT>(raw, base, size, dir, rank);
    u32 threshold;
    if (written <= 4u) {
        // Rounds of redux max, each retiring every lane that holds the maximum (ties count
        // once per lane): ~11 instructions a round.
        u32 top = m;
        i32 left = (i32)written;
        do {
            threshold = bt_warp_max(top);
            const bool holder = top == threshold;
            left -= __popc(__ballot_sync(FULL, holder));
            top = holder ? 0u : top;
        } while (left > 0);
    } else {
        // The lane maxima sorted best first across the warp (15 steps of one shuffle and one
        // min or max): cheaper than 5 or more rounds.
        threshold = __shfl_sync(FULL, bt_warp_sort_desc<32>(m, lane), (int)written - 1);
    }
    if (threshold == 0) {
        return false;  // warp-uniform
    }
    u32 mine = 0;
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
        mine = bt_count_at_least(mine, rank[t], threshold);  // absent items rank 0
    }
    const u32 total = bt_warp_sum(mine);
    if (total > 32u) {
        return false;  // warp-uniform
    }
    // Each lane appends its candidates after those of the lanes below it.
    BtWarpScratch& scratch = bt_warp_scratch();
    const u32 warp = (threadIdx.x >> 5) & 7u;
    u64* candidates = scratch.candidates[warp];
    const u32 first = bt_exclusive_scan<32>(mine, lane);
    u32 at = (u32)__cvta_generic_to_shared(candidates + first);
    const u32 order_flip = prefer_larger ? 0u : ~0u;
    bt_append_items<0, ITEMS, 0, 0>(&at, rank, threshold - 1u,
                                  bt_order_base(base, prefer_larger));
    // The ranking below reads 4 entries at a time: zeros up to a multiple of 4 rank below
    // every candidate (whose rank is at least threshold > 0).
    const u32 padded = (total + 3u) & ~3u;
    if (lane >= total && lane < padded) {
        candidates[lane] = 0;
    }
    __syncwarp();
    const u64 own = candidates[lane];
    u32 pos = 0;
#pragma unroll 1
    for (u32 q = 0; q < padded; q += 4) {
        const ulonglong2 a = reinterpret_cast<const ulonglong2*>(candidates + q)[0];
        const ulonglong2 b = reinterpret_cast<const ulonglong2*>(candidates + q)[1];
        pos = bt_count_above(pos, a.x, own);
        pos = bt_count_above(pos, a.y, own);
        pos = bt_count_above(pos, b.x, own);
        pos = bt_count_above(pos, b.y, own);
    }
    pos = lane < total ? pos : 32u;
    const u32 own_rank = (u32)(own >> 32);
    const u32 own_index = (u32)own ^ order_flip;
    u32 out_slot = pos;
    if (stable && prefer_larger) {
        // The selected items (at or above the written-th best) by key, then index.
        const u32 cut_lane = (u32)__ffs(__ballot_sync(FULL, pos + 1u == written)) - 1u;
        const u64 cut = __shfl_sync(FULL, own, (int)cut_lane);
        out_slot = 0;
        for (u32 q = 0; q < total; ++q) {
            const u64 other = candidates[q];
            const u32 other_rank = (u32)(other >> 32);
            const u32 other_index = (u32)other;  // prefer_larger: the index itself
            out_slot += (other >= cut && (other_rank > own_rank ||
                         (other_rank == own_rank && other_index < own_index))) ? 1u : 0u;
        }
    }
    if (pos < written) {
        bt_write<Key, VALUE_BYTES>(p, begin, (u64)own_index, seg * p.out_stride + out_slot);
    }
    __syncwarp();  // the entries are reused by the warp's next segment
    return true;
}

// Two full segments of 32 * ITEMS keys at once, one per half warp (lanes 16h .. 16h + 15 take
// this lane's `seg`, H = 2 * ITEMS keys per lane, ranked by bt_rank32_lane; `m` the lane's
// largest rank), `written` <= 16: bt_warp32_segment's method with every collective step (the
// threshold's sort, the counts, the ranking) done for both segments by the same warp
// instructions, and 16 candidate entries per half. A half with `valid` false has no segment
// (its lanes write nothing). Selected keys are written from their ranks (bt_write_ranked, direction `dir`), not read
// again. The halves declined (bit h: threshold of rank 0 or more than 16 items at or above
// it), having written nothing for them (bt_warp32_slow's), are shifted into `declined` as its
// two low bits: folded in at once, so no value of the decision stays live through the pair.
template <class Key, int VALUE_BYTES, int H>
__device__ __forceinline__ void bt_warp32_pair(const BatchedTopKParams& p, u32 seg, u32 stride,
                                               u32 written, bool valid, u32 m,
                                               const u32 (&rank)[H], u32 dir, u32& declined) {
    const u32 FULL = 0xFFFFFFFFu;
    const u32 lane = threadIdx.x & 31u;
    const u32 half = lane >> 4;
    const u32 hl = lane & 15u;
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool stable = (p.flags & BT_STABLE) != 0;
    // The written-th largest lane maximum of each half (lanes 16h .. 16h + 15 sorted apart).
    const u32 threshold =
        __shfl_sync(FULL, bt_warp_sort_desc<16>(m, lane), (int)((lane & 16u) | (written - 1u)));
    u32 mine = 0;
#pragma unroll
    for (int t = 0; t < H; ++t) {
        mine = bt_count_at_least(mine, rank[t], threshold);
    }
    // Both halves' counts by one sum: half 1's in the upper 16 bits (each at most 256).
    const u32 total = (bt_warp_sum(mine << (16u * half)) >> (16u * half)) & 0xFFFFu;
    const bool ok = valid && threshold != 0 && total <= 16u;  // uniform within a half
    const u32 refused = __ballot_sync(FULL, valid && !ok);
    declined = (declined << 2) | (refused & 1u) | ((refused >> 15) & 2u);
    if (!__any_sync(FULL, ok)) {
        return;  // warp-uniform
    }
    // Half h's 16 candidates: ranks at words 32h .. 32h + 15 of the warp's entries, their
    // orders 16 words above (bt_append_if's split form).
    BtWarpScratch& scratch = bt_warp_scratch();
    const u32 warp = (threadIdx.x >> 5) & 7u;
    u32* ranks = reinterpret_cast<u32*>(scratch.candidates[warp]) + 32u * half;
    u32* orders = ranks + 16;
    const u32 order_flip = prefer_larger ? 0u : ~0u;
    // Each lane appends its candidates after those of the lanes below it in its half.
    const u32 first = bt_exclusive_scan<16>(mine, lane);
    if (ok) {
        u32 at = (u32)__cvta_generic_to_shared(ranks + first);
        // Lane hl's items are 4v .. 4v + 3 of run v = 0 .. H/4 - 1: indices 64v + 4hl + j.
        bt_append_items<0, H, 64, 64>(&at, rank, threshold - 1u,
                                      bt_order_base(hl * 4u, prefer_larger));
    }
    // Zeros past a half's candidates rank below every candidate (whose rank is at least
    // threshold > 0): the ranking reads all 16 entries of its half, a fixed count unrolled (no
    // loop branch and no trip count live through the appends; the few extra compares cost less).
    // A declined half's entries are not used.
    if (hl >= total) {
        ranks[hl] = 0;
        orders[hl] = 0;
    }
    __syncwarp();
    const u32 own_rank = ranks[hl];
    const u32 own_order = orders[hl];
    const u64 own = (u64)own_rank << 32 | own_order;
    u32 pos = 0;
#pragma unroll
    for (u32 q = 0; q < 16; q += 4) {
        const uint4 r = reinterpret_cast<const uint4*>(ranks + q)[0];
        const uint4 o = reinterpret_cast<const uint4*>(orders + q)[0];
        pos = bt_count_above(pos, (u64)r.x << 32 | o.x, own);
        pos = bt_count_above(pos, (u64)r.y << 32 | o.y, own);
        pos = bt_count_above(pos, (u64)r.z << 32 | o.z, own);
        pos = bt_count_above(pos, (u64)r.w << 32 | o.w, own);
    }
    pos = ok && hl < total ? pos : 32u;
    const u32 own_index = own_order ^ order_flip;
    u32 out_slot = pos;
    if (stable && prefer_larger) {
        // The selected items (at or above the written-th best) by key, then index.
        const u32 cut_at = __ballot_sync(FULL, pos + 1u == written) & (0xFFFFu << (16u * half));
        const u32 cut_lane = (u32)__ffs(cut_at) - 1u;  // none in a declined half: unused
        const u64 cut = __shfl_sync(FULL, own, (int)(cut_lane & 31u));
        out_slot = 0;
        const u32 n = ok ? total : 0u;
        for (u32 q = 0; q < n; ++q) {
            const u32 other_rank = ranks[q];
            const u32 other_index = orders[q];  // prefer_larger: the index itself
            const u64 other = (u64)other_rank << 32 | other_index;
            out_slot += (other >= cut && (other_rank > own_rank ||
                         (other_rank == own_rank && other_index < own_index))) ? 1u : 0u;
        }
    }
    if (pos < written) {
        bt_write_ranked<Key, VALUE_BYTES>(p, (u64)seg * stride, (u64)own_index,
                                          (u64)seg * p.out_stride + out_slot, own_rank, dir);
    }
    __syncwarp();  // the entries are reused by the warp's next pair
}

// Any key type: `written` rounds of a warp arg-max over (u64 rank, index), keys strided over
// the lanes (j = lane + 32t). Wider keys, and the segments bt_warp32_slow gets.
template <class Key, int VALUE_BYTES, int ITEMS>
__device__ __forceinline__ void bt_warp_general(const BatchedTopKParams& p, u64 seg, u64 begin,
                                                u64 size, u64 written, u32 dir) {
    const u32 lane = threadIdx.x & 31u;
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    const bool stable = (p.flags & BT_STABLE) != 0;
    const typename Key::Bits* keys = reinterpret_cast<const typename Key::Bits*>(p.keys);
    u64 rank[ITEMS];
    u32 alive = 0;
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
        const u64 j = (u64)lane + 32ull * (u64)t;
        rank[t] = 0;
        if (j < size) {
            rank[t] = bt_rank<Key>(keys[begin + j], dir);
            alive |= 1u << t;
        }
    }
    u64 kept_rank = 0;
    u64 kept_index = BT_PAD;
    for (u64 round = 0; round < written; ++round) {
        u64 best_rank = 0;
        u64 best_index = BT_PAD;
#pragma unroll
        for (int t = 0; t < ITEMS; ++t) {
            const u64 j = (u64)lane + 32ull * (u64)t;
            if (((alive >> t) & 1u) && bt_better(rank[t], j, best_rank, best_index, prefer_larger)) {
                best_rank = rank[t];
                best_index = j;
            }
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1) {
            const u64 other_rank = __shfl_xor_sync(0xFFFFFFFFu, best_rank, offset);
            const u64 other_index = __shfl_xor_sync(0xFFFFFFFFu, best_index, offset);
            if (bt_better(other_rank, other_index, best_rank, best_index, prefer_larger)) {
                best_rank = other_rank;
                best_index = other_index;
            }
        }
        // Every lane holds the same winner (a strict total order over distinct indices).
        if (best_index != BT_PAD && (best_index & 31u) == lane) {
            alive &= ~(1u << (u32)(best_index >> 5));
        }
        if (round == lane) {
            kept_rank = best_rank;
            kept_index = best_index;
        }
    }
    // Lane r holds the r-th item in selection order (best first, ties as the tie-break
    // prefers): already sorted by key. A stable order puts equal keys by index.
    u64 slot = lane;
    if (stable && prefer_larger) {
        slot = 0;
        for (u64 q = 0; q < written; ++q) {
            const u64 other_rank = __shfl_sync(0xFFFFFFFFu, kept_rank, (int)q);
            const u64 other_index = __shfl_sync(0xFFFFFFFFu, kept_index, (int)q);
            if (other_rank > kept_rank || (other_rank == kept_rank && other_index < kept_index)) {
                ++slot;
            }
        }
    }
    if ((u64)lane < written) {
        bt_write<Key, VALUE_BYTES>(p, begin, kept_index, seg * p.out_stride + slot);
    }
}

// The segments bt_warp32_segment declines (keys of at most 32 bits): the 32-bit rounds when
// at least `written` items rank above 0 (many ties at the threshold), else the general path.
template <class Key, int VALUE_BYTES, int ITEMS>
__device__ __forceinline__ void bt_warp32_slow(const BatchedTopKParams& p, u64 seg, u64 begin,
                                               u32 size, u32 written, u32 dir) {
    const u32 lane = threadIdx.x & 31u;
    const typename Key::Bits* src = reinterpret_cast<const typename Key::Bits*>(p.keys) + begin;
    u32 rank[ITEMS];
    u32 nonzero = 0;
#pragma unroll
    for (int t = 0; t < ITEMS; ++t) {
        const u32 j = lane * (u32)ITEMS + (u32)t;
        rank[t] = j < size ? (u32)bt_rank<Key>(src[j], dir) : 0u;
        nonzero += rank[t] != 0 ? 1u : 0u;
    }
    if (bt_warp_sum(nonzero) >= written) {
        bt_warp32_rounds<Key, VALUE_BYTES, ITEMS>(p, seg, begin, written, rank);
    } else {
        bt_warp_general<Key, VALUE_BYTES, ITEMS>(p, seg, begin, size, written, dir);
    }
}

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
// or shift is carried through the loop (the block's `end` is fixed for the whole call). (v8
// loaded after the appends and carried those: ptxas kept ~12 values a pair in local memory;
// this loop has none.)
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
    // Before, round r gave pair r * warps + w * gridDim.x + b to warp w of block b, so all the
    // warps read one window of the rows moving through the whole buffer; contiguous ranges:
    // [65536x256] on an H100 0.0313 -> 0.0302-0.0308 ms, on an H200 0.0281-0.0288 ->
    // 0.0277-0.0284 (side by side; a contiguous range per warp: H100 0.0302-0.0311, H200
    // 0.0286-0.0291).
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
                // lane (the registers hold only the next pair). H100, [65536x256]: 0.0300-0.0311
                // -> 0.0291-0.0301 ms. A prefetch.global.L2 per 128-byte line (eighth session)
                // was slower: 16 instructions a pair, not 2.
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
                    // cost v7 more than the halved instructions saved (0.0140 -> 0.0150 ms);
                    // v9, which loads the next pair a whole pair ahead, is no faster there than
                    // a warp per segment (0.0135 both, from 2 x warps rows).
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

// ---- Shared-memory bitonic sort of (rank, index) pairs, best first ----

// Sorts entries [0, n) (n a power of two); `stable_order` sorts by (rank desc, index asc),
// else by the selection order (rank desc, index as the tie-break prefers). Every thread of the
// block calls it.
template <u32 BLOCK_THREADS>
__device__ __forceinline__ void bt_block_sort(u64* ranks, u64* indices, u32 n, bool prefer_larger) {
    for (u32 size = 2; size <= n; size <<= 1) {
        for (u32 half = size >> 1; half > 0; half >>= 1) {
            for (u32 i = threadIdx.x; i < n; i += BLOCK_THREADS) {
                const u32 partner = i ^ half;
                if (partner > i) {
                    const bool best_first = (i & size) == 0;
                    const u64 ra = ranks[i], ia = indices[i];
                    const u64 rb = ranks[partner], ib = indices[partner];
                    const bool swap = best_first ? bt_better(rb, ib, ra, ia, prefer_larger)
                                                 : bt_better(ra, ia, rb, ib, prefer_larger);
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

__device__ __forceinline__ u32 bt_pow2_at_least(u64 n) {
    u32 p = 1;
    while ((u64)p < n) {
        p <<= 1;
    }
    return p;
}

// ---- Tier 2: a block per segment ----

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
        const u32 n = bt_pow2_at_least(size);  // size <= block_max_size <= SORT_CAP
        for (u32 j = threadIdx.x; j < n; j += BLOCK_THREADS) {
            const bool item = (u64)j < size;
            ranks[j] = item ? bt_rank<Key>(keys[begin + j], dir) : 0;
            indices[j] = item ? (u64)j : BT_PAD;
        }
        __syncthreads();
        bt_block_sort<BLOCK_THREADS>(ranks, indices, n, prefer_larger);
        if (stable && prefer_larger) {
            // The first `written` entries are the set; lay them out with equal keys by index.
            const u32 m = bt_pow2_at_least(written);
            for (u32 j = (u32)written + threadIdx.x; j < m; j += BLOCK_THREADS) {
                indices[j] = BT_PAD;
            }
            __syncthreads();
            bt_block_sort<BLOCK_THREADS>(ranks, indices, m, false);
        }
        for (u32 j = threadIdx.x; (u64)j < written; j += BLOCK_THREADS) {
            bt_write<Key, VALUE_BYTES>(p, begin, indices[j], seg * p.out_stride + j);
        }
        __syncthreads();  // the shared arrays are reused by the next segment
    }
}

// ---- Tier 3: several blocks per segment ----
//
// Per segment, in global memory: `large_state` (BT_LARGE_WORDS u64: prefix, mask, remaining,
// done, boundary total, collected count), `large_histogram` (256 u64, cleared per pass), and
// per chunk of the segment the boundary count, then its exclusive prefix (`large_chunks`,
// chunks_per_segment u64). `large_selected` holds, per segment, the indices of the `written`
// selected items (out_stride entries per segment).
//   LARGE_INIT       one thread per segment: state reset (remaining = written).
//   LARGE_HISTOGRAM  grid (segment, chunk): histogram of digit `shift` over the candidates.
//   LARGE_PIVOT      one thread per segment: the pivot digit; narrows prefix/mask; early exit.
//   LARGE_COUNT      grid (segment, chunk): boundary items of the chunk.
//   LARGE_SCAN       one thread per segment: exclusive scan of the chunk counts.
//   LARGE_COLLECT    grid (segment, chunk): items above the boundary (any order, by atomics)
//                    and the boundary items the tie-break keeps (by their boundary rank, in
//                    index order) into large_selected.
//   LARGE_SORT_INIT  (sorted output of sets larger than SORT_CAP) one thread per (segment,
//                    slot of sort_span): the rank of each selected item, padding past `written`.
//   LARGE_SORT_STEP  one compare-exchange step (size = shift, half = half) of a bitonic sort
//                    of every segment's sort_span slots in global memory, by (key, index).
//   LARGE_WRITE      a block per segment: sorts the selected indices (by key, then index) in
//                    shared memory when they fit (written <= SORT_CAP) and the output is
//                    sorted, unless they were sorted in global memory; writes the outputs.
constexpr u32 BT_L_PREFIX = 0;
constexpr u32 BT_L_MASK = 1;
constexpr u32 BT_L_REMAINING = 2;
constexpr u32 BT_L_DONE = 3;
constexpr u32 BT_L_BOUNDARY = 4;
constexpr u32 BT_L_ABOVE = 5;
constexpr u32 BT_L_ARRIVED = 6;  // histogram work items of this pass that have finished

// The pivot digit of pass `p.shift` from a segment's merged histogram, by the whole block
// (thread b looks at digit 255 - b, so an inclusive scan in thread order counts the items at
// or above each digit); clears the histogram for the next pass. Every thread of the block
// calls it.
template <u32 BLOCK_THREADS>
__device__ __forceinline__ void bt_large_pivot(const BatchedTopKParams& p, u64* state,
                                               u64* histogram, u64* warp_sums) {
    static_assert(BLOCK_THREADS == BT_BINS, "one thread per bin");
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    const u32 digit = BT_BINS - 1u - threadIdx.x;
    const u64 c = __ldcg(&histogram[digit]);
    histogram[digit] = 0;
    const u64 x = warp_inclusive_sum(c);
    if (lane == 31u) {
        warp_sums[warp] = x;
    }
    const u64 remaining = __ldcg(&state[BT_L_REMAINING]);
    __syncthreads();
    u64 below = 0;
    for (u32 w = 0; w < warp; ++w) {
        below += warp_sums[w];
    }
    const u64 at_or_above = x + below;
    const u64 above = at_or_above - c;
    if (above < remaining && at_or_above >= remaining) {
        // Exactly one digit: the largest with above + c >= remaining.
        const u64 left = remaining - above;
        state[BT_L_REMAINING] = left;
        state[BT_L_PREFIX] = __ldcg(&state[BT_L_PREFIX]) | ((u64)digit << p.shift);
        state[BT_L_MASK] = __ldcg(&state[BT_L_MASK]) | ((u64)(BT_BINS - 1) << p.shift);
        if (c == left || p.shift == 0) {
            state[BT_L_DONE] = 1;
        }
    }
    __syncthreads();
}

// Bitonic sort, descending, of n (a power of two) packed u64 keys in shared memory. Every
// thread of the block calls it.
template <u32 BLOCK_THREADS>
__device__ __forceinline__ void bt_block_sort_packed(u64* keys, u32 n) {
    for (u32 size = 2; size <= n; size <<= 1) {
        for (u32 half = size >> 1; half > 0; half >>= 1) {
            for (u32 q = threadIdx.x; q < n / 2; q += BLOCK_THREADS) {
                const u32 i = ((q & ~(half - 1u)) << 1) | (q & (half - 1u));
                const u32 partner = i + half;
                const bool descending = (i & size) == 0;
                const u64 a = keys[i];
                const u64 b = keys[partner];
                if (descending ? a < b : a > b) {
                    keys[i] = b;
                    keys[partner] = a;
                }
            }
            __syncthreads();
        }
    }
}

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int SORT_CAP>
__device__ __forceinline__ void bt_large(const BatchedTopKParams& p) {
    typedef typename Key::Bits Bits;
    const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
    const u64 count = bt_bin_count(p, BT_TIER_LARGE);  // scratch is per position `slot`
    const bool prefer_larger = (p.flags & BT_PREFER_LARGER) != 0;
    u64* state_all = reinterpret_cast<u64*>(p.large_state);
    u64* histogram_all = reinterpret_cast<u64*>(p.large_histogram);
    u64* chunks_all = reinterpret_cast<u64*>(p.large_chunks);
    u64* selected_all = reinterpret_cast<u64*>(p.large_selected);
    u64* sort_ranks_all = reinterpret_cast<u64*>(p.large_ranks);
    const u64 chunks = p.chunks_per_segment;
    const u64 chunk_items = p.chunk_items;

    if (p.stage == BT_STAGE_LARGE_SORT_INIT || p.stage == BT_STAGE_LARGE_SORT_STEP) {
        // One thread per (segment, slot) of the global sort.
        const u64 span = p.sort_span;
        const u64 items = count * span;
        const u64 stride = grid_threads(BLOCK_THREADS);
        for (u64 e = global_thread_index(BLOCK_THREADS); e < items; e += stride) {
            const u64 slot = e / span;
            const u64 seg = bt_bin_segment(p, BT_TIER_LARGE, slot);
            const u64 i = e % span;
            u64 begin, size, written;
            u32 dir;
            if (!bt_descriptor(p, seg, BT_TIER_LARGE, &begin, &size, &written, &dir)) {
                continue;
            }
            u64* selected = selected_all + slot * p.selected_stride;
            u64* sort_ranks = sort_ranks_all + slot * span;
            if (p.stage == BT_STAGE_LARGE_SORT_INIT) {
                if (i < written) {
                    sort_ranks[i] = bt_rank<Key>(keys[begin + selected[i]], dir);
                } else {
                    sort_ranks[i] = 0;
                    selected[i] = BT_PAD;
                }
                continue;
            }
            const u64 partner = i ^ (u64)p.half;
            if (partner > i) {
                const bool best_first = (i & (u64)p.shift) == 0;
                const u64 ra = sort_ranks[i], ia = selected[i];
                const u64 rb = sort_ranks[partner], ib = selected[partner];
                const bool swap = best_first ? bt_better(rb, ib, ra, ia, false)
                                             : bt_better(ra, ia, rb, ib, false);
                if (swap) {
                    sort_ranks[i] = rb;
                    selected[i] = ib;
                    sort_ranks[partner] = ra;
                    selected[partner] = ia;
                }
            }
        }
        return;
    }

    if (p.stage == BT_STAGE_LARGE_INIT) {
        // One thread per (segment, bin): clears the bin; the first few also reset the state.
        const u64 stride = grid_threads(BLOCK_THREADS);
        for (u64 e = global_thread_index(BLOCK_THREADS); e < count * BT_BINS; e += stride) {
            const u64 slot = e / BT_BINS;
            const u64 seg = bt_bin_segment(p, BT_TIER_LARGE, slot);
            const u32 b = (u32)(e % BT_BINS);
            u64 begin, size, written;
            u32 dir;
            if (!bt_descriptor(p, seg, BT_TIER_LARGE, &begin, &size, &written, &dir)) {
                continue;
            }
            histogram_all[slot * BT_BINS + b] = 0;
            u64* state = state_all + slot * BT_LARGE_WORDS;
            if (b < BT_LARGE_WORDS) {
                u64 v = 0;
                if (b == BT_L_REMAINING) {
                    v = written;
                } else if (b == BT_L_DONE) {
                    v = written == size ? 1 : 0;
                }
                state[b] = v;
            }
        }
        return;
    }
    if (p.stage == BT_STAGE_LARGE_INIT || p.stage == BT_STAGE_LARGE_PIVOT ||
        p.stage == BT_STAGE_LARGE_SCAN) {
        // One thread per segment.
        const u64 stride = grid_threads(BLOCK_THREADS);
        for (u64 slot = global_thread_index(BLOCK_THREADS); slot < count; slot += stride) {
            const u64 seg = bt_bin_segment(p, BT_TIER_LARGE, slot);
            u64 begin, size, written;
            u32 dir;
            if (!bt_descriptor(p, seg, BT_TIER_LARGE, &begin, &size, &written, &dir)) {
                continue;
            }
            u64* state = state_all + slot * BT_LARGE_WORDS;
            u64* histogram = histogram_all + slot * BT_BINS;
            if (p.stage == BT_STAGE_LARGE_INIT) {
                state[BT_L_PREFIX] = 0;
                state[BT_L_MASK] = 0;
                state[BT_L_REMAINING] = written;
                state[BT_L_DONE] = written == size ? 1 : 0;
                state[BT_L_BOUNDARY] = 0;
                state[BT_L_ABOVE] = 0;
                state[BT_L_ARRIVED] = 0;
                for (u32 b = 0; b < BT_BINS; ++b) {
                    histogram[b] = 0;
                }
            } else if (p.stage == BT_STAGE_LARGE_PIVOT) {
                if (state[BT_L_DONE] != 0) {
                    continue;
                }
                u64 remaining = state[BT_L_REMAINING];
                u64 above = 0;
                u32 pivot = 0;
                for (int digit = (int)BT_BINS - 1; digit >= 0; --digit) {
                    const u64 c = histogram[digit];
                    if (above + c >= remaining) {
                        pivot = (u32)digit;
                        break;
                    }
                    above += c;
                }
                remaining -= above;
                state[BT_L_REMAINING] = remaining;
                state[BT_L_PREFIX] |= (u64)pivot << p.shift;
                state[BT_L_MASK] |= (u64)(BT_BINS - 1) << p.shift;
                if (histogram[pivot] == remaining || p.shift == 0) {
                    state[BT_L_DONE] = 1;
                }
                for (u32 b = 0; b < BT_BINS; ++b) {
                    histogram[b] = 0;
                }
            } else {
                // Exclusive scan of the chunk boundary counts.
                u64* chunk_counts = chunks_all + slot * chunks;
                u64 running = 0;
                for (u64 c = 0; c < chunks; ++c) {
                    const u64 v = chunk_counts[c];
                    chunk_counts[c] = running;
                    running += v;
                }
                state[BT_L_BOUNDARY] = running;
            }
        }
        return;
    }

    // Grid-stride over (segment, chunk) work items; one block per work item at a time.
    __shared__ u32 block_counts[BT_BINS];
    __shared__ u32 warp_totals[BLOCK_THREADS / 32];
    __shared__ u64 chunk_base;
    __shared__ u32 last_arrival;
    __shared__ u64 warp_sums[BLOCK_THREADS / 32];
    const u64 work_items = count * chunks;
    for (u64 work = blockIdx.x; work < work_items; work += gridDim.x) {
        const u64 slot = work / chunks;
        const u64 seg = bt_bin_segment(p, BT_TIER_LARGE, slot);
        const u64 chunk = work % chunks;
        u64 begin, size, written;
        u32 dir;
        if (!bt_descriptor(p, seg, BT_TIER_LARGE, &begin, &size, &written, &dir)) {
            continue;  // block-uniform
        }
        if (p.stage == BT_STAGE_LARGE_WRITE) {
            if (chunk != 0) {
                continue;
            }
            // Sort the selected indices of the segment, then write.
            __shared__ u64 ranks[SORT_CAP];
            __shared__ u64 indices[SORT_CAP];
            const u64* selected = selected_all + slot * p.selected_stride;
            const bool sorted = (p.flags & BT_SORTED) != 0;
            if (sizeof(Bits) <= 4 && sorted && size <= 0xFFFFFFFFull &&
                written <= (u64)SORT_CAP && (p.flags & BT_GLOBAL_SORT) == 0) {
                // (rank << 32 | ~index): one u64 per item, best first = by key, then by index.
                const u32 n = bt_pow2_at_least(written);
                for (u32 j = threadIdx.x; j < n; j += BLOCK_THREADS) {
                    u64 packed = 0;
                    if ((u64)j < written) {
                        const u64 index = selected[j];
                        const u64 rank = bt_rank<Key>(keys[begin + index], dir);
                        packed = (rank << 32) | (u64)(0xFFFFFFFFu - (u32)index);
                    }
                    ranks[j] = packed;
                }
                __syncthreads();
                bt_block_sort_packed<BLOCK_THREADS>(ranks, n);
                for (u32 j = threadIdx.x; (u64)j < written; j += BLOCK_THREADS) {
                    const u64 index = (u64)(0xFFFFFFFFu - (u32)ranks[j]);
                    bt_write<Key, VALUE_BYTES>(p, begin, index, seg * p.out_stride + j);
                }
                __syncthreads();
            } else if (written <= (u64)SORT_CAP && (p.flags & BT_GLOBAL_SORT) == 0) {
                const u32 n = bt_pow2_at_least(written);
                for (u32 j = threadIdx.x; j < n; j += BLOCK_THREADS) {
                    const bool item = (u64)j < written;
                    const u64 index = item ? selected[j] : BT_PAD;
                    ranks[j] = item ? bt_rank<Key>(keys[begin + index], dir) : 0;
                    indices[j] = index;
                }
                __syncthreads();
                if (sorted) {
                    bt_block_sort<BLOCK_THREADS>(ranks, indices, n, false);
                }
                for (u32 j = threadIdx.x; (u64)j < written; j += BLOCK_THREADS) {
                    bt_write<Key, VALUE_BYTES>(p, begin, indices[j], seg * p.out_stride + j);
                }
                __syncthreads();
            } else {
                // Sorted in global memory already, or unsorted output: as they are.
                for (u64 j = threadIdx.x; j < written; j += BLOCK_THREADS) {
                    bt_write<Key, VALUE_BYTES>(p, begin, selected[j], seg * p.out_stride + j);
                }
            }
            continue;
        }
        u64* state = state_all + slot * BT_LARGE_WORDS;
        if (p.stage == BT_STAGE_LARGE_HISTOGRAM && state[BT_L_DONE] != 0) {
            continue;
        }
        const u64 prefix = state[BT_L_PREFIX];
        const u64 mask = state[BT_L_MASK];
        const u64 lo = chunk * chunk_items;
        const u64 hi = lo + chunk_items < size ? lo + chunk_items : size;
        if (p.stage == BT_STAGE_LARGE_HISTOGRAM) {
            for (u32 b = threadIdx.x; b < BT_BINS; b += BLOCK_THREADS) {
                block_counts[b] = 0;
            }
            __syncthreads();
            // Four independent loads in flight per thread.
            for (u64 j0 = lo + threadIdx.x; j0 < hi; j0 += 4ull * BLOCK_THREADS) {
                Bits raw[4];
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const u64 j = j0 + (u64)u * BLOCK_THREADS;
                    raw[u] = j < hi ? keys[begin + j] : (Bits)0;
                }
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const u64 rank = bt_rank<Key>(raw[u], dir);
                    if (j0 + (u64)u * BLOCK_THREADS < hi && (rank & mask) == prefix) {
                        atomicAdd(&block_counts[(u32)(rank >> p.shift) & (BT_BINS - 1)], 1u);
                    }
                }
            }
            __syncthreads();
            u64* histogram = histogram_all + slot * BT_BINS;
            for (u32 b = threadIdx.x; b < BT_BINS; b += BLOCK_THREADS) {
                if (block_counts[b] != 0) {
                    atomicAdd(&histogram[b], (u64)block_counts[b]);
                }
            }
            // The last work item of the segment to finish picks the pivot (no separate launch).
            __threadfence();
            __syncthreads();
            if (threadIdx.x == 0) {
                const u64 arrived = atomicAdd(&state[BT_L_ARRIVED], 1ull);
                last_arrival = arrived + 1 == chunks ? 1u : 0u;
            }
            __syncthreads();
            if (last_arrival != 0) {
                __threadfence();
                if (threadIdx.x == 0) {
                    state[BT_L_ARRIVED] = 0;
                }
                bt_large_pivot<BLOCK_THREADS>(p, state, histogram, warp_sums);
            }
            __syncthreads();
            continue;
        }
        // LARGE_COUNT / LARGE_COLLECT: tiles of BLOCK_THREADS items in index order.
        u64* chunk_slot = chunks_all + slot * chunks + chunk;
        const u64 remaining = state[BT_L_REMAINING];
        const u64 boundary_total = state[BT_L_BOUNDARY];
        u64* selected = selected_all + slot * p.selected_stride;
        if (p.stage == BT_STAGE_LARGE_COUNT ||
            (p.stage == BT_STAGE_LARGE_COLLECT && boundary_total == remaining)) {
            // COUNT: the chunk's boundary items (no order needed). COLLECT when every boundary
            // item is kept: every item at or above the boundary, in any order (the output is
            // sorted by key and index afterwards, or unsorted).
            const bool count_only = p.stage == BT_STAGE_LARGE_COUNT;
            const u32 lane = threadIdx.x & 31u;
            u32 counted = 0;
            for (u64 j0 = lo + (threadIdx.x & ~31u) * 4ull; j0 < hi; j0 += 4ull * BLOCK_THREADS) {
                // Each warp takes 4 x 32 consecutive items; four loads in flight per thread.
                Bits raw[4];
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const u64 j = j0 + 32ull * (u64)u + lane;
                    raw[u] = j < hi ? keys[begin + j] : (Bits)0;
                }
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const u64 j = j0 + 32ull * (u64)u + lane;
                    const u64 rank = bt_rank<Key>(raw[u], dir);
                    const bool valid = j < hi;
                    if (count_only) {
                        counted += (valid && (rank & mask) == prefix) ? 1u : 0u;
                        continue;
                    }
                    const bool take = valid && (rank & mask) >= prefix;
                    const u64 at = warp_append(take, &state[BT_L_ABOVE]);
                    if (take) {
                        selected[at] = j;
                    }
                }
            }
            if (count_only) {
                if (threadIdx.x == 0) {
                    block_counts[0] = 0;
                }
                __syncthreads();
#if __CUDA_ARCH__ >= 800
                counted = __reduce_add_sync(0xFFFFFFFFu, counted);
#else
                for (int offset = 16; offset > 0; offset >>= 1) {
                    counted += __shfl_xor_sync(0xFFFFFFFFu, counted, offset);
                }
#endif
                if (lane == 0 && counted != 0) {
                    atomicAdd(&block_counts[0], counted);
                }
                __syncthreads();
                if (threadIdx.x == 0) {
                    *chunk_slot = block_counts[0];
                }
            }
            __syncthreads();
            continue;
        }
        if (threadIdx.x == 0) {
            chunk_base = p.stage == BT_STAGE_LARGE_COLLECT ? *chunk_slot : 0;
        }
        __syncthreads();
        u64 boundary_before = chunk_base;  // boundary items before this tile, in the segment
        for (u64 tile = lo; tile < hi; tile += BLOCK_THREADS) {
            const u64 j = tile + threadIdx.x;
            const bool valid = j < hi;
            const u64 rank = valid ? bt_rank<Key>(keys[begin + j], dir) : 0;
            const bool boundary = valid && (rank & mask) == prefix;
            u32 total = 0;
            const u32 below = block_flag_scan<BLOCK_THREADS>(boundary, warp_totals, &total);
            if (p.stage == BT_STAGE_LARGE_COLLECT) {
                const bool above = valid && (rank & mask) > prefix;
                const u64 at = warp_append(above, &state[BT_L_ABOVE]);
                if (above) {
                    selected[at] = j;
                }
                if (boundary) {
                    const u64 boundary_rank = boundary_before + below;
                    const u64 above_total = written - remaining;
                    if (prefer_larger) {
                        if (boundary_rank + remaining >= boundary_total) {
                            selected[above_total + boundary_rank - (boundary_total - remaining)] = j;
                        }
                    } else if (boundary_rank < remaining) {
                        selected[above_total + boundary_rank] = j;
                    }
                }
            }
            boundary_before += total;
        }
        if (p.stage == BT_STAGE_LARGE_COUNT && threadIdx.x == 0) {
            *chunk_slot = boundary_before;
        }
        __syncthreads();
    }
}

// Tier 4, in batched_topk_stream.cuh (included after this header).
template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int K_CAP, int PART>
__device__ __forceinline__ void bt_stream(const BatchedTopKParams& p);

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
