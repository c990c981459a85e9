// Family routing: MoE routers, a warp per token (docs/design/routing.md, "Kernel"). Each lane
// holds the experts lane, lane + 32, ... (PER_LANE of them) in registers. The steps and their
// rounding follow the oracle (oxicub_test::routing) exactly: scores by the deterministic
// functions of core/math.cuh; the softmax denominator in the oracle's warp_sum shape; groups
// scored by (0 + best) + second of their biased scores (their best score without a bias); the kept groups and then the k experts
// by rounds of a warp arg-max over (rank, index), ties to the smaller index; weights summed in
// the order chosen, divided by that sum plus 1e-20 when renormalised (k > 1), then scaled.
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
__device__ __forceinline__ u32 routing_rank(float v) {
    return KeyF32::to_radix(__float_as_uint(v));
}

// Warp arg-max of (rank, index), carrying a value: the larger rank, then the smaller index.
// Every lane ends with the winner.
__device__ __forceinline__ void routing_argmax(u32& rank, u32& index, float& value) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        const u32 r = __shfl_xor_sync(0xffffffffu, rank, offset);
        const u32 i = __shfl_xor_sync(0xffffffffu, index, offset);
        const float v = __shfl_xor_sync(0xffffffffu, value, offset);
        if (r > rank || (r == rank && i < index)) {
            rank = r;
            index = i;
            value = v;
        }
    }
}

template <class Key, u32 BLOCK_THREADS, int PER_LANE, int SCORING>
__device__ __forceinline__ void routing(const RoutingParams& p) {
    typedef typename Key::Bits Bits;
    const u32 lane = threadIdx.x & 31u;
    const u64 first_warp = global_thread_index(BLOCK_THREADS) >> 5;
    const u64 warps = grid_threads(BLOCK_THREADS) >> 5;
    const u32 experts = p.experts;
    const u32 k = p.k;
    const bool renormalize = (p.flags & ROUTING_RENORMALIZE) != 0 && k > 1;
    const float scale = __uint_as_float(p.scale_bits);
    const float* bias = reinterpret_cast<const float*>(p.bias);
    for (u64 token = first_warp; token < p.tokens; token += warps) {
        const Bits* row = reinterpret_cast<const Bits*>(p.logits) + token * experts;
        float s[PER_LANE];
        float c[PER_LANE];
        u32 rank[PER_LANE];
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) {
            const u32 e = lane + 32u * (u32)j;
            s[j] = e < experts ? routing_logit<Key>(row[e]) : 0.0f;
        }
        if (SCORING == ROUTING_SOFTMAX) {
            float m = __uint_as_float(0xff800000u);
#pragma unroll
            for (int j = 0; j < PER_LANE; ++j) {
                if (lane + 32u * (u32)j < experts) {
                    m = fmaxf(m, s[j]);
                }
            }
#pragma unroll
            for (int offset = 16; offset > 0; offset >>= 1) {
                m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
            }
            float sum = 0.0f;
#pragma unroll
            for (int j = 0; j < PER_LANE; ++j) {
                if (lane + 32u * (u32)j < experts) {
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
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) {
            const u32 e = lane + 32u * (u32)j;
            c[j] = (bias != nullptr && e < experts) ? __fadd_rn(s[j], bias[e]) : s[j];
            rank[j] = e < experts ? routing_rank(c[j]) : 0u;
        }
        if (p.groups > 1) {
            const u32 size = experts / p.groups;
            float group_score = 0.0f;
            for (u32 g = 0; g < p.groups; ++g) {
                u32 best_rank = 0, best = 0xffffffffu;
                float best_value = 0.0f;
#pragma unroll
                for (int j = 0; j < PER_LANE; ++j) {
                    const u32 e = lane + 32u * (u32)j;
                    if (rank[j] > best_rank && e / size == g) {
                        best_rank = rank[j];
                        best = e;
                        best_value = c[j];
                    }
                }
                routing_argmax(best_rank, best, best_value);
                float score = __fadd_rn(0.0f, best_value);
                if (size > 1 && bias != nullptr) {
                    u32 second_rank = 0, second = 0xffffffffu;
                    float second_value = 0.0f;
#pragma unroll
                    for (int j = 0; j < PER_LANE; ++j) {
                        const u32 e = lane + 32u * (u32)j;
                        if (rank[j] > second_rank && e / size == g && e != best) {
                            second_rank = rank[j];
                            second = e;
                            second_value = c[j];
                        }
                    }
                    routing_argmax(second_rank, second, second_value);
                    score = __fadd_rn(score, second_value);
                }
                if (lane == g) {
                    group_score = score;
                }
            }
            u32 kept = 0;
            for (u32 r = 0; r < p.top_groups; ++r) {
                const bool open = lane < p.groups && ((kept >> lane) & 1u) == 0;
                u32 group_rank = open ? routing_rank(group_score) : 0u;
                u32 group = open ? lane : 0xffffffffu;
                float unused = 0.0f;
                routing_argmax(group_rank, group, unused);
                kept |= 1u << group;
            }
            const float minus_infinity = __uint_as_float(0xff800000u);
#pragma unroll
            for (int j = 0; j < PER_LANE; ++j) {
                const u32 e = lane + 32u * (u32)j;
                if (e < experts && ((kept >> (e / size)) & 1u) == 0) {
                    c[j] = minus_infinity;
                    rank[j] = routing_rank(minus_infinity);
                }
            }
        }
        float weight_sum = 0.0f;
        float my_weight = 0.0f;
        u32 my_id = 0;
        for (u32 r = 0; r < k; ++r) {
            u32 best_rank = 0, best = 0xffffffffu;
            float best_score = 0.0f;
#pragma unroll
            for (int j = 0; j < PER_LANE; ++j) {
                if (rank[j] > best_rank) {
                    best_rank = rank[j];
                    best = lane + 32u * (u32)j;
                    best_score = s[j];
                }
            }
            routing_argmax(best_rank, best, best_score);
#pragma unroll
            for (int j = 0; j < PER_LANE; ++j) {
                if (lane + 32u * (u32)j == best) {
                    rank[j] = 0u;
                }
            }
            weight_sum = __fadd_rn(weight_sum, best_score);
            if (lane == r) {
                my_id = best;
                my_weight = best_score;
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

}  // namespace oxicub
