// Family topk_radix_select: single-problem top-k by MSB-first radix select, as a sequence of
// stages of one kernel, launched back to back on one stream with no host round trip
// (docs/design/topk.md, "Radix select"). All pass state lives in a small device array (`state`,
// the TOPK_SLOT_* u64 slots). The rank of a key is its radix
// code XOR `flip` (all ones for min, zero for max), so a larger rank is always better.
//
// Stages (params.stage):
//   INIT              one thread: read k (host value or deferred pointer, clamped), reset state.
//   HISTOGRAM         per-block shared histogram of digit (rank >> shift) & 255 over candidates
//                     ((rank & mask) == prefix), merged into histogram[pass] with atomics.
//   PIVOT             one thread: scan the histogram from the best digit down, find the pivot
//                     bucket, narrow (prefix, mask), update `remaining`; early exit (done) when
//                     the pivot bucket's count equals `remaining`, or after the last digit.
//   COUNT_BOUNDARY    per tile: number of boundary items ((rank & mask) == prefix).
//   SCAN              one block: exclusive scan of per-tile counts in place; total -> state.
//   COUNT_SELECTED    per tile: number of selected items (above the boundary, or boundary items
//                     kept by the tie-break from their boundary rank in source-index order).
//   SCATTER_SELECTED  per tile: stable compaction of the selected items into the outputs, in
//                     source-index order.
//   COUNT_SPLIT       per tile over the selected items: number with rank bit `shift` set.
//   SCATTER_SPLIT     stable split by that bit (set first); one LSD pass of the sort of the k
//                     results (by rank, descending; equal ranks stay in source-index order).
// Every per-tile stage is a block-uniform loop over tiles of BLOCK_THREADS items (one per
// thread), with 64-bit indices. Counts per tile fit in 32 bits; offsets and totals are 64-bit.
//
// The fast path (mode 1), decided on the device:
//   SAMPLE            one block (compiled alone as PART 2, 1024 threads): INIT, then the rank of
//                     TOPK_SAMPLES keys spread over the input, held in registers; the threshold
//                     T is the sample_rank-th best, found by a radix select in shared memory. The
//                     host chooses sample_rank so that fewer than k keys reach T with probability
//                     below 1e-15; about sample_rank * len / TOPK_SAMPLES keys reach it.
//   PREFILTER         the one full read of the input (16-byte loads, several in flight per
//                     thread; compiled alone as PART 1): every key with rank >= T goes, with its
//                     64-bit index, into its warp's own segment of the candidate buffer, counted
//                     in a register (no atomics, no barriers). The last block to finish DECIDEs:
//                     mode 1 iff no segment overflowed and k <= candidates; otherwise mode 0 (the
//                     stages above re-read the input: the fallback).
//   HISTOGRAM         as above, over the candidate buffer in mode 1 (a warp per segment); the
//                     last block of each pass finds the pivot (no PIVOT launch).
//   FINAL             over the candidate buffer: the direct path (no determinism, unsorted) writes
//                     the selected items straight to the outputs (atomic slots; boundary items by
//                     ticket); the other contracts append every item at or above the pivot bucket
//                     to the rank buffer (at most rank_cap items; more falls back to mode 0).
//   RANK_BUCKET/RANK_PLACE/RANK_COUNT/RANK_SCATTER: the rank sort of the rank buffer: each
//                     item's output position is the number of items better than it (rank
//                     descending, equal ranks by source index ascending; all distinct, so
//                     positions are unique and deterministic). BUCKET counts the items per bucket
//                     of leading rank bits (monotone in the rank; its last block scans the
//                     counts), PLACE groups the items by bucket, COUNT compares each item only
//                     with the items in its tile's buckets, by a grid of (item tile x chunk) work
//                     units, and adds the items of the better buckets; SCATTER writes the outputs.
//                     The tie-break drops the surplus boundary items (smaller or larger indices).
//                     In mode 0 with a sorted contract, SCATTER_SELECTED fills the rank buffer
//                     instead of the outputs and the same stages sort it.
namespace oxicub {

// The stages, state slots, flags and sizes shared with the host are generated from the Rust
// list (families/topk_radix_select.rs) ahead of this header.

constexpr u32 TOPK_UNROLL = 4;            // 16-byte loads in flight per thread in PREFILTER
constexpr u32 TOPK_RANK_CHUNK = 2048;     // items compared per RANK_COUNT work unit


// Reads k (host value, or a deferred one checked against its bounds: reported and clamped when
// outside) and resets the pass state. One thread.
__device__ __forceinline__ void topk_init(const TopKRadixSelectParams& params, u64* state) {
    u64 k = params.k_value;
    if (params.k_pointer != 0) {
        const i64 deferred = *reinterpret_cast<const i64*>(params.k_pointer);
        const i64 lo = (i64)params.k_min;
        const i64 hi = (i64)params.k_max;
        if (deferred < lo || deferred > hi) {
            u64* report = reinterpret_cast<u64*>(params.k_report);
            report[0] = 1;
            report[1] = (u64)deferred;
        }
        k = (u64)(deferred < lo ? lo : (deferred > hi ? hi : deferred));
    }
    if (k > params.len) {
        k = params.len;
    }
    state[TOPK_SLOT_K] = k;
    state[TOPK_SLOT_PREFIX] = 0;
    state[TOPK_SLOT_MASK] = 0;
    state[TOPK_SLOT_REMAINING] = k;
    state[TOPK_SLOT_DONE] = (k == 0 || k == params.len) ? 1 : 0;
    for (u32 slot = TOPK_SLOT_BOUNDARY; slot < TOPK_STATE_SLOTS; ++slot) {
        state[slot] = 0;
    }
}

// The pivot of pass `pass` from its merged histogram: narrows (prefix, mask), updates
// `remaining`; done when the pivot bucket's count equals `remaining`, or after the last digit.
// Every thread of one block calls it (one bin per thread, a scan from the best digit down),
// after every block of the pass has merged its counts.
template <u32 BLOCK_THREADS>
__device__ __forceinline__ void topk_pivot(const TopKRadixSelectParams& params, u64* state,
                                           u64* scan) {
    const volatile u64* pass_histogram =
        reinterpret_cast<const volatile u64*>(params.histogram) + (u64)params.pass * TOPK_BINS;
    const u32 t = threadIdx.x;
    const u64 count = t < TOPK_BINS ? pass_histogram[TOPK_BINS - 1 - t] : 0;
    const u64 remaining = state[TOPK_SLOT_REMAINING];
    scan[t] = count;
    __syncthreads();
    for (u32 offset = 1; offset < BLOCK_THREADS; offset <<= 1) {
        const u64 add = t >= offset ? scan[t - offset] : 0;
        __syncthreads();
        scan[t] += add;
        __syncthreads();
    }
    const u64 inclusive = scan[t];
    const u64 above = inclusive - count;
    if (t < TOPK_BINS && above < remaining && inclusive >= remaining) {
        const u64 pivot = TOPK_BINS - 1 - t;
        const u64 left = remaining - above;
        state[TOPK_SLOT_REMAINING] = left;
        state[TOPK_SLOT_PREFIX] |= pivot << params.shift;
        state[TOPK_SLOT_MASK] |= (u64)(TOPK_BINS - 1) << params.shift;
        if (count == left || params.shift == 0) {
            state[TOPK_SLOT_DONE] = 1;
        }
    }
}

// The largest `value` of the flagged lanes of a converged warp, folded into *slot.
__device__ __forceinline__ void topk_warp_max(bool flag, u64 value, u64* slot) {
    if (!__any_sync(0xFFFFFFFFu, flag)) {
        return;
    }
    u64 best = flag ? value : 0;
    for (u32 d = 16; d > 0; d >>= 1) {
        const u64 other = __shfl_xor_sync(0xFFFFFFFFu, best, d);
        best = other > best ? other : best;
    }
    if ((threadIdx.x & 31u) == 0) {
        atomicMax(slot, best);
    }
}

__device__ __forceinline__ u64 topk_mix(u64 x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

}  // namespace oxicub
