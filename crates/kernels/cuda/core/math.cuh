// oxicub core: f32 transcendental functions that give the same bits on the device as their Rust
// twins in src/math.rs give on the host, for every input. Each is a fixed sequence of IEEE
// operations that round correctly on both sides (add, multiply, fused multiply-add, divide,
// square root, round-to-integer) written out explicitly: the `__f*_rn` intrinsics keep NVRTC
// from contracting a multiply and an add into an fma the host does not do. A routing kernel
// ranks experts by these values, so the host oracle and the GPU choose the same experts even
// where two scores differ in their last bit. The Rust twin states each function's accuracy.
namespace oxicub {

// One Horner step p * r + c with fma, c given as bits (the Rust twin's constants, bit for bit).
__device__ __forceinline__ float det_step(float p, float r, unsigned int c) {
    return __fmaf_rn(p, r, __uint_as_float(c));
}

// e^x. Cody-Waite reduction x = k ln2 + r (|r| <= ln2 / 2, two fma steps), a degree-7 Taylor
// polynomial in r by Horner's rule with fma, then the scale 2^k: one multiply where 2^k is a
// normal float (it rounds the exact p 2^k once), else in two halves so that results in the
// subnormal range round once (p 2^half is exact): the same bits either way. NaN gives the
// input's bits, x > 88.72284 gives +inf, x < -103.97208 gives +0. Branch-free: the steps run
// on x clamped into range and those cases are selected at the end (a routing kernel takes it
// for every expert of every token, and a branch costs it a convergence barrier).
__device__ __forceinline__ float det_exp(float x) {
    const float high = __int_as_float(0x42b17218);
    const float low = __int_as_float(0xc2cff1b4);
    const float xc = fminf(fmaxf(x, low), high);
    const float k = rintf(__fmul_rn(xc, __int_as_float(0x3fb8aa3b)));
    float r = __fmaf_rn(k, -__int_as_float(0x3f317200), xc);
    r = __fmaf_rn(k, -__int_as_float(0x35bfbe8e), r);
    // 1/7!, 1/6!, 1/5!, 1/4!, 1/3!, then 1/2, 1, 1.
    float p = __uint_as_float(0x39500d01u);
    p = det_step(p, r, 0x3ab60b61u);
    p = det_step(p, r, 0x3c088889u);
    p = det_step(p, r, 0x3d2aaaabu);
    p = det_step(p, r, 0x3e2aaaabu);
    p = det_step(p, r, 0x3f000000u);
    p = det_step(p, r, 0x3f800000u);
    p = det_step(p, r, 0x3f800000u);
    const int ki = (int)k;
    const bool one = ki >= -126 && ki <= 127;
    const int half = ki / 2;
    const float scale_a = __int_as_float(((one ? ki : half) + 127) << 23);
    const float scale_b = one ? 1.0f : __int_as_float((ki - half + 127) << 23);
    float e = __fmul_rn(__fmul_rn(p, scale_a), scale_b);
    e = x > high ? __int_as_float(0x7f800000) : e;
    e = x < low ? 0.0f : e;
    return x != x ? x : e;
}

// ln(u) for u in [1, 2]: 2 atanh(s) with s = (u - 1) / (u + 1) <= 1/3, by its odd series to
// s^15 (Horner in s^2 with fma).
__device__ __forceinline__ float det_log_1_2(float u) {
    const float s = __fdiv_rn(__fadd_rn(u, -1.0f), __fadd_rn(u, 1.0f));
    const float s2 = __fmul_rn(s, s);
    // 1/15, 1/13, 1/11, 1/9, 1/7, 1/5, 1/3, 1.
    float p = __uint_as_float(0x3d888889u);
    p = det_step(p, s2, 0x3d9d89d9u);
    p = det_step(p, s2, 0x3dba2e8cu);
    p = det_step(p, s2, 0x3de38e39u);
    p = det_step(p, s2, 0x3e124925u);
    p = det_step(p, s2, 0x3e4ccccdu);
    p = det_step(p, s2, 0x3eaaaaabu);
    p = det_step(p, s2, 0x3f800000u);
    return __fmul_rn(__fmul_rn(2.0f, s), p);
}

// ln(1 + y) for y in [0, 1]: ln(u) with u = 1 + y rounded, corrected by y / (u - 1) (the
// rounding of u undone to first order; exact when u - 1 == y).
__device__ __forceinline__ float det_log1p_0_1(float y) {
    const float u = __fadd_rn(1.0f, y);
    const float d = __fadd_rn(u, -1.0f);
    if (d == 0.0f) {
        return y;
    }
    return __fmul_rn(det_log_1_2(u), __fdiv_rn(y, d));
}

// 1 / (1 + e^-x). NaN gives the input's bits (selected, not computed: platforms quiet and sign
// NaNs differently).
__device__ __forceinline__ float det_sigmoid(float x) {
    // The correctly rounded reciprocal is the correctly rounded 1 / y, in fewer instructions;
    // a NaN is selected at the end (no branch).
    const float y = __frcp_rn(__fadd_rn(1.0f, det_exp(-x)));
    return x != x ? x : y;
}

// ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|). NaN gives the input's bits.
__device__ __forceinline__ float det_softplus(float x) {
    if (x != x) {
        return x;
    }
    const float a = fabsf(x);
    return __fadd_rn(x > 0.0f ? x : 0.0f, det_log1p_0_1(det_exp(-a)));
}

}  // namespace oxicub
