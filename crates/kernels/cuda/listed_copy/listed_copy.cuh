// Family listed_copy: elements moved between a listed layout (each segment a view of its own,
// addressed by element address from a base of 0) and one joined buffer holding the segments one
// after another (segment s at joined_offsets[s]). TO_LIST = 0 gathers the list into the joined
// buffer, 1 scatters the joined buffer back into the list. A gather may add an i64 per segment
// to its elements (list_addend, 0 for none): sharded top-k's local indices made global. With
// `single`, one view whose address (and addend) are the parameters themselves: no tables.
namespace oxicub {

// The last segment s of `offsets` (num_segments + 1 ascending i64, offsets[0] = 0) with
// offsets[s] <= i, searched in [lo, hi]: the segment that holds joined position i (empty
// segments share their offset with the next one and are passed over).
__device__ __forceinline__ u64 listed_copy_segment_of(const i64* offsets, u64 i, u64 lo, u64 hi) {
    while (lo < hi) {
        const u64 mid = lo + (hi - lo + 1) / 2;
        if ((u64)offsets[mid] <= i) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    return lo;
}

// One view (`single`): a plain copy of p.total elements, adding p.list_addend when single is 2.
template <class Bits, u32 BLOCK_THREADS>
__device__ __forceinline__ void listed_copy_single(const ListedCopyParams& p) {
    const Bits* from = reinterpret_cast<const Bits*>((u64)p.list_begin * sizeof(Bits));
    Bits* joined = reinterpret_cast<Bits*>(p.joined);
    const Bits addend = p.single == 2 ? (Bits)p.list_addend : (Bits)0;
    for (u64 i = (u64)blockIdx.x * BLOCK_THREADS + threadIdx.x; i < p.total;
         i += (u64)gridDim.x * BLOCK_THREADS) {
        joined[i] = (Bits)(from[i] + addend);
    }
}

template <class Key, u32 BLOCK_THREADS>
__device__ __forceinline__ void listed_copy(const ListedCopyParams& p) {
    typedef typename Key::Bits Bits;
    if (p.single != 0) {
        listed_copy_single<Bits, BLOCK_THREADS>(p);
        return;
    }
    const i64* list_begin = reinterpret_cast<const i64*>(p.list_begin);
    const i64* offsets = reinterpret_cast<const i64*>(p.joined_offsets);
    const i64* addend = reinterpret_cast<const i64*>(p.list_addend);
    Bits* joined = reinterpret_cast<Bits*>(p.joined);
    // A block moves tiles of consecutive positions: one thread finds the segments of the tile's
    // first and last positions, so each position searches only the segments the tile spans.
    constexpr u32 ITEMS = 4;
    constexpr u64 TILE = (u64)BLOCK_THREADS * ITEMS;
    __shared__ u64 span[2];
    const u64 last_segment = p.num_segments - 1;
    for (u64 base = (u64)blockIdx.x * TILE; base < p.total; base += (u64)gridDim.x * TILE) {
        const u64 end = base + TILE < p.total ? base + TILE : p.total;
        if (threadIdx.x == 0) {
            span[0] = listed_copy_segment_of(offsets, base, 0, last_segment);
            span[1] = listed_copy_segment_of(offsets, end - 1, span[0], last_segment);
        }
        __syncthreads();
        const u64 lo = span[0], hi = span[1];
        for (u32 j = 0; j < ITEMS; ++j) {
            const u64 i = base + (u64)j * BLOCK_THREADS + threadIdx.x;
            if (i < end) {
                const u64 s = listed_copy_segment_of(offsets, i, lo, hi);
                Bits* at = reinterpret_cast<Bits*>(
                    (u64)(list_begin[s] + (i64)(i - (u64)offsets[s])) * sizeof(Bits));
                if (p.to_list) {
                    *at = joined[i];
                } else if (addend != nullptr) {
                    joined[i] = (Bits)(*at + (Bits)addend[s]);
                } else {
                    joined[i] = *at;
                }
            }
        }
        __syncthreads();
    }
}

}  // namespace oxicub
