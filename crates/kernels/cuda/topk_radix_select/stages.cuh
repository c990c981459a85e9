// Family topk_radix_select: the entry of every instantiation; PART 0 runs every stage but the
// prefilter and the sample.
namespace oxicub {

template <class Key, u32 BLOCK_THREADS, int VALUE_BYTES, int PART>
__device__ __forceinline__ void topk_radix_select(const TopKRadixSelectParams& params) {
    typedef typename Key::Bits Bits;
    typedef typename ValuePayload<VALUE_BYTES>::Type Payload;
    static_assert(BLOCK_THREADS % 32 == 0 && BLOCK_THREADS >= TOPK_BINS, "block size");
    static_assert(BLOCK_THREADS <= 1024, "block size");
    if (PART == TOPK_PART_PREFILTER) {
        if (params.stage == TOPK_STAGE_PREFILTER) {
            topk_prefilter<Key, BLOCK_THREADS>(params);
        }
        return;
    }
    if (PART == TOPK_PART_SAMPLE) {
        if (params.stage == TOPK_STAGE_SAMPLE) {
            topk_sample<Key, BLOCK_THREADS>(params);
        }
        return;
    }

    __shared__ u32 block_counts[TOPK_BINS];
    __shared__ u32 warp_totals[BLOCK_THREADS / 32];
    __shared__ u64 scan_buffer[BLOCK_THREADS];
    __shared__ u64 tile_a[BLOCK_THREADS];
    __shared__ u64 tile_b[BLOCK_THREADS];
    __shared__ u64 block_base;

    u64* state = reinterpret_cast<u64*>(params.state);
    const Bits flip = (Bits)params.flip;
    const u32 stage = params.stage;

    if (stage == TOPK_STAGE_INIT) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            topk_init(params, state);
        }
        return;
    }

    const Bits* keys = reinterpret_cast<const Bits*>(params.keys);
    u64* histogram = reinterpret_cast<u64*>(params.histogram);
    Bits* cand_keys = reinterpret_cast<Bits*>(params.cand_keys);
    u64* cand_index = reinterpret_cast<u64*>(params.cand_index);
    Bits* rank_keys = reinterpret_cast<Bits*>(params.rank_keys);
    u64* rank_index = reinterpret_cast<u64*>(params.rank_index);
    const bool mode_fast = stage > TOPK_STAGE_INIT && state[TOPK_SLOT_MODE] == 1;
    const u32 lane = threadIdx.x & 31u;
    // The candidate buffer: one segment of cand_cap slots per PREFILTER warp, seg_count[s] used.
    const u64* seg_count = reinterpret_cast<const u64*>(params.cand_counts);
    const u64 seg_cap = params.cand_cap;
    const u64 segments = params.cand_segments;
    // Calls f(valid, raw key, slot) for every candidate, in warp-uniform steps: one warp per
    // segment at a time, 32 candidates per step.
    auto for_each_candidate = [&](auto&& f) {
        const u64 warps = grid_threads(BLOCK_THREADS) >> 5;
        for (u64 segment = global_thread_index(BLOCK_THREADS) >> 5; segment < segments;
             segment += warps) {
            const u64 n = seg_count[segment];  // at most seg_cap in mode 1
            for (u64 j0 = 0; j0 < n; j0 += 32) {
                const u64 j = j0 + lane;
                const bool valid = j < n;
                const u64 at = segment * seg_cap + j;
                f(valid, valid ? cand_keys[at] : (Bits)0, at);
            }
        }
    };
    const bool rank_sort = (params.flags & TOPK_RANK_SORT) != 0;
    const bool direct = (params.flags & TOPK_DIRECT) != 0;

    if (stage == TOPK_STAGE_DECIDE) {
        if (blockIdx.x == 0 && threadIdx.x == 0 && state[TOPK_SLOT_SAMPLED] != 0 &&
            state[TOPK_SLOT_DONE] == 0) {
            const u64 count = state[TOPK_SLOT_CANDIDATES];
            if (count >= state[TOPK_SLOT_K] && count <= params.cand_cap) {
                state[TOPK_SLOT_MODE] = 1;
            }
        }
        return;
    }

    if (stage == TOPK_STAGE_HISTOGRAM) {
        if (state[TOPK_SLOT_DONE] != 0) {
            return;  // block-uniform: every thread reads the same value
        }
        const u64 prefix = state[TOPK_SLOT_PREFIX];
        const u64 mask = state[TOPK_SLOT_MASK];
        const bool fast = mode_fast;
        for (u32 bin = threadIdx.x; bin < TOPK_BINS; bin += BLOCK_THREADS) {
            block_counts[bin] = 0;
        }
        __syncthreads();
        if (fast) {
            // Candidates share their top digits: one shared atomic per distinct digit and warp.
            for_each_candidate([&](bool valid, Bits raw, u64) {
                const u64 rank = (u64)(Bits)(Key::to_radix(raw) ^ flip);
                const bool in = valid && (rank & mask) == prefix;
                const u32 digit = (u32)(rank >> params.shift) & (TOPK_BINS - 1);
                const u32 in_lanes = __ballot_sync(0xFFFFFFFFu, in);
                if (in_lanes == 0) {
                    return;
                }
                const u32 leader = (u32)__ffs(in_lanes) - 1;
                const u32 lead_digit = __shfl_sync(0xFFFFFFFFu, digit, leader);
                if (__ballot_sync(0xFFFFFFFFu, in && digit == lead_digit) == in_lanes) {
                    if (lane == leader) {
                        atomicAdd(&block_counts[digit], (u32)__popc(in_lanes));
                    }
                } else if (in) {
                    atomicAdd(&block_counts[digit], 1u);
                }
            });
        } else {
            const u64 stride = grid_threads(BLOCK_THREADS);
            for (u64 i = global_thread_index(BLOCK_THREADS); i < params.len; i += stride) {
                const u64 rank = (u64)(Bits)(Key::to_radix(keys[i]) ^ flip);
                if ((rank & mask) == prefix) {
                    atomicAdd(&block_counts[(u32)(rank >> params.shift) & (TOPK_BINS - 1)], 1u);
                }
            }
        }
        __syncthreads();
        u64* pass_histogram = histogram + (u64)params.pass * TOPK_BINS;
        for (u32 bin = threadIdx.x; bin < TOPK_BINS; bin += BLOCK_THREADS) {
            const u32 count = block_counts[bin];
            if (count != 0) {
                atomicAdd(&pass_histogram[bin], (u64)count);
            }
        }
        // The last block to merge finds the pivot (no separate launch).
        __threadfence();
        __syncthreads();
        __shared__ bool last_block;
        if (threadIdx.x == 0) {
            const u64 ticket = atomicAdd(&state[TOPK_SLOT_FINISHED + params.pass], 1ull);
            last_block = ticket == (u64)gridDim.x - 1;
        }
        __syncthreads();
        if (last_block) {
            __threadfence();
            topk_pivot<BLOCK_THREADS>(params, state, scan_buffer);
        }
        return;
    }

    if (stage == TOPK_STAGE_PIVOT) {
        if (blockIdx.x == 0 && state[TOPK_SLOT_DONE] == 0) {
            topk_pivot<BLOCK_THREADS>(params, state, scan_buffer);
        }
        return;
    }

    // Writes one selected item (key, and its value or source index) to the outputs.
    auto write_out = [&](u64 position, Bits raw, u64 index) {
        reinterpret_cast<Bits*>(params.out_keys)[position] = raw;
        if (VALUE_BYTES != 0) {
            const Payload payload = (params.flags & TOPK_VALUES_ARE_INDEX)
                ? (Payload)index
                : reinterpret_cast<const Payload*>(params.values)[index];
            reinterpret_cast<Payload*>(params.out_values)[position] = payload;
        }
    };
    // Mode 0, or the rank buffer overflowed: the input-order stages below run.
    const bool old_path =
        !mode_fast || (!direct && state[TOPK_SLOT_RANKED] > params.rank_cap);

    if (stage == TOPK_STAGE_FINAL) {
        if (!mode_fast) {
            return;
        }
        const u64 prefix = state[TOPK_SLOT_PREFIX];
        const u64 mask = state[TOPK_SLOT_MASK];
        const u64 remaining = state[TOPK_SLOT_REMAINING];
        const u64 k = state[TOPK_SLOT_K];
        for_each_candidate([&](bool valid, Bits raw, u64 at) {
            const u64 masked = (u64)(Bits)(Key::to_radix(raw) ^ flip) & mask;
            const bool above = valid && masked > prefix;
            const bool boundary = valid && masked == prefix;
            if (direct) {
                const u64 slot = warp_append(above, &state[TOPK_SLOT_ABOVE]);
                if (above) {
                    write_out(slot, raw, cand_index[at]);
                }
                const u64 ticket = warp_append(boundary, &state[TOPK_SLOT_TICKETS]);
                if (boundary && ticket < remaining) {
                    write_out(k - remaining + ticket, raw, cand_index[at]);
                }
            } else {
                const bool keep = above || boundary;
                topk_warp_max(keep, (u64)(Bits)(Key::to_radix(raw) ^ flip), &state[TOPK_SLOT_MAX_RANK]);
                const u64 slot = warp_append(keep, &state[TOPK_SLOT_RANKED]);
                if (keep && slot < params.rank_cap) {
                    rank_keys[slot] = raw;
                    rank_index[slot] = cand_index[at];
                }
            }
        });
        return;
    }

    if (stage == TOPK_STAGE_RANK_BUCKET || stage == TOPK_STAGE_RANK_PLACE || stage == TOPK_STAGE_RANK_COUNT ||
        stage == TOPK_STAGE_RANK_SCATTER) {
        if (old_path ? !rank_sort : direct) {
            return;
        }
        // The rank sort. Each item's output position is the number of items better than it
        // (rank descending, equal ranks by source index ascending: all distinct, so positions
        // are unique and deterministic). Comparing every pair is quadratic in k, so the items
        // are first grouped by bucket, a monotone function of the rank (best bucket first): an
        // item is then compared only with the items of its own tile's buckets, and every item
        // before those buckets is better (docs/design/topk.md, "Rank sort").
        const u64 items = old_path ? state[TOPK_SLOT_SELECTED] : state[TOPK_SLOT_RANKED];
        u64* positions = reinterpret_cast<u64*>(params.rank_pos);  // zeroed
        u64* placed = positions + params.rank_cap;  // bucket << 32 | slot within the bucket
        u32* bucket_count = reinterpret_cast<u32*>(histogram + sizeof(Bits) * TOPK_BINS);
        u32* bucket_start = bucket_count + TOPK_RANK_BUCKETS;
        // The grouped items reuse the candidate buffer (no longer read; at least rank_cap).
        Bits* grouped_keys = cand_keys;
        u64* grouped_index = cand_index;
        // Every item's rank is in [prefix, max rank]: the buckets split that span evenly.
        const u64 low = state[TOPK_SLOT_PREFIX];
        const u64 high = state[TOPK_SLOT_MAX_RANK];
        const u64 span = high > low ? high - low : 0;
        const u32 width = span == 0 ? 0u : 64u - (u32)__clzll((long long)span);
        const u32 bucket_shift = width > TOPK_RANK_BUCKET_BITS ? width - TOPK_RANK_BUCKET_BITS : 0u;
        auto bucket_of = [&](Bits raw) -> u32 {
            const u64 rank = (u64)(Bits)(Key::to_radix(raw) ^ flip);
            const u64 b = rank <= low ? 0 : (rank - low) >> bucket_shift;
            return TOPK_RANK_BUCKETS - 1 - (u32)(b < TOPK_RANK_BUCKETS - 1 ? b : TOPK_RANK_BUCKETS - 1);
        };
        const u64 stride = grid_threads(BLOCK_THREADS);
        if (stage == TOPK_STAGE_RANK_BUCKET) {
            for (u64 i = global_thread_index(BLOCK_THREADS); i < items; i += stride) {
                const u32 b = bucket_of(rank_keys[i]);
                placed[i] = ((u64)b << 32) | atomicAdd(&bucket_count[b], 1u);
            }
            // The last block: exclusive scan of the bucket counts into bucket_start.
            __threadfence();
            __syncthreads();
            __shared__ bool last_bucketing;
            if (threadIdx.x == 0) {
                last_bucketing = atomicAdd(&state[TOPK_SLOT_BUCKETED], 1ull) == (u64)gridDim.x - 1;
            }
            __syncthreads();
            if (!last_bucketing) {
                return;
            }
            __threadfence();
            constexpr u32 PER = TOPK_RANK_BUCKETS / BLOCK_THREADS;
            static_assert(PER * BLOCK_THREADS == TOPK_RANK_BUCKETS, "rank buckets");
            // L2 reads (the other blocks' atomics are there), all in flight at once.
            u32 c[PER];
#pragma unroll
            for (u32 p = 0; p < PER; ++p) {
                c[p] = __ldcg(&bucket_count[threadIdx.x * PER + p]);
            }
            u32 sum = 0;
#pragma unroll
            for (u32 p = 0; p < PER; ++p) {
                sum += c[p];
            }
            u32 total = 0;
            u32 running = block_exclusive_sum<BLOCK_THREADS>(sum, warp_totals, &total);
#pragma unroll
            for (u32 p = 0; p < PER; ++p) {
                bucket_start[threadIdx.x * PER + p] = running;
                running += c[p];
            }
            return;
        }
        if (stage == TOPK_STAGE_RANK_PLACE) {
            for (u64 i = global_thread_index(BLOCK_THREADS); i < items; i += stride) {
                const u64 at = placed[i];
                const u64 to = bucket_start[at >> 32] + (at & 0xFFFFFFFFull);
                grouped_keys[to] = rank_keys[i];
                grouped_index[to] = rank_index[i];
            }
            return;
        }
        if (stage == TOPK_STAGE_RANK_SCATTER) {
            const u64 k = state[TOPK_SLOT_K];
            const u64 above = k - state[TOPK_SLOT_REMAINING];
            const u64 drop = items - k;  // surplus boundary items (fast path only)
            const bool prefer_larger = (params.flags & TOPK_PREFER_LARGER) != 0;
            for (u64 i = global_thread_index(BLOCK_THREADS); i < items; i += stride) {
                u64 p = positions[i];
                if (prefer_larger && !old_path && p >= above) {
                    if (p < above + drop) {
                        continue;
                    }
                    p -= drop;
                }
                if (p < k) {
                    write_out(p, grouped_keys[i], grouped_index[i]);
                }
            }
            return;
        }
        // RANK_COUNT over the grouped items, by (tile of BLOCK_THREADS items x chunk of the
        // items in the tile's buckets) work units.
        const bool packed = sizeof(Bits) <= 4 && params.len < (1ull << 32);
        const u64 tiles = (items + BLOCK_THREADS - 1) / BLOCK_THREADS;
        const u64 chunks = (items + TOPK_RANK_CHUNK - 1) / TOPK_RANK_CHUNK;
        for (u64 unit = blockIdx.x; unit < tiles * chunks; unit += gridDim.x) {
            const u64 tile = unit / chunks;
            const u64 chunk = unit % chunks;
            const u64 first = tile * BLOCK_THREADS;
            const u64 last = (first + BLOCK_THREADS < items ? first + BLOCK_THREADS : items) - 1;
            const u32 first_bucket = bucket_of(grouped_keys[first]);
            const u32 last_bucket = bucket_of(grouped_keys[last]);
            const u64 range_start = bucket_start[first_bucket];
            const u64 range_end = (u64)bucket_start[last_bucket] + bucket_count[last_bucket];
            const u64 begin = range_start + chunk * TOPK_RANK_CHUNK;
            if (begin >= range_end) {
                continue;  // block-uniform
            }
            const u64 end = begin + TOPK_RANK_CHUNK < range_end ? begin + TOPK_RANK_CHUNK : range_end;
            const u64 i = first + threadIdx.x;
            const bool valid = i < items;
            const u64 my_rank = valid ? (u64)(Bits)(Key::to_radix(grouped_keys[i]) ^ flip) : 0;
            const u64 my_index = valid ? grouped_index[i] : ~0ull;
            const u64 my_packed = (my_rank << 32) | (0xFFFFFFFFull - (my_index & 0xFFFFFFFFull));
            u32 better = 0;
            for (u64 j0 = begin; j0 < end; j0 += BLOCK_THREADS) {
                const u64 j = j0 + threadIdx.x;
                const bool other = j < end;
                const u64 r = other ? (u64)(Bits)(Key::to_radix(grouped_keys[j]) ^ flip) : 0;
                const u64 x = other ? grouped_index[j] : ~0ull;
                if (packed) {
                    tile_a[threadIdx.x] = other ? (r << 32) | (0xFFFFFFFFull - x) : 0;
                } else {
                    tile_a[threadIdx.x] = r;
                    tile_b[threadIdx.x] = x;
                }
                __syncthreads();
                // Padding (0, or rank 0 with index ~0) is never better.
                if (packed) {
#pragma unroll 16
                    for (u32 t = 0; t < BLOCK_THREADS; ++t) {
                        better += tile_a[t] > my_packed ? 1u : 0u;
                    }
                } else {
                    for (u32 t = 0; t < BLOCK_THREADS; ++t) {
                        const u64 r2 = tile_a[t];
                        better += (r2 > my_rank || (r2 == my_rank && tile_b[t] < my_index)) ? 1u : 0u;
                    }
                }
                __syncthreads();
            }
            // Every item before the tile's buckets is better (counted once, by chunk 0).
            const u64 add = better + (chunk == 0 ? range_start : 0);
            if (valid && add != 0) {
                atomicAdd(&positions[i], add);
            }
        }
        return;
    }

    if (!old_path) {
        return;  // the input-order stages below are the fallback
    }
    const u64 threshold = mode_fast ? state[TOPK_SLOT_THRESHOLD] : 0;

    u64* tile_offsets = reinterpret_cast<u64*>(params.tile_offsets);
    u64* boundary_offsets = reinterpret_cast<u64*>(params.boundary_offsets);
    const u64 len =
        (params.flags & TOPK_LEN_IS_SELECTED) ? state[TOPK_SLOT_SELECTED] : params.len;
    const u64 num_tiles = (len + BLOCK_THREADS - 1) / BLOCK_THREADS;

    if (stage == TOPK_STAGE_SCAN) {
        if (blockIdx.x != 0) {
            return;
        }
        u64* counts = (params.flags & TOPK_SCAN_BOUNDARY) ? boundary_offsets : tile_offsets;
        u64 running = 0;
        for (u64 base = 0; base < num_tiles; base += BLOCK_THREADS) {
            const u64 t = base + threadIdx.x;
            const u64 value = t < num_tiles ? counts[t] : 0;
            scan_buffer[threadIdx.x] = value;
            __syncthreads();
            for (u32 offset = 1; offset < BLOCK_THREADS; offset <<= 1) {
                const u64 add = threadIdx.x >= offset ? scan_buffer[threadIdx.x - offset] : 0;
                __syncthreads();
                scan_buffer[threadIdx.x] += add;
                __syncthreads();
            }
            if (t < num_tiles) {
                counts[t] = running + scan_buffer[threadIdx.x] - value;
            }
            running += scan_buffer[BLOCK_THREADS - 1];
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            state[params.scan_slot] = running;
        }
        return;
    }

    if (stage == TOPK_STAGE_COUNT_BOUNDARY || stage == TOPK_STAGE_COUNT_SELECTED ||
        stage == TOPK_STAGE_SCATTER_SELECTED) {
        const u64 prefix = state[TOPK_SLOT_PREFIX];
        const u64 mask = state[TOPK_SLOT_MASK];
        const u64 remaining = state[TOPK_SLOT_REMAINING];
        const u64 boundary_total = state[TOPK_SLOT_BOUNDARY];
        const bool prefer_larger = (params.flags & TOPK_PREFER_LARGER) != 0;
        for (u64 tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
            const u64 i = tile * BLOCK_THREADS + threadIdx.x;
            const bool valid = i < len;
            const Bits raw = valid ? keys[i] : (Bits)0;
            const u64 rank = (u64)(Bits)(Key::to_radix(raw) ^ flip);
            const u64 masked = rank & mask;
            // In mode 1 the select ran over the keys at or above the threshold only.
            const bool boundary = valid && masked == prefix && rank >= threshold;
            u32 total = 0;
            const u32 boundary_below = block_flag_scan<BLOCK_THREADS>(boundary, warp_totals, &total);
            if (stage == TOPK_STAGE_COUNT_BOUNDARY) {
                if (threadIdx.x == 0) {
                    boundary_offsets[tile] = total;
                }
                continue;
            }
            const u64 boundary_rank = boundary_offsets[tile] + boundary_below;
            const bool kept = prefer_larger ? boundary_rank + remaining >= boundary_total
                                            : boundary_rank < remaining;
            const bool selected = valid && (masked > prefix || (boundary && kept));
            const u32 selected_below = block_flag_scan<BLOCK_THREADS>(selected, warp_totals, &total);
            if (stage == TOPK_STAGE_COUNT_SELECTED) {
                if (threadIdx.x == 0) {
                    tile_offsets[tile] = total;
                }
                continue;
            }
            if (rank_sort) {
                topk_warp_max(selected, rank, &state[TOPK_SLOT_MAX_RANK]);
            }
            if (selected) {
                const u64 position = tile_offsets[tile] + selected_below;
                if (rank_sort) {
                    rank_keys[position] = raw;  // sorted next by RANK_COUNT / RANK_SCATTER
                    rank_index[position] = i;
                } else {
                    write_out(position, raw, i);
                }
            }
        }
        return;
    }

    if (stage == TOPK_STAGE_COUNT_SPLIT || stage == TOPK_STAGE_SCATTER_SPLIT) {
        const bool from_tmp = (params.flags & TOPK_SOURCE_IS_TMP) != 0;
        const Bits* src_keys = reinterpret_cast<const Bits*>(from_tmp ? params.tmp_keys : params.out_keys);
        Bits* dst_keys = reinterpret_cast<Bits*>(from_tmp ? params.out_keys : params.tmp_keys);
        const Payload* src_values =
            reinterpret_cast<const Payload*>(from_tmp ? params.tmp_values : params.out_values);
        Payload* dst_values = reinterpret_cast<Payload*>(from_tmp ? params.out_values : params.tmp_values);
        const u64 ones_total = state[TOPK_SLOT_ONES];
        for (u64 tile = blockIdx.x; tile < num_tiles; tile += gridDim.x) {
            const u64 i = tile * BLOCK_THREADS + threadIdx.x;
            const bool valid = i < len;
            const Bits raw = valid ? src_keys[i] : (Bits)0;
            const u64 rank = (u64)(Bits)(Key::to_radix(raw) ^ flip);
            const bool one = valid && ((rank >> params.shift) & 1u) != 0;
            u32 total = 0;
            const u32 ones_below = block_flag_scan<BLOCK_THREADS>(one, warp_totals, &total);
            if (stage == TOPK_STAGE_COUNT_SPLIT) {
                if (threadIdx.x == 0) {
                    tile_offsets[tile] = total;
                }
                continue;
            }
            if (valid) {
                const u64 ones_before = tile_offsets[tile] + ones_below;
                const u64 position = one ? ones_before : ones_total + (i - ones_before);
                dst_keys[position] = raw;
                if (VALUE_BYTES != 0) {
                    dst_values[position] = src_values[i];
                }
            }
        }
        return;
    }
}

}  // namespace oxicub
