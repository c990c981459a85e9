// Family segmented_sort: the seed's segmented mergesort over the whole keys array
// (docs/design/segmented_sort.md, "GPU: segmented mergesort"). Every position carries the start
// of its segment (a position outside every valid segment is a segment of its own), so the
// sort of (segment start, rank, position) keeps each segment where it lies: tiles are sorted
// in shared memory, then merge passes double the sorted runs, and in a pass only the segment
// that spans the two runs' interface moves; every other entry is copied.
namespace oxicub {

// A merge pass that meets no active range and whose tiles' buffers agree moves nothing: after a
// few passes only the segments longer than a run still merge (docs/design/segmented_sort.md,
// "GPU: segmented mergesort").

// The flag of seg_start[i] when position i belongs to a valid segment; the sort compares the
// starts without it (positions are below 2^63).
constexpr u64 SS_VALID = 1ull << 63;


// Resolves segment `seg` and checks it in the order the host backend does: the layout's checks,
// then (offsets) that it does not begin before the previous segment ends, then the order.
__device__ __forceinline__ u32 ss_resolve(const SegmentedSortParams& p, u64 seg, u64* begin,
                                          u64* size, u32* order, i64* value) {
    const u32 code = segment_resolve(p, seg, begin, size, value);
    if (code != 0) {
        return code;
    }
    if ((p.flags & SEGMENT_OFFSETS) && seg > 0) {
        const i64 previous_end = reinterpret_cast<const i64*>(p.end_offsets)[seg - 1];
        if ((i64)*begin < previous_end) {
            *value = (i64)*begin;
            return VIOLATION_OVERLAPS;
        }
    }
    u32 o = p.order_value;
    if (p.flags & SS_ORDER_PER_SEGMENT) {
        const u32 d = reinterpret_cast<const u8*>(p.orders)[seg];
        if (d > 1 || ((p.order_mask >> d) & 1u) == 0) {
            *value = (i64)d;
            return VIOLATION_OPTION_NOT_COMPILED;
        }
        o = d;
    }
    *order = o;
    return 0;
}

// An entry of the sort: its segment's start, its rank (the radix code, inverted for a
// descending segment) and its position; entries are distinct (positions are), so the order is
// strict and the sort stable.
__device__ __forceinline__ bool ss_before(u64 seg_a, u64 rank_a, u64 pos_a, u64 seg_b, u64 rank_b,
                                          u64 pos_b) {
    if (seg_a != seg_b) {
        return seg_a < seg_b;
    }
    if (rank_a != rank_b) {
        return rank_a < rank_b;
    }
    return pos_a < pos_b;
}

// Sorts each run of `span` (a power of two up to SS_TILE) of the SS_TILE entries (rank, tag =
// segment << 32 | slot) in shared memory by (segment, rank, slot): a bitonic network whose
// last stage runs every run forward, every thread comparing one pair per step. Every thread of
// the block calls it; it ends in a block barrier.
template <u32 BLOCK_THREADS>
__device__ __forceinline__ void ss_tile_sort(u64* ranks, u64* tags, u32 span) {
    auto before = [](u64 ra, u64 ta, u64 rb, u64 tb) {
        if ((ta >> 32) != (tb >> 32)) {
            return ta < tb;
        }
        return ra != rb ? ra < rb : ta < tb;
    };
    for (u32 size = 2; size <= span; size <<= 1) {
        for (u32 half = size >> 1; half > 0; half >>= 1) {
            for (u32 q = threadIdx.x; q < SS_TILE / 2; q += BLOCK_THREADS) {
                const u32 i = ((q & ~(half - 1u)) << 1) | (q & (half - 1u));
                const u32 partner = i + half;
                const bool forward = size == span || (i & size) == 0;
                const u64 ra = ranks[i], ta = tags[i];
                const u64 rb = ranks[partner], tb = tags[partner];
                // Entries are distinct: b before a exactly when a is not before b.
                if (before(rb, tb, ra, ta) == forward) {
                    ranks[i] = rb;
                    tags[i] = tb;
                    ranks[partner] = ra;
                    tags[partner] = ta;
                }
            }
            __syncthreads();
        }
    }
}

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES>
__device__ __forceinline__ void segmented_sort(const SegmentedSortParams& p) {
    typedef typename Key::Bits Bits;
    // The entries a tile sort holds in shared memory (TILE and SMALL: ranks, then tags); the
    // register path's stages use dynamic shared memory (RegisterSort<BLOCK_THREADS,
    // SS_ITEMS>::SHARED_WORDS words, sized at launch).
    __shared__ u64 shared_words[2 * SS_TILE];
    extern __shared__ __align__(16) unsigned char ss_dynamic[];
    constexpr u32 REGISTER_TILE = BLOCK_THREADS * SS_ITEMS;
    u64* sort_ranks = shared_words;
    u64* sort_tags = shared_words + SS_TILE;
    u64* status = reinterpret_cast<u64*>(p.status);
    u64* seg_start = reinterpret_cast<u64*>(p.seg_start);
    const u64 n = p.num_keys;
    const u64 stride = grid_threads(BLOCK_THREADS);
    const u64 first = global_thread_index(BLOCK_THREADS);

    if (p.stage == SS_STAGE_INIT) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            segment_status_init(p, status, SS_STATUS_WORDS);
        }
        return;
    }
    u64* ranks = reinterpret_cast<u64*>(p.ranks);
    u64* positions = reinterpret_cast<u64*>(p.positions);
    const u64 count = status[SEGMENT_STATUS_COUNT];
    if (p.stage == SS_STAGE_RESOLVE) {
        // A thread per segment: resolved, checked, described. The valid sizes are summed a
        // warp at a time (one atomic per warp, not per segment), so the loop runs in step.
        const u64 warps_base = first - (threadIdx.x & 31u);
        // The register path's classes are counted here too (register_path.cuh).
        SsClassCounts& classes = ss_class_counts();
        if (p.flags & SS_CLASSES) {
            ss_clear_classes(classes);
        }
        for (u64 base = warps_base; base < count; base += stride) {
            const u64 seg = base + (threadIdx.x & 31u);
            u64 size = 0;
            if (seg < count) {
                u64 begin = 0;
                u32 order = 0;
                i64 value = 0;
                const u32 code = ss_resolve(p, seg, &begin, &size, &order, &value);
                segment_describe(p, seg, begin, size, (u64)order, 0, code == 0);
                if (code != 0) {
                    size = 0;
                    atomicMin(&status[SEGMENT_STATUS_VIOLATION], (seg << 8) | (u64)code);
                    if (code == VIOLATION_OFFSETS_OUT_OF_ORDER || code == VIOLATION_OVERLAPS) {
                        status[SS_STATUS_DISORDER] = 1;
                    }
                }
                // A begin below the previous end breaks the order whatever else is wrong with
                // either segment (a size check failing first must not hide it: valid segments
                // around an invalid one could overlap), so nothing is written.
                if ((p.flags & SEGMENT_OFFSETS) && seg > 0 &&
                    reinterpret_cast<const i64*>(p.begin_offsets)[seg] <
                        reinterpret_cast<const i64*>(p.end_offsets)[seg - 1]) {
                    status[SS_STATUS_DISORDER] = 1;
                }
            }
            const u64 total = warp_inclusive_sum(size);
            if ((threadIdx.x & 31u) == 31u && total != 0) {
                atomicAdd(&status[SS_STATUS_TOTAL], total);
            }
            if (p.flags & SS_CLASSES) {
                ss_count_class<REGISTER_TILE>(classes, size);
            }
        }
        if (p.flags & SS_CLASSES) {
            ss_add_classes(p, classes);
        }
        return;
    }
    if (p.stage >= SS_STAGE_PLACE) {
        // The register path (register_path.cuh): keys of at most 32 bits.
        if (sizeof(Bits) > 4 || status[SS_STATUS_DISORDER] != 0) {
            return;
        }
        if (p.stage == SS_STAGE_PLACE) {
            ss_place<Key, VALUE_BYTES, BLOCK_THREADS>(p, count);
        } else if (p.stage == SS_STAGE_BLOCK) {
            ss_block<Key, VALUE_BYTES, BLOCK_THREADS>(p, count, reinterpret_cast<u64*>(ss_dynamic));
        } else if (p.stage == SS_STAGE_PARTITION || p.stage == SS_STAGE_RUNS) {
            // The merge passes take a part (SS_PART entries) a block: the kernel whose tile is
            // a part runs them, whichever kernel sorted the chunks.
            if constexpr (REGISTER_TILE == SS_PART) {
                if (p.stage == SS_STAGE_PARTITION) {
                    if (ss_rank_entries<Key, VALUE_BYTES>(p)) {
                        ss_partition<BLOCK_THREADS, u32>(p, count);
                    } else {
                        ss_partition<BLOCK_THREADS, u64>(p, count);
                    }
                } else if (p.stage == SS_STAGE_RUNS) {
                    if (ss_rank_entries<Key, VALUE_BYTES>(p)) {
                        ss_runs<Key, VALUE_BYTES, BLOCK_THREADS>(
                            p, count, reinterpret_cast<u32*>(ss_dynamic));
                    } else {
                        ss_runs<Key, VALUE_BYTES, BLOCK_THREADS>(
                            p, count, reinterpret_cast<u64*>(ss_dynamic));
                    }
                }
            }
        } else if (p.stage == SS_STAGE_NAN_SCAN) {
            if (Key::KEY_KIND == KIND_FLOAT) {
                ss_nan_scan<Key, BLOCK_THREADS>(p, count);
            }
        }
        return;
    }
    if (p.stage == SS_STAGE_FILL) {
        // A thread per position: a position of a valid segment takes the segment's start
        // (flagged) and its key's rank; any other is a segment of its own.
        const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
        const i64* begins = reinterpret_cast<const i64*>(p.begin_offsets);
        for (u64 i = first; i < n; i += stride) {
            u64 start = i;
            u64 rank = 0;
            // The one segment that can hold position i: by the stride, or the last whose begin
            // offset is at most i (offsets in order; out of order, nothing is written anyway).
            u64 seg = ~0ull;
            if (p.flags & SEGMENT_OFFSETS) {
                u64 lo = 0, hi = count;
                while (lo < hi) {
                    const u64 mid = (lo + hi) >> 1;
                    if (begins[mid] <= (i64)i) {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                seg = lo == 0 ? ~0ull : lo - 1;
            } else if (p.stride != 0 && i / p.stride < count) {
                seg = i / p.stride;
            }
            if (seg != ~0ull) {
                const u64* desc = segment_descriptor(p, seg);
                const u64 begin = desc[SEGMENT_DESC_BEGIN];
                if ((desc[SEGMENT_DESC_FLAGS] & SEGMENT_DESC_VALID) != 0 && i >= begin &&
                    i - begin < desc[SEGMENT_DESC_SIZE]) {
                    const Bits flip = desc[SEGMENT_DESC_WORD] ? (Bits)~(Bits)0 : (Bits)0;
                    start = begin | SS_VALID;
                    rank = (u64)(Bits)(Key::to_radix(keys[i]) ^ flip);
                }
            }
            seg_start[i] = start;
            ranks[i] = rank;
            positions[i] = i;
        }
        return;
    }
    if (p.stage == SS_STAGE_FINALIZE) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            const u64 violation = status[SEGMENT_STATUS_VIOLATION];
            if (violation != ~0ull) {
                u64 begin = 0, size = 0;
                u32 order = 0;
                i64 value = 0;
                ss_resolve(p, violation >> 8, &begin, &size, &order, &value);
                status[SEGMENT_STATUS_VALUE] = (u64)value;
            }
            const u64 total = status[SS_STATUS_TOTAL];
            if (total < p.total_min || total > p.total_max) {
                status[SS_STATUS_TOTAL_BAD] = 1;
            }
            if ((p.flags & SS_CLASSES) && sizeof(Bits) <= 4) {
                ss_plan<REGISTER_TILE>(p);  // the classes' lists and batches
            }
        }
        return;
    }
    if (p.stage == SS_STAGE_TILE) {
        // One tile of SS_TILE positions sorted in shared memory (positions are the identity
        // here): by segment (the start, relative to the tile), rank, slot.
        u64* tile_ranks = sort_ranks;
        u64* tile_tags = sort_tags;  // the segment start within the tile << 32 | slot
        const u64 tiles = (n + SS_TILE - 1) / SS_TILE;
        for (u64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const u64 base = tile * SS_TILE;
            for (u32 j = threadIdx.x; j < SS_TILE; j += BLOCK_THREADS) {
                const u64 i = base + j;
                if (i < n) {
                    // Starts are monotone: one at or before the tile is the tile's first.
                    const u64 start = seg_start[i] & ~SS_VALID;
                    const u64 local = start > base ? start - base : 0;
                    tile_ranks[j] = ranks[i];
                    tile_tags[j] = (local << 32) | j;
                } else {
                    tile_ranks[j] = ~0ull;
                    tile_tags[j] = ((u64)SS_TILE << 32) | j;  // past every segment
                }
            }
            __syncthreads();
            ss_tile_sort<BLOCK_THREADS>(tile_ranks, tile_tags, SS_TILE);
            for (u32 j = threadIdx.x; j < SS_TILE; j += BLOCK_THREADS) {
                const u64 i = base + j;
                if (i < n) {
                    ranks[i] = tile_ranks[j];
                    positions[i] = base + (tile_tags[j] & 0xffffffffull);
                }
            }
            if (threadIdx.x == 0) {
                reinterpret_cast<u32*>(p.tile_dirty)[tile] = 1;  // the other buffer is empty
            }
            __syncthreads();
        }
        return;
    }
    if (p.stage == SS_STAGE_SMALL) {
        // Every segment fits a tile (the host knows from the size bound): a block sorts whole
        // segments in shared memory and writes them in place, with no scratch and no merge
        // pass (docs/design/segmented_sort.md, "GPU: segments of one tile").
        if (status[SS_STATUS_DISORDER] != 0) {
            return;
        }
        // Runs of `span` entries (a power of two at least every segment's size, p.width): a
        // block sorts SS_TILE / span segments at a time.
        const u32 span = (u32)p.width;
        const u64 per_block = SS_TILE / span;
        const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
        Bits* out_keys = reinterpret_cast<Bits*>(p.out_keys);
        // A run's segment, its begin and size (size 0 for none or an invalid one), its flip.
        auto segment_of = [&](u64 seg, u64* begin, u64* size, Bits* flip) {
            *begin = 0;
            *size = 0;
            *flip = 0;
            if (seg < count) {
                const u64* desc = segment_descriptor(p, seg);
                if ((desc[SEGMENT_DESC_FLAGS] & SEGMENT_DESC_VALID) != 0 &&
                    desc[SEGMENT_DESC_SIZE] <= span) {
                    *begin = desc[SEGMENT_DESC_BEGIN];
                    *size = desc[SEGMENT_DESC_SIZE];
                    *flip = desc[SEGMENT_DESC_WORD] ? (Bits)~(Bits)0 : (Bits)0;
                }
            }
        };
        for (u64 first_seg = blockIdx.x * per_block; first_seg < count;
             first_seg += (u64)gridDim.x * per_block) {
            for (u32 j = threadIdx.x; j < SS_TILE; j += BLOCK_THREADS) {
                const u32 local = j % span;
                u64 begin, size;
                Bits flip;
                segment_of(first_seg + j / span, &begin, &size, &flip);
                const bool inside = local < size;
                sort_ranks[j] = inside ? (u64)(Bits)(Key::to_radix(keys[begin + local]) ^ flip)
                                       : ~0ull;
                sort_tags[j] = inside ? (u64)local : ((1ull << 32) | local);  // past the segment
            }
            __syncthreads();
            ss_tile_sort<BLOCK_THREADS>(sort_ranks, sort_tags, span);
            for (u32 j = threadIdx.x; j < SS_TILE; j += BLOCK_THREADS) {
                const u32 local = j % span;
                u64 begin, size;
                Bits flip;
                segment_of(first_seg + j / span, &begin, &size, &flip);
                if (local >= size) {
                    continue;
                }
                const u64 slot = sort_tags[j] & 0xffffffffull;
                out_keys[begin + local] = keys[begin + slot];
                if (VALUE_BYTES != 0) {
                    typedef typename ValueWord<VALUE_BYTES>::Type Word;
                    Word* out_values = reinterpret_cast<Word*>(p.out_values);
                    out_values[begin + local] =
                        (p.flags & SS_VALUES_INDEX)
                            ? (Word)slot
                            : reinterpret_cast<const Word*>(p.values)[begin + slot];
                }
            }
            __syncthreads();
        }
        return;
    }
    if (p.stage == SS_STAGE_MERGE) {
        // Runs of p.width sorted entries in buffer p.src merged pairwise into the other buffer,
        // a tile per block. Only the segment that spans a pair's interface (its active range)
        // moves; a tile outside every active range whose two buffers already agree does
        // nothing (the seed's early exit), one whose buffers differ is copied, and a tile that
        // meets an active range is left differing (tile_dirty).
        const u64* src_ranks = ranks + (u64)p.src * n;
        const u64* src_pos = positions + (u64)p.src * n;
        u64* dst_ranks = ranks + (u64)(p.src ^ 1u) * n;
        u64* dst_pos = positions + (u64)(p.src ^ 1u) * n;
        u32* dirty = reinterpret_cast<u32*>(p.tile_dirty);
        const u64 width = p.width;
        auto seg_of = [&](u64 at) { return seg_start[src_pos[at]] & ~SS_VALID; };
        // The active range [begin, end), its segment, the tile's flag, whether the tile moves.
        __shared__ u64 range[5];
        const u64 tiles = (n + SS_TILE - 1) / SS_TILE;
        for (u64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const u64 t0 = tile * SS_TILE;
            const u64 t1 = (t0 + SS_TILE < n) ? t0 + SS_TILE : n;
            const u64 a0 = (t0 / (2 * width)) * (2 * width);
            const u64 b0 = a0 + width;
            const u64 b1 = (a0 + 2 * width < n) ? a0 + 2 * width : n;
            if (threadIdx.x == 0) {
                u64 begin = 0, end = 0, active = 0;
                if (b0 < n && seg_of(b0 - 1) == seg_of(b0)) {
                    active = seg_of(b0);
                    // A's part of the active segment starts at the first entry of it in A,
                    // B's part ends at the first entry of B past it (starts are monotone).
                    u64 lo = a0, hi = b0;
                    while (lo < hi) {
                        const u64 mid = (lo + hi) >> 1;
                        if (seg_of(mid) == active) {
                            hi = mid;
                        } else {
                            lo = mid + 1;
                        }
                    }
                    begin = lo;
                    lo = b0;
                    hi = b1;
                    while (lo < hi) {
                        const u64 mid = (lo + hi) >> 1;
                        if (seg_of(mid) == active) {
                            lo = mid + 1;
                        } else {
                            hi = mid;
                        }
                    }
                    end = lo;
                }
                // The tile moves only if the active range meets it and the other run's part
                // interleaves with its entries: an A tile moves when B's first entry comes
                // before its last active one, a B tile when A's last comes after its first
                // (the early exit of the seed's locality sort: a source interval that maps
                // onto its destination).
                u64 moves = 0;
                if (t0 < end && t1 > begin) {
                    if (t0 < b0) {
                        const u64 last = (t1 < b0 ? t1 : b0) - 1;
                        moves = ss_before(active, src_ranks[b0], src_pos[b0], active,
                                          src_ranks[last], src_pos[last]);
                    } else {
                        const u64 first_b = t0;
                        moves = ss_before(active, src_ranks[first_b], src_pos[first_b], active,
                                          src_ranks[b0 - 1], src_pos[b0 - 1]);
                    }
                }
                range[0] = begin;
                range[1] = end;
                range[2] = active;
                range[3] = dirty[tile];  // read before thread 0 rewrites it below
                range[4] = moves;
                // The seed's merge-pass statistics: tiles merged, tiles copied.
                u64* statistics = reinterpret_cast<u64*>(p.statistics) + 2 * (u64)p.pass;
                if (moves != 0) {
                    atomicAdd(&statistics[0], 1ull);
                } else if (range[3] != 0) {
                    atomicAdd(&statistics[1], 1ull);
                }
            }
            __syncthreads();
            const u64 begin = range[0], end = range[1], active = range[2];
            const bool differs = range[3] != 0;
            const bool meets = range[4] != 0;
            __syncthreads();
            if (!meets && !differs) {
                continue;  // both buffers hold this tile's entries already
            }
            for (u64 i = t0 + threadIdx.x; i < t1; i += BLOCK_THREADS) {
                const u64 rank = src_ranks[i];
                const u64 pos = src_pos[i];
                u64 out = i;
                if (i >= begin && i < end) {
                    // The first entry of the other run's part not before this one.
                    auto first_not_before = [&](u64 l, u64 h) {
                        while (l < h) {
                            const u64 mid = (l + h) >> 1;
                            if (ss_before(active, src_ranks[mid], src_pos[mid], active, rank, pos)) {
                                l = mid + 1;
                            } else {
                                h = mid;
                            }
                        }
                        return l;
                    };
                    // B's entries before this one come before it; A's after it, after it.
                    out = i < b0 ? i + (first_not_before(b0, end) - b0)
                                 : i - (b0 - first_not_before(begin, b0));
                } else if (!differs) {
                    continue;  // stationary, and the other buffer agrees
                }
                dst_ranks[out] = rank;
                dst_pos[out] = pos;
            }
            if (threadIdx.x == 0) {
                dirty[tile] = meets ? 1u : 0u;
            }
        }
        return;
    }
    if (p.stage == SS_STAGE_WRITE) {
        // Every position of a valid segment (none after offsets out of order) takes the key (and
        // value, or index within the segment) that the sort put there.
        if (status[SS_STATUS_DISORDER] != 0) {
            return;
        }
        const u64* final_pos = positions + (u64)p.src * n;
        const Bits* keys = reinterpret_cast<const Bits*>(p.keys);
        Bits* out_keys = reinterpret_cast<Bits*>(p.out_keys);
        for (u64 i = first; i < n; i += stride) {
            const u64 pos = final_pos[i];
            const u64 start = seg_start[pos];
            if ((start & SS_VALID) == 0) {
                continue;
            }
            out_keys[i] = keys[pos];
            if (VALUE_BYTES != 0) {
                typedef typename ValueWord<VALUE_BYTES>::Type Word;
                Word* out_values = reinterpret_cast<Word*>(p.out_values);
                if (p.flags & SS_VALUES_INDEX) {
                    out_values[i] = (Word)(pos - (start & ~SS_VALID));
                } else {
                    out_values[i] = reinterpret_cast<const Word*>(p.values)[pos];
                }
            }
        }
        return;
    }
}

}  // namespace oxicub
