// oxicub core: a block sort of entries (u64, or u32) held in registers, each run of a
// power-of-two `span`
// sorted ascending on its own (docs/design/segmented_sort.md, "GPU: register path"). Entry k of
// thread t is element t * ITEMS + k of the block's tile (a blocked arrangement): a bitonic
// network sorts each thread's ITEMS in registers, then merge rounds through shared memory
// double the sorted runs (n log n work, where a bitonic network across threads is n log^2 n).
// A u64 entry packs its tie-break into its low bits, so the order is total and the sort stable;
// u32 entries are bare ranks, for sorts where equal ranks are indistinguishable.
namespace oxicub {

template <u32 THREADS, u32 ITEMS, class T = u64>
struct RegisterSort {
    static constexpr u32 TILE = THREADS * ITEMS;
    // The shared entries the sort and the exchanges use.
    static constexpr u32 SHARED_WORDS = TILE + TILE / 16;
    // Above every entry: the padding of a run.
    static constexpr T PAD = (T)~(T)0;

    // The shared word of element i: one spare word after every 16 keeps a warp's stores of
    // t * ITEMS + k (a stride of ITEMS words) and its reads of consecutive elements off a
    // single bank.
    __device__ __forceinline__ static u32 element(u32 i) { return i + (i >> 4); }
    // The shared word of element t * ITEMS + k.
    __device__ __forceinline__ static u32 at(u32 t, u32 k) { return element(t * ITEMS + k); }

    __device__ __forceinline__ static void order(T& low, T& high) {
        const T a = low;
        const T b = high;
        low = a < b ? a : b;
        high = a < b ? b : a;
    }

    // Element i against i ^ (S - 1), both in this thread (S <= ITEMS).
    template <u32 S>
    __device__ __forceinline__ static void flip_in_thread(T (&e)[ITEMS]) {
#pragma unroll
        for (u32 k = 0; k < ITEMS; ++k) {
            const u32 partner = k ^ (S - 1u);
            if (partner > k) {
                order(e[k], e[partner]);
            }
        }
    }

    // Element i against i ^ H, both in this thread (H < ITEMS).
    template <u32 H>
    __device__ __forceinline__ static void half_in_thread(T (&e)[ITEMS]) {
#pragma unroll
        for (u32 k = 0; k < ITEMS; ++k) {
            if ((k & H) == 0) {
                order(e[k], e[k | H]);
            }
        }
    }

    // Each run of `span` (up to ITEMS) of this thread's entries sorted: the bitonic merges of
    // runs of 2, 4, ... (a flip, then half-cleaners), all within the thread.
    __device__ __forceinline__ static void sort_in_thread(T (&e)[ITEMS], u32 span) {
        // Unrolled per size: register indices must be compile-time constants.
        if (span >= 2) {
            flip_in_thread<2>(e);
        }
        if (ITEMS >= 4 && span >= 4) {
            flip_in_thread<(ITEMS >= 4 ? 4 : 2)>(e);
            half_in_thread<1>(e);
        }
        if (ITEMS >= 8 && span >= 8) {
            flip_in_thread<(ITEMS >= 8 ? 8 : 2)>(e);
            half_in_thread<(ITEMS >= 8 ? 2 : 1)>(e);
            half_in_thread<1>(e);
        }
        if (ITEMS >= 16 && span >= 16) {
            flip_in_thread<(ITEMS >= 16 ? 16 : 2)>(e);
            half_in_thread<(ITEMS >= 16 ? 4 : 1)>(e);
            half_in_thread<(ITEMS >= 16 ? 2 : 1)>(e);
            half_in_thread<1>(e);
        }
    }

    // One merge round: the sorted runs of `width` elements (at least ITEMS) merged pairwise,
    // each thread producing its ITEMS outputs from the merge path of its pair of runs in shared
    // memory. Equal entries (only the padding) take A's first.
    __device__ __forceinline__ static void merge_round(T (&e)[ITEMS], T* shared, u32 width) {
        const u32 t = threadIdx.x;
        // Runs that a warp holds whole (its 32 * ITEMS elements) merge within the warp: only
        // its lanes read what it wrote.
        const bool in_warp = 2 * width <= 32 * ITEMS;
        if (in_warp) {
            __syncwarp();
        } else {
            __syncthreads();  // the last reads of `shared` are done
        }
#pragma unroll
        for (u32 k = 0; k < ITEMS; ++k) {
            shared[at(t, k)] = e[k];
        }
        if (in_warp) {
            __syncwarp();
        } else {
            __syncthreads();
        }
        const u32 first = t * ITEMS;
        const u32 a0 = first & ~(2 * width - 1u);
        const u32 b0 = a0 + width;
        const u32 diag = first - a0;
        u32 lo = diag > width ? diag - width : 0;
        u32 hi = diag < width ? diag : width;
        while (lo < hi) {
            const u32 mid = (lo + hi) >> 1;
            if (shared[element(a0 + mid)] <= shared[element(b0 + diag - 1 - mid)]) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        u32 ai = lo;
        u32 bi = diag - lo;
        T a = ai < width ? shared[element(a0 + ai)] : PAD;
        T b = bi < width ? shared[element(b0 + bi)] : PAD;
#pragma unroll
        for (u32 k = 0; k < ITEMS; ++k) {
            const bool take_a = bi >= width || (ai < width && a <= b);
            e[k] = take_a ? a : b;
            if (take_a) {
                ++ai;
                a = ai < width ? shared[element(a0 + ai)] : PAD;
            } else {
                ++bi;
                b = bi < width ? shared[element(b0 + bi)] : PAD;
            }
        }
    }

    // Sorts each run of `span` elements (a power of two, 1 to TILE) ascending: each thread's
    // ITEMS (or each run within them) in registers, then merge rounds. Every thread of the
    // block calls it with the same span; `shared` holds SHARED_WORDS words, and the caller
    // synchronises before its next use of them.
    __device__ __forceinline__ static void sort(T (&e)[ITEMS], T* shared, u32 span) {
        static_assert(ITEMS >= 2 && ITEMS <= 16 && (ITEMS & (ITEMS - 1)) == 0,
                      "ITEMS is a power of two from 2 to 16");
        static_assert(THREADS % 32 == 0, "whole warps");
        sort_in_thread(e, span);
#pragma unroll 1
        for (u32 width = ITEMS; width < span; width <<= 1) {
            merge_round(e, shared, width);
        }
    }

    // The element of the run of 2^span_log that entry k of thread t loads (and, after the sort,
    // the rank in its run that element t * ITEMS + k is written to through `element`): a
    // bijection within each run under which a warp's lanes touch consecutive positions of a
    // run. `run` is the run of element t * ITEMS + k. Shifts, not divisions: the span is a
    // run-time power of two.
    __device__ __forceinline__ static u32 striped(u32 t, u32 k, u32 span_log, u32* run) {
        constexpr u32 ITEMS_LOG = ITEMS == 2 ? 1 : ITEMS == 4 ? 2 : ITEMS == 8 ? 3 : 4;
        if (span_log >= ITEMS_LOG) {
            const u32 threads_log = span_log - ITEMS_LOG;  // threads per run
            *run = t >> threads_log;
            return (k << threads_log) | (t & ((1u << threads_log) - 1u));
        }
        *run = (t * ITEMS + k) >> span_log;
        return k & ((1u << span_log) - 1u);
    }
};

}  // namespace oxicub
