// Family routing_dispatch: what a MoE dispatch needs after the router (docs/design/routing.md,
// "Dispatch"): each expert's number of entries (counts) and the entries grouped by expert
// (order: entry indices into the router's ids, expert after expert, each expert's in ascending
// order: stable, so the same on every GPU and every run).
//
// The entries (ids, read as u32: a negative i32 id is above every expert) are cut into tiles
// of RD_TILE_ENTRIES, a warp owning RD_ITEMS_PER_LANE x 32 consecutive entries of its block's
// tile. Each warp counts its entries per expert into its own shared row: the lanes holding the
// same expert meet by __match_any_sync and their lowest lane adds their number (no atomics,
// so no order that could vary). Three stages when there is more than one tile:
//   COUNT  a block per tile: the tile's counts per expert into tile_counts[tile][expert];
//          the smallest invalid entry (id >= experts) into the status, by an atomic maximum of
//          its complement
//   SCAN   one block: each expert's total (its count, written out), the experts' exclusive
//          sums, and each tile's first position per expert, in place of its counts; the
//          invalid entry's value into the status
//   PLACE  a block per tile: each warp's first position per expert (the tile's, plus the
//          warps before it), then the entries in order, a lane's position its warp's position
//          for its expert plus the lanes below it holding the same expert
// and one, SINGLE, that does all three in one block when there is at most one tile (decode
// sizes: one launch).
namespace oxicub {

typedef u32 RdRow[RD_MAX_EXPERTS];

// This lane's first entry of `tile` (its others follow 32 apart).
__device__ __forceinline__ u64 rd_first_entry(u64 tile) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    return tile * (u64)RD_TILE_ENTRIES + (u64)warp * (32u * RD_ITEMS_PER_LANE) + lane;
}

// The ids of this lane's entries from `first`; RD_NONE past the entries.
__device__ __forceinline__ void rd_load(const RoutingDispatchParams& p, u64 first,
                                        u32 (&ids)[RD_ITEMS_PER_LANE]) {
    const u32* in = reinterpret_cast<const u32*>(p.ids);
#pragma unroll
    for (u32 j = 0; j < RD_ITEMS_PER_LANE; ++j) {
        const u64 entry = first + 32u * j;
        ids[j] = entry < p.entries ? in[entry] : RD_NONE;
    }
}

// Counts this warp's entries per expert into `row` (zeroed here first). With `report`, the
// warp's smallest invalid entry goes to the status, one atomic a warp at most (entries past
// the end are not entries: their RD_NONE is also the bits of an i32 id of -1, which is one).
__device__ __forceinline__ void rd_count_warp(const RoutingDispatchParams& p, u64 first,
                                              const u32 (&ids)[RD_ITEMS_PER_LANE], u32* row,
                                              bool report) {
    const u32 lane = threadIdx.x & 31u;
    for (u32 e = lane; e < p.experts; e += 32u) {
        row[e] = 0;
    }
    __syncwarp();
    bool reported = !report;
#pragma unroll
    for (u32 j = 0; j < RD_ITEMS_PER_LANE; ++j) {
        const u32 id = ids[j];
        const bool valid = id < p.experts;
        const u32 invalid =
            __ballot_sync(0xFFFFFFFFu, !valid && first + 32u * j < p.entries);
        if (!reported && invalid != 0u) {
            // The warp's entries rise with the lane, then with j: the lowest such lane of the
            // first such j holds the warp's smallest. The smallest entry wins: its complement
            // is the largest.
            reported = true;
            if (lane == (u32)__ffs(invalid) - 1u) {
                u64* status = reinterpret_cast<u64*>(p.status);
                atomicMax(&status[RD_STATUS_INVALID], ~(first + 32u * j));
            }
        }
        const u32 peers = __match_any_sync(0xFFFFFFFFu, valid ? id : RD_NONE);
        if (valid && lane == (u32)__ffs(peers) - 1u) {
            row[id] += (u32)__popc(peers);
        }
        __syncwarp();
    }
}

// Writes this warp's entries to `order`: `row[e]` holds the warp's first position for expert
// e and is advanced past its entries.
__device__ __forceinline__ void rd_place_warp(const RoutingDispatchParams& p, u64 first,
                                              const u32 (&ids)[RD_ITEMS_PER_LANE], u32* row) {
    const u32 lane = threadIdx.x & 31u;
    const u32 below = (1u << lane) - 1u;
    u32* order = reinterpret_cast<u32*>(p.order);
#pragma unroll
    for (u32 j = 0; j < RD_ITEMS_PER_LANE; ++j) {
        const u32 id = ids[j];
        const bool valid = id < p.experts;
        const u32 peers = __match_any_sync(0xFFFFFFFFu, valid ? id : RD_NONE);
        if (valid) {
            order[row[id] + (u32)__popc(peers & below)] = (u32)(first + 32u * j);
        }
        // Every lane has read its expert's position before the lowest lane moves it on.
        __syncwarp();
        if (valid && lane == (u32)__ffs(peers) - 1u) {
            row[id] += (u32)__popc(peers);
        }
        __syncwarp();
    }
}

// The warps' rows turned, expert by expert, from counts into first positions: warp w's
// position for expert e is base(e) plus the counts of warps 0..w-1 (the block synchronises
// before and after).
template <u32 WARPS, class Base>
__device__ __forceinline__ void rd_warp_positions(const RoutingDispatchParams& p, RdRow* rows,
                                                  Base base) {
    for (u32 e = threadIdx.x; e < p.experts; e += WARPS * 32u) {
        u32 at = base(e);
#pragma unroll
        for (u32 w = 0; w < WARPS; ++w) {
            const u32 count = rows[w][e];
            rows[w][e] = at;
            at += count;
        }
    }
}

// The invalid entry's id, for the host's message (one thread, after every count).
__device__ __forceinline__ void rd_report_value(const RoutingDispatchParams& p) {
    u64* status = reinterpret_cast<u64*>(p.status);
    const u64 invalid = status[RD_STATUS_INVALID];
    if (invalid != 0) {
        status[RD_STATUS_VALUE] = reinterpret_cast<const u32*>(p.ids)[~invalid];
    }
}

// The experts' exclusive sums of `total(e)` into `offsets` (shared, RD_MAX_EXPERTS), and
// with `write_counts` the totals into `counts`. Each thread takes RD_MAX_EXPERTS /
// BLOCK_THREADS consecutive experts, so that one block scan orders them; every thread calls it.
template <u32 BLOCK_THREADS, class Total>
__device__ __forceinline__ void rd_expert_offsets(const RoutingDispatchParams& p, u32* offsets,
                                                  u32* warp_totals, Total total,
                                                  bool write_counts) {
    constexpr u32 PER_THREAD = RD_MAX_EXPERTS / BLOCK_THREADS;
    u32 mine[PER_THREAD];
    u32 sum = 0;
#pragma unroll
    for (u32 i = 0; i < PER_THREAD; ++i) {
        const u32 e = threadIdx.x * PER_THREAD + i;
        mine[i] = e < p.experts ? total(e) : 0u;
        sum += mine[i];
    }
    u32 all;
    u32 at = block_exclusive_sum<BLOCK_THREADS, u32>(sum, warp_totals, &all);
    u32* counts = reinterpret_cast<u32*>(p.counts);
#pragma unroll
    for (u32 i = 0; i < PER_THREAD; ++i) {
        const u32 e = threadIdx.x * PER_THREAD + i;
        if (e < p.experts) {
            offsets[e] = at;
            if (write_counts) {
                counts[e] = mine[i];
            }
        }
        at += mine[i];
    }
}

template <u32 BLOCK_THREADS>
__device__ __forceinline__ void routing_dispatch(const RoutingDispatchParams& p) {
    constexpr u32 WARPS = BLOCK_THREADS / 32u;
    static_assert(WARPS * 32u * RD_ITEMS_PER_LANE == RD_TILE_ENTRIES,
                  "a tile is its warps' entries");
    static_assert(RD_MAX_EXPERTS % BLOCK_THREADS == 0, "whole experts per thread");
    __shared__ RdRow rows[WARPS];
    __shared__ u32 offsets[RD_MAX_EXPERTS];
    __shared__ u32 warp_totals[WARPS];
    const u32 lane = threadIdx.x & 31u;
    const u32 warp = threadIdx.x >> 5;
    u32* row = rows[warp];
    u32* tile_counts = reinterpret_cast<u32*>(p.tile_counts);
    const u32* counts = reinterpret_cast<const u32*>(p.counts);
    const u64 tiles = (p.entries + RD_TILE_ENTRIES - 1) / RD_TILE_ENTRIES;
    const u32 experts = p.experts;
    u32 ids[RD_ITEMS_PER_LANE];

    if (p.stage == RD_STAGE_SINGLE) {
        // At most one tile, one block: count, the experts' totals and offsets, place.
        const u64 first = rd_first_entry(0);
        rd_load(p, first, ids);
        rd_count_warp(p, first, ids, row, true);
        __syncthreads();
        rd_expert_offsets<BLOCK_THREADS>(
            p, offsets, warp_totals,
            [&](u32 e) {
                u32 t = 0;
#pragma unroll
                for (u32 w = 0; w < WARPS; ++w) {
                    t += rows[w][e];
                }
                return t;
            },
            true);
        __syncthreads();
        rd_warp_positions<WARPS>(p, rows, [&](u32 e) { return offsets[e]; });
        __syncthreads();
        if (threadIdx.x == 0) {
            rd_report_value(p);
        }
        rd_place_warp(p, first, ids, row);
        return;
    }
    if (p.stage == RD_STAGE_COUNT) {
        for (u64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const u64 first = rd_first_entry(tile);
            rd_load(p, first, ids);
            rd_count_warp(p, first, ids, row, true);
            __syncthreads();
            u32* tile_row = tile_counts + tile * experts;
            for (u32 e = threadIdx.x; e < experts; e += BLOCK_THREADS) {
                u32 t = 0;
#pragma unroll
                for (u32 w = 0; w < WARPS; ++w) {
                    t += rows[w][e];
                }
                tile_row[e] = t;
            }
            // The rows are rewritten by the next tile.
            __syncthreads();
        }
        return;
    }
    if (p.stage == RD_STAGE_SCAN) {
        // A warp per expert: its total (its count) and, in place of each tile's count, the
        // entries of the tiles before it, 32 tiles a step.
        for (u32 e = blockIdx.x * WARPS + warp; e < experts; e += gridDim.x * WARPS) {
            u32 at = 0;
            for (u64 base = 0; base < tiles; base += 32u) {
                const u64 tile = base + lane;
                const u32 count = tile < tiles ? tile_counts[tile * experts + e] : 0u;
                const u32 inclusive = warp_inclusive_sum(count);
                if (tile < tiles) {
                    tile_counts[tile * experts + e] = at + inclusive - count;
                }
                at += __shfl_sync(0xFFFFFFFFu, inclusive, 31);
            }
            if (lane == 0) {
                reinterpret_cast<u32*>(p.counts)[e] = at;
            }
        }
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            rd_report_value(p);
        }
        return;
    }
    if (p.stage == RD_STAGE_PLACE) {
        // Every block scans the experts' counts itself (at most RD_MAX_EXPERTS values).
        rd_expert_offsets<BLOCK_THREADS>(
            p, offsets, warp_totals, [&](u32 e) { return counts[e]; }, false);
        __syncthreads();
        for (u64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
            const u64 first = rd_first_entry(tile);
            rd_load(p, first, ids);
            rd_count_warp(p, first, ids, row, false);
            __syncthreads();
            const u32* tile_row = tile_counts + tile * experts;
            rd_warp_positions<WARPS>(p, rows, [&](u32 e) { return offsets[e] + tile_row[e]; });
            __syncthreads();
            rd_place_warp(p, first, ids, row);
            // The rows are rewritten by the next tile.
            __syncthreads();
        }
    }
}

}  // namespace oxicub
