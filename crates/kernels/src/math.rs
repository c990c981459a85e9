//! `f32` transcendental functions that give the same bits on the host as their device twins in
//! `cuda/core/math.cuh` give on the GPU, for every input: the scores a routing kernel ranks
//! experts by, so that the host oracle and the device choose the same experts even where two
//! scores differ in their last bit.
//!
//! Each function is one fixed sequence of IEEE operations that round correctly on both sides
//! (add, multiply, fused multiply-add, divide, square root, round to integer), in the same
//! order; the device code spells every operation with a `__f*_rn` intrinsic so that the
//! compiler cannot contract a multiply and an add into an fma here and not there. Neither side
//! calls its platform's `expf` or `logf`, whose last bits differ between libraries. (On the host
//! `f32::mul_add` is the hardware fma or the C library's `fmaf`, correctly rounded in glibc and
//! musl; a target whose `fmaf` is not, such as MinGW's, would break the equality.)
//!
//! Accuracy against `f64` (a sweep of every exponent in this module's tests; the same bounds
//! hold over every 997th bit pattern): [`exp`] within 1 ulp over its normal range, [`sigmoid`]
//! within 2 ulp, [`softplus`] within 4 ulp.
//!
//! ```
//! use oxicub::kernels::math;
//!
//! assert_eq!(math::exp(0.0), 1.0);
//! assert_eq!(math::sigmoid(0.0), 0.5);
//! assert!((math::softplus(1.0) - 1.3132616).abs() < 1e-6);
//! assert!(math::exp(f32::NAN).is_nan() && math::exp(-200.0) == 0.0);
//! ```

/// The constants of [`exp`] and `ln_1_2`, as bits (the device code spells the same bits).
mod bits {
    /// Above it `e^x` is `+inf`, below [`EXP_MIN`] `+0` (88.72284, -103.97208).
    pub const EXP_MAX: u32 = 0x42b1_7218;
    pub const EXP_MIN: u32 = 0xc2cf_f1b4;
    /// log2(e), and ln 2 in two parts (the high part has 12 trailing zero bits).
    pub const LOG2E: u32 = 0x3fb8_aa3b;
    pub const LN2_HI: u32 = 0x3f31_7200;
    pub const LN2_LO: u32 = 0x35bf_be8e;
    /// 1/7!, 1/6!, 1/5!, 1/4!, 1/3!, then 1/2, 1, 1 (Horner's order).
    pub const EXP_POLY: [u32; 8] = [
        0x3950_0d01,
        0x3ab6_0b61,
        0x3c08_8889,
        0x3d2a_aaab,
        0x3e2a_aaab,
        0x3f00_0000,
        0x3f80_0000,
        0x3f80_0000,
    ];
    /// 1/15, 1/13, 1/11, 1/9, 1/7, 1/5, 1/3, 1 (Horner's order in s^2).
    pub const ATANH_POLY: [u32; 8] = [
        0x3d88_8889,
        0x3d9d_89d9,
        0x3dba_2e8c,
        0x3de3_8e39,
        0x3e12_4925,
        0x3e4c_cccd,
        0x3eaa_aaab,
        0x3f80_0000,
    ];
}

/// `p(r)` by Horner's rule with fma over `coefficients` (bits), highest degree first.
fn horner(coefficients: &[u32], r: f32) -> f32 {
    let mut p = f32::from_bits(coefficients[0]);
    for &c in &coefficients[1..] {
        p = p.mul_add(r, f32::from_bits(c));
    }
    p
}

/// `e^x`: Cody-Waite reduction `x = k ln2 + r` (`|r| <= ln2 / 2`, two fma steps), a degree-7
/// Taylor polynomial in `r` by Horner's rule with fma, then the scale `2^k` applied in two
/// halves so that a subnormal result rounds once. NaN gives the input's bits (no arithmetic on
/// it: platforms quiet and sign NaNs differently), `x > 88.72284` gives `+inf`, `x < -103.97208`
/// gives `+0`.
pub fn exp(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x > f32::from_bits(bits::EXP_MAX) {
        return f32::INFINITY;
    }
    if x < f32::from_bits(bits::EXP_MIN) {
        return 0.0;
    }
    let k = (x * f32::from_bits(bits::LOG2E)).round_ties_even();
    let r = k.mul_add(-f32::from_bits(bits::LN2_HI), x);
    let r = k.mul_add(-f32::from_bits(bits::LN2_LO), r);
    let p = horner(&bits::EXP_POLY, r);
    let ki = k as i32;
    let half = ki / 2;
    let scale = |e: i32| f32::from_bits(((e + 127) as u32) << 23);
    p * scale(half) * scale(ki - half)
}

/// `ln(u)` for `u` in `[1, 2]`: `2 atanh(s)` with `s = (u - 1) / (u + 1) <= 1/3`, by its odd
/// series to `s^15` (Horner in `s^2` with fma).
fn ln_1_2(u: f32) -> f32 {
    let s = (u - 1.0) / (u + 1.0);
    2.0 * s * horner(&bits::ATANH_POLY, s * s)
}

/// `ln(1 + y)` for `y` in `[0, 1]`: `ln(u)` with `u = 1 + y` rounded, corrected by
/// `y / (u - 1)` (the rounding of `u` undone to first order; exact when `u - 1 == y`).
fn ln_1p_0_1(y: f32) -> f32 {
    let u = 1.0 + y;
    let d = u - 1.0;
    if d == 0.0 {
        return y;
    }
    ln_1_2(u) * (y / d)
}

/// The logistic function `1 / (1 + e^-x)` (DeepSeek-V3's expert scores). NaN gives the
/// input's bits.
pub fn sigmoid(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    1.0 / (1.0 + exp(-x))
}

/// `ln(1 + e^x)`, as `max(x, 0) + ln(1 + e^-|x|)` (never overflows). NaN gives the input's
/// bits.
pub fn softplus(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let positive = if x > 0.0 { x } else { 0.0 };
    positive + ln_1p_0_1(exp(-x.abs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance in ulp between `got` and the `f64` value `want` rounded to `f32`.
    fn ulps(got: f32, want: f64) -> u64 {
        let want = want as f32;
        if got == want {
            return 0;
        }
        let key = |v: f32| {
            let b = v.to_bits() as i64;
            if b < 0x8000_0000 {
                b
            } else {
                0x8000_0000 - b
            }
        };
        (key(got) - key(want)).unsigned_abs()
    }

    /// Every exponent of f32, 64 mantissas each, both signs.
    fn sweep() -> impl Iterator<Item = f32> {
        (0u32..256).flat_map(|e| {
            (0u32..64).flat_map(move |m| {
                let bits = (e << 23) | (m * 0x1_0001 % (1 << 23));
                [f32::from_bits(bits), -f32::from_bits(bits)]
            })
        })
    }

    #[test]
    fn exp_is_within_1_ulp_and_handles_the_edges() {
        for x in sweep().filter(|x| x.is_finite() && (-87.3..88.7).contains(x)) {
            let e = ulps(exp(x), (x as f64).exp());
            assert!(e <= 1, "exp({x:e}): {e} ulp");
        }
        // Subnormal results are within one ulp of the subnormal grid.
        for x in [-88.0f32, -95.5, -100.0, -103.0] {
            let want = (x as f64).exp() as f32;
            assert!(exp(x).to_bits().abs_diff(want.to_bits()) <= 1, "exp({x})");
        }
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
    }

    #[test]
    fn sigmoid_and_softplus_are_within_a_few_ulp() {
        for x in sweep().filter(|x| x.is_finite() && x.abs() < 80.0) {
            let xd = x as f64;
            let s = ulps(sigmoid(x), 1.0 / (1.0 + (-xd).exp()));
            assert!(s <= 2, "sigmoid({x:e}): {s} ulp");
            let want = xd.max(0.0) + (-xd.abs()).exp().ln_1p();
            let p = ulps(softplus(x), want);
            assert!(p <= 4, "softplus({x:e}): {p} ulp");
        }
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
        assert_eq!(sigmoid(f32::NEG_INFINITY), 0.0);
        let nan = f32::from_bits(0xff80_0001);
        assert_eq!(sigmoid(nan).to_bits(), nan.to_bits());
        assert_eq!(softplus(f32::INFINITY), f32::INFINITY);
        assert_eq!(softplus(f32::NEG_INFINITY), 0.0);
        assert_eq!(softplus(1e30), 1e30);
        assert!(softplus(f32::NAN).is_nan());
    }
}
