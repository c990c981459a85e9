//! Batched top-k on the GPU against the host backend, the warp tier: the MoE shape with static
//! parameters through AnyBackend, and the two-segments-per-warp path (full rows, 128-key rows, odd
//! counts, ties, NaN, signed zeros, pairs). Each test skips without a GPU (fails with
//! OXICUB_REQUIRE_GPU=1).

use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::{AnyBackend, Host};
use oxicub_env::{determinism, output_ordering, require, tie_break, Env};
use oxicub_params::{direction, k, num_segments, segment_size, SelectDirection};
use oxicub_test::batched_topk::{check_strided, StridedShape};
use oxicub_test::cases::{poison, unit_scores};
use oxicub_test::{for_every_env, gpu_or_skip, sample_keys, SplitMix64};

/// `select_pairs` of f32 keys through AnyBackend on the GPU and on Host (outputs poisoned first,
/// `len` of each): both results as (key bits, values).
macro_rules! f32_pairs_on_both {
    ($cuda:expr, $problem:expr, $keys:expr, $values:expr, $len:expr, $value_poison:expr) => {{
        let run = |backend: &AnyBackend| {
            let (mut top, mut v) = (vec![poison::<f32>(); $len], vec![$value_poison; $len]);
            batched_topk::select_pairs(
                backend,
                $problem,
                $keys,
                $values,
                &mut top[..],
                &mut v[..],
                &Env::new(),
            )
            .expect("call")
            .check()
            .expect("valid");
            (top.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), v)
        };
        (
            run(&AnyBackend::Cuda($cuda)),
            run(&AnyBackend::Host(Host::new())),
        )
    }};
}

/// The MoE shape through AnyBackend (static size and k: the warp tier only), against Host.
#[test]
fn moe_shape_static_parameters_and_pairs_on_any_backend() {
    let Some(cuda) = gpu_or_skip() else { return };
    let tokens = 3000usize;
    let logits: Vec<f32> = sample_keys(tokens * 256, 20);
    let weights: Vec<u64> = (0..logits.len() as u64).collect();
    let problem = Problem::strided(
        256,
        segment_size::Static::<256>::new(),
        k::Static::<8>::new(),
        direction::Max,
        num_segments::uniform(tokens as i64).expect("n"),
    );
    let (gpu, host) = f32_pairs_on_both!(
        cuda.clone(),
        &problem,
        &logits[..],
        &weights[..],
        tokens * 8,
        u64::MAX
    );
    assert_eq!(gpu, host);
    // [4096 x 64], k = 6: ITEMS = 2 per lane.
    let logits: Vec<f32> = sample_keys(4096 * 64, 21);
    let problem = Problem::strided(
        64,
        segment_size::Static::<64>::new(),
        k::Static::<6>::new(),
        direction::Max,
        num_segments::Static::<4096>::new(),
    );
    let run = |backend: &AnyBackend| {
        let (mut top, mut at) = (vec![0f32; 4096 * 6], vec![0u32; 4096 * 6]);
        batched_topk::select_indices(
            backend,
            &problem,
            &logits[..],
            &mut top[..],
            &mut at[..],
            &require!(tie_break::PreferLargerIndex),
        )
        .expect("call")
        .check()
        .expect("valid");
        at
    };
    assert_eq!(
        run(&AnyBackend::Cuda(cuda)),
        run(&AnyBackend::Host(Host::new()))
    );
}

/// Enough rows that every warp of the warp tier gets several pairs of segments (the MoE
/// shape): the two-segments-per-warp path, against the host, including ties and NaN.
#[test]
fn many_full_rows_take_the_two_segments_per_warp_path() {
    let Some(cuda) = gpu_or_skip() else { return };
    let shape = |k, dir| StridedShape::rows(65_536, 256, 256, k, dir);
    let mut keys: Vec<f32> = sample_keys(65_536 * 256, 51);
    // Ties at the boundary in some rows, NaN in others: the slow path within the same call.
    for row in (0..65_536).step_by(97) {
        keys[row * 256..row * 256 + 40].fill(0.999);
    }
    for row in (0..65_536).step_by(1013) {
        keys[row * 256 + 5] = f32::NAN;
    }
    for (k, dir) in [(8, SelectDirection::Max), (16, SelectDirection::Min)] {
        check_strided(&cuda, &keys, shape(k, dir), &Env::new());
        check_strided(
            &cuda,
            &keys,
            shape(k, dir),
            &require!(tie_break::PreferLargerIndex),
        );
        check_strided(
            &cuda,
            &keys,
            shape(k, dir),
            &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        );
    }
    // Keys in [0, 1) (no NaN: every selected key is written from its rank), and the other
    // 4-byte key types: random bits, and integers in a narrow range (ties at the k-th key in
    // most rows: the slow path).
    let mut rng = SplitMix64::new(52);
    let unit: Vec<f32> = (0..65_536 * 256)
        .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
        .collect();
    check_strided(&cuda, &unit, shape(8, SelectDirection::Max), &Env::new());
    let ints: Vec<i32> = sample_keys(65_536 * 256, 53);
    check_strided(
        &cuda,
        &ints,
        shape(5, SelectDirection::Min),
        &require!(tie_break::PreferLargerIndex),
    );
    let narrow: Vec<u32> = (0..65_536 * 256)
        .map(|_| (rng.next_u64() % 300) as u32)
        .collect();
    check_strided(&cuda, &narrow, shape(8, SelectDirection::Max), &Env::new());
}

/// The two-segments-per-warp path's other shapes: 128-key rows (two runs of 4 keys per lane)
/// and odd row counts (the last pair's second half has no segment, and must write nothing),
/// a row stride above the size, more pairs per warp than one run of the declined mask holds,
/// keys and pairs with 4-byte values. The path is taken when
/// the rows are at least 8 x the warps of the grid (runtime.grid_blocks: SMs x 4 resident
/// blocks of 8 warps): 33 792 rows on an H200 or H100 (132 SMs), 37 888 on 148 SMs, so
/// 45 001 rows. Rows cycle through adversarial patterns: untouched keys in [0, 1); k + 1 keys
/// equal above the rest, or below it (a tie at the k-th key for max, or for min, that the fast
/// path ranks by index); 40 equal keys at the top (more than 16 candidates: the slow path); a
/// NaN; every key +0.0 or -0.0; k + 1 NaNs (ties among NaNs at the k-th key).
#[test]
fn two_segments_per_warp_with_128_key_rows_odd_counts_and_pairs() {
    let Some(cuda) = gpu_or_skip() else { return };
    let n = 45_001;
    let keys_for = |stride: usize, size: usize, k: usize, seed: u64| -> Vec<f32> {
        let mut keys = unit_scores(n * stride, seed, 24);
        for row in 0..n {
            let seg = &mut keys[row * stride..row * stride + size];
            let at = (row * 37) % (size - 40);
            match row % 7 {
                1 => seg[at..at + k + 1].fill(2.0),
                2 => seg[at..at + 40].fill(0.999),
                3 => seg[at] = f32::NAN,
                4 => seg
                    .iter_mut()
                    .enumerate()
                    .for_each(|(j, x)| *x = if j % 3 == 0 { -0.0 } else { 0.0 }),
                5 => seg[at..at + k + 1].fill(f32::NAN),
                6 => seg[at..at + k + 1].fill(-1.0),
                _ => {}
            }
        }
        keys
    };
    let shape = |stride, size, k, dir| StridedShape::rows(n, stride, size, k, dir);
    use SelectDirection::{Max, Min};
    for (s, seed) in [
        (shape(128, 128, 8, Max), 61),  // 128-key rows, odd count
        (shape(132, 128, 5, Min), 62),  // stride above the size (16-byte aligned rows)
        (shape(256, 256, 16, Min), 63), // 256-key rows, odd count, k = 16
        (shape(256, 256, 1, Max), 64),  // k = 1
    ] {
        let keys = keys_for(s.stride, s.size, s.k, seed);
        check_strided(&cuda, &keys, s, &Env::new());
        check_strided(&cuda, &keys, s, &require!(tie_break::PreferLargerIndex));
        check_strided(
            &cuda,
            &keys,
            s,
            &require!(
                determinism::RunToRun,
                tie_break::PreferLargerIndex,
                output_ordering::Sorted
            ),
        );
        check_strided(
            &cuda,
            &keys,
            s,
            &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        );
    }
    // More than 15 pairs per warp: the runs after the first, whose declined halves (the 40
    // equal keys of every seventh row) are found from their own mask. Each block takes a
    // contiguous range of pairs, its 8 warps in turn; 180 001 rows give every warp at least
    // 19 pairs on 148 SMs (21 on 132), so later runs hold several pairs and their declined
    // halves sit at several distances from the run's last pair.
    let many = StridedShape {
        n: 180_001,
        ..shape(128, 128, 8, Max)
    };
    let keys = {
        let mut keys = unit_scores(many.n * 128, 69, 24);
        for row in (2..many.n).step_by(7) {
            keys[row * 128 + 50..row * 128 + 90].fill(0.999);
        }
        keys
    };
    check_strided(&cuda, &keys, many, &Env::new());
    // Every requirement combination on the 128-key rows, and the other 4-byte key types.
    let s = shape(128, 128, 8, Min);
    let keys = keys_for(s.stride, s.size, s.k, 65);
    for_every_env!(check_strided(&cuda, &keys, s));
    let ints: Vec<i32> = sample_keys(n * 128, 66);
    check_strided(&cuda, &ints, shape(128, 128, 7, Max), &Env::new());
    let narrow: Vec<u32> = {
        let mut rng = SplitMix64::new(67);
        (0..n * 256)
            .map(|_| (rng.next_u64() % 300) as u32)
            .collect()
    };
    check_strided(
        &cuda,
        &narrow,
        shape(256, 256, 8, Min),
        &require!(tie_break::PreferLargerIndex),
    );
    // Pairs with 4-byte values (read from the values array, not the index), 128-key rows.
    let keys = keys_for(128, 128, 8, 68);
    let values: Vec<u32> = (0..keys.len() as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let problem = Problem::strided(
        128,
        segment_size::Static::<128>::new(),
        k::Static::<8>::new(),
        direction::Max,
        num_segments::uniform(n as i64).expect("n"),
    );
    let (gpu, host) = f32_pairs_on_both!(
        cuda,
        &problem,
        &keys[..],
        &values[..],
        n * 8,
        0xA5A5_A5A5u32
    );
    assert!(gpu == host, "pairs with 4-byte values differ from the host");
}
