// Family batched_topk: top-k of many independent segments, each with its own size, k and
// direction (docs/design/batched_topk.md, "Tiers"). One template, specialised by TIER (the
// files of this folder, entry.cuh last); a call launches, in stream order:
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
//                                     in large.cuh), the selected indices collected, then
//                                     sorted per segment.
//   TIER 4 (stream)                   several blocks per segment, two launches: a filter that
//                                     streams each chunk once against a sampled threshold and
//                                     keeps the candidates, then a block per segment that
//                                     selects and orders them; or, for a direct call of no more
//                                     segments than clusters fit at once (sm_90), one launch of
//                                     a two-block cluster per segment that does both on chip
//                                     (stream_*.cuh).
//
// The listed layout (segments at their own device addresses, the seeds' iterator of
// iterators) is the offsets layout over a keys base of 0: begin/end are element addresses
// (address / sizeof(Key)), so `keys + begin` is the segment's own address; values, when
// copied, come from a per-segment address list (SEGMENT_VALUE_POINTERS).
//
// A direct call (SEGMENT_DIRECT: strided layout, size, k, direction and count each one host value,
// all checked on the host) launches no control stage but FILL (when asked): the tiers take the
// segment count and every segment's begin, size, k and direction from the parameters, and no
// status is written.
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

// The selection order (bt_better) as block_sort_pairs's comparator.
struct BtSelectionOrder {
    bool prefer_larger;
    __device__ __forceinline__ bool operator()(u64 rank_a, u64 index_a, u64 rank_b,
                                               u64 index_b) const {
        return bt_better(rank_a, index_a, rank_b, index_b, prefer_larger);
    }
};

// Resolves segment `seg` (< the number of segments) and checks it: its layout
// (segment_resolve), then k and the direction; returns 0 or a violation code (with the
// offending value in *value).
__device__ __forceinline__ u32 bt_resolve(const BatchedTopKParams& p, u64 seg, u64* begin_out,
                                          u64* size_out, u64* written_out, u32* dir_out,
                                          i64* value) {
    const u32 f = p.flags;
    u64 begin;
    u64 size;
    const u32 code = segment_resolve(p, seg, &begin, &size, value);
    if (code != 0) {
        return code;
    }
    const i64 k = (f & BT_K_PER_SEGMENT) ? segment_int(p.ks, seg, (f & BT_K_I32) != 0)
                                         : (i64)p.k_value;
    if (k < (i64)p.k_min || k > (i64)p.k_max) {
        *value = k;
        return VIOLATION_PARAM_OUT_OF_BOUNDS;
    }
    if ((f & BT_REJECT_K_ABOVE_SIZE) && (u64)k > size) {
        *value = k;
        return VIOLATION_K_ABOVE_SIZE;
    }
    u32 dir = p.direction_value;
    if (f & BT_DIR_PER_SEGMENT) {
        const u32 d = reinterpret_cast<const u8*>(p.directions)[seg];
        if (d > 1 || ((p.direction_mask >> d) & 1u) == 0) {
            *value = (i64)d;
            return VIOLATION_OPTION_NOT_COMPILED;
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

// Reads a segment's descriptor (the family's word: the items it writes; its low flag bit: the
// direction); false when it is invalid, not in `bin`, or writes nothing.
__device__ __forceinline__ bool bt_descriptor(const BatchedTopKParams& p, u64 seg, u32 bin,
                                              u64* begin, u64* size, u64* written, u32* dir) {
    if (p.flags & SEGMENT_DIRECT) {
        return bt_direct_descriptor(p, seg, bin, begin, size, written, dir);
    }
    const u64* desc = segment_descriptor(p, seg);
    const u64 flags = desc[SEGMENT_DESC_FLAGS];
    if ((flags & SEGMENT_DESC_VALID) == 0) {
        return false;
    }
    *begin = desc[SEGMENT_DESC_BEGIN];
    *size = desc[SEGMENT_DESC_SIZE];
    *written = desc[SEGMENT_DESC_WORD];
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

// The bins' lists (segment_list_*), indexed by bt_bin_index: the warp list and the block list,
// each p.bin_capacity long, then the large list, p.large_capacity long, then the stream list,
// p.stream_capacity long. The lists of the tiers with scratch per segment (large, stream) are
// sized from the TotalItems guarantee.
struct BtLists {
    static __device__ __forceinline__ u64 capacity(const BatchedTopKParams& p, u32 index) {
        return index == 2u ? p.large_capacity : (index == 3u ? p.stream_capacity : p.bin_capacity);
    }
    static __device__ __forceinline__ u64 start(const BatchedTopKParams& p, u32 index) {
        return (u64)(index < 2u ? index : 2u) * p.bin_capacity +
            (index == 3u ? p.large_capacity : 0ull);
    }
};

// The list of a bin (a tier's BT_TIER_* bit).
__device__ __forceinline__ u32 bt_bin_index(u32 bin) {
    return bin == BT_TIER_WARP ? 0u
        : (bin == BT_TIER_BLOCK ? 1u : (bin == BT_TIER_LARGE ? 2u : 3u));
}

// The number of segments in `bin` (a tier reads it after RESOLVE, in stream order).
__device__ __forceinline__ u64 bt_bin_count(const BatchedTopKParams& p, u32 bin) {
    return segment_list_count<BtLists>(p, bt_bin_index(bin));
}

// The segment at position `i` of `bin`'s list.
__device__ __forceinline__ u64 bt_bin_segment(const BatchedTopKParams& p, u32 bin, u64 i) {
    return segment_list_entry<BtLists>(p, bt_bin_index(bin), i);
}

}  // namespace oxicub
