//! Batched top-k on the GPU against the host backend, every tier at once: calls that mix tiny,
//! shared-memory and huge segments (the warp, block, multi-block and stream tiers in one call) with
//! adversarial k, under every requirement combination and for every key type, with all-equal keys,
//! NaN and signed zeros; and uniform strided shapes that take the direct path in each tier. Bit for
//! bit where the contract pins the output, exactly the contract elsewhere; outputs poisoned before
//! each run. Each test skips without a GPU (fails with OXICUB_REQUIRE_GPU=1).

use oxicub_algorithms::Cuda;
use oxicub_env::{determinism, output_ordering, require, tie_break, Env};
use oxicub_params::SelectDirection;
use oxicub_test::batched_topk::{check_on_gpu, check_strided, Case, StridedShape};
use oxicub_test::cases::F32_SPECIALS;
use oxicub_test::oracle::RefKey;
use oxicub_test::{every_key_type, for_every_env, gpu_or_skip, sample_keys, SplitMix64};

#[test]
fn mixed_tiers_every_requirement_combination() {
    let Some(cuda) = gpu_or_skip() else { return };
    let case = Case::mixed(sample_keys::<f32>, 1);
    for_every_env!(check_on_gpu(&cuda, &case));
    let ties = Case::mixed(
        |n, s| {
            let mut rng = SplitMix64::new(s);
            (0..n).map(|_| (rng.next_u64() % 4) as i32).collect()
        },
        2,
    );
    for_every_env!(check_on_gpu(&cuda, &ties));
}

#[test]
fn every_key_type_in_every_tier() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey>(cuda: &Cuda, seed: u64) {
        let case = Case::mixed(sample_keys::<K>, seed);
        check_on_gpu(cuda, &case, &Env::new());
        check_on_gpu(cuda, &case, &require!(tie_break::PreferLargerIndex));
        check_on_gpu(
            cuda,
            &case,
            &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        );
    }
    every_key_type!(each, &cuda, 3);
}

#[test]
fn all_equal_nan_and_signed_zeros() {
    let Some(cuda) = gpu_or_skip() else { return };
    let equal = Case::mixed(|n, _| vec![7u32; n], 15);
    check_on_gpu(&cuda, &equal, &Env::new());
    check_on_gpu(&cuda, &equal, &require!(tie_break::PreferLargerIndex));
    let specials = F32_SPECIALS;
    let special = Case::mixed(
        |n, _| {
            specials
                .iter()
                .copied()
                .cycle()
                .take(n)
                .collect::<Vec<f32>>()
        },
        16,
    );
    for_every_env!(check_on_gpu(&cuda, &special));
}

fn shapes() -> Vec<StridedShape> {
    let s = StridedShape::rows;
    use SelectDirection::{Max, Min};
    vec![
        s(300, 256, 256, 8, Max),          // warp tier, 16-byte loads
        s(301, 256, 256, 16, Min),         // the same, odd count: a half warp idle
        s(77, 128, 128, 3, Max),           // the same, 128 keys, k = 3
        s(200, 64, 64, 6, Min),            // warp tier, 8-byte loads
        s(100, 67, 64, 6, Max),            // warp tier, unaligned rows: scalar loads
        s(50, 256, 200, 32, Max),          // warp tier, partial rows
        s(40, 1000, 1000, 100, Min),       // block tier
        s(3, 40_000, 40_000, 2048, Max),   // several blocks, packed shared-memory sort
        s(4, 9000, 9000, 700, Min),        // several blocks, packed sort with padding
        s(2, 5000, 4999, 3000, Min),       // several blocks, global sort
        s(3, 40_001, 40_000, 100, Max),    // stream tier, unaligned rows: scalar loads
        s(5, 131_072, 131_072, 2048, Min), // stream tier, the sparse-attention row
        s(4, 2049, 2049, 2048, Max),       // stream tier, all but one item
        StridedShape {
            short: 1,
            ..s(10, 256, 256, 8, Max)
        }, // last row past the buffer: reported
    ]
}

#[test]
fn uniform_strided_shapes_take_the_direct_path_in_every_tier() {
    let Some(cuda) = gpu_or_skip() else { return };
    let f32_keys: Vec<f32> = sample_keys(300 * 256, 30);
    let ties: Vec<u32> = {
        // Many zeros (rank 0 for max) and u32::MAX (rank 0 for min): the warp tier's fallback.
        let mut rng = SplitMix64::new(31);
        (0..300 * 256)
            .map(|_| match rng.next_u64() % 4 {
                0 => 0,
                1 => u32::MAX,
                x => x as u32,
            })
            .collect()
    };
    let half_ties: Vec<u32> = ties
        .iter()
        .map(|&x| if x == u32::MAX { 5 } else { x })
        .collect();
    for shape in shapes() {
        let need = shape.n * shape.stride;
        let f: Vec<f32> = f32_keys.iter().copied().cycle().take(need).collect();
        for_every_env!(check_strided(&cuda, &f, shape));
        let t: Vec<u32> = ties.iter().copied().cycle().take(need).collect();
        for_every_env!(check_strided(&cuda, &t, shape));
        let h: Vec<u32> = half_ties.iter().copied().cycle().take(need).collect();
        check_strided(&cuda, &h, shape, &Env::new());
        check_strided(&cuda, &h, shape, &require!(tie_break::PreferLargerIndex));
        fn each<K: RefKey>(cuda: &Cuda, shape: StridedShape, seed: u64) {
            let keys: Vec<K> = sample_keys(shape.n * shape.stride, seed);
            check_strided(cuda, &keys, shape, &Env::new());
            check_strided(cuda, &keys, shape, &require!(tie_break::PreferLargerIndex));
        }
        each::<i8>(&cuda, shape, 32);
        each::<u16>(&cuda, shape, 33);
        each::<i32>(&cuda, shape, 34);
        each::<half::bf16>(&cuda, shape, 35);
        each::<u64>(&cuda, shape, 36);
        each::<f64>(&cuda, shape, 37);
    }
}
