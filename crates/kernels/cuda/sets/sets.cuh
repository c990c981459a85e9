// Family sets: a multiset operation or a merge of two sorted inputs a and b (seed 003,
// docs/design/sets.md, "GPU"). Two launches: PARTITION (a group of lanes per tile boundary
// finds where its cross-diagonal meets the Balanced Path, or the Merge Path for a merge or
// when no key repeats), then TILES, a single pass: each tile loads its ranges once into shared
// memory, checks their order, runs the serial operation a thread, compacts its outputs, learns
// where they go from the tiles before it (decoupled look-back; a merge's go at the tile's
// diagonal) and writes them. The last tile leaves the total; the last tile to finish compares
// every neighbour when a tile's partition came out of order (only an unsorted input does that).
namespace oxicub {

// The rank of a key: its radix code, inverted for descending inputs (one ascending comparison
// serves both orders).
template <class Key>
__device__ __forceinline__ typename Key::Bits sets_rank(typename Key::Bits raw, bool descending) {
    typedef typename Key::Bits Bits;
    const Bits code = Key::to_radix(raw);
    return descending ? (Bits)~code : code;
}

// The key of a rank, bit for bit, except a float NaN (every NaN has the all-ones code):
// `*exact` is false for it, and its bits are read from its input.
template <class Key>
__device__ __forceinline__ typename Key::Bits sets_key(typename Key::Bits rank, bool descending,
                                                       bool* exact) {
    typedef typename Key::Bits Bits;
    const Bits code = descending ? (Bits)~rank : rank;
    *exact = Key::KEY_KIND != KIND_FLOAT || code != Key::ALL_ONES;
    return Key::from_radix(code);
}

// A position out of order (and whether its key repeats the one before) into a status word that
// holds the smallest such, complemented (0: none), so the scratch starts zeroed.
__device__ __forceinline__ void sets_report_disorder(u64* word, u64 position, bool repeat) {
    atomicMax(word, ~((position << 1) | (repeat ? 1ull : 0ull)));
}

// One tile: its ranges of a and b (after the partitions' stars).
struct SetsTile {
    u64 a0, b0;        // where the tile's a and b start
    u32 a_count, b_count;
    bool left_star;    // the tile's left diagonal is starred (its first b was taken)
};

// The tile's ranges from the partition words at its two diagonals (clamped into a and b: an
// unsorted input can give partitions out of order, which DISORDER then reports).
__device__ __forceinline__ SetsTile sets_tile_ranges(const SetsParams& p, u64 tile, u64 nv,
                                                     u64 p0, u64 p1, u64* status) {
    const u64 total = p.a_count + p.b_count;
    const u64 mask = ~(1ull << 63);
    const u64 gid = tile * nv;
    const u64 end = gid + nv < total ? gid + nv : total;
    SetsTile t;
    t.left_star = (p0 >> 63) != 0;
    u64 a0 = p0 & mask, a1 = p1 & mask;
    u64 b0 = gid - a0 + (p0 >> 63), b1 = end - a1 + (p1 >> 63);
    if (a1 < a0 || b1 < b0 || a1 > p.a_count || b1 > p.b_count || (a1 - a0) + (b1 - b0) > nv + 1) {
        status[SETS_STATUS_DISORDER] = 1;
        __threadfence();  // before the tile is counted done (the last tile then checks all)
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
    t.a_count = (u32)(a1 - a0);
    t.b_count = (u32)(b1 - b0);
    return t;
}

// Where a tile's ranks sit in its shared array: a's at a[0..a_count) = array[a_shift..], b's at
// b[0..b_count) = array[b_shift..]. Each input starts at the offset its first key has within a
// 16-byte line of global memory (and b past a's last key, rounded up to a line), so a bulk
// copy can bring the aligned middle of each range in one piece. A source index (16 bits) is a
// position in the array: b's from b_shift on.
// A batched call's regions (batch.cuh) sit at the same places in a parallel u32 array.
template <class Bits>
struct SetsTileRanks {
    Bits* a;
    Bits* b;
    u32 a_shift, b_shift;
    u32* region_a;  // batched calls only
    u32* region_b;
};

// The serial operation of one thread over the tile's ranks (r.a[0..a_count), r.b[0..b_count)):
// slots from (ai, bi) while ai + bi < end, each a key-rank slot (a pair of
// equal ranks, or the smaller one alone; a merge takes one element a slot). Returns the commit
// mask; `sources` holds each committed slot's source as a 16-bit index into the tile's ranks
// array (SetsTileRanks), two a
// word (fewer registers, more resident blocks). A merge of one pair commits every slot: its
// sources go straight to `merged` (the thread's outputs in shared memory) and it returns 0. A
// slot past `end` commits nothing and advances nothing; a merge's slot reloads both current
// ranks (an index that did not advance reloads the same rank; r.a[a_count] and r.b[b_count]
// are inside the array). A batched call compares composite ranks (batch.cuh) and commits only
// elements of a pair (odd regions). With CHECK on, `*disorder` is set when a rank loaded is out
// of order with the one before it in its input (the threads' walks cover every neighbouring
// pair of the tile once their ends meet the next thread's starts, which the caller checks).
template <u32 OP, u32 VT, bool BATCHED, class Bits>
__device__ __forceinline__ u32 sets_serial(const SetsTileRanks<Bits>& r, u32 a_count, u32 b_count,
                                           u32& ai, u32& bi, u32 end,
                                           u32 (&sources)[(VT + 1) / 2], u16* merged, u32 flags,
                                           bool* disorder) {
    constexpr bool DIRECT = OP == SETS_OP_MERGE && !BATCHED;
    const bool check = (flags & SETS_CHECK) != 0, strict = (flags & SETS_STRICT) != 0;
    u32 commit = 0;
#pragma unroll
    for (u32 i = 0; i < (VT + 1) / 2; ++i) {
        sources[i] = 0;
    }
    Bits x = r.a[ai], y = r.b[bi];
    u32 gx = BATCHED ? r.region_a[ai] : 0u, gy = BATCHED ? r.region_b[bi] : 0u;
    bool bad = false;
#pragma unroll
    for (u32 i = 0; i < VT; ++i) {
        const bool live = ai + bi < end;
        const bool a_in = ai < a_count, b_in = bi < b_count;
        // a before b (pa), b before a (pb); an exhausted side is after every key.
        const bool x_below = BATCHED ? gx < gy || (gx == gy && x < y) : x < y;
        const bool y_below = BATCHED ? gy < gx || (gx == gy && y < x) : y < x;
        const bool pa = !b_in || (a_in && x_below);
        const bool pb = !a_in || (b_in && y_below);
        const u32 from_a = r.a_shift + ai, from_b = r.b_shift + bi;
        bool keep;
        bool take_b;
        if (OP == SETS_OP_MERGE) {
            take_b = pb;
            keep = true;
        } else if (OP == SETS_OP_INTERSECTION) {
            take_b = false;
            keep = !pa && !pb;
        } else if (OP == SETS_OP_UNION) {
            take_b = pb;
            keep = true;
        } else if (OP == SETS_OP_DIFFERENCE) {
            take_b = false;
            keep = pa;
        } else {
            take_b = !pa;
            keep = pa != pb;
        }
        const u32 from = take_b ? from_b : from_a;
        if (BATCHED) {
            keep = keep && ((take_b ? gy : gx) & 1u) != 0;  // a gap's elements are never written
        }
        keep = keep && live;
        if (DIRECT) {
            if (live) {
                merged[i] = (u16)from;  // every slot is an output, in the thread's order
            }
        } else {
            commit |= keep ? 1u << i : 0u;
            sources[i / 2] |= keep ? from << (16 * (i % 2)) : 0u;
        }
        // A merge takes one element a slot; a set operation a key-rank slot.
        const bool next_a = live && !pb;
        const bool next_b = live && (OP == SETS_OP_MERGE ? pb : !pa);
        ai += next_a ? 1u : 0u;
        bi += next_b ? 1u : 0u;
        // A merge advances one side every slot: reloading both ranks is cheaper than a
        // branch. A set operation often advances neither or one: it loads what advanced.
        const Bits nx = DIRECT || next_a ? r.a[ai] : x;
        const Bits ny = DIRECT || next_b ? r.b[bi] : y;
        const u32 ngx = BATCHED && next_a ? r.region_a[ai] : gx;
        const u32 ngy = BATCHED && next_b ? r.region_b[bi] : gy;
        if (check && DIRECT) {
            // A side that did not advance reloads the same rank, which is never below itself:
            // only equality needs to know whether it advanced (no branch: a merge advances a
            // side every slot).
            bad |= (ai < a_count) & ((nx < x) | (strict & next_a & (nx == x)));
            bad |= (bi < b_count) & ((ny < y) | (strict & next_b & (ny == y)));
        } else if (check && BATCHED) {
            // Composite order; equal ranks repeat a key only within a pair (a gap's are all 0).
            // Branch-free, as the merge's (every term a predicate): the composite compares
            // make the short-circuit form's branches cost more than the tests they skip.
            auto below = [&](u32 ng, Bits n, u32 g, Bits o) {
                return (ng < g) | ((ng == g) & ((n < o) | (strict & (n == o) & ((g & 1u) != 0))));
            };
            bad |= (next_a & (ai < a_count) & below(ngx, nx, gx, x)) |
                   (next_b & (bi < b_count) & below(ngy, ny, gy, y));
        } else if (check) {
            // A set operation often advances neither side: test only what advanced (the
            // branch-free form measured no faster here: "Tried and dropped").
            bad = bad || (next_a && ai < a_count && (nx < x || (strict && nx == x))) ||
                  (next_b && bi < b_count && (ny < y || (strict && ny == y)));
        }
        x = nx;
        y = ny;
        gx = ngx;
        gy = ngy;
    }
    *disorder = bad;
    return commit;
}

// The first position out of order in ranks[first, last) (against the rank before it, which
// must exist: first >= 1), else ~0u. A thread's rescan of its own walk, after the walk found
// one.
// A batched call compares composite ranks (`regions` parallel to `ranks`).
template <bool BATCHED, class Bits>
__device__ __forceinline__ u32 sets_first_out_of_order(const Bits* ranks, const u32* regions,
                                                       u32 first, u32 last, bool strict) {
    for (u32 i = first; i < last; ++i) {
        const bool same = !BATCHED || regions[i] == regions[i - 1];
        const bool in_pair = !BATCHED || (regions[i] & 1u) != 0;
        if ((BATCHED && regions[i] < regions[i - 1]) ||
            (same && (ranks[i] < ranks[i - 1] || (strict && in_pair && ranks[i] == ranks[i - 1])))) {
            return i;
        }
    }
    return ~0u;
}

// Every neighbour of keys[first, last) compared (position i against i - 1) by the block; in a
// batched call only neighbours within one segment of `side` (a search per position: the error
// path only).
template <class Key, u32 THREADS, bool BATCHED>
__device__ __forceinline__ void sets_check_all(const SetsParams& p, const SetsSide& side,
                                               const typename Key::Bits* keys, u64 count,
                                               u64* word) {
    const bool descending = (p.flags & SETS_DESCENDING) != 0;
    const bool strict = (p.flags & SETS_STRICT) != 0;
    const u64 pairs = BATCHED ? sets_pairs(p) : 0;
    for (u64 i = threadIdx.x + 1; i < count; i += THREADS) {
        if (BATCHED) {
            // Same segment: an odd region with no boundary at i.
            const u64 region = sets_region_of(SerialSearch(), side, pairs, i);
            if ((region & 1) == 0 || sets_boundary(side, region - 1) == i) {
                continue;
            }
        }
        const auto x = sets_rank<Key>(keys[i - 1], descending);
        const auto y = sets_rank<Key>(keys[i], descending);
        if (y < x || (strict && y == x)) {
            sets_report_disorder(word, i, y == x);
        }
    }
}

// The tiles' outputs before `tile` (decoupled look-back, by one warp). Each round reads a
// window of 32 x SETS_LOOK_BACK_WORDS state words before the last one looked at (lane L holds
// the words at distances L W .. L W + W - 1), waits until every tile nearer than the nearest
// inclusive prefix has published at least its own count, and adds them back to that prefix. A
// wide window matters: a tile's inclusive prefix is published only after its own look-back,
// so the tiles between the nearest published prefix and a new tile are as many as the tiles
// in flight, and a window of 32 would cap the tiles a look-back round can pass at 32.
__device__ __forceinline__ u64 sets_look_back(const u64* state, u64 tile) {
    constexpr u32 W = SETS_LOOK_BACK_WORDS;
    constexpr u32 NONE = 32u * W;  // no such position in the window
    const u32 lane = threadIdx.x & 31u;
    const volatile u64* words = state;
    u64 exclusive = 0;
    i64 last = (i64)tile - 1;
    for (;;) {
        u64 w[W];
        u32 inclusive_at;
        for (;;) {
            u32 first_empty = W, first_inclusive = W;
#pragma unroll
            for (u32 i = 0; i < W; ++i) {
                const i64 at = last - (i64)(lane * W + i);
                // Before the first tile: an inclusive prefix of 0.
                w[i] = at >= 0 ? words[at] : SETS_TILE_INCLUSIVE;
            }
#pragma unroll
            for (u32 i = W; i-- > 0;) {
                const u64 flags = w[i] & SETS_TILE_FLAGS;
                first_empty = flags == 0 ? i : first_empty;
                first_inclusive = flags == SETS_TILE_INCLUSIVE ? i : first_inclusive;
            }
            // The window's nearest empty word and nearest inclusive prefix.
            auto nearest = [&](u32 mine) {
                const u32 lanes = __ballot_sync(0xffffffffu, mine < W);
                const u32 l = lanes != 0 ? (u32)__ffs(lanes) - 1u : 0u;
                const u32 in_lane = __shfl_sync(0xffffffffu, mine, (int)l);
                return lanes != 0 ? l * W + in_lane : NONE;
            };
            const u32 empty_at = nearest(first_empty);
            inclusive_at = nearest(first_inclusive);
            if (empty_at >= inclusive_at) {
                break;  // every word up to the nearest inclusive prefix is published
            }
            // Back off: a spinning warp takes issue slots from the tiles it waits for.
            __nanosleep(SETS_LOOK_BACK_SLEEP_NS);
        }
        u64 counted = 0;
#pragma unroll
        for (u32 i = 0; i < W; ++i) {
            counted += lane * W + i <= inclusive_at ? (w[i] & ~SETS_TILE_FLAGS) : 0;
        }
        exclusive += __shfl_sync(0xffffffffu, warp_inclusive_sum(counted), 31);
        if (inclusive_at != NONE) {
            return exclusive;
        }
        last -= (i64)NONE;
    }
}

// A tile's keys as ranks: a's a_count keys from global `ga` to shared `sa`, b's from `gb` to
// `sb` (SetsTileRanks: each at its 16-byte-line offset). On sm_90 thread 0 bulk-copies each
// range's whole lines, a few threads fill the partial lines at its ends (fewer than a line of
// keys each), and every thread waits on the mbarrier; the ranks are then computed in place
// unless the transform is the identity (unsigned keys, ascending). The bulk copy replaces a
// load, an address and a store per key ("Tried and dropped" in docs/design/sets.md has the
// register-staged loads it replaced). Below sm_90 each thread loads and stores its share.
template <class Key, u32 THREADS>
__device__ __forceinline__ void sets_load_tile(const typename Key::Bits* ga, u32 a_count,
                                               typename Key::Bits* sa,
                                               const typename Key::Bits* gb, u32 b_count,
                                               typename Key::Bits* sb, bool descending, u64* bar,
                                               u32* phase) {
    typedef typename Key::Bits Bits;
#if __CUDA_ARCH__ >= 900
    constexpr u32 LINE = 16 / sizeof(Bits);
    static_assert(4 * LINE <= THREADS, "a thread per key of the partial lines");
    // A range's head (keys before its first line boundary) and body (its whole lines); the
    // tail is the rest.
    auto head_of = [](const Bits* g, u32 count) {
        const u32 offset = (u32)((reinterpret_cast<u64>(g) / sizeof(Bits)) % LINE);
        const u32 head = (LINE - offset) % LINE;
        return head < count ? head : count;
    };
    const u32 a_head = head_of(ga, a_count), b_head = head_of(gb, b_count);
    const u32 a_body = (a_count - a_head) / LINE * LINE, b_body = (b_count - b_head) / LINE * LINE;
    if (threadIdx.x == 0) {
        // The block's last reads of these bytes were before the barrier that ended the tile.
        fence_proxy_async_shared();
        mbarrier_expect_bytes(bar, (a_body + b_body) * (u32)sizeof(Bits));
        if (a_body != 0) {
            bulk_copy_to_shared(sa + a_head, ga + a_head, a_body * (u32)sizeof(Bits), bar);
        }
        if (b_body != 0) {
            bulk_copy_to_shared(sb + b_head, gb + b_head, b_body * (u32)sizeof(Bits), bar);
        }
    }
    if (threadIdx.x < 4 * LINE) {
        // Threads [0, LINE): a's head, then a's tail, b's head, b's tail.
        const u32 part = threadIdx.x / LINE, i = threadIdx.x % LINE;
        const bool on_a = part < 2;
        const u32 head = on_a ? a_head : b_head;
        const u32 at = part % 2 == 0 ? i : head + (on_a ? a_body : b_body) + i;
        const u32 end = part % 2 == 0 ? head : (on_a ? a_count : b_count);
        if (at < end) {
            (on_a ? sa : sb)[at] = (on_a ? ga : gb)[at];
        }
    }
    mbarrier_wait_parity(bar, *phase);
    *phase ^= 1u;
    if (Key::KEY_KIND != KIND_UNSIGNED || descending) {
        __syncthreads();  // the partial lines' keys
        for (u32 k = threadIdx.x; k < a_count + b_count; k += THREADS) {
            Bits* at = k < a_count ? sa + k : sb + (k - a_count);
            *at = sets_rank<Key>(*at, descending);
        }
    }
#else
    for (u32 k = threadIdx.x; k < a_count + b_count; k += THREADS) {
        const bool on_a = k < a_count;
        const u32 at = on_a ? k : k - a_count;
        (on_a ? sa : sb)[at] = sets_rank<Key>((on_a ? ga : gb)[at], descending);
    }
#endif
}

// Slots a thread runs: a batched call's tile also holds a region per element.
template <class Bits, bool BATCHED>
__device__ __forceinline__ constexpr u32 sets_items() {
    return BATCHED ? (sizeof(Bits) == 8 ? SETS_ITEMS_BATCHED_WIDE : SETS_ITEMS_BATCHED)
                   : (sizeof(Bits) == 8 ? SETS_ITEMS_WIDE : SETS_ITEMS);
}

// A batched tile's regions (batch.cuh), beside its ranks: every boundary inside the tile's
// range of a (positions a0 < x < a0 + a_count) adds one at x's slot, the first slot starts at
// the region of a0 (region_a0), and one scan over a's slots then b's turns the marks into
// regions (b's first slot holds b0's region less what a's slots summed). A gap's ranks become
// 0: its elements pair up among themselves, in any order the caller left them.
template <u32 THREADS, class Bits>
__device__ __forceinline__ void sets_tile_regions(const SetsSide& side_a, const SetsSide& side_b,
                                                  u64 pairs, const SetsTile& t,
                                                  const SetsTileRanks<Bits>& r, u64 region_a0,
                                                  u64 region_b0, u32* regions, u32* a_marks,
                                                  u32 (&before)[2], u64* warp_totals) {
    const u32 n = t.a_count + t.b_count;
    auto slot = [&](u32 k) { return k < t.a_count ? r.a_shift + k : r.b_shift + (k - t.a_count); };
    for (u32 k = threadIdx.x; k < n; k += THREADS) {
        regions[slot(k)] = 0;
    }
    if (threadIdx.x == 0) {
        *a_marks = 0;
        // The regions of the elements before the tile: its first's, less the boundaries at
        // the first (few: one per empty pair there and the segment that begins there).
        auto region_before = [&](const SetsSide& side, u64 region, u64 x0) -> u32 {
            if (x0 == 0) {
                return ~0u;
            }
            while (region > 0 && sets_boundary(side, region - 1) == x0) {
                --region;
            }
            return (u32)region;
        };
        before[0] = region_before(side_a, region_a0, t.a0);
        before[1] = region_before(side_b, region_b0, t.b0);
    }
    __syncthreads();
    auto mark = [&](const SetsSide& side, u64 first, u64 begin, u32 count, u32 shift) {
        u32 marks = 0;
        for (u64 k = first + threadIdx.x; k < 2 * pairs; k += THREADS) {
            const u64 x = sets_boundary(side, k);
            if (x >= begin + count) {
                break;  // the boundaries are in order: the rest are past the tile
            }
            if (x > begin) {
                atomicAdd(&regions[shift + (u32)(x - begin)], 1u);
                ++marks;
            }
        }
        return marks;
    };
    const u32 marks = mark(side_a, region_a0, t.a0, t.a_count, r.a_shift);
    mark(side_b, region_b0, t.b0, t.b_count, r.b_shift);
    if (marks != 0) {
        atomicAdd(a_marks, marks);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        // Sums wrap modulo 2^32: b's start may lie below a's end.
        if (t.a_count != 0) {
            regions[r.a_shift] += (u32)region_a0;
        }
        if (t.b_count != 0) {
            regions[r.b_shift] += (u32)region_b0 - (t.a_count != 0 ? (u32)region_a0 + *a_marks : 0u);
        }
    }
    __syncthreads();
    // An inclusive scan: each thread a run of consecutive slots.
    const u32 per = (n + THREADS - 1) / THREADS;
    const u32 k0 = threadIdx.x * per < n ? threadIdx.x * per : n;
    const u32 k1 = k0 + per < n ? k0 + per : n;
    u32 sum = 0;
    for (u32 k = k0; k < k1; ++k) {
        sum += regions[slot(k)];
    }
    u32 total;
    u32 run = block_exclusive_sum<THREADS, u32>(sum, reinterpret_cast<u32*>(warp_totals), &total);
    for (u32 k = k0; k < k1; ++k) {
        const u32 at = slot(k);
        run += regions[at];
        regions[at] = run;
        if ((run & 1u) == 0) {
            (k < t.a_count ? r.a : r.b)[k < t.a_count ? k : k - t.a_count] = 0;
        }
    }
    __syncthreads();
}

// A batched thread's share of the pairs' offsets: every pair q starting on a diagonal in its
// walk gets `first` (where the thread's outputs go) plus the thread's outputs of regions up to
// 2q. The elements of regions up to 2q are the first E(2q) of the batch (E: the pair's start),
// so pair q starts in the walk exactly when the element consumed before the walk is of region
// at most 2q and the walk's last is of region above it: the pairs are read off the regions,
// with no search. `before` holds the regions of a's and b's element before the tile (~0u:
// none).
template <u32 VT, class Bits>
__device__ __forceinline__ void sets_write_pair_offsets(
    u64 pairs, const SetsTileRanks<Bits>& r, const u32* regions, const SetsTile& t,
    const u32 (&before)[2], u32 a_first, u32 b_first, u32 a_end, u32 b_end, u32 commit,
    const u32 (&sources)[(VT + 1) / 2], u64 first, i64* out_offsets) {
    if (a_first + b_first == a_end + b_end) {
        return;  // an empty walk
    }
    constexpr u32 NONE = ~0u;
    const u32 a_prev = a_first > 0 ? r.region_a[a_first - 1] : before[0];
    const u32 b_prev = b_first > 0 ? r.region_b[b_first - 1] : before[1];
    // The last element consumed before the walk is the later of the two (regions first).
    const u32 prev = a_prev == NONE ? b_prev : (b_prev == NONE ? a_prev : max(a_prev, b_prev));
    const u32 a_last = a_end > a_first ? r.region_a[a_end - 1] : 0u;
    const u32 b_last = b_end > b_first ? r.region_b[b_end - 1] : 0u;
    const u64 last = max(a_last, b_last);
    u64 q = prev == NONE ? 0 : ((u64)prev + 1) / 2;
    const u64 q_end = (last + 1) / 2 < pairs ? (last + 1) / 2 : pairs;
    u32 count = 0;
    // Pairs q up to the region `region` (2q < region): offset before the output of that region.
    auto flush = [&](u64 region) {
        for (; q < q_end && 2 * q < region; ++q) {
            out_offsets[q] = (i64)(first + count);
        }
    };
#pragma unroll
    for (u32 i = 0; i < VT; ++i) {
        if (commit & (1u << i)) {
            flush(regions[(sources[i / 2] >> (16 * (i % 2))) & 0xFFFFu]);
            ++count;
        }
    }
    flush(~0ull);
}

// TILES: tickets hand the tiles to resident blocks in order (a tile's look-back waits only for
// tiles already taken by running blocks, so it always ends).
template <class Key, u32 THREADS, u32 OP, int VALUE_BYTES, bool BATCHED>
__device__ __forceinline__ void sets_tiles(const SetsParams& p) {
    typedef typename Key::Bits Bits;
    constexpr u32 VT = sets_items<Bits, BATCHED>();
    constexpr u32 NV = THREADS * VT;
    constexpr bool DIRECT = OP == SETS_OP_MERGE && !BATCHED;  // outputs at the diagonal
    constexpr u32 WORDS = BATCHED ? 3 : 1;  // partition words per tile boundary
    static_assert(NV + 1 < 65536, "tile-local sources are 16-bit");
    constexpr u32 LINE = 16 / sizeof(Bits);  // keys in a 16-byte line
    constexpr u32 SLOTS = NV + 2 + 3 * LINE;
    static_assert(SLOTS < 65536, "tile-local sources are 16-bit");
    __shared__ __align__(16) Bits ranks[SLOTS];
    __shared__ u32 regions[BATCHED ? SLOTS : 1];  // a batched call's regions (batch.cuh)
    __shared__ u64 tile_loaded;  // mbarrier: the tile's bulk copies have landed
    __shared__ u16 compacted[NV + 2];
    __shared__ u32 thread_starts[THREADS];  // each thread's (ai << 16 | bi) in the tile
    __shared__ u64 warp_totals[THREADS / 32];
    __shared__ u64 shared_next[5];  // the next tile's ticket and partition words
    __shared__ u64 shared_word[2];  // the tile's outputs' offset; whether it finished last
    __shared__ u32 a_marks;  // a batched tile's boundaries inside its range of a
    __shared__ u32 regions_before[2];  // a batched tile's regions before its a and its b
    u64* status = reinterpret_cast<u64*>(p.status);
    u64* state = reinterpret_cast<u64*>(p.tile_state);
    const Bits* a = reinterpret_cast<const Bits*>(p.a);
    const Bits* b = reinterpret_cast<const Bits*>(p.b);
    const bool descending = (p.flags & SETS_DESCENDING) != 0;
    const SetsSide side_a = sets_side(p, false), side_b = sets_side(p, true);
    const u64 pairs = BATCHED ? sets_pairs(p) : 0;
    i64* out_offsets = reinterpret_cast<i64*>(p.out_offsets);
    if (BATCHED && blockIdx.x == 0 && threadIdx.x == 0) {
        // The smallest invalid pair's offending value (the partition stage found the pair).
        if (status[SETS_STATUS_VIOLATION] != 0) {
            const u64 violation = ~status[SETS_STATUS_VIOLATION];
            i64 value = 0;
            sets_resolve_pair(p, violation >> 8, &value);
            status[SETS_STATUS_VALUE] = (u64)value;
        }
    }
    if (p.tiles == 0) {
        // No input: the count (0) still reaches the caller's buffer, and every pair's offset.
        if (blockIdx.x == 0 && threadIdx.x == 0 && p.count_out != 0) {
            *reinterpret_cast<i64*>(p.count_out) = 0;
        }
        if (BATCHED && blockIdx.x == 0) {
            for (u64 q = threadIdx.x; q <= pairs; q += THREADS) {
                out_offsets[q] = 0;
            }
        }
        return;
    }
    // Thread 0 takes the next tile's ticket and reads its partition words while the block
    // still works on the current tile, hiding their latency (an atomic, then two dependent
    // loads): the ticket is issued first, its words read once the tile's own loads are in
    // flight, and all three stored for the block at the end of the tile. Taking a ticket early
    // is safe (a tile's look-back waits only on smaller tiles, and the smallest unfinished tile
    // waits on nothing) but not free: the tiles after an early ticket wait for its count in
    // their look-backs. So a set operation takes it only after its look-back, for the time of
    // its writes; a merge, which looks back at nothing, as soon as it starts a tile.
    const u64* partition = reinterpret_cast<const u64*>(p.partition);
#if __CUDA_ARCH__ >= 900
    if (threadIdx.x == 0) {
        mbarrier_init_one(&tile_loaded);
    }
    u32 load_phase = 0;
#endif
    // next: the ticket, the partition at the tile's two diagonals, and (batched) the regions
    // of its first a and first b.
    u64 next[5];
    auto issue_ticket = [&]() {
        next[0] = atomicAdd(reinterpret_cast<unsigned long long*>(&status[SETS_STATUS_TICKET]),
                            1ull);
    };
    auto read_bounds = [&]() {
        const bool on = next[0] < p.tiles;
        next[1] = on ? partition[WORDS * next[0]] : 0;
        next[2] = on ? partition[WORDS * (next[0] + 1)] : 0;
        if (BATCHED) {
            next[3] = on ? partition[WORDS * next[0] + 1] : 0;
            next[4] = on ? partition[WORDS * next[0] + 2] : 0;
        }
    };
    auto store_next = [&]() {
#pragma unroll
        for (u32 i = 0; i < (BATCHED ? 5u : 3u); ++i) {
            shared_next[i] = next[i];
        }
    };
    // Thread 0's last count of a finished tile (the atomic's answer is looked at one tile
    // later, so no tile waits for it), and whether one of its counts was the last.
    constexpr u64 NO_COUNT = ~0ull;
    u64 done = NO_COUNT;
    bool counted_last = false;
    if (threadIdx.x == 0) {
        issue_ticket();
        read_bounds();
        store_next();
    }
    __syncthreads();
    for (;;) {
        const u64 tile = shared_next[0];
        if (tile >= p.tiles) {
            break;
        }
        const SetsTile t = sets_tile_ranges(p, tile, NV, shared_next[1], shared_next[2], status);
        const u64 region_a0 = BATCHED ? shared_next[3] : 0, region_b0 = BATCHED ? shared_next[4] : 0;
        if (DIRECT && threadIdx.x == 0) {
            issue_ticket();
        }
        const u32 count = t.a_count + t.b_count;
        const Bits* tile_a = a + t.a0;
        const Bits* tile_b = b + t.b0;
        SetsTileRanks<Bits> r;
        r.a_shift = (u32)((reinterpret_cast<u64>(tile_a) / sizeof(Bits)) % LINE);
        r.b_shift = (r.a_shift + t.a_count + LINE - 1) / LINE * LINE +
                    (u32)((reinterpret_cast<u64>(tile_b) / sizeof(Bits)) % LINE);
        r.a = ranks + r.a_shift;
        r.b = ranks + r.b_shift;
        r.region_a = regions + (BATCHED ? r.a_shift : 0);
        r.region_b = regions + (BATCHED ? r.b_shift : 0);
        sets_load_tile<Key, THREADS>(tile_a, t.a_count, r.a, tile_b, t.b_count, r.b, descending,
#if __CUDA_ARCH__ >= 900
                                     &tile_loaded, &load_phase
#else
                                     nullptr, nullptr
#endif
        );
        // With the check on, the key before each range (the seam with the tile before), loaded
        // while the tile's keys land: a's by thread 0, b's by thread 32.
        const bool a_seam = threadIdx.x == 0 && t.a0 > 0 && t.a_count > 0;
        const bool b_seam = threadIdx.x == 32 % THREADS && t.b0 > 0 && t.b_count > 0;
        const bool seam = (p.flags & SETS_CHECK) && (a_seam || b_seam);
        Bits seam_raw = 0;
        if (seam) {
            seam_raw = a_seam ? a[t.a0 - 1] : b[t.b0 - 1];
        }
        if (DIRECT && threadIdx.x == 0) {
            read_bounds();
        }
        __syncthreads();
        if (BATCHED) {
            sets_tile_regions<THREADS>(side_a, side_b, pairs, t, r, region_a0, region_b0,
                                       regions, &a_marks, regions_before, warp_totals);
        }
        // The thread's diagonals within the tile: the tile's first diagonal is VT * tid on the
        // slot path, less one when the tile's first b went to the tile before.
        auto diagonal = [&](u32 thread) -> u32 {
            if (thread == 0) {
                return 0;
            }
            const u32 d = VT * thread - (t.left_star ? 1u : 0u);
            return d < count ? d : count;
        };
        const u32 d0 = diagonal(threadIdx.x);
        const u32 d1 = threadIdx.x + 1 == THREADS ? count : diagonal(threadIdx.x + 1);
        auto at_a = [&](u32 i) { return r.a[i]; };
        auto at_b = [&](u32 i) { return r.b[i]; };
        auto at_ca = [&](u32 i) { return SetsComposite<Bits>{r.region_a[i], r.a[i]}; };
        auto at_cb = [&](u32 i) { return SetsComposite<Bits>{r.region_b[i], r.b[i]}; };
        bool star = false;
        u32 a_start;
        if (BATCHED && OP == SETS_OP_MERGE) {
            a_start = merge_path_lower(SerialSearch(), at_ca, t.a_count, at_cb, t.b_count, d0);
        } else if (BATCHED) {
            // A gap's elements repeat (all rank 0): the duplicates' path.
            a_start = balanced_path<true>(SerialSearch(), at_ca, t.a_count, at_cb, t.b_count, d0,
                                          &star);
        } else if (OP == SETS_OP_MERGE) {
            a_start = merge_path_lower(SerialSearch(), at_a, t.a_count, at_b, t.b_count, d0);
        } else if (p.flags & SETS_NO_DUPLICATES) {
            a_start =
                balanced_path<false>(SerialSearch(), at_a, t.a_count, at_b, t.b_count, d0, &star);
        } else {
            a_start =
                balanced_path<true>(SerialSearch(), at_a, t.a_count, at_b, t.b_count, d0, &star);
        }
        u32 ai = a_start, bi = d0 - ai + (star ? 1u : 0u);
        // Each thread's start, for the thread before it: its walk must end there.
        thread_starts[threadIdx.x] = (ai << 16) | bi;
        const u32 a_first = ai, b_first = bi;
        u32 sources[(VT + 1) / 2];
        bool walk_disorder;
        const u32 commit = sets_serial<OP, VT, BATCHED>(r, t.a_count, t.b_count, ai, bi, d1,
                                                        sources, compacted + d0, p.flags,
                                                        &walk_disorder);
        u64 tile_total;
        u32 below;
        if (DIRECT) {
            // Every slot is an output, already in place at the thread's diagonal.
            below = d0;
            tile_total = count;
            __syncthreads();
        } else {
            below = (u32)block_exclusive_sum<THREADS, u64>((u64)__popc(commit), warp_totals,
                                                           &tile_total);
        }
        // A set operation publishes its tile's count at once (after its DISORDER report), for
        // the look-backs of the tiles after it; a merge's tile writes at its diagonal.
        if (!DIRECT && threadIdx.x == 0) {
            __threadfence();
            const u64 flag = tile == 0 ? SETS_TILE_INCLUSIVE : SETS_TILE_AGGREGATE;
            reinterpret_cast<volatile u64*>(state)[tile] = flag | tile_total;
        }
        if (p.flags & SETS_CHECK) {
            // The walks cover the tile's neighbouring pairs when each ends where the next one
            // starts (and the last at the tile's end): else the tile came out of order, and
            // the last tile to finish compares every neighbour. Each range's first key is
            // compared with the key before it (the seam with the tile before).
            const u32 next_start = threadIdx.x + 1 == THREADS ? (t.a_count << 16) | t.b_count
                                                              : thread_starts[threadIdx.x + 1];
            if (((ai << 16) | bi) != next_start) {
                status[SETS_STATUS_DISORDER] = 1;
                __threadfence();  // before the tile is counted done
            }
            if (walk_disorder) {
                // Rare: find the first position out of order of each input in the walk.
                const bool strict = (p.flags & SETS_STRICT) != 0;
                const u32 a_end = ai < t.a_count ? ai + 1 : t.a_count;
                const u32 b_end = bi < t.b_count ? bi + 1 : t.b_count;
                const u32 bad_a = sets_first_out_of_order<BATCHED>(r.a, r.region_a, a_first + 1,
                                                                   a_end, strict);
                const u32 bad_b = sets_first_out_of_order<BATCHED>(r.b, r.region_b, b_first + 1,
                                                                   b_end, strict);
                if (bad_a != ~0u) {
                    sets_report_disorder(&status[SETS_STATUS_A_BAD], t.a0 + bad_a,
                                         r.a[bad_a] == r.a[bad_a - 1]);
                }
                if (bad_b != ~0u) {
                    sets_report_disorder(&status[SETS_STATUS_B_BAD], t.b0 + bad_b,
                                         r.b[bad_b] == r.b[bad_b - 1]);
                }
            }
            // A batched seam counts only within one segment: the first key's region is odd and
            // no boundary sits at it.
            const bool seam_in_pair =
                !BATCHED ||
                (a_seam ? (region_a0 & 1) != 0 && sets_boundary(side_a, region_a0 - 1) != t.a0
                        : (region_b0 & 1) != 0 && sets_boundary(side_b, region_b0 - 1) != t.b0);
            if (seam && seam_in_pair) {
                const u64 first = a_seam ? t.a0 : t.b0;
                const Bits x = sets_rank<Key>(seam_raw, descending);
                const Bits y = a_seam ? r.a[0] : r.b[0];
                if (y < x || ((p.flags & SETS_STRICT) && y == x)) {
                    sets_report_disorder(&status[a_seam ? SETS_STATUS_A_BAD : SETS_STATUS_B_BAD],
                                         first, y == x);
                }
            }
        }
        u32 at = below;
#pragma unroll
        for (u32 i = 0; i < VT; ++i) {
            if (!DIRECT && (commit & (1u << i))) {
                compacted[at++] = (u16)(sources[i / 2] >> (16 * (i % 2)));
            }
        }
        if (threadIdx.x < 32) {
            u64 before = tile * NV;
            if (!DIRECT) {
                before = tile == 0 ? 0 : sets_look_back(state, tile);
            }
            if (threadIdx.x == 0) {
                if (!DIRECT && tile != 0) {
                    reinterpret_cast<volatile u64*>(state)[tile] =
                        SETS_TILE_INCLUSIVE | (before + tile_total);
                }
                shared_word[0] = before;
                if (tile + 1 == p.tiles) {
                    status[SETS_STATUS_COUNT] = before + tile_total;
                    if (p.count_out != 0) {
                        *reinterpret_cast<i64*>(p.count_out) = (i64)(before + tile_total);
                    }
                }
            }
        }
        __syncthreads();
        const u64 offset = shared_word[0];
        if (!DIRECT && threadIdx.x == 0) {
            issue_ticket();
            read_bounds();
        }
        if (BATCHED) {
            // Each pair's offset, by the thread whose walk passes the pair's start.
            sets_write_pair_offsets<VT>(pairs, r, regions, t, regions_before, a_first, b_first,
                                        ai, bi, commit, sources, offset + below, out_offsets);
            if (tile + 1 == p.tiles && threadIdx.x == 0) {
                // The pairs that start at the very end (empty ones), and the end.
                const u64 total = p.a_count + p.b_count;
                const u64 count = offset + tile_total;
                u64 q = SerialSearch().first_false((u64)0, pairs, [&](u64 s) {
                    return sets_pair_start(side_a, side_b, s) < total;
                });
                for (; q <= pairs; ++q) {
                    out_offsets[q] = (i64)count;
                }
            }
        }
        // Only an unsorted input (reported) has more outputs than the bound.
        const u64 room = offset < p.out_len ? p.out_len - offset : 0;
        const u32 written = (u32)(tile_total < room ? tile_total : room);
        Bits* out_keys = reinterpret_cast<Bits*>(p.out_keys) + offset;
#pragma unroll 4
        for (u32 i = threadIdx.x; i < written; i += THREADS) {
            const u32 source = compacted[i];
            const bool in_b = source >= r.b_shift;
            const u32 at_input = source - (in_b ? r.b_shift : r.a_shift);
            bool exact;
            const Bits key = sets_key<Key>(ranks[source], descending, &exact);
            out_keys[i] = exact ? key : (in_b ? tile_b : tile_a)[at_input];
            if (VALUE_BYTES != 0) {
                typedef typename ValueWord<VALUE_BYTES>::Type Word;
                Word* out_values = reinterpret_cast<Word*>(p.out_values) + offset;
                if (p.flags & SETS_INDEX) {
                    out_values[i] = (Word)(in_b ? p.a_count + t.b0 + at_input : t.a0 + at_input);
                } else {
                    const Word* values = reinterpret_cast<const Word*>(in_b ? p.b_values
                                                                            : p.a_values);
                    out_values[i] = values[(in_b ? t.b0 : t.a0) + at_input];
                }
            }
        }
        if (threadIdx.x == 0) {
            // Every thread read the current tile's words before the barriers above.
            store_next();
            if (p.flags & SETS_CHECK) {
                // Count the tile done; the block that counts the last one compares every
                // neighbour when a tile came out of order, once it has no tile left (after the
                // loop). Every DISORDER report is fenced by its writer, so none waits here.
                counted_last = counted_last || (done != NO_COUNT && done + 1 == p.tiles);
                done = atomicAdd(reinterpret_cast<unsigned long long*>(&status[SETS_STATUS_DONE]),
                                 1ull);
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        counted_last = counted_last || (done != NO_COUNT && done + 1 == p.tiles);
        shared_word[1] = counted_last ? 1 : 0;
    }
    __syncthreads();
    if (shared_word[1] != 0) {
        __threadfence();  // the other tiles' DISORDER reports, fenced before they counted
        if (*reinterpret_cast<volatile u64*>(&status[SETS_STATUS_DISORDER]) != 0) {
            sets_check_all<Key, THREADS, BATCHED>(p, side_a, a, p.a_count,
                                                  &status[SETS_STATUS_A_BAD]);
            sets_check_all<Key, THREADS, BATCHED>(p, side_b, b, p.b_count,
                                                  &status[SETS_STATUS_B_BAD]);
        }
    }
}

template <class Key, u32 THREADS, u32 OP, int VALUE_BYTES, int BATCHED>
__device__ __forceinline__ void sets(const SetsParams& p) {
    typedef typename Key::Bits Bits;
    constexpr u64 NV = (u64)THREADS * sets_items<Bits, BATCHED != 0>();
    if (p.stage == SETS_STAGE_TILES) {
        sets_tiles<Key, THREADS, OP, VALUE_BYTES, BATCHED != 0>(p);
        return;
    }
    // PARTITION: a group of SETS_PARTITION_LANES lanes per tile boundary: the Balanced Path
    // (or Merge Path) at its diagonal, the star in the top bit.
    constexpr u32 G = SETS_PARTITION_LANES;
    const Bits* a = reinterpret_cast<const Bits*>(p.a);
    const Bits* b = reinterpret_cast<const Bits*>(p.b);
    const bool descending = (p.flags & SETS_DESCENDING) != 0;
    auto at_a = [&](u64 i) { return sets_rank<Key>(a[i], descending); };
    auto at_b = [&](u64 i) { return sets_rank<Key>(b[i], descending); };
    u64* partition = reinterpret_cast<u64*>(p.partition);
    u64* status = reinterpret_cast<u64*>(p.status);
    const u64 total = p.a_count + p.b_count;
    const u64 stride = grid_threads(THREADS) / G;
    const GroupSearch<G> search;
    if (BATCHED) {
        // A thread per pair checks both its segments (the smallest invalid pair is reported).
        const u64 pairs = sets_pairs(p);
        for (u64 seg = global_thread_index(THREADS); seg < pairs; seg += grid_threads(THREADS)) {
            i64 value = 0;
            const u64 word = sets_resolve_pair(p, seg, &value);
            if (word != 0) {
                atomicMax(reinterpret_cast<unsigned long long*>(&status[SETS_STATUS_VIOLATION]),
                          ~word);
            }
        }
        if (global_thread_index(THREADS) == 0 && (p.a_layout & SEGMENT_COUNT_DEFERRED)) {
            const i64 n = *reinterpret_cast<const i64*>(p.num_segments_ptr);
            if (n < (i64)p.num_segments_min || n > (i64)p.num_segments_max) {
                status[SETS_STATUS_COUNT_BAD] = 1;
                status[SETS_STATUS_COUNT_VALUE] = (u64)n;
            }
        }
        // Each tile boundary: its region (the events, each boundary's sum over both inputs,
        // are in order), the path within the region, and the regions of the first a and first
        // b at the split.
        const SetsSide side_a = sets_side(p, false), side_b = sets_side(p, true);
        const u64 events = 2 * pairs;
        for (u64 q = global_thread_index(THREADS) / G; q <= p.tiles; q += stride) {
            const u64 diag = q * NV < total ? q * NV : total;
            const u64 region = search.first_false((u64)0, events, [&](u64 k) {
                return sets_boundary(side_a, k) + sets_boundary(side_b, k) <= diag;
            });
            const u64 a_lo = region == 0 ? 0 : sets_boundary(side_a, region - 1);
            const u64 b_lo = region == 0 ? 0 : sets_boundary(side_b, region - 1);
            u64 a_hi = region == events ? p.a_count : sets_boundary(side_a, region);
            u64 b_hi = region == events ? p.b_count : sets_boundary(side_b, region);
            a_hi = a_hi < a_lo ? a_lo : a_hi;
            b_hi = b_hi < b_lo ? b_lo : b_hi;
            const u64 a_n = a_hi - a_lo, b_n = b_hi - b_lo;
            u64 local = diag > a_lo + b_lo ? diag - a_lo - b_lo : 0;
            local = local < a_n + b_n ? local : a_n + b_n;
            bool star = false;
            u64 ai;
            auto in_a = [&](u64 i) { return at_a(a_lo + i); };
            auto in_b = [&](u64 i) { return at_b(b_lo + i); };
            auto gap = [](u64) { return (Bits)0; };  // a gap's elements are alike
            if (OP == SETS_OP_MERGE) {
                ai = (region & 1) ? merge_path_lower(search, in_a, a_n, in_b, b_n, local)
                                  : merge_path_lower(search, gap, a_n, gap, b_n, local);
            } else if (region & 1) {
                ai = balanced_path<true>(search, in_a, a_n, in_b, b_n, local, &star);
            } else {
                ai = balanced_path<true>(search, gap, a_n, gap, b_n, local, &star);
            }
            ai += a_lo;
            const u64 bi = b_lo + local - (ai - a_lo) + (star ? 1u : 0u);
            const u64 region_a = sets_region_of(search, side_a, pairs, ai);
            const u64 region_b = sets_region_of(search, side_b, pairs, bi);
            if ((threadIdx.x & (G - 1)) == 0) {
                partition[3 * q] = ai | (star ? 1ull << 63 : 0ull);
                partition[3 * q + 1] = region_a;
                partition[3 * q + 2] = region_b;
            }
        }
        return;
    }
    // Every lane of a group runs the same trip count (a group's threads are consecutive).
    for (u64 q = global_thread_index(THREADS) / G; q <= p.tiles; q += stride) {
        const u64 diag = q * NV < total ? q * NV : total;
        bool star = false;
        u64 ai;
        if (OP == SETS_OP_MERGE) {
            ai = merge_path_lower(search, at_a, p.a_count, at_b, p.b_count, diag);
        } else if (p.flags & SETS_NO_DUPLICATES) {
            ai = balanced_path<false>(search, at_a, p.a_count, at_b, p.b_count, diag, &star);
        } else {
            ai = balanced_path<true>(search, at_a, p.a_count, at_b, p.b_count, diag, &star);
        }
        if ((threadIdx.x & (G - 1)) == 0) {
            partition[q] = ai | (star ? 1ull << 63 : 0ull);
        }
    }
}

}  // namespace oxicub
