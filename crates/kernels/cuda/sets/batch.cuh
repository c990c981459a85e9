// Family sets, batched calls (docs/design/sets.md, "Batched"): pair p is a's segment p and b's
// segment p, each input's segments in order and disjoint. The batch runs as one operation over
// the whole of a and b whose keys are composite: (region, rank), where region 2p + 1 is pair
// p's segment and region 2p the gap before it (2n: after the last). Equal ranks of different
// pairs never match, every pair's elements come before the next pair's, and a gap's elements
// (all of rank 0) pair up among themselves and are never written. An element's region is the
// number of its input's segment boundaries at or below its position (boundary 2p: begin of
// segment p, 2p + 1: its end), so one search over the boundaries finds it, and a tile finds
// its elements' regions from the boundaries that fall inside it.
namespace oxicub {

// One input's segments as the batched stages read them (the fields segment_resolve reads).
struct SetsSide {
    u32 flags;  // SEGMENT_OFFSETS, SEGMENT_SIZES_PER_SEGMENT
    u64 begin_offsets, end_offsets, sizes;
    u64 size_value, size_min, size_max, stride;
    u64 num_keys;
};

// Input b's segments when `on_b`, else a's.
__device__ __forceinline__ SetsSide sets_side(const SetsParams& p, bool on_b) {
    SetsSide s;
    s.flags = on_b ? p.b_layout : p.a_layout;
    s.begin_offsets = on_b ? p.b_begin : p.a_begin;
    s.end_offsets = on_b ? p.b_end : p.a_end;
    s.sizes = on_b ? p.b_sizes : p.a_sizes;
    s.size_value = on_b ? p.b_size_value : p.a_size_value;
    s.size_min = on_b ? p.b_size_min : p.a_size_min;
    s.size_max = on_b ? p.b_size_max : p.a_size_max;
    s.stride = on_b ? p.b_stride : p.a_stride;
    s.num_keys = on_b ? p.b_count : p.a_count;
    return s;
}

// The number of pairs: the host's, or the deferred one clamped into its bounds (a value
// outside them is reported by the partition stage).
__device__ __forceinline__ u64 sets_pairs(const SetsParams& p) {
    if (p.a_layout & SEGMENT_COUNT_DEFERRED) {
        const i64 n = *reinterpret_cast<const i64*>(p.num_segments_ptr);
        const i64 lo = (i64)p.num_segments_min, hi = (i64)p.num_segments_max;
        return (u64)(n < lo ? lo : (n > hi ? hi : n));
    }
    return p.num_segments;
}

// Boundary k of side s (k < 2n: segment k / 2's begin for even k, its end for odd k), clamped
// into [0, num_keys] so every search stays inside the input whatever the offsets hold (an
// invalid segment is reported; the call's outputs are then unspecified).
__device__ __forceinline__ u64 sets_boundary(const SetsSide& s, u64 k) {
    const u64 seg = k >> 1;
    i64 v;
    if (s.flags & SEGMENT_OFFSETS) {
        v = reinterpret_cast<const i64*>((k & 1) ? s.end_offsets : s.begin_offsets)[seg];
    } else {
        const u64 begin = __umul64hi(seg, s.stride) != 0 ? s.num_keys : seg * s.stride;
        i64 size = 0;
        if (k & 1) {
            size = (s.flags & SEGMENT_SIZES_PER_SEGMENT)
                       ? segment_int(s.sizes, seg, (s.flags & SEGMENT_SIZES_I32) != 0)
                       : (i64)s.size_value;
        }
        const u64 clamped = size < 0 ? 0 : (u64)size;
        const u64 begin_c = begin > s.num_keys ? s.num_keys : begin;
        v = (i64)(clamped > s.num_keys - begin_c ? s.num_keys : begin_c + clamped);
    }
    return v < 0 ? 0 : ((u64)v > s.num_keys ? s.num_keys : (u64)v);
}

// Pair `seg` resolved and checked on one side: 0, or a violation code with its value (the order
// the host backend checks in: the layout, then the overlap with the segment before).
__device__ __forceinline__ u32 sets_resolve_side(const SetsSide& s, u64 seg, i64* value) {
    u64 begin = 0, size = 0;
    const u32 code = segment_resolve(s, seg, &begin, &size, value);
    if (code != 0) {
        return code;
    }
    if ((s.flags & SEGMENT_OFFSETS) && seg > 0) {
        const i64 before = reinterpret_cast<const i64*>(s.end_offsets)[seg - 1];
        if ((i64)begin < before) {
            *value = (i64)begin;
            return VIOLATION_OVERLAPS;
        }
    }
    return 0;
}

// The violation word of pair `seg`: `seg << 8 | side << 7 | code`, or 0 when both sides hold.
__device__ __forceinline__ u64 sets_resolve_pair(const SetsParams& p, u64 seg, i64* value) {
    const u32 a = sets_resolve_side(sets_side(p, false), seg, value);
    if (a != 0) {
        return (seg << 8) | (u64)a;
    }
    const u32 b = sets_resolve_side(sets_side(p, true), seg, value);
    return b != 0 ? (seg << 8) | 128u | (u64)b : 0;
}

// The region of position i of side s: the number of its boundaries at or below i.
template <class S>
__device__ __forceinline__ u64 sets_region_of(const S& search, const SetsSide& s, u64 pairs,
                                              u64 i) {
    return search.first_false((u64)0, 2 * pairs, [&](u64 k) { return sets_boundary(s, k) <= i; });
}

// Where pair `seg` starts on the diagonals of the whole batch (its begins' sum).
__device__ __forceinline__ u64 sets_pair_start(const SetsSide& a, const SetsSide& b, u64 seg) {
    return sets_boundary(a, 2 * seg) + sets_boundary(b, 2 * seg);
}

// A composite rank: the region, then the rank (only `<` is used by the searches).
template <class Bits>
struct SetsComposite {
    u32 region;
    Bits rank;
    __device__ __forceinline__ bool operator<(const SetsComposite& o) const {
        return region < o.region || (region == o.region && rank < o.rank);
    }
};

}  // namespace oxicub
