//! Test helpers shared by oxicub's test suites.
//!
//! * [`gpu_or_skip`]: the [`Cuda`] backend, or a printed skip line when there is no GPU; with
//!   `OXICUB_REQUIRE_GPU=1` a missing GPU fails the test instead, so a run on a GPU machine can
//!   never pass by skipping.
//! * [`sample_keys`]: deterministic pseudo-random keys of any radix key type, mixed with the
//!   edge values of the type (zeros of both signs, infinities, NaNs, extremes).
//!
//! ```
//! use oxicub_test::{gpu_or_skip, sample_keys};
//!
//! let keys: Vec<f32> = sample_keys(1000, 7);
//! if let Some(cuda) = gpu_or_skip() {
//!     let _device_keys = cuda.upload_keys(&keys);
//! }
//! ```

#![deny(missing_docs)]

use oxicub_algorithms::radix::{RadixBits, RadixKey};
pub use oxicub_algorithms::Cuda;

/// The environment variable that turns a missing GPU into a test failure.
///
/// ```
/// assert_eq!(oxicub_test::REQUIRE_GPU_VAR, "OXICUB_REQUIRE_GPU");
/// ```
pub const REQUIRE_GPU_VAR: &str = "OXICUB_REQUIRE_GPU";

/// The [`Cuda`] backend on device 0, or `None` after printing
/// `skipped: no GPU (<reason>)` with the current test's name. With `OXICUB_REQUIRE_GPU=1` a
/// missing GPU panics (fails the test) instead.
///
/// ```
/// if let Some(cuda) = oxicub_test::gpu_or_skip() {
///     println!("testing on {cuda}");
/// }
/// ```
pub fn gpu_or_skip() -> Option<Cuda> {
    match Cuda::new(0) {
        Ok(cuda) => Some(cuda),
        Err(why) => {
            let test = std::thread::current()
                .name()
                .unwrap_or("<unnamed>")
                .to_owned();
            if std::env::var(REQUIRE_GPU_VAR).is_ok_and(|v| v == "1") {
                panic!("{REQUIRE_GPU_VAR}=1 but no GPU is usable in {test}: {why}");
            }
            println!("skipped: no GPU ({why}) in {test}");
            None
        }
    }
}

/// A small deterministic generator (splitmix64), so tests need no RNG crate and every run
/// sees the same keys.
///
/// ```
/// use oxicub_test::SplitMix64;
///
/// let (mut a, mut b) = (SplitMix64::new(1), SplitMix64::new(1));
/// assert_eq!(a.next_u64(), b.next_u64());
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
}

/// Bit patterns of edge values worth mixing into any key sample: all zeros, all ones, only
/// the sign bit, the sign bit clear with the rest set, and the float specials of each width
/// (+/-inf, quiet and signalling NaNs of both signs, the smallest subnormal).
fn edge_bits(bits: u32) -> Vec<u64> {
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
