// Family routing: MoE routers, a warp per token (docs/design/routing.md, "Kernel"). Each lane
// holds PER_LANE consecutive experts in registers (lane l: l * PER_LANE, ...), so the lowest
// lane holding a rank holds its smallest expert id, and a warp's arg-max is a redux and a
// ballot. The steps and their rounding follow the oracle (oxicub_test::routing) exactly:
// scores by the deterministic functions of core/math.cuh; the softmax denominator in the
// oracle's warp_sum shape (each lane's experts in order, then lanes j and j + 16, j and j + 8,
// ...); groups scored by (0 + best) + second of their biased scores (their best score without
// a bias); a group kept when fewer than top_groups come before it (ties to the smaller
// group); the k experts by rounds of the warp arg-max, ties to the smaller index; weights
// summed in the order chosen, divided by that sum plus 1e-20 when renormalised (k > 1), then
// scaled.
namespace oxicub {

// Scores (template constant SCORING).
enum RoutingScoring { ROUTING_SIGMOID = 0, ROUTING_SOFTMAX = 1, ROUTING_SQRT_SOFTPLUS = 2 };

// An IEEE binary16 value as f32 (exact).
__device__ __forceinline__ float routing_f16_to_f32(u16 h) {
    const u32 sign = ((u32)h & 0x8000u) << 16;
    const u32 exponent = ((u32)h >> 10) & 0x1fu;
    const u32 mantissa = (u32)h & 0x3ffu;
    if (exponent == 0x1fu) {
        return __uint_as_float(sign | 0x7f800000u | (mantissa << 13));
    }
    if (exponent == 0) {
        // mantissa * 2^-24, exact in f32.
        const float magnitude = __fmul_rn((float)mantissa, __uint_as_float(0x33800000u));
        return sign ? -magnitude : magnitude;
    }
    return __uint_as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// A logit of key type Key (F32, F16 or BF16 bits) as f32 (exact).
template <class Key> __device__ __forceinline__ float routing_logit(typename Key::Bits bits);
template <> __device__ __forceinline__ float routing_logit<KeyF32>(u32 bits) {
    return __uint_as_float(bits);
}
template <> __device__ __forceinline__ float routing_logit<KeyBF16>(u16 bits) {
    return __uint_as_float((u32)bits << 16);
}
template <> __device__ __forceinline__ float routing_logit<KeyF16>(u16 bits) {
    return routing_f16_to_f32(bits);
}

// The rank of a score in oxicub's order (NaN above +inf); never 0, the rank of "no expert".
// KeyF32::to_radix in fewer instructions: flip every bit of a negative, the sign of a
// positive; every NaN to the top.
__device__ __forceinline__ u32 routing_rank(float v) {
    const u32 bits = __float_as_uint(v);
    const u32 rank = bits ^ ((u32)((i32)bits >> 31) | 0x80000000u);
    return v != v ? 0xffffffffu : rank;
}

// The score whose rank is `rank` (routing_rank's inverse; NaN comes back as one NaN).
__device__ __forceinline__ float routing_unrank(u32 rank) {
    return __uint_as_float(KeyF32::from_radix(rank));
}

// The N values of type Bits from `first` in `src` (those at or past `end` are not read: 0), by
// 16-byte vectors when they are whole and aligned.
template <class Bits, int N>
__device__ __forceinline__ void routing_load(const Bits* src, u32 first, u32 end,
                                             Bits (&out)[N]) {
    constexpr int BYTES = N * (int)sizeof(Bits);
    constexpr int PER_VECTOR = 16 / (int)sizeof(Bits);
    if (BYTES % 16 == 0 && first + N <= end && ((u64)(src + first) & 15u) == 0) {
        const uint4* vectors = reinterpret_cast<const uint4*>(src + first);
#pragma unroll
        for (int q = 0; q < BYTES / 16; ++q) {
            const uint4 w = vectors[q];
#pragma unroll
            for (int i = 0; i < PER_VECTOR; ++i) {
                out[q * PER_VECTOR + i] = vector_key<Bits>(w, (u32)i);
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < N; ++j) {
            out[j] = first + (u32)j < end ? src[first + (u32)j] : (Bits)0;
        }
    }
}

// The top two of the ranks `a1 >= a2` and `b1 >= b2`, into `a1 >= a2` (as values: equal ranks
// are equal scores, so which expert holds them does not matter).
__device__ __forceinline__ void routing_top_two(u32& a1, u32& a2, u32 b1, u32 b2) {
    const u32 second = max(min(a1, b1), max(a2, b2));
    a1 = max(a1, b1);
    a2 = second;
}

// The lowest lane whose `rank` is the warp's largest, and that rank (a redux and a ballot:
// with the experts laid out in lane order, the lowest lane holds the smallest index).
__device__ __forceinline__ u32 routing_first_max(u32 rank, u32& lane_out) {
    const u32 best = warp_max(rank);
    lane_out = (u32)__ffs(__ballot_sync(0xffffffffu, rank == best)) - 1u;
    return best;
}

// A lane's two best remaining experts in the top-k's order (rank descending, then index
// ascending) with their unbiased scores: the head it offers each round. Rank 0: none.
struct RoutingCache {
    u32 r0, j0, r1, j1;
    float s0, s1;
};

// The cache of the lane's experts (`ALL`), or of those after (after_r, after_j) in the
// top-k's order; scanned in ascending index, so a tie keeps the earlier.
template <bool ALL, int PER_LANE>
__device__ __forceinline__ RoutingCache routing_fill(const u32 (&rank)[PER_LANE],
                                                     const float (&s)[PER_LANE], u32 after_r,
                                                     u32 after_j) {
    RoutingCache c = {0u, 0u, 0u, 0u, 0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < PER_LANE; ++j) {
        const u32 r = rank[j];
        const bool remaining = ALL || r < after_r || (r == after_r && (u32)j > after_j);
        if (remaining && r > c.r0) {
            c.r1 = c.r0;
            c.j1 = c.j0;
            c.s1 = c.s0;
            c.r0 = r;
            c.j0 = (u32)j;
            c.s0 = s[j];
        } else if (remaining && r > c.r1) {
            c.r1 = r;
            c.j1 = (u32)j;
            c.s1 = s[j];
        }
    }
    return c;
}

template <class Key, u32 BLOCK_THREADS, int PER_LANE, int SCORING>
__device__ __forceinline__ void routing_tokens(const RoutingParams& p) {
    typedef typename Key::Bits Bits;
    const u32 lane = threadIdx.x & 31u;
    const u64 first_warp = global_thread_index(BLOCK_THREADS) >> 5;
    const u64 warps = grid_threads(BLOCK_THREADS) >> 5;
    const u32 experts = p.experts;
    const u32 k = p.k;
    const bool renormalize = (p.flags & ROUTING_RENORMALIZE) != 0 && k > 1;
    const float scale = __uint_as_float(p.scale_bits);
    const u32* bias = reinterpret_cast<const u32*>(p.bias);
    const float minus_infinity = __uint_as_float(0xff800000u);
    const u32 excluded = routing_rank(minus_infinity);
    // This lane's experts: PER_LANE consecutive ones (the lowest lanes hold the smallest ids).
    const u32 first = lane * (u32)PER_LANE;
    // Token-invariant: the bias, each expert's group, the group stage's shape.
    u32 bias_bits[PER_LANE];
    if (bias != nullptr) {
        routing_load<u32, PER_LANE>(bias, first, experts, bias_bits);
    }
    const u32 groups = p.groups;
    const u32 size = experts / groups;
    // One division, then the boundaries crossed (at most one an expert: size >= 1).
    u32 group_of[PER_LANE];
    {
        u32 g = first / size;
        u32 next = (g + 1u) * size;
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) {
            if (first + (u32)j >= next) {
                ++g;
                next += size;
            }
            group_of[j] = g;
        }
    }
    const u32 lanes_per_group = size / (u32)PER_LANE;
    // Each lane's experts in one group, a group's lanes a power-of-two block (DeepSeek-V3: 4
    // lanes of 8 experts): every group's two best at once by a butterfly.
    const bool aligned =
        size % (u32)PER_LANE == 0 && (lanes_per_group & (lanes_per_group - 1u)) == 0;
    const bool second = size > 1 && bias != nullptr;
    for (u64 token = first_warp; token < p.tokens; token += warps) {
        const Bits* row = reinterpret_cast<const Bits*>(p.logits) + token * experts;
        Bits bits[PER_LANE];
        routing_load<Bits, PER_LANE>(row, first, experts, bits);
        float s[PER_LANE];
        u32 rank[PER_LANE];
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) {
            s[j] = routing_logit<Key>(bits[j]);
        }
        if (SCORING == ROUTING_SOFTMAX) {
            // The largest non-NaN logit (the oracle's f32::max from -inf), by rank.
            u32 top = excluded;
#pragma unroll
            for (int j = 0; j < PER_LANE; ++j) {
                if (first + (u32)j < experts && s[j] == s[j]) {
                    top = max(top, routing_rank(s[j]));
                }
            }
            const float m = routing_unrank(warp_max(top));
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < PER_LANE; ++j) {
                if (first + (u32)j < experts) {
                    s[j] = det_exp(__fsub_rn(s[j], m));
                    sum = __fadd_rn(sum, s[j]);
                }
            }
#pragma unroll
            for (int offset = 16; offset > 0; offset >>= 1) {
                sum = __fadd_rn(sum, __shfl_down_sync(0xffffffffu, sum, offset));
            }
            sum = __shfl_sync(0xffffffffu, sum, 0);
#pragma unroll
            for (int j = 0; j < PER_LANE; ++j) {
                s[j] = __fdiv_rn(s[j], sum);
            }
        } else {
#pragma unroll
            for (int j = 0; j < PER_LANE; ++j) {
                s[j] = SCORING == ROUTING_SIGMOID ? det_sigmoid(s[j])
                                                  : __fsqrt_rn(det_softplus(s[j]));
            }
        }
        // Biased scores, as ranks (0: no expert); the scores themselves come back by unrank.
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) {
            const float c =
                bias != nullptr ? __fadd_rn(s[j], __uint_as_float(bias_bits[j])) : s[j];
            rank[j] = first + (u32)j < experts ? routing_rank(c) : 0u;
        }
        // Each lane's two best, the top-k's heads (and, aligned, its group's candidates).
        RoutingCache cache = routing_fill<true, PER_LANE>(rank, s, 0u, 0u);
        if (groups > 1) {
            // Lane g ends with group g's score, as a rank.
            u32 group_rank = 0;
            if (aligned) {
                u32 r1 = cache.r0, r2 = cache.r1;
                for (u32 offset = 1; offset < lanes_per_group; offset <<= 1) {
                    const u32 o1 = __shfl_xor_sync(0xffffffffu, r1, offset);
                    const u32 o2 = __shfl_xor_sync(0xffffffffu, r2, offset);
                    routing_top_two(r1, r2, o1, o2);
                }
                float score = __fadd_rn(0.0f, routing_unrank(r1));
                if (second) {
                    score = __fadd_rn(score, routing_unrank(r2));
                }
                const u32 from = lane < groups ? lane * lanes_per_group : 0u;
                group_rank = __shfl_sync(0xffffffffu, routing_rank(score), from);
            } else {
                // Groups across lanes in any shape: a group at a time, its best by a redux,
                // its second by another in which the best's lane offers its own second.
                for (u32 g = 0; g < groups; ++g) {
                    u32 r1 = 0, r2 = 0;
#pragma unroll
                    for (int j = 0; j < PER_LANE; ++j) {
                        routing_top_two(r1, r2, group_of[j] == g ? rank[j] : 0u, 0u);
                    }
                    u32 holder;
                    const u32 best = routing_first_max(r1, holder);
                    float score = __fadd_rn(0.0f, routing_unrank(best));
                    if (second) {
                        const u32 next = warp_max(lane == holder ? r2 : r1);
                        score = __fadd_rn(score, routing_unrank(next));
                    }
                    if (lane == g) {
                        group_rank = routing_rank(score);
                    }
                }
            }
            // Kept: fewer than top_groups groups before it (a larger score, then a smaller
            // group), each lane counting for its group at once rather than rounds of the best.
            u32 before = 0;
            for (u32 g = 0; g < groups; ++g) {
                const u32 other = __shfl_sync(0xffffffffu, group_rank, g);
                before += (other > group_rank || (other == group_rank && g < lane)) ? 1u : 0u;
            }
            const u32 kept = __ballot_sync(0xffffffffu, lane < groups && before < p.top_groups);
            if (aligned) {
                // A lane's experts are kept or excluded together: an excluded lane's become
                // equal (-inf), so its first two lead its cache.
                if (((kept >> group_of[0]) & 1u) == 0) {
#pragma unroll
                    for (int j = 0; j < PER_LANE; ++j) {
                        rank[j] = rank[j] != 0u ? excluded : 0u;
                    }
                    cache.r0 = rank[0];
                    cache.j0 = 0;
                    cache.s0 = s[0];
                    cache.r1 = PER_LANE > 1 ? rank[PER_LANE > 1 ? 1 : 0] : 0u;
                    cache.j1 = 1;
                    cache.s1 = s[PER_LANE > 1 ? 1 : 0];
                }
            } else {
#pragma unroll
                for (int j = 0; j < PER_LANE; ++j) {
                    if (rank[j] != 0u && group_of[j] < groups && ((kept >> group_of[j]) & 1u) == 0) {
                        rank[j] = excluded;
                    }
                }
                cache = routing_fill<true, PER_LANE>(rank, s, 0u, 0u);
            }
        }
        // The k best: rounds of the best lane head, each lane's from its cache of two,
        // refilled (from the experts after the last taken) when it runs out.
        float weight_sum = 0.0f;
        float my_weight = 0.0f;
        u32 my_id = 0;
        for (u32 r = 0; r < k; ++r) {
            u32 winner;
            routing_first_max(cache.r0, winner);
            const u32 id = winner * (u32)PER_LANE + __shfl_sync(0xffffffffu, cache.j0, winner);
            const float score = __shfl_sync(0xffffffffu, cache.s0, winner);
            if (lane == winner) {
                const u32 taken_r = cache.r0, taken_j = cache.j0;
                cache.r0 = cache.r1;
                cache.j0 = cache.j1;
                cache.s0 = cache.s1;
                cache.r1 = 0u;
                if (cache.r0 == 0u) {
                    cache = routing_fill<false, PER_LANE>(rank, s, taken_r, taken_j);
                }
            }
            weight_sum = __fadd_rn(weight_sum, score);
            if (lane == r) {
                my_id = id;
                my_weight = score;
            }
        }
        if (lane < k) {
            const u64 at = token * k + lane;
            const float w = renormalize
                                ? __fdiv_rn(my_weight, __fadd_rn(weight_sum, 1e-20f))
                                : my_weight;
            reinterpret_cast<u32*>(p.ids)[at] = my_id;
            reinterpret_cast<float*>(p.weights)[at] = __fmul_rn(w, scale);
        }
    }
}

// The family's entry. Launched as a programmatic dependent (sm_90): it may start while the
// kernel before it on the stream finishes, and waits for it before touching memory; once its
// writes are issued, the kernel after it may start (and waits in turn before reading them).
template <class Key, u32 BLOCK_THREADS, int PER_LANE, int SCORING>
__device__ __forceinline__ void routing(const RoutingParams& p) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    routing_tokens<Key, BLOCK_THREADS, PER_LANE, SCORING>(p);
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace oxicub
