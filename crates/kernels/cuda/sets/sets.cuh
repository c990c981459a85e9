// Family sets: a multiset operation or a merge of two sorted inputs a and b (seed 003,
// docs/design/sets.md, "GPU"). PARTITION finds where each tile's cross-diagonal meets the
// Balanced Path (Merge Path for a merge, or when no key repeats), COUNT runs each tile's serial
// operation and counts its outputs (and checks that the tile's keys are in order), FIND looks
// for the first key out of order when a tile's partition came out of order, SCAN turns the
// tiles' counts into offsets and the total, WRITE runs the tiles again and writes the
// outputs, compacted through shared memory, with their values or source positions.
namespace oxicub {

// The rank of a key: its radix code, inverted for descending inputs (one ascending comparison
// serves both orders).
template <class Key>
__device__ __forceinline__ u64 sets_rank(typename Key::Bits raw, bool descending) {
    typedef typename Key::Bits Bits;
    const Bits code = Key::to_radix(raw);
    return (u64)(descending ? (Bits)~code : code);
}

// One tile: its ranges of a and b (after the partitions' stars), and the per-thread results.
struct SetsTile {
    u64 a0, b0;          // where the tile's a and b start
    u64 a_count, b_count;
    bool left_star;      // the tile's left diagonal is starred (its first b was taken)
};

// The tile's ranges from the partitions at its two diagonals (clamped into a and b: an
// unsorted input can give partitions out of order, which DISORDER then reports).
__device__ __forceinline__ SetsTile sets_tile_ranges(const SetsParams& p, u64 tile, u64 nv,
                                                     u64* status) {
    const u64* partition = reinterpret_cast<const u64*>(p.partition);
    const u64 total = p.a_count + p.b_count;
    const u64 p0 = partition[tile], p1 = partition[tile + 1];
    const u64 mask = ~(1ull << 63);
    const u64 gid = tile * nv;
    const u64 end = gid + nv < total ? gid + nv : total;
    SetsTile t;
    t.left_star = (p0 >> 63) != 0;
    u64 a0 = p0 & mask, a1 = p1 & mask;
    u64 b0 = gid - a0 + (p0 >> 63), b1 = end - a1 + (p1 >> 63);
    if (a1 < a0 || b1 < b0 || a1 > p.a_count || b1 > p.b_count || (a1 - a0) + (b1 - b0) > nv + 1) {
        status[SETS_STATUS_DISORDER] = 1;
        a1 = a1 < a0 ? a0 : (a1 > p.a_count ? p.a_count : a1);
        a0 = a0 > a1 ? a1 : a0;
        b0 = b0 > p.b_count ? p.b_count : b0;
        b1 = b1 < b0 ? b0 : (b1 > p.b_count ? p.b_count : b1);
        if (a1 - a0 > nv + 1) {
            a1 = a0 + nv + 1;
        }
        if ((a1 - a0) + (b1 - b0) > nv + 1) {
            b1 = b0 + (nv + 1 - (a1 - a0));
        }
    }
    t.a0 = a0;
    t.b0 = b0;
    t.a_count = a1 - a0;
    t.b_count = b1 - b0;
    return t;
}

// The serial operation of one thread over the tile's ranks (a's at ranks[0..a_count), b's at
// ranks[a_count..]): slots from (ai, bi) while ai + bi < end, each a key-rank slot (a pair of
// equal ranks, or the smaller one alone; a merge takes one element a slot). Returns the commit
// mask; from[i] is the tile-local source of slot i (b's above SETS_FROM_B).
template <u32 OP, u32 VT>
__device__ __forceinline__ u32 sets_serial(const u64* ranks, u64 a_count, u64 b_count, u64 ai,
                                           u64 bi, u64 end, u64 (&from)[VT]) {
    u32 commit = 0;
#pragma unroll
    for (u32 i = 0; i < VT; ++i) {
        if (ai + bi < end) {
            const bool a_in = ai < a_count, b_in = bi < b_count;
            const u64 x = a_in ? ranks[ai] : 0, y = b_in ? ranks[a_count + bi] : 0;
            // a before b (pa), b before a (pb); an exhausted side is after every key.
            const bool pa = !b_in || (a_in && x < y);
            const bool pb = !a_in || (b_in && y < x);
            const u64 from_a = ai, from_b = SETS_FROM_B | bi;
            if (OP == SETS_OP_MERGE) {
                from[i] = pb ? from_b : from_a;
                commit |= 1u << i;
                ai += pb ? 0 : 1;
                bi += pb ? 1 : 0;
                continue;
            }
            bool keep = false;
            if (OP == SETS_OP_INTERSECTION) {
                from[i] = from_a;
                keep = !pa && !pb;
            } else if (OP == SETS_OP_UNION) {
                from[i] = pb ? from_b : from_a;
                keep = true;
            } else if (OP == SETS_OP_DIFFERENCE) {
                from[i] = from_a;
                keep = pa;
            } else {
                from[i] = pa ? from_a : from_b;
                keep = pa != pb;
            }
            commit |= keep ? 1u << i : 0u;
            ai += pb ? 0 : 1;
            bi += pa ? 0 : 1;
        }
    }
    return commit;
}

// A tile's serial operation by every thread: the tile's ranks loaded into shared memory, each
// thread's start found by a search within them. Returns the thread's commit mask.
template <class Key, u32 THREADS, u32 VT, u32 OP>
__device__ __forceinline__ u32 sets_run_tile(const SetsParams& p, const SetsTile& t, u64* ranks,
                                             u64 (&from)[VT]) {
    typedef typename Key::Bits Bits;
    const Bits* a = reinterpret_cast<const Bits*>(p.a);
    const Bits* b = reinterpret_cast<const Bits*>(p.b);
    const bool descending = (p.flags & SETS_DESCENDING) != 0;
    for (u64 i = threadIdx.x; i < t.a_count; i += THREADS) {
        ranks[i] = sets_rank<Key>(a[t.a0 + i], descending);
    }
    for (u64 i = threadIdx.x; i < t.b_count; i += THREADS) {
        ranks[t.a_count + i] = sets_rank<Key>(b[t.b0 + i], descending);
    }
    __syncthreads();
    const u64 count = t.a_count + t.b_count;
    // The thread's diagonals within the tile: the tile's first diagonal is VT * tid on the
    // slot path, less one when the tile's first b went to the tile before.
    auto diagonal = [&](u32 thread) -> u64 {
        if (thread == 0) {
            return 0;
        }
        const u64 d = (u64)VT * thread - (t.left_star ? 1 : 0);
        return d < count ? d : count;
    };
    const u64 d0 = diagonal(threadIdx.x);
    const u64 d1 = threadIdx.x + 1 == THREADS ? count : diagonal(threadIdx.x + 1);
    auto at_a = [&](u64 i) { return ranks[i]; };
    auto at_b = [&](u64 i) { return ranks[t.a_count + i]; };
    bool star = false;
    u64 ai;
    if (OP == SETS_OP_MERGE) {
        ai = merge_path_lower(at_a, t.a_count, at_b, t.b_count, d0);
    } else if (p.flags & SETS_NO_DUPLICATES) {
        ai = balanced_path<false>(at_a, t.a_count, at_b, t.b_count, d0, &star);
    } else {
        ai = balanced_path<true>(at_a, t.a_count, at_b, t.b_count, d0, &star);
    }
    const u64 bi = d0 - ai + (star ? 1 : 0);
    return sets_serial<OP, VT>(ranks, t.a_count, t.b_count, ai, bi, d1, from);
}

// The first key out of order among n keys of `keys` whose neighbours [first, last) this thread
// compares (position i against i - 1), into the status word `word` (position << 1 | repeat).
template <class Key>
__device__ __forceinline__ void sets_check_range(const SetsParams& p, const typename Key::Bits* keys,
                                                 u64 first, u64 last, u64 step, u64* word) {
    const bool descending = (p.flags & SETS_DESCENDING) != 0;
    const bool strict = (p.flags & SETS_STRICT) != 0;
    for (u64 i = first; i < last; i += step) {
        const u64 x = sets_rank<Key>(keys[i - 1], descending);
        const u64 y = sets_rank<Key>(keys[i], descending);
        if (y < x || (strict && y == x)) {
            atomicMin(word, (i << 1) | (y == x ? 1ull : 0ull));
        }
    }
}

template <class Key, u32 THREADS, u32 OP, int VALUE_BYTES>
__device__ __forceinline__ void sets(const SetsParams& p) {
    typedef typename Key::Bits Bits;
    constexpr u32 VT = SETS_ITEMS;
    constexpr u64 NV = (u64)THREADS * VT;
    __shared__ u64 ranks[NV + 2];
    __shared__ u64 compacted[NV + 2];
    __shared__ u64 warp_totals[THREADS / 32];
    u64* status = reinterpret_cast<u64*>(p.status);
    const u64 total = p.a_count + p.b_count;
    if (p.stage == SETS_STAGE_PARTITION) {
        // A thread per tile boundary: the Balanced Path (or Merge Path) at its diagonal, the
        // star in the top bit.
        const Bits* a = reinterpret_cast<const Bits*>(p.a);
        const Bits* b = reinterpret_cast<const Bits*>(p.b);
        const bool descending = (p.flags & SETS_DESCENDING) != 0;
        auto at_a = [&](u64 i) { return sets_rank<Key>(a[i], descending); };
        auto at_b = [&](u64 i) { return sets_rank<Key>(b[i], descending); };
        u64* partition = reinterpret_cast<u64*>(p.partition);
        const u64 stride = grid_threads(THREADS);
        for (u64 q = global_thread_index(THREADS); q <= p.tiles; q += stride) {
            const u64 diag = q * NV < total ? q * NV : total;
            bool star = false;
            u64 ai;
            if (OP == SETS_OP_MERGE) {
                ai = merge_path_lower(at_a, p.a_count, at_b, p.b_count, diag);
            } else if (p.flags & SETS_NO_DUPLICATES) {
                ai = balanced_path<false>(at_a, p.a_count, at_b, p.b_count, diag, &star);
            } else {
                ai = balanced_path<true>(at_a, p.a_count, at_b, p.b_count, diag, &star);
            }
            partition[q] = ai | (star ? 1ull << 63 : 0ull);
        }
        return;
    }
    if (p.stage == SETS_STAGE_FIND) {
        // Only when a tile's partitions came out of order: every neighbour compared.
        if (status[SETS_STATUS_DISORDER] == 0) {
            return;
        }
        const u64 stride = grid_threads(THREADS);
        const u64 first = global_thread_index(THREADS) + 1;
        sets_check_range<Key>(p, reinterpret_cast<const Bits*>(p.a), first, p.a_count, stride,
                              &status[SETS_STATUS_A_BAD]);
        sets_check_range<Key>(p, reinterpret_cast<const Bits*>(p.b), first, p.b_count, stride,
                              &status[SETS_STATUS_B_BAD]);
        return;
    }
    u64* tile_counts = reinterpret_cast<u64*>(p.tile_counts);
    if (p.stage == SETS_STAGE_SCAN) {
        // One block: each thread sums a run of consecutive tiles' counts, one block scan, then
        // each thread writes its run's offsets (two passes of independent loads a thread, not
        // a block scan per THREADS tiles). The total goes to the status and to the caller's
        // count on the device.
        const u64 per = (p.tiles + THREADS - 1) / THREADS;
        const u64 first = (u64)threadIdx.x * per;
        const u64 last = first + per < p.tiles ? first + per : p.tiles;
        u64 sum = 0;
#pragma unroll 8
        for (u64 i = first; i < last; ++i) {
            sum += tile_counts[i];
        }
        u64 total;
        u64 below = block_exclusive_sum<THREADS, u64>(sum, warp_totals, &total);
        for (u64 i = first; i < last; ++i) {
            const u64 x = tile_counts[i];
            tile_counts[i] = below;
            below += x;
        }
        if (threadIdx.x == 0) {
            status[SETS_STATUS_COUNT] = total;
            if (p.count_out != 0) {
                *reinterpret_cast<i64*>(p.count_out) = (i64)total;
            }
        }
        return;
    }
    // COUNT and WRITE: a block per tile at a time.
    for (u64 tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
        const SetsTile t = sets_tile_ranges(p, tile, NV, status);
        u64 from[VT];
        const u32 commit = sets_run_tile<Key, THREADS, VT, OP>(p, t, ranks, from);
        u64 tile_total;
        const u64 below = block_exclusive_sum<THREADS, u64>((u64)__popc(commit), warp_totals,
                                                            &tile_total);
        if (p.stage == SETS_STAGE_COUNT) {
            if (threadIdx.x == 0) {
                tile_counts[tile] = tile_total;
            }
            if (p.flags & SETS_CHECK) {
                // The tile's keys in order, and each range's first key after the key before it
                // (the seam with the tile before); the tiles cover a and b when the partitions
                // are in order (else FIND compares every neighbour).
                const bool strict = (p.flags & SETS_STRICT) != 0;
                for (u64 i = threadIdx.x + 1; i < t.a_count; i += THREADS) {
                    const u64 x = ranks[i - 1], y = ranks[i];
                    if (y < x || (strict && y == x)) {
                        atomicMin(&status[SETS_STATUS_A_BAD],
                                  ((t.a0 + i) << 1) | (y == x ? 1ull : 0ull));
                    }
                }
                for (u64 i = threadIdx.x + 1; i < t.b_count; i += THREADS) {
                    const u64 x = ranks[t.a_count + i - 1], y = ranks[t.a_count + i];
                    if (y < x || (strict && y == x)) {
                        atomicMin(&status[SETS_STATUS_B_BAD],
                                  ((t.b0 + i) << 1) | (y == x ? 1ull : 0ull));
                    }
                }
                if (threadIdx.x == 0 && t.a0 > 0 && t.a_count > 0) {
                    sets_check_range<Key>(p, reinterpret_cast<const Bits*>(p.a), t.a0, t.a0 + 1,
                                          1, &status[SETS_STATUS_A_BAD]);
                }
                if (threadIdx.x == 32 % THREADS && t.b0 > 0 && t.b_count > 0) {
                    sets_check_range<Key>(p, reinterpret_cast<const Bits*>(p.b), t.b0, t.b0 + 1,
                                          1, &status[SETS_STATUS_B_BAD]);
                }
            }
            __syncthreads();
            continue;
        }
        // WRITE: the committed sources compacted in shared memory, then written in order.
        u64 at = below;
#pragma unroll
        for (u32 i = 0; i < VT; ++i) {
            if (commit & (1u << i)) {
                compacted[at++] = from[i];
            }
        }
        __syncthreads();
        const u64 offset = tile_counts[tile];
        const Bits* a = reinterpret_cast<const Bits*>(p.a);
        const Bits* b = reinterpret_cast<const Bits*>(p.b);
        Bits* out_keys = reinterpret_cast<Bits*>(p.out_keys);
        for (u64 i = threadIdx.x; i < tile_total; i += THREADS) {
            const u64 g = offset + i;
            if (g >= p.out_len) {
                break;  // only an unsorted input (reported) writes more than the bound
            }
            const u64 source = compacted[i];
            const bool in_b = (source & SETS_FROM_B) != 0;
            const u64 at_input = in_b ? t.b0 + (source & ~SETS_FROM_B) : t.a0 + source;
            out_keys[g] = in_b ? b[at_input] : a[at_input];
            if (VALUE_BYTES != 0) {
                typedef typename ValueWord<VALUE_BYTES>::Type Word;
                Word* out_values = reinterpret_cast<Word*>(p.out_values);
                if (p.flags & SETS_INDEX) {
                    out_values[g] = (Word)(in_b ? p.a_count + at_input : at_input);
                } else {
                    out_values[g] =
                        reinterpret_cast<const Word*>(in_b ? p.b_values : p.a_values)[at_input];
                }
            }
        }
        __syncthreads();
    }
}

}  // namespace oxicub
