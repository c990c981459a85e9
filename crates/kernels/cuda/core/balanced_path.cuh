// oxicub core: the partition searches of two sorted sequences (docs/design/sets.md, "GPU"). A
// sequence is read through a functor `at(i)` returning the rank of its element i (unsigned,
// ascending; indices of any unsigned type I: u32 within a tile, u64 over global memory), so one search serves global memory (keys through the radix transform) and a
// tile's ranks in shared memory. Every search is written once over a search policy: a thread
// alone (SerialSearch: over shared memory, where a probe costs a few cycles) or a group of G
// lanes testing G points a round (GroupSearch: over global memory, where each round is a
// memory latency and the rounds, not the probes, are the cost).
namespace oxicub {

// A thread alone: binary searches.
struct SerialSearch {
    // The first m in [lo, hi) with !pred(m), where pred holds on a prefix of [lo, hi); hi when
    // it holds everywhere.
    template <class I, class P>
    __device__ __forceinline__ I first_false(I lo, I hi, P pred) const {
        while (lo < hi) {
            const I mid = (lo + hi) >> 1;
            if (pred(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    // first_false biased toward hi (the seed's BiasedBinarySearch): the first probes split at
    // 511/512, 127/128, 31/32 and 15/16 of the range, since the answers looked for this way
    // (the start of a short run of equal keys) lie near the end.
    template <class I, class P>
    __device__ __forceinline__ I first_false_near_end(I lo, I hi, P pred) const {
        const u32 shifts[4] = {9u, 7u, 5u, 4u};
#pragma unroll
        for (u32 level = 0; level < 4; ++level) {
            if (lo < hi) {
                const I mid = hi - 1 - ((hi - lo - 1) >> shifts[level]);
                if (pred(mid)) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
        }
        return first_false(lo, hi, pred);
    }

    // first_false with a guess at the answer: a thread's probes cost a few cycles, so the
    // guess is not used.
    template <class I, class P>
    __device__ __forceinline__ I first_false_around(I lo, I hi, I, P pred) const {
        return first_false(lo, hi, pred);
    }
};

// A group of G lanes (G a power of two up to 32, the groups aligned within the warp; every lane
// of a group calls with the same arguments and gets the same answer).
template <u32 G>
struct GroupSearch {
    static_assert(G >= 2 && G <= 32 && (G & (G - 1)) == 0, "a power-of-two group of a warp");

    __device__ __forceinline__ static u32 lane() { return threadIdx.x & (G - 1); }
    __device__ __forceinline__ static u32 mask() {
        const u32 ones = G == 32 ? 0xffffffffu : (1u << G) - 1u;
        return ones << ((threadIdx.x & 31u) & ~(G - 1));
    }
    // How many lanes of the group hold `flag` (a prefix of the lanes, for a monotone pred).
    __device__ __forceinline__ static u64 count(bool flag) {
        const u32 m = mask();
        return (u64)__popc(__ballot_sync(m, flag) & m);
    }

    // SerialSearch::first_false in rounds of G probes, so a search of 2^24 entries with G = 8
    // takes 8 dependent loads instead of 24.
    template <class P>
    __device__ __forceinline__ u64 first_false(u64 lo, u64 hi, P pred) const {
        while (hi - lo > G) {
            const u64 span = hi - lo;
            // Probe k at lo + span (k + 1) / (G + 1): strictly increasing since span > G.
            const u64 held = count(pred(lo + span * (lane() + 1) / (G + 1)));
            const u64 new_lo = held == 0 ? lo : lo + span * held / (G + 1) + 1;
            hi = held == G ? hi : lo + span * (held + 1) / (G + 1);
            lo = new_lo;
        }
        const u64 m = lo + lane();
        return lo + count(m < hi && pred(m));
    }

    // first_false whose first round spreads its G probes over guess +- GUESS_RADIUS: when the
    // answer lies there (a merge path of keys drawn alike stays within a few thousand of the
    // diagonal's proportional split), the rounds left search a few hundred entries, not all.
    // Wherever the answer is, the round narrows the range by its probes.
    static constexpr u64 GUESS_RADIUS = 2048;
    template <class P>
    __device__ __forceinline__ u64 first_false_around(u64 lo, u64 hi, u64 guess, P pred) const {
        if (hi - lo > 2 * GUESS_RADIUS + G) {
            const u64 first = guess > lo + GUESS_RADIUS ? guess - GUESS_RADIUS : lo;
            const u64 last = guess + GUESS_RADIUS < hi ? guess + GUESS_RADIUS : hi - 1;
            // Probe k at first + (last - first) k / (G - 1): both ends, nondecreasing.
            auto probe = [&](u64 k) { return first + (last - first) * k / (G - 1); };
            const u64 held = count(pred(probe(lane())));
            if (held != 0) {
                lo = probe(held - 1) + 1;
            }
            if (held != G) {
                hi = probe(held);
            }
        }
        return first_false(lo, hi, pred);
    }

    // first_false whose first round tests the last G entries (where the answers looked for this
    // way usually are): one round when the answer is among them.
    template <class P>
    __device__ __forceinline__ u64 first_false_near_end(u64 lo, u64 hi, P pred) const {
        if (hi - lo <= G) {
            return first_false(lo, hi, pred);
        }
        const u64 tail = hi - G;
        const u64 held = count(pred(tail + lane()));
        return held == 0 ? first_false(lo, tail, pred) : tail + held;
    }
};

// Merge Path: how many of the first `diag` outputs of merging a (a_count) and b (b_count) come
// from a, equal ranks from a first (a's duplicates are all consumed before b's).
template <class S, class A, class B, class I>
__device__ __forceinline__ I merge_path_lower(const S& search, A a, I a_count, B b, I b_count,
                                              I diag) {
    const I lo = diag > b_count ? diag - b_count : (I)0;
    const I hi = diag < a_count ? diag : a_count;
    // The guess: a's share of the diagonal in proportion to a's share of the inputs.
    const u64 total = (u64)a_count + (u64)b_count;
    const I guess = total == 0 ? lo : (I)((double)diag * (double)a_count / (double)total);
    return search.first_false_around(lo, hi, guess < lo ? lo : (guess > hi ? hi : guess),
                                     [&](I m) { return !(b(diag - 1 - m) < a(m)); });
}

// The first i in [begin, end) with at(i) >= x (UPPER: at(i) > x), else end, searched from the
// end (first_false_near_end).
template <bool UPPER, class S, class F, class I, class X>
__device__ __forceinline__ I run_bound(const S& search, F at, I begin, I end, X x) {
    return search.first_false_near_end(begin, end, [&](I i) {
        const auto y = at(i);
        return UPPER ? !(x < y) : y < x;
    });
}

// Balanced Path: where the cross-diagonal `diag` meets the path that pairs the k-th copy of a
// rank in a with its k-th copy in b (the seed's BalancedPath). Returns the a index; `*star` is
// set when the diagonal would separate such a pair (the partition on the left then takes the b
// element after the diagonal: the next partition starts one b later). DUPLICATES = false is
// the promise that no rank repeats within a or within b (one comparison, no run searches).
// Every index stays inside a and b whatever the inputs hold (an unsorted input gives some
// partition, never an access outside them).
template <bool DUPLICATES, class S, class A, class B, class I>
__device__ __forceinline__ I balanced_path(const S& search, A a, I a_count, B b, I b_count, I diag,
                                           bool* star) {
    I a_index = merge_path_lower(search, a, a_count, b, b_count, diag);
    const I b_index = diag - a_index;
    *star = false;
    if (b_index >= b_count) {
        return a_index;
    }
    if (!DUPLICATES) {
        *star = a_index > 0 && !(a(a_index - 1) < b(b_index));
        return a_index;
    }
    const auto x = b(b_index);
    // Where the run of x starts in both: the Merge Path and the Balanced Path diverge there.
    const I a_start = run_bound<false>(search, a, (I)0, a_index, x);
    const I b_start = run_bound<false>(search, b, (I)0, b_index, x);
    const I a_run = a_index - a_start;
    const I x_count = a_run + (b_index - b_start);
    // Share the run's x_count elements evenly between a and b, b's share bounded by its run.
    const I half = x_count >> 1;
    I b_advance = half > x_count - a_run ? half : x_count - a_run;
    const I b_end = b_start + b_advance + 1 < b_count ? b_start + b_advance + 1 : b_count;
    const I b_run = run_bound<true>(search, b, b_index, b_end, x) - b_start;
    b_advance = b_advance < b_run ? b_advance : b_run;
    const I a_advance = x_count - b_advance;
    *star = a_advance == b_advance + 1 && b_advance < b_run;
    a_index = a_start + a_advance;
    return a_index;
}

}  // namespace oxicub
