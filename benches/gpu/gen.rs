//! Host copy of the shared input generator (benches/peers/gen.cuh) and the result digest.
//!
//! The device side of bench-gpu compiles gen.cuh itself with NVRTC; this host copy exists for the
//! CPU reference results and for the generator check (host digest == every device digest). Keep
//! it in step with gen.cuh, line for line.

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 output function (`oxb_fmix64`).
#[inline]
pub fn fmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Value `i` of stream `seed` (`oxb_mix`).
#[inline]
pub fn mix(seed: u64, i: u64) -> u64 {
    fmix64(seed.wrapping_add(i.wrapping_add(1).wrapping_mul(GOLDEN)))
}

/// Uniform f32 in [0, 1) with 24 random bits (`oxb_f32`).
#[inline]
pub fn f32_at(seed: u64, i: u64) -> f32 {
    (mix(seed, i) >> 40) as u32 as f32 * (1.0 / 16_777_216.0)
}

/// The f32 key's bit pattern. Keys are non-negative, so the bits order like the values.
#[inline]
pub fn f32_bits_at(seed: u64, i: u64) -> u32 {
    f32_at(seed, i).to_bits()
}

/// Key `i` of ascending rows of `len` keys (`oxb_ramp_f32`, len <= 2^17): (j * 128 + r) / 2^24
/// for key j of row i / len, r in [0, 128) drawn once per row. Returned as its bit pattern
/// (non-negative, so the bits order like the values).
#[inline]
pub fn ramp_bits_at(seed: u64, i: u64, len: u64) -> u32 {
    let (row, j) = (i / len, i % len);
    let r = (mix(seed, row) >> 57) as u32;
    ((((j as u32) << 7) | r) as f32 * (1.0 / 16_777_216.0)).to_bits()
}

/// bf16 key `i`'s bits: the top 16 bits of the f32 key's (`oxb_bf16_bits`: the f32 key
/// truncated toward zero).
#[inline]
pub fn bf16_bits_at(seed: u64, i: u64) -> u16 {
    (f32_bits_at(seed, i) >> 16) as u16
}

/// Tie-heavy key `i`'s bits (`oxb_tie_bits`): 1 + j / 2^23, j the top 6 bits of value `i`.
#[inline]
pub fn tie_bits_at(seed: u64, i: u64) -> u32 {
    0x3F80_0000 | (mix(seed, i) >> 58) as u32
}

/// The length of row `row` of a ragged `[rows x len]` matrix with `k` selected a row
/// (`oxb_ragged_len`): `k + floor(u^2 (len - k))`, u the top 24 bits of value `row` of stream
/// `seed + 1`, over 2^24.
#[inline]
pub fn ragged_len(seed: u64, row: u64, len: u32, k: u32) -> u32 {
    let r = mix(seed + 1, row) >> 40;
    k + ((((r * r) >> 24) * u64::from(len - k)) >> 24) as u32
}

/// Uniform u32 key in [0, mask] for mask = 2^b - 1 (`oxb_u32`).
#[inline]
pub fn u32_at(seed: u64, i: u64, mask: u32) -> u32 {
    ((mix(seed, i) >> 32) as u32) & mask
}

/// Near-sorted int32 key `i` (`oxb_near_i32`): i + (value i of the stream mod (range + 1)), the
/// offset uniform in [0, range] (both bounds inclusive), in 32-bit unsigned arithmetic as gen.cuh.
#[inline]
pub fn near_i32_at(seed: u64, i: u64, range: u32) -> i32 {
    let r = (mix(seed, i) % (u64::from(range) + 1)) as u32;
    (i as u32).wrapping_add(r) as i32
}

/// Uniform random int32 key: the u32 stream with the full mask, reinterpreted (`oxb_u32`).
#[inline]
pub fn i32_at(seed: u64, i: u64) -> i32 {
    u32_at(seed, i, u32::MAX) as i32
}

/// MoE router logit of `expert` for `token` over `experts` experts, a power of two
/// (`oxb_route_logit`): an affine permutation p(e) = (e * m + o) mod E per token (m odd and o from
/// value `token` of the stream), logit = (p - E/2) / (E/2): for E = 256 the grid -1 .. 127/128 in
/// steps of 1/128, each value once per token (gen.cuh says why).
#[inline]
pub fn route_logit(seed: u64, token: u64, expert: u32, experts: u32) -> f32 {
    let h = mix(seed, token);
    let mask = experts - 1;
    let m = (h as u32 & mask) | 1;
    let o = (h >> 32) as u32 & mask;
    let p = expert.wrapping_mul(m).wrapping_add(o) & mask;
    let mut scale = 1.0f32;
    let mut half = experts >> 1;
    while half > 1 {
        scale *= 0.5;
        half >>= 1;
    }
    (p as i32 - (experts >> 1) as i32) as f32 * scale
}

/// Power-law segment length (`oxb_powerlaw_len`): exponent e uniform in [0, max_exp], length
/// uniform in [2^e, 2^(e+1)).
#[inline]
pub fn powerlaw_len(seed: u64, i: u64, max_exp: u32) -> u32 {
    let r = mix(seed, i);
    let e = (r % u64::from(max_exp + 1)) as u32;
    let low = ((r >> 32) as u32) & ((1u32 << e) - 1);
    (1u32 << e) + low
}

/// Segment offsets (length segments + 1) of the power-law segmentation of stream `seed`.
pub fn powerlaw_offsets(seed: u64, segments: u64, max_exp: u32) -> Vec<u64> {
    let mut off = Vec::with_capacity(segments as usize + 1);
    off.push(0u64);
    for i in 0..segments {
        let last = *off.last().unwrap_or(&0);
        off.push(last + u64::from(powerlaw_len(seed, i, max_exp)));
    }
    off
}

/// One term of the digest: word `w` at position `i` of the canonical output.
#[inline]
pub fn digest_term(i: u64, w: u32) -> u64 {
    fmix64((i << 32) | u64::from(w))
}

/// The result digest shared with the peers: over 32-bit words w[0..n),
/// sum_i fmix64((i << 32) | w[i]) mod 2^64. Position-sensitive (order is checked too), and a sum,
/// so disjoint ranges of the output can be digested in parallel and added.
///
/// A result with values (sort pairs, argsort) is digested as one sequence of words: the n keys,
/// then the n values as their little-endian 32-bit words (a 4-byte value at word n + j, an 8-byte
/// value as two words, low first, at n + 2j and n + 2j + 1). So a wrong permutation, or a wrong
/// high word of an int64 index, changes the digest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Digest {
    pub len: u64,
    pub sum: u64,
}

impl Digest {
    pub fn of_words(words: &[u32]) -> Self {
        Self::of_words_at(0, words)
    }

    /// The partial digest of `words` placed at position `start` of a longer output.
    pub fn of_words_at(start: u64, words: &[u32]) -> Self {
        let sum = words.iter().enumerate().fold(0u64, |acc, (j, &w)| {
            acc.wrapping_add(digest_term(start + j as u64, w))
        });
        Digest {
            len: words.len() as u64,
            sum,
        }
    }

    /// The partial digest of 64-bit `values` placed at word `start` of a longer output: value j
    /// is the two words start + 2j (low) and start + 2j + 1 (high).
    pub fn of_i64_at(start: u64, values: &[i64]) -> Self {
        let sum = values.iter().enumerate().fold(0u64, |acc, (j, &v)| {
            let (at, v) = (start + 2 * j as u64, v as u64);
            acc.wrapping_add(digest_term(at, v as u32))
                .wrapping_add(digest_term(at + 1, (v >> 32) as u32))
        });
        Digest {
            len: 2 * values.len() as u64,
            sum,
        }
    }

    pub fn of_f32(values: &[f32]) -> Self {
        let words: Vec<u32> = values.iter().map(|v| v.to_bits()).collect();
        Self::of_words(&words)
    }

    /// Combine digests of disjoint parts (lengths add, sums add).
    pub fn add(self, other: Digest) -> Digest {
        Digest {
            len: self.len + other.len,
            sum: self.sum.wrapping_add(other.sum),
        }
    }

    /// The printed form, as the peers print it: "n:%016x".
    pub fn text(&self) -> String {
        format!("{}:{:016x}", self.len, self.sum)
    }
}
