//! Batched top-k on the GPU against the host backend on the inputs where published top-k kernels
//! drop candidates or lose the selected set (issue 28, "Exactness stress"), at the serving
//! shapes: rows whose keys share their top 16 or 11 bits (every coarse histogram bin collides), a
//! tie class of 10^5 equal keys straddling k (wider than any candidate buffer), all-equal rows,
//! rows of 2^20 keys whose threshold bucket holds more than 4096 keys, NaN-heavy rows, bf16
//! rows (few distinct values), and rows whose k-th key ties with about k others. Each under the default contract (deterministic, ties to the smaller
//! index, stable sorted), ties to the larger index, and the opt-out (not guaranteed, unsorted).
//! Each test skips without a GPU (fails with OXICUB_REQUIRE_GPU=1).

use half::bf16;
use oxicub_algorithms::Cuda;
use oxicub_env::{determinism, output_ordering, require, tie_break, Env};
use oxicub_params::SelectDirection;
use oxicub_test::batched_topk::{check_strided, StridedShape};
use oxicub_test::oracle::RefKey;
use oxicub_test::{gpu_or_skip, SplitMix64};

const ROWS: usize = 64;
const ROW: usize = 131_072;
const K: usize = 2048;

/// `rows` rows of `len` keys (dense, the serving layout), each selecting its `k` largest, on the
/// GPU against the host under the three contracts.
fn check_rows<K: RefKey>(cuda: &Cuda, keys: &[K], rows: usize, len: usize, k: usize) {
    let shape = StridedShape::rows(rows, len, len, k, SelectDirection::Max);
    check_strided(cuda, keys, shape, &Env::new());
    check_strided(cuda, keys, shape, &require!(tie_break::PreferLargerIndex));
    check_strided(
        cuda,
        keys,
        shape,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
    );
}

/// f32 keys `prefix | random low bits`, the top `shared` bits fixed.
fn sharing_top_bits(len: usize, shared: u32, prefix: u32, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    let low = (1u32 << (32 - shared)) - 1;
    (0..len)
        .map(|_| f32::from_bits((prefix & !low) | (rng.next_u64() as u32 & low)))
        .collect()
}

#[test]
fn keys_sharing_their_top_16_or_11_bits() {
    let Some(cuda) = gpu_or_skip() else { return };
    // [1, 1.0078) and [1, 1.25): one bin of a 16- or 11-bit histogram holds every key.
    for (shared, seed) in [(16, 1), (11, 2)] {
        let keys = sharing_top_bits(ROWS * ROW, shared, 0x3F80_0000, seed);
        check_rows(&cuda, &keys, ROWS, ROW, K);
    }
}

#[test]
fn a_tie_class_of_100000_keys_straddles_k() {
    let Some(cuda) = gpu_or_skip() else { return };
    // 2^20 keys: 1000 above 0.5, 100000 equal to 0.5 spread through the row, the rest below:
    // the top 2048 are the 1000 and 1048 of the tie class (which ones, the tie-break says).
    let len = 1 << 20;
    let mut rng = SplitMix64::new(3);
    let mut keys: Vec<f32> = (0..len)
        .map(|_| (rng.next_unit_f64() * 0.49) as f32)
        .collect();
    for i in 0..100_000 {
        keys[(i * 10 + 3) % len] = 0.5;
    }
    for i in 0..1000 {
        keys[(i * 1031 + 7) % len] = 0.75 + i as f32 * 1e-4;
    }
    check_rows(&cuda, &keys, 1, len, K);
}

#[test]
fn the_kth_keys_tie_class_about_k_wide() {
    let Some(cuda) = gpu_or_skip() else { return };
    // 64 values 1 + j / 2^23 (their top 26 bits shared): each row holds ~2048 copies of each,
    // so the selection is the best value's copies and part of the next one's. The clustered
    // stream kernel ranks these one-rank buckets by index through a bitmap (more than 64 items
    // a bucket) and smaller ones by comparing indices.
    let keys = sharing_top_bits(ROWS * ROW, 26, 0x3F80_0000, 11);
    check_rows(&cuda, &keys, ROWS, ROW, K);
    // 2 and 40 copies of each of the 64 values: buckets below and above the bitmap's cut-off.
    for (len, k, seed) in [(128usize, 16usize, 12u64), (2560, 40, 13)] {
        check_rows(
            &cuda,
            &sharing_top_bits(8 * len, 26, 0x3F80_0000, seed),
            8,
            len,
            k,
        );
    }
}

#[test]
fn keys_above_the_sampled_best_in_a_narrow_span() {
    let Some(cuda) = gpu_or_skip() else { return };
    // u16 rows of 65536 keys in [1000, 1063] (the sample's threshold and best within 64 ranks:
    // the clustered kernel's buckets hold one rank each) and two outliers far above, which the
    // sample most likely misses (it reads 1 key in 8): they land in the open bucket 0 and must
    // come out first, the larger first, whatever their indices.
    const LEN: usize = 65_536;
    let mut rng = SplitMix64::new(13);
    let mut keys: Vec<u16> = (0..8 * LEN)
        .map(|_| 1000 + (rng.next_u64() >> 58) as u16)
        .collect();
    for row in 0..8 {
        let (a, b) = (rng.next_u64() as usize % LEN, rng.next_u64() as usize % LEN);
        keys[row * LEN + a.min(b)] = 50_000;
        keys[row * LEN + a.max(b)] = 60_000 + row as u16;
    }
    for k in [1usize, 2, 5, 300] {
        check_rows(&cuda, &keys, 8, LEN, k);
    }
}

#[test]
fn all_equal_rows() {
    let Some(cuda) = gpu_or_skip() else { return };
    check_rows(&cuda, &vec![0.5f32; ROWS * ROW], ROWS, ROW, K);
    check_rows(&cuda, &vec![-3.0f32; 1 << 20], 1, 1 << 20, K);
}

#[test]
fn a_threshold_bucket_of_more_than_4096_keys() {
    let Some(cuda) = gpu_or_skip() else { return };
    // 2^20 keys: 2000 clearly above, then 10000 sharing their top 16 bits (distinct low bits)
    // around the k-th place, the rest below: the threshold's bucket holds 10000 keys.
    let len = 1 << 20;
    let mut rng = SplitMix64::new(4);
    let mut keys: Vec<f32> = (0..len)
        .map(|_| (rng.next_unit_f64() * 0.9) as f32)
        .collect();
    let band = sharing_top_bits(10_000, 16, 0x3FC0_0000, 5);
    for (i, &key) in band.iter().enumerate() {
        keys[(i * 97 + 11) % len] = key;
    }
    for i in 0..2000 {
        keys[(i * 523 + 13) % len] = 2.0 + i as f32 * 1e-3;
    }
    check_rows(&cuda, &keys, 1, len, K);
}

#[test]
fn nan_heavy_rows() {
    let Some(cuda) = gpu_or_skip() else { return };
    // Half the keys NaN (quiet and signalling payloads, both signs): every row's top is NaN,
    // ordered by the tie-break. Then 1 % NaN among random keys.
    let mut rng = SplitMix64::new(6);
    let payloads = [0x7FC0_0000u32, 0xFFC0_0000, 0x7F80_0001, 0xFFBF_FFFF];
    let mut keys: Vec<f32> = (0..ROWS * ROW)
        .map(|_| {
            let r = rng.next_u64();
            if r % 2 == 0 {
                f32::from_bits(payloads[(r >> 8) as usize % payloads.len()])
            } else {
                (r >> 40) as f32 / (1u64 << 24) as f32
            }
        })
        .collect();
    check_rows(&cuda, &keys, ROWS, ROW, K);
    for (i, key) in keys.iter_mut().enumerate() {
        if key.is_nan() && i % 50 != 0 {
            *key = 0.25;
        }
    }
    check_rows(&cuda, &keys, ROWS, ROW, K);
}

#[test]
fn bf16_rows_of_few_distinct_values() {
    let Some(cuda) = gpu_or_skip() else { return };
    // [4 x 65536] bf16, k = 512: values on a grid of 1/64 in [0, 4) (256 distinct): every
    // threshold is a tie class of about 256 keys.
    let mut rng = SplitMix64::new(7);
    let keys: Vec<bf16> = (0..4 * 65_536)
        .map(|_| bf16::from_f32((rng.next_u64() % 256) as f32 / 64.0))
        .collect();
    check_rows(&cuda, &keys, 4, 65_536, 512);
}
