// Radix key transforms: map each key type onto unsigned bits whose unsigned order is the
// key's order. Must agree bit for bit with oxicub_kernels::radix (Rust); the GPU tests check it.
//
// Policy (the same on both sides):
// - unsigned integers: identity;
// - signed integers (two's complement): flip the sign bit;
// - IEEE floats (f16, bf16, f32, f64): a negative value has all bits inverted, a non-negative
//   value has its sign bit set. So -inf < negatives < -0.0 < +0.0 < positives < +inf, and -0.0
//   and +0.0 get DISTINCT codes (-0.0 just below +0.0).
// - every NaN (either sign, any payload) maps to the single code all-ones, above +inf, so a
//   "max" selection ranks NaN first and a "min" selection ranks it last. Decoding all-ones gives
//   the positive quiet NaN with all mantissa bits set.
namespace oxicub {

enum KeyKind { KIND_UNSIGNED = 0, KIND_SIGNED = 1, KIND_FLOAT = 2 };

// B: the unsigned storage type of the key; INF_BITS: bit pattern of +inf for floats (0 otherwise).
template <class B, int KIND, u64 INF_BITS>
struct RadixKey {
    typedef B Bits;
    static constexpr int BITS = (int)sizeof(B) * 8;
    static constexpr B SIGN = (B)((B)1 << (BITS - 1));
    static constexpr B ALL_ONES = (B)~(B)0;
    static constexpr int KEY_KIND = KIND;
    static constexpr B INF = (B)INF_BITS;  // +inf for floats, 0 otherwise

    __device__ __forceinline__ static B to_radix(B raw) {
        if (KIND == KIND_UNSIGNED) {
            return raw;
        } else if (KIND == KIND_SIGNED) {
            return (B)(raw ^ SIGN);
        } else {
            const B magnitude = (B)(raw & (B)~SIGN);
            if (magnitude > (B)INF_BITS) {
                return ALL_ONES;  // NaN
            }
            return (raw & SIGN) ? (B)~raw : (B)(raw | SIGN);
        }
    }

    __device__ __forceinline__ static B from_radix(B code) {
        if (KIND == KIND_UNSIGNED) {
            return code;
        } else if (KIND == KIND_SIGNED) {
            return (B)(code ^ SIGN);
        } else {
            return (code & SIGN) ? (B)(code & (B)~SIGN) : (B)~code;
        }
    }
};

typedef RadixKey<u8, KIND_UNSIGNED, 0> KeyU8;
typedef RadixKey<u16, KIND_UNSIGNED, 0> KeyU16;
typedef RadixKey<u32, KIND_UNSIGNED, 0> KeyU32;
typedef RadixKey<u64, KIND_UNSIGNED, 0> KeyU64;
typedef RadixKey<u8, KIND_SIGNED, 0> KeyI8;
typedef RadixKey<u16, KIND_SIGNED, 0> KeyI16;
typedef RadixKey<u32, KIND_SIGNED, 0> KeyI32;
typedef RadixKey<u64, KIND_SIGNED, 0> KeyI64;
typedef RadixKey<u16, KIND_FLOAT, 0x7C00ull> KeyF16;
typedef RadixKey<u16, KIND_FLOAT, 0x7F80ull> KeyBF16;
typedef RadixKey<u32, KIND_FLOAT, 0x7F800000ull> KeyF32;
typedef RadixKey<u64, KIND_FLOAT, 0x7FF0000000000000ull> KeyF64;

// The radix digit of a code: DIGIT_BITS bits starting at bit_offset (bits above the key's width
// read as zero, so the top digit of a key may be narrower than DIGIT_BITS).
template <int DIGIT_BITS, class B>
__device__ __forceinline__ u32 radix_digit(B code, u32 bit_offset) {
    return (u32)(((u64)code >> bit_offset) & (u64)((1u << DIGIT_BITS) - 1u));
}

// The raw keys whose rank (to_radix(raw) ^ flip) is at least T, as two intervals of raw bit
// patterns, each tested as (Bits)(raw - lo) <= width (modular, so an interval may wrap; the two
// may be equal). The rank is piecewise monotone in the raw bits (floats: non-negative values
// increasing, negative ones decreasing, NaNs all ranked as all-ones), so the set is exact: two
// subtractions and compares per key instead of the transform (~10 integer instructions), which
// matters in the streaming filters (top-k's PREFILTER, the batched stream tier), limited by the
// integer pipe.
template <class Key>
__device__ __forceinline__ void radix_hit_intervals(typename Key::Bits t, typename Key::Bits flip,
                                                   typename Key::Bits (&lo)[2],
                                                   typename Key::Bits (&width)[2]) {
    typedef typename Key::Bits Bits;
    constexpr Bits S = Key::SIGN;
    constexpr Bits ONES = Key::ALL_ONES;
    constexpr Bits INF = Key::INF;
    const bool max = flip == 0;
    if (Key::KEY_KIND != KIND_FLOAT) {
        // Rank = raw (^ sign): the ranks [t, ONES] (max) or [0, ~t] (min) are one raw interval.
        const Bits sign = Key::KEY_KIND == KIND_SIGNED ? S : (Bits)0;
        lo[0] = (Bits)((max ? t : (Bits)0) ^ sign);
        width[0] = max ? (Bits)(ONES - t) : (Bits)~t;
        lo[1] = lo[0];
        width[1] = width[0];
        return;
    }
    const Bits neg_nan = (Bits)((S | INF) + 1);  // the negative NaNs: [neg_nan, ONES]
    if (max) {
        if (t >= S) {
            // Non-negative keys from t ^ S up, and every positive NaN.
            lo[0] = (Bits)(t ^ S) < (Bits)(INF + 1) ? (Bits)(t ^ S) : (Bits)(INF + 1);
            width[0] = (Bits)((Bits)(S - 1) - lo[0]);
        } else {
            // Every non-negative key and positive NaN, and the negative keys down to ~t.
            lo[0] = 0;
            width[0] = (Bits)~t < (Bits)(S | INF) ? (Bits)~t : (Bits)(S | INF);
        }
        lo[1] = neg_nan;
        width[1] = (Bits)(ONES - neg_nan);
        return;
    }
    // min: rank = ~code >= t, i.e. code <= ~t; NaNs (code all-ones) only when t == 0.
    if (t == 0) {
        lo[0] = lo[1] = 0;
        width[0] = width[1] = ONES;
    } else if ((Bits)~t >= S) {
        // Non-negative keys up to (~t) ^ S, and every negative key (no NaN).
        lo[0] = 0;
        width[0] = (Bits)((Bits)~t ^ S) < INF ? (Bits)((Bits)~t ^ S) : INF;
        lo[1] = S;
        width[1] = INF;
    } else {
        // Negative keys from t (the code ~t) down to -inf.
        lo[0] = lo[1] = t;
        width[0] = width[1] = (Bits)((Bits)(S | INF) - t);
    }
}

// A test that every raw key with rank (to_radix(raw) ^ flip) at least T passes. Integer keys and
// 16-bit floats: radix_hit_intervals (exact). f32 and f64: one float compare against the key of
// rank T, unordered (a NaN passes): a superset (-0.0 and +0.0 compare equal, so either passes
// with the other; a T among the NaN codes passes every key), which a filter may take, since
// what passes is ranked exactly afterwards. The min direction compares the negated key; with
// the direction a compile-time constant (DIR 0 max, 1 min; -1: from `flip` at run time) it
// compares the other way instead, one instruction a key instead of two.
template <class Key, int DIR = -1>
struct RadixHitTest {
    typedef typename Key::Bits Bits;
    static constexpr bool FLOAT_COMPARE = Key::KEY_KIND == KIND_FLOAT && sizeof(Bits) >= 4;
    static constexpr bool ABOVE = FLOAT_COMPARE && DIR == 1;  // min: !(raw > bound)
    Bits lo[2];
    Bits width[2];
    Bits negate;  // float compare: the sign bit for min, 0 for max (0 when ABOVE)
    Bits bound;   // float compare: the raw key of rank T (min, not ABOVE: negated)

    __device__ __forceinline__ RadixHitTest(Bits t, Bits flip) {
        if constexpr (FLOAT_COMPARE) {
            negate = flip != 0 && !ABOVE ? Key::SIGN : (Bits)0;
            bound = (Bits)(Key::from_radix((Bits)(t ^ flip)) ^ negate);
        } else {
            radix_hit_intervals<Key>(t, flip, lo, width);
        }
    }

    __device__ __forceinline__ bool operator()(Bits raw) const {
        if constexpr (ABOVE && sizeof(Bits) == 4) {
            return !(__uint_as_float((u32)raw) > __uint_as_float((u32)bound));
        } else if constexpr (ABOVE) {
            return !(__longlong_as_double((long long)raw) > __longlong_as_double((long long)bound));
        } else if constexpr (FLOAT_COMPARE && sizeof(Bits) == 4) {
            return !(__uint_as_float((u32)(raw ^ negate)) < __uint_as_float((u32)bound));
        } else if constexpr (FLOAT_COMPARE) {
            return !(__longlong_as_double((long long)(raw ^ negate)) <
                     __longlong_as_double((long long)bound));
        } else {
            return ((Bits)(raw - lo[0]) <= width[0]) | ((Bits)(raw - lo[1]) <= width[1]);
        }
    }
};

}  // namespace oxicub
