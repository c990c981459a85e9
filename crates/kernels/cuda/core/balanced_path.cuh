// oxicub core: the partition searches of two sorted sequences (docs/design/sets.md, "GPU"). A
// sequence is read through a functor `at(i)` returning the rank of its element i (u64,
// ascending), so one search serves global memory (keys through the radix transform) and a
// tile's ranks in shared memory.
namespace oxicub {

// Merge Path: how many of the first `diag` outputs of merging a (a_count) and b (b_count) come
// from a, equal ranks from a first (a's duplicates are all consumed before b's).
template <class A, class B>
__device__ __forceinline__ u64 merge_path_lower(A a, u64 a_count, B b, u64 b_count, u64 diag) {
    u64 lo = diag > b_count ? diag - b_count : 0;
    u64 hi = diag < a_count ? diag : a_count;
    while (lo < hi) {
        const u64 mid = (lo + hi) >> 1;
        if (!(b(diag - 1 - mid) < a(mid))) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

// The first i in [begin, end) with at(i) >= x (UPPER: at(i) > x), else end. Biased toward the
// end (the seed's BiasedBinarySearch): the first probes split at 511/512, 127/128, 31/32 and
// 15/16 of the range, since the run of a key the partition looks for is short.
template <bool UPPER, class F>
__device__ __forceinline__ u64 biased_search(F at, u64 begin, u64 end, u64 x) {
    auto step = [&](u64 mid) {
        const u64 y = at(mid);
        if (UPPER ? !(x < y) : (y < x)) {
            begin = mid + 1;
        } else {
            end = mid;
        }
    };
    const u32 shifts[4] = {9u, 7u, 5u, 4u};
#pragma unroll
    for (u32 level = 0; level < 4; ++level) {
        if (begin < end) {
            step(end - 1 - ((end - begin - 1) >> shifts[level]));
        }
    }
    while (begin < end) {
        step((begin + end) >> 1);
    }
    return begin;
}

// Balanced Path: where the cross-diagonal `diag` meets the path that pairs the k-th copy of a
// rank in a with its k-th copy in b (the seed's BalancedPath). Returns the a index; `*star` is
// set when the diagonal would separate such a pair (the partition on the left then takes the b
// element after the diagonal: the next partition starts one b later). DUPLICATES = false is
// the promise that no rank repeats within a or within b (one comparison, no run searches).
// Every index stays inside a and b whatever the inputs hold (an unsorted input gives some
// partition, never an access outside them).
template <bool DUPLICATES, class A, class B>
__device__ __forceinline__ u64 balanced_path(A a, u64 a_count, B b, u64 b_count, u64 diag,
                                             bool* star) {
    u64 a_index = merge_path_lower(a, a_count, b, b_count, diag);
    const u64 b_index = diag - a_index;
    *star = false;
    if (b_index >= b_count) {
        return a_index;
    }
    if (!DUPLICATES) {
        *star = a_index > 0 && !(a(a_index - 1) < b(b_index));
        return a_index;
    }
    const u64 x = b(b_index);
    // Where the run of x starts in both: the Merge Path and the Balanced Path diverge there.
    const u64 a_start = biased_search<false>(a, 0, a_index, x);
    const u64 b_start = biased_search<false>(b, 0, b_index, x);
    const u64 a_run = a_index - a_start;
    const u64 x_count = a_run + (b_index - b_start);
    // Share the run's x_count elements evenly between a and b, b's share bounded by its run.
    const u64 half = x_count >> 1;
    u64 b_advance = half > x_count - a_run ? half : x_count - a_run;
    const u64 b_end = b_start + b_advance + 1 < b_count ? b_start + b_advance + 1 : b_count;
    const u64 b_run = biased_search<true>(b, b_index, b_end, x) - b_start;
    b_advance = b_advance < b_run ? b_advance : b_run;
    const u64 a_advance = x_count - b_advance;
    *star = a_advance == b_advance + 1 && b_advance < b_run;
    a_index = a_start + a_advance;
    return a_index;
}

}  // namespace oxicub
