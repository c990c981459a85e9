//! Inputs for tests of any algorithm: a deterministic generator, keys of every radix key type
//! mixed with their edge values, tie-heavy keys, score-like keys whose best items crowd
//! together, and the poison values written into outputs before a run so that a slot an
//! algorithm must not write is seen to stay untouched.
//!
//! Everything here is deterministic: the same seed gives the same input on every machine, so
//! a failure on the GPU machine reproduces on any other.
//!
//! ```
//! use oxicub_test::cases::{poison, tied_keys, unit_scores, POISON_INDEX};
//!
//! let ties: Vec<i32> = tied_keys(1000, 7);
//! let mut distinct = ties.clone();
//! distinct.sort_unstable();
//! distinct.dedup();
//! assert!(distinct.len() <= 4);
//!
//! let scores = unit_scores(100, 1, 12);
//! assert!(scores.iter().all(|s| (0.0..1.0).contains(s)));
//!
//! // Outputs start as poison: a slot that still holds it was not written.
//! let out_indices = vec![POISON_INDEX; 8];
//! let out_keys = vec![poison::<f32>(); 8];
//! assert_eq!(out_keys[0].to_bits(), 0xA5A5_A5A5);
//! # let _ = out_indices;
//! ```

use oxicub_algorithms::radix::{RadixBits, RadixKey};

/// A small deterministic generator (splitmix64), so tests need no RNG crate and every run
/// sees the same keys.
///
/// ```
/// use oxicub_test::SplitMix64;
///
/// let (mut a, mut b) = (SplitMix64::new(1), SplitMix64::new(1));
/// assert_eq!(a.next_u64(), b.next_u64());
/// let unit = a.next_unit_f64();
/// assert!((0.0..1.0).contains(&unit));
/// ```
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number uniform in [0, 1) with 53 bits of resolution (one [`next_u64`](Self::next_u64)).
    pub fn next_unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Bit patterns of edge values worth mixing into any key sample: all zeros, all ones, only
/// the sign bit, the sign bit clear with the rest set, and the float specials of each width
/// (+/-inf, quiet and signalling NaNs of both signs, the smallest subnormal).
pub(crate) fn edge_bits(bits: u32) -> Vec<u64> {
    let all = u64::MAX >> (64 - bits);
    let sign = 1u64 << (bits - 1);
    let mut edges = vec![0, all, sign, all & !sign, 1, sign | 1];
    let inf = match bits {
        16 => vec![0x7C00, 0x7F80], // f16 and bf16
        32 => vec![0x7F80_0000],
        64 => vec![0x7FF0_0000_0000_0000],
        _ => vec![],
    };
    for inf in inf {
        edges.extend([
            inf,
            inf | sign,
            inf | 1,
            inf | 1 | sign,
            inf | (inf >> 1),
            all,
        ]);
    }
    edges
}

/// `len` deterministic keys: random bit patterns (which cover every class of float value)
/// with edge values and repeats mixed in.
///
/// ```
/// let keys: Vec<i8> = oxicub_test::sample_keys(100, 1);
/// assert_eq!(keys.len(), 100);
/// ```
pub fn sample_keys<K: RadixKey>(len: usize, seed: u64) -> Vec<K> {
    let bits = K::Bits::BITS;
    let edges = edge_bits(bits);
    let mut rng = SplitMix64::new(seed);
    let mut keys = Vec::with_capacity(len);
    for i in 0..len {
        let r = rng.next_u64();
        let pattern = match r % 8 {
            0 => edges[(r >> 8) as usize % edges.len()],
            // a repeat of an earlier key, so histograms see heavy bins
            1 if i > 0 => keys
                .get((r >> 8) as usize % i)
                .map_or(r, |k: &K| k.to_bits().to_u64()),
            _ => rng.next_u64(),
        };
        keys.push(K::from_bits(K::Bits::from_u64_truncating(pattern)));
    }
    keys
}

/// Every bit pattern of an 8- or 16-bit key type, as keys.
///
/// ```
/// let all: Vec<u8> = oxicub_test::all_keys();
/// assert_eq!(all.len(), 256);
/// ```
pub fn all_keys<K: RadixKey>() -> Vec<K> {
    let bits = K::Bits::BITS.min(16);
    (0..1u64 << bits)
        .map(|b| K::from_bits(K::Bits::from_u64_truncating(b)))
        .collect()
}

/// NaN of both signs, both zeros, both infinities and a number: cycled through by the tests
/// of special keys, so every pair of them meets at a boundary.
///
/// ```
/// let nans = oxicub_test::cases::F32_SPECIALS.iter().filter(|x| x.is_nan()).count();
/// assert_eq!(nans, 2);
/// ```
pub const F32_SPECIALS: [f32; 8] = [
    f32::NAN,
    -0.0,
    0.0,
    f32::INFINITY,
    -f32::NAN,
    1.0,
    -0.0,
    f32::NEG_INFINITY,
];

/// `n` keys with heavy ties: 4 distinct values (drawn by [`sample_keys`]), so the k-th key is
/// tied in every segment and the tie-break decides among thousands of equal keys.
///
/// ```
/// let keys: Vec<u64> = oxicub_test::cases::tied_keys(50, 3);
/// assert_eq!(keys.len(), 50);
/// ```
pub fn tied_keys<K: RadixKey>(n: usize, seed: u64) -> Vec<K> {
    let values: Vec<K> = sample_keys(4, seed);
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| values[(rng.next_u64() % 4) as usize])
        .collect()
}

/// `n` keys drawn from `distinct` values of stream `seed` (long runs of each when few), sorted
/// in the contract's order (descending: reversed): the sorted inputs of a set operation.
///
/// ```
/// let keys: Vec<u32> = oxicub_test::cases::sorted_keys(100, 3, 7, false);
/// assert!(keys.windows(2).all(|w| w[0] <= w[1]));
/// ```
pub fn sorted_keys<K: crate::oracle::RefKey>(
    n: usize,
    distinct: usize,
    seed: u64,
    descending: bool,
) -> Vec<K> {
    let pool: Vec<K> = sample_keys(distinct.max(1), seed);
    let mut rng = SplitMix64::new(seed ^ 0x5e75);
    let mut keys: Vec<K> = (0..n)
        .map(|_| pool[(rng.next_u64() % pool.len() as u64) as usize])
        .collect();
    keys.sort_by(|x, y| {
        if descending {
            y.ref_cmp(x)
        } else {
            x.ref_cmp(y)
        }
    });
    keys
}

/// `n` scores uniform in [0, 1) with `bits` bits of resolution (fewer bits: more ties), as a
/// sparse-attention indexer produces them.
///
/// ```
/// let coarse = oxicub_test::cases::unit_scores(1000, 5, 4);
/// assert!(coarse.iter().all(|&s| s * 16.0 == (s * 16.0).floor()));
/// ```
pub fn unit_scores(n: usize, seed: u64, bits: u32) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| (rng.next_u64() >> (64 - bits)) as f32 / (1u64 << bits) as f32)
        .collect()
}

/// `n` keys of an AR(1) series x_i = rho x_(i-1) + u_i - 0.5 from x = 0, u uniform in [0, 1)
/// ([`SplitMix64::next_unit_f64`]): neighbouring keys correlated, more so as rho nears 1.
///
/// ```
/// use oxicub_test::{cases::ar1_scores, SplitMix64};
///
/// let smooth = ar1_scores(&mut SplitMix64::new(1), 1000, 0.999);
/// assert_eq!(smooth, ar1_scores(&mut SplitMix64::new(1), 1000, 0.999));
/// ```
pub fn ar1_scores(rng: &mut SplitMix64, n: usize, rho: f64) -> Vec<f32> {
    let mut x = 0.0f64;
    (0..n)
        .map(|_| {
            x = rho * x + (rng.next_unit_f64() - 0.5);
            x as f32
        })
        .collect()
}

/// Rows of 131072 scores whose best keys crowd together: ascending, descending, an AR(1)
/// series with coefficient 0.999 ([`ar1_scores`]), one hot window of 3000 keys (1 added to
/// uniform scores), five of 600.
///
/// ```
/// let [ascending, descending, ..] = oxicub_test::cases::crowded_rows(1);
/// assert_eq!(ascending.len(), 131_072);
/// assert_eq!(ascending.first(), descending.last());
/// ```
pub fn crowded_rows(seed: u64) -> [Vec<f32>; 5] {
    const SIZE: usize = 131_072;
    let mut rng = SplitMix64::new(seed);
    let ascending: Vec<f32> = (0..SIZE).map(|j| j as f32 / SIZE as f32).collect();
    let descending: Vec<f32> = ascending.iter().rev().copied().collect();
    let smooth = ar1_scores(&mut rng, SIZE, 0.999);
    let mut window = |width: usize, count: usize| -> Vec<f32> {
        let mut keys: Vec<f32> = (0..SIZE).map(|_| rng.next_unit_f64() as f32).collect();
        for _ in 0..count {
            let start = (rng.next_u64() % (SIZE - width) as u64) as usize;
            keys[start..start + width]
                .iter_mut()
                .for_each(|k| *k += 1.0);
        }
        keys
    };
    let one_window = window(3000, 1);
    let five_windows = window(600, 5);
    [ascending, descending, smooth, one_window, five_windows]
}

/// Poison for output keys: the bit pattern `0xA5..A5` of the key's width, which no test
/// places at the tail of an output on purpose.
///
/// ```
/// assert_eq!(oxicub_test::cases::poison::<u16>(), 0xA5A5);
/// ```
pub fn poison<K: RadixKey>() -> K {
    K::from_bits(<K::Bits as RadixBits>::from_u64_truncating(
        0xA5A5_A5A5_A5A5_A5A5,
    ))
}

/// Poison for output indices (and for 8-byte values): no input is this long.
pub const POISON_INDEX: u64 = 0xDEAD_BEEF_DEAD_BEEF;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_deterministic_and_include_edges() {
        let a: Vec<u32> = sample_keys(1000, 3);
        let b: Vec<u32> = sample_keys(1000, 3);
        assert_eq!(a, b);
        assert!(a.contains(&0x7F80_0000));
        let floats: Vec<f64> = sample_keys(1000, 3);
        assert!(floats.iter().any(|f| f.is_nan()));
        assert!(floats.iter().any(|f| f.is_infinite()));
    }
}
