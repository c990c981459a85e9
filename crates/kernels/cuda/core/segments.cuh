// oxicub core: the segmented problem on the device. Every segmented family resolves and checks
// its segments' layout, keeps a descriptor per segment and bins its segments into lists with
// these functions; the flags, status words, descriptor words and violation codes are the
// SEGMENT_* and VIOLATION_* constants generated from the Rust list (src/segments.rs).
//
// The functions are templates over the family's parameter struct P, which has these fields
// (the host fills them; src/segments.rs documents the flags):
//   flags                 SEGMENT_* flags (and the family's own, in other bits)
//   begin_offsets, end_offsets   i64 per segment (SEGMENT_OFFSETS)
//   sizes                 i64 per segment (strided, SEGMENT_SIZES_PER_SEGMENT), or i32
//                         with SEGMENT_SIZES_I32
//   size_value            the one size (strided, else)
//   size_min, size_max    the bounds every size must satisfy
//   stride                distance between strided segments
//   num_keys              the keys a segment may address
//   num_segments          the number of segments on the host (a direct call's)
//   status                the u64 status words (SEGMENT_STATUS_*)
//   descriptors           SEGMENT_DESC_WORDS u64 per segment
//   bins                  the family's bin lists, one after another
//
// A family's bin lists are described by a policy type L with
//   static u64 capacity(const P&, u32 list)  the list's length
//   static u64 start(const P&, u32 list)     its first word in p.bins
//
// A direct call (SEGMENT_DIRECT: strided, every value one host value checked on the host) has
// no descriptors, lists or status: every segment is valid and alike.
namespace oxicub {

// Value `i` of a per-segment integer buffer a caller holds in either width (`narrow`: i32,
// else i64): the kernels widen as they read, so an engine's i32 buffers need no copy.
__device__ __forceinline__ i64 segment_int(u64 ptr, u64 i, bool narrow) {
    return narrow ? (i64) reinterpret_cast<const i32*>(ptr)[i]
                  : reinterpret_cast<const i64*>(ptr)[i];
}

// Resolves the layout of segment `seg` (below the number of segments) and checks it, in the
// order the host backend checks: returns 0 with its begin and size, or a violation code with
// the offending value in *value (and the outputs untouched).
template <class P>
__device__ __forceinline__ u32 segment_resolve(const P& p, u64 seg, u64* begin_out,
                                               u64* size_out, i64* value) {
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
        const i64 s = (f & SEGMENT_SIZES_PER_SEGMENT)
                          ? segment_int(p.sizes, seg, (f & SEGMENT_SIZES_I32) != 0)
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
    *begin_out = begin;
    *size_out = size;
    return 0;
}

// The control stage INIT of a segmented family (one thread): the number of segments (a deferred
// one checked against its bounds, clamped into them and flagged when outside), no violation
// yet, and the family's other status words (up to `words`) zeroed. P also has num_segments_ptr,
// num_segments_min and num_segments_max.
template <class P>
__device__ __forceinline__ void segment_status_init(const P& p, u64* status, u32 words) {
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
    for (u32 w = SEGMENT_STATUS_LISTS; w < words; ++w) {
        status[w] = 0;
    }
}

// The words of a segment's descriptor (SEGMENT_DESC_WORDS u64): begin, size, a word of the
// family's, and the flags (the family's low 8 bits, SEGMENT_DESC_VALID).
enum SegmentDescriptorWord : u32 {
    SEGMENT_DESC_BEGIN = 0,
    SEGMENT_DESC_SIZE = 1,
    SEGMENT_DESC_WORD = 2,
    SEGMENT_DESC_FLAGS = 3
};

// Segment `seg`'s descriptor (a family reads its words and checks SEGMENT_DESC_VALID itself,
// with its own use of the family word and bits).
template <class P>
__device__ __forceinline__ const u64* segment_descriptor(const P& p, u64 seg) {
    return reinterpret_cast<const u64*>(p.descriptors) + seg * SEGMENT_DESC_WORDS;
}

// Writes segment `seg`'s descriptor: begin, size, the family's word and its flags (`low`, the
// family's low 8 bits, and SEGMENT_DESC_VALID when `valid`).
template <class P>
__device__ __forceinline__ void segment_describe(const P& p, u64 seg, u64 begin, u64 size,
                                                 u64 word, u64 low, bool valid) {
    u64* desc = reinterpret_cast<u64*>(p.descriptors) + seg * SEGMENT_DESC_WORDS;
    desc[SEGMENT_DESC_BEGIN] = begin;
    desc[SEGMENT_DESC_SIZE] = size;
    desc[SEGMENT_DESC_WORD] = word;
    desc[SEGMENT_DESC_FLAGS] = low | (valid ? SEGMENT_DESC_VALID : 0ull);
}

// Binning by compaction: the control stage appends every segment that a tier of the family
// takes to that tier's list (segment_list_append), so a tier walks only its own segments and a
// tier with scratch per segment indexes it by the position in its list (sized from what the
// call guarantees, not from the number of segments). A direct call has no lists: every
// segment is in the one bin its shape selects, and the tiers walk every segment.

// The number of segments in list `list` (read after the control stage, in stream order).
template <class L, class P>
__device__ __forceinline__ u64 segment_list_count(const P& p, u32 list) {
    if (p.flags & SEGMENT_DIRECT) {
        return p.num_segments;  // the family's descriptor still skips those of other bins
    }
    const u64 appended = reinterpret_cast<const u64*>(p.status)[SEGMENT_STATUS_LISTS + list];
    const u64 capacity = L::capacity(p, list);
    // Past the capacity only when a guarantee that sized the list is broken (reported).
    return appended < capacity ? appended : capacity;
}

// The segment at position `i` of list `list`.
template <class L, class P>
__device__ __forceinline__ u64 segment_list_entry(const P& p, u32 list, u64 i) {
    if (p.flags & SEGMENT_DIRECT) {
        return i;
    }
    return reinterpret_cast<const u64*>(p.bins)[L::start(p, list) + i];
}

// Appends segment `seg` to list `mine` (LISTS: to none), as every lane of `active` does for its
// own segment: one atomic on a list's status word per warp and list. The count goes on past
// the capacity (segment_list_count caps it); the entries past it are dropped.
template <u32 LISTS, class L, class P>
__device__ __forceinline__ void segment_list_append(const P& p, u64* status, u64* bins,
                                                    u32 mine, u32 active, u64 seg) {
#pragma unroll
    for (u32 b = 0; b < LISTS; ++b) {
        u64* appended = &status[SEGMENT_STATUS_LISTS + b];
        const u64 at = warp_append<u64>(mine == b, active,
                                        [appended](u64 n) { return atomicAdd(appended, n); });
        if (mine == b && at < L::capacity(p, b)) {
            bins[L::start(p, b) + at] = seg;
        }
    }
}

}  // namespace oxicub
