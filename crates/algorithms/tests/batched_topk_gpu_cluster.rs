//! Batched top-k on the GPU against the host backend, the stream tier in one clustered launch
//! (`docs/design/batched_topk.md`, "Stream tier"): a direct call (strided, every value uniform)
//! whose segments all fit on the device at once as clusters of two blocks (sm_90), which hold the
//! candidates in their shared memory and select there. Each test skips without a GPU (fails with
//! OXICUB_REQUIRE_GPU=1).

use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::radix::RadixBits;
use oxicub_algorithms::{Cuda, Host};
use oxicub_env::{determinism, output_ordering, require, tie_break, Env, Environment};
use oxicub_params::{direction, k, num_segments, segment_size, SelectDirection};
use oxicub_test::batched_topk::{check_strided, sample_miss_row, StridedShape};
use oxicub_test::cases::{crowded_rows, poison, tied_keys, unit_scores, F32_SPECIALS};
use oxicub_test::oracle::RefKey;
use oxicub_test::{every_key_type, for_every_env, gpu_or_skip, sample_keys};

/// Runs `f` and asserts that it made at least one clustered launch (the path these tests are
/// for; a device without clusters fails here rather than passing through the other path).
fn clustered<R>(what: &str, f: impl FnOnce() -> R) -> R {
    let before = oxicub_kernels::families::batched_topk::clustered_launches();
    let out = f();
    let after = oxicub_kernels::families::batched_topk::clustered_launches();
    assert!(after > before, "{what}: no clustered launch");
    out
}

/// `rows` of equal length, one after another, as one strided call of `k` per row.
fn check_rows<K: RefKey, E: Environment>(
    cuda: &Cuda,
    rows: &[Vec<K>],
    k: usize,
    dir: SelectDirection,
    env: &E,
) {
    let size = rows[0].len();
    assert!(rows.iter().all(|r| r.len() == size));
    let keys: Vec<K> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    let shape = StridedShape::rows(rows.len(), size, size, k, dir);
    clustered(&format!("{} {shape:?}", K::KEY_TYPE), || {
        check_strided(cuda, &keys, shape, env)
    });
}

/// Inputs whose candidates crowd into one of the two blocks or into a few buckets (sorted,
/// smooth and clustered rows), in both directions and every requirement combination.
#[test]
fn stream_cluster_sorted_smooth_and_clustered_rows() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rows = crowded_rows(80).to_vec();
    rows.push(unit_scores(131_072, 81, 24));
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        for_every_env!(check_rows(&cuda, &rows, 2048, dir));
    }
    check_rows(&cuda, &rows, 100, SelectDirection::Max, &Env::new());
}

/// Candidates that overflow a block through the walk (the append form for a few hits a warp
/// batch): rows of 262144 f32 keys, 1 at the positions p % 512 < 60 and 0 elsewhere (negated for
/// min). The sample (runs of 8 keys every 512) reads only ones, so the threshold is 1: every warp
/// batch (512 keys, aligned) holds exactly 60 hits, below the walk's limit of 64, and each block's
/// 15360 pass its 8192 places: the batch that crosses them takes the walk's checked placement,
/// and the cluster's first block then the exact path (ties broken by index).
#[test]
fn stream_cluster_overflow_in_the_walk() {
    let Some(cuda) = gpu_or_skip() else { return };
    for (dir, one) in [(SelectDirection::Max, 1.0f32), (SelectDirection::Min, -1.0)] {
        let row: Vec<f32> = (0..262_144usize)
            .map(|p| if p % 512 < 60 { one } else { 0.0 })
            .collect();
        let rows = vec![row.clone(), row];
        for_every_env!(check_rows(&cuda, &rows, 2048, dir));
    }
}

/// All-equal keys: every key is a candidate, so the candidates overflow a block and the
/// cluster's first block takes the exact path over every key (small enough for
/// compute-sanitizer's racecheck).
#[test]
fn stream_cluster_exact_path_all_equal_keys() {
    let Some(cuda) = gpu_or_skip() else { return };
    let equal = vec![vec![7u32; 20_000]; 3];
    for_every_env!(check_rows(&cuda, &equal, 2048, SelectDirection::Max));
}

/// The paths out of the buckets (all-equal keys: the test above): a sample that misses while
/// NaNs rank below the threshold, NaN, infinities and signed zeros, ties at the k-th key
/// (12-bit scores), an outlier NaN above every sampled key (bucket 0, open-ended), k = 2048 of
/// 2049 keys (no sample: nothing is cut) and of 4000, and k = 1.
#[test]
fn stream_cluster_ties_nan_sample_misses_and_every_k() {
    let Some(cuda) = gpu_or_skip() else { return };
    const SIZE: usize = 131_072;
    let specials = F32_SPECIALS;
    let special: Vec<Vec<f32>> = (0..3)
        .map(|r| {
            specials
                .iter()
                .copied()
                .cycle()
                .skip(r)
                .take(SIZE)
                .collect()
        })
        .collect();
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        for_every_env!(check_rows(&cuda, &special, 2048, dir));
    }
    // The sampled keys are the rows' best numbers and one other key in 32 a NaN
    // (sample_miss_row): for min the NaNs rank last.
    for (dir, code) in [(SelectDirection::Max, 0), (SelectDirection::Min, 1)] {
        let rows = vec![sample_miss_row(code, 82), sample_miss_row(code, 83)];
        for_every_env!(check_rows(&cuda, &rows, 2048, dir));
        let narrow: Vec<Vec<f32>> = rows
            .iter()
            .map(|r| r.iter().map(|&x| x as f32).collect())
            .collect();
        check_rows(&cuda, &narrow, 2048, dir, &Env::new());
    }
    let tied: Vec<Vec<f32>> = (0..4).map(|r| unit_scores(SIZE, 84 + r, 12)).collect();
    for_every_env!(check_rows(&cuda, &tied, 2048, SelectDirection::Max));
    let outlier: Vec<Vec<f32>> = (0..2)
        .map(|r| {
            let mut keys = unit_scores(SIZE, 88 + r, 24);
            keys[1000] = f32::NAN;
            keys
        })
        .collect();
    for_every_env!(check_rows(&cuda, &outlier, 2048, SelectDirection::Max));
    // k = 2048 of 2049 keys (no sample: every key a candidate), of 4000 (a sample that
    // keeps about every key), and k = 1. (k = size and k > size leave the stream tier: it
    // takes at most 2048 of more than 2048 keys.)
    let barely: Vec<Vec<f32>> = (0..5).map(|r| sample_keys(2049, 90 + r)).collect();
    let small: Vec<Vec<f32>> = (0..5).map(|r| sample_keys(4000, 95 + r)).collect();
    for rows in [&barely, &small] {
        for_every_env!(check_rows(&cuda, rows, 2048, SelectDirection::Min));
        check_rows(&cuda, rows, 1, SelectDirection::Max, &Env::new());
    }
}

/// Keys the f32 compare of the streaming pass takes but whose rank is below the threshold
/// (dead entries: they keep their place among the candidates, in no bucket): NaNs of both
/// signs among uniform scores, for min (where every NaN passes the compare and ranks last; one
/// key in 37 a NaN, more of them than k: about half the candidates are dead) and for max (NaNs
/// rank first: one key in 500), with -0.0 and +0.0 among them (one key in 400: among the k
/// best for min).
#[test]
fn stream_cluster_dead_entries_nan_and_signed_zeros() {
    let Some(cuda) = gpu_or_skip() else { return };
    const SIZE: usize = 131_072;
    let negative_nan = f32::from_bits(0xFFC0_0001);
    let rows = |every: usize, seed: u64| -> Vec<Vec<f32>> {
        (0..3)
            .map(|r| {
                let mut keys = unit_scores(SIZE, seed + r, 24);
                for (i, key) in keys.iter_mut().enumerate() {
                    if i % every == 5 {
                        *key = if i % 2 == 0 { f32::NAN } else { negative_nan };
                    } else if i % 400 == 7 {
                        *key = if i % 2 == 0 { 0.0 } else { -0.0 };
                    }
                }
                keys
            })
            .collect()
    };
    for_every_env!(check_rows(
        &cuda,
        &rows(37, 130),
        2048,
        SelectDirection::Min
    ));
    for_every_env!(check_rows(
        &cuda,
        &rows(500, 140),
        2048,
        SelectDirection::Max
    ));
    check_rows(
        &cuda,
        &rows(37, 150),
        100,
        SelectDirection::Min,
        &Env::new(),
    );
}

/// Segments at the stream tier's largest size (262 144 f32 keys, 131 072 f64 keys), and 8-byte
/// keys whose candidates crowd into one block or a few buckets (the crowded rows as f64: a
/// block holds half the candidates of a 4-byte key's).
#[test]
fn stream_cluster_largest_segments_and_crowded_8_byte_rows() {
    let Some(cuda) = gpu_or_skip() else { return };
    const LARGEST_F32: usize = 262_144;
    let largest: Vec<Vec<f32>> = vec![
        unit_scores(LARGEST_F32, 160, 24),
        (0..LARGEST_F32)
            .map(|j| j as f32 / LARGEST_F32 as f32)
            .collect(),
    ];
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        check_rows(&cuda, &largest, 2048, dir, &Env::new());
    }
    let crowded: Vec<Vec<f64>> = crowded_rows(161)
        .iter()
        .map(|row| row.iter().map(|&x| f64::from(x)).collect())
        .collect();
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        for_every_env!(check_rows(&cuda, &crowded, 2048, dir));
    }
}

/// The clustered launch's edge: the most segments whose clusters are all resident at once
/// (the device's count, found here by bisection: every probe is checked against the host)
/// take it, one more does not.
#[test]
fn stream_cluster_segment_count_at_the_resident_clusters() {
    let Some(cuda) = gpu_or_skip() else { return };
    const SIZE: usize = 4096;
    let clustered_with = |n: usize| -> bool {
        let keys: Vec<f32> = sample_keys(n * SIZE, 97 + n as u64);
        let shape = StridedShape::rows(n, SIZE, SIZE, 100, SelectDirection::Max);
        let before = oxicub_kernels::families::batched_topk::clustered_launches();
        check_strided(&cuda, &keys, shape, &Env::new());
        oxicub_kernels::families::batched_topk::clustered_launches() > before
    };
    assert!(
        clustered_with(1),
        "one segment did not take the clustered launch"
    );
    // At most one cluster per two SMs: 400 segments never fit.
    let (mut fits, mut too_many) = (1usize, 400usize);
    while too_many - fits > 1 {
        let mid = (fits + too_many) / 2;
        if clustered_with(mid) {
            fits = mid;
        } else {
            too_many = mid;
        }
    }
    assert!(clustered_with(fits), "{fits} segments");
    assert!(!clustered_with(fits + 1), "{} segments", fits + 1);
    println!("clusters resident at once: {fits}");
}

/// Every key type, rows whose length is not a multiple of a vector or a block's share (a tail
/// of scalar keys), rows that do not start 16-byte aligned (all scalar loads), and more
/// segments than clusters fit at once (the filter and final selection take those).
#[test]
fn stream_cluster_every_key_type_odd_rows_and_many_segments() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey>(cuda: &Cuda, seed: u64) {
        let rows: Vec<Vec<K>> = (0..3).map(|r| sample_keys(65_539, seed * 10 + r)).collect();
        check_rows(cuda, &rows, 1000, SelectDirection::Max, &Env::new());
        check_rows(
            cuda,
            &rows,
            2048,
            SelectDirection::Min,
            &require!(tie_break::PreferLargerIndex, output_ordering::Unsorted),
        );
        let ties: Vec<Vec<K>> = (0..2)
            .map(|r| tied_keys(20_000, seed * 10 + 5 + r))
            .collect();
        check_rows(cuda, &ties, 700, SelectDirection::Max, &Env::new());
        // Unaligned rows: a stride of 40 001 keys.
        let keys: Vec<K> = sample_keys(3 * 40_001, seed * 10 + 9);
        let shape = StridedShape::rows(3, 40_001, 40_000, 300, SelectDirection::Min);
        clustered("unaligned rows", || {
            check_strided(cuda, &keys, shape, &Env::new())
        });
    }
    every_key_type!(each, &cuda, 95);
    // More segments than clusters fit at once (at most one per two SMs): no clustered launch.
    let keys: Vec<f32> = sample_keys(400 * 4096, 96);
    let shape = StridedShape::rows(400, 4096, 4096, 100, SelectDirection::Max);
    let before = oxicub_kernels::families::batched_topk::clustered_launches();
    check_strided(&cuda, &keys, shape, &Env::new());
    assert_eq!(
        oxicub_kernels::families::batched_topk::clustered_launches(),
        before,
        "400 segments took the clustered launch"
    );
}

/// Pairs with 4- and 8-byte values through the clustered launch: the values are the items'
/// global positions, so each output's source is checked, against the host bit for bit.
#[test]
fn stream_cluster_keys_and_pairs() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey, V>(
        cuda: &Cuda,
        rows: usize,
        size: usize,
        env: &impl Environment,
        value: fn(u64) -> V,
    ) where
        V: oxicub_algorithms::DeviceValue + PartialEq + std::fmt::Debug + Default,
        V: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits,
    {
        let k = 2048usize;
        let keys: Vec<K> = sample_keys(rows * size, 97);
        let values: Vec<V> = (0..keys.len() as u64).map(value).collect();
        let problem = || {
            Problem::strided(
                size,
                segment_size::Static::<131_072>::new(),
                k::Static::<2048>::new(),
                direction::Max,
                num_segments::uniform(rows as i64).expect("n"),
            )
        };
        let poison_value = value(u64::from(u32::MAX));
        let (mut host_keys, mut host_values) =
            (vec![poison::<K>(); rows * k], vec![poison_value; rows * k]);
        batched_topk::select_pairs(
            &Host::new(),
            &problem(),
            &keys[..],
            &values[..],
            &mut host_keys[..],
            &mut host_values[..],
            env,
        )
        .expect("host call")
        .check()
        .expect("valid");
        let device_keys = cuda.upload_keys(&keys).expect("upload");
        let device_values = cuda.upload(&values).expect("upload");
        let mut out_keys = cuda
            .upload_keys(&vec![poison::<K>(); rows * k])
            .expect("poison");
        let mut out_values = cuda.upload(&vec![poison_value; rows * k]).expect("poison");
        clustered("pairs", || {
            batched_topk::select_pairs(
                cuda,
                &problem(),
                device_keys.as_view(),
                device_values.as_view(),
                out_keys.as_view_mut(),
                out_values.as_view_mut(),
                env,
            )
            .expect("gpu call")
            .check()
            .expect("valid")
        });
        let gpu_keys = cuda.download_keys(&out_keys).expect("download");
        let gpu_values = cuda.download(&out_values.as_view()).expect("download");
        let bits = |v: &[K]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let what = format!(
            "{} pairs of {} bytes {:?}",
            K::KEY_TYPE,
            std::mem::size_of::<V>(),
            env.resolved()
        );
        if env.resolved().pins_output() {
            assert_eq!(gpu_values, host_values, "{what}: values");
            assert!(bits(&gpu_keys) == bits(&host_keys), "{what}: keys");
        } else {
            // Unpinned: the same set of (key, value) pairs per row.
            for r in 0..rows {
                let set = |ks: &[K], vs: &[V]| {
                    let mut pairs: Vec<(u64, String)> = ks
                        .iter()
                        .zip(vs)
                        .map(|(k, v)| (k.to_bits().to_u64(), format!("{v:?}")))
                        .collect();
                    pairs.sort();
                    pairs
                };
                let at = r * k..(r + 1) * k;
                assert_eq!(
                    set(&gpu_keys[at.clone()], &gpu_values[at.clone()]),
                    set(&host_keys[at.clone()], &host_values[at]),
                    "{what}: row {r}"
                );
            }
        }
    }
    let to_u32 = |x: u64| x as u32;
    let to_u64 = |x: u64| x;
    each::<f32, u32>(&cuda, 6, 131_072, &Env::new(), to_u32);
    each::<f32, u64>(
        &cuda,
        6,
        131_072,
        &require!(tie_break::PreferLargerIndex),
        to_u64,
    );
    each::<u64, u64>(&cuda, 4, 131_072, &Env::new(), to_u64);
    each::<half::bf16, u32>(
        &cuda,
        4,
        131_072,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        to_u32,
    );
}

/// Ragged rows whose lengths are on the device (decode: most rows shorter than the longest) in
/// one strided call: not direct, so the control stages check and bin the rows, and the
/// clustered launch takes the stream tier's list, a cluster per position, while the warp and
/// block tiers take the short rows. Lengths at each tier's edges (0, 1, 32, 256, 2047, 2048,
/// 2049, the stride) and between, against the host in every requirement combination; then a
/// length above the stride, reported for its row while the other rows are written.
#[test]
fn stream_cluster_ragged_rows_with_lengths_on_the_device() {
    use oxicub_test::batched_topk::{check_segments, Case};
    use oxicub_test::cases::POISON_INDEX;
    let Some(cuda) = gpu_or_skip() else { return };
    const STRIDE: i64 = 32_768;
    const K: i64 = 2048;
    fn run<E: Environment>(cuda: &Cuda, keys: &[f32], lens: &[i64], env: &E) {
        let r = env.resolved();
        let n = lens.len();
        let len = n * K as usize;
        // The same problem over the lengths on the host or on the device.
        macro_rules! problem {
            ($lens:expr) => {
                Problem::strided(
                    STRIDE as usize,
                    segment_size::PerSegment::<_, 0, STRIDE>::new($lens),
                    k::Static::<K>::new(),
                    direction::Max,
                    num_segments::uniform(n as i64).expect("n"),
                )
            };
        }
        let (mut host_keys, mut host_indices) =
            (vec![poison::<f32>(); len], vec![POISON_INDEX; len]);
        let host = batched_topk::select_indices(
            &Host::new(),
            &problem!(lens),
            keys,
            &mut host_keys[..],
            &mut host_indices[..],
            env,
        )
        .expect("host call")
        .check()
        .map_err(|e| e.to_string());
        let device_lens = cuda.upload(lens).expect("upload");
        let device_keys = cuda.upload(keys).expect("upload");
        let mut out_keys = cuda.upload(&vec![poison::<f32>(); len]).expect("upload");
        let mut out_indices = cuda.upload(&vec![POISON_INDEX; len]).expect("upload");
        let gpu = clustered("ragged rows", || {
            batched_topk::select_indices(
                cuda,
                &problem!(device_lens.as_view()),
                device_keys.as_view(),
                out_keys.as_view_mut(),
                out_indices.as_view_mut(),
                env,
            )
            .expect("GPU call")
            .check()
            .map_err(|e| e.to_string())
        });
        assert_eq!(gpu, host, "{r:?}: the outcome");
        let gpu_keys = cuda.download(&out_keys.as_view()).expect("download");
        let gpu_indices = cuda.download(&out_indices.as_view()).expect("download");
        // The rows as a case: an invalid length makes its row invalid (begin past its end).
        let case = Case {
            keys: keys.to_vec(),
            begin: (0..n)
                .map(|i| {
                    if lens[i] > STRIDE {
                        1
                    } else {
                        i as i64 * STRIDE
                    }
                })
                .collect(),
            end: (0..n)
                .map(|i| {
                    if lens[i] > STRIDE {
                        0
                    } else {
                        i as i64 * STRIDE + lens[i]
                    }
                })
                .collect(),
            ks: vec![K; n],
            dirs: vec![0; n],
        };
        assert_eq!(case.stride(), K as usize);
        check_segments(&case, r, &gpu_keys, &gpu_indices);
        if r.pins_output() {
            assert_eq!(
                gpu_indices, host_indices,
                "{r:?}: indices differ from the host"
            );
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&gpu_keys) == bits(&host_keys),
                "{r:?}: keys differ from the host"
            );
        }
    }
    let lens: Vec<i64> = vec![
        32_768, 0, 1, 32, 256, 2047, 2048, 2049, 3000, 20_001, 32_767, 5, 16_384, 12_345, 2100,
        24_576,
    ];
    let keys: Vec<f32> = sample_keys(lens.len() * STRIDE as usize, 98);
    for_every_env!(run(&cuda, &keys, &lens));
    // Ties across the rows' ends: keys in 64 values, so the k-th key's ties straddle k.
    let ties: Vec<f32> = (0..lens.len() * STRIDE as usize)
        .map(|i| ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as f32)
        .collect();
    run(&cuda, &ties, &lens, &Env::new());
    run(&cuda, &ties, &lens, &require!(tie_break::PreferLargerIndex));
    // Row 3's length is above the stride (and the bound): reported, the others written.
    let mut bad = lens.clone();
    bad[3] = STRIDE + 1;
    run(&cuda, &keys, &bad, &Env::new());
}
