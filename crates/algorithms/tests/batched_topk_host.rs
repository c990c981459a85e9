//! Batched top-k on the host backend against the sequential oracle of `oxicub_test` (the
//! single-problem reference applied to each segment's slice): every requirement combination,
//! every parameter kind, both layouts, keys / pairs / indices. The bad inputs are in
//! `batched_topk_host_errors.rs`.

use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::Host;
use oxicub_env::{require, tie_break, Env, Environment};
use oxicub_params::{direction, k, num_segments, segment_size, SelectDirection};
use oxicub_test::batched_topk::{check_segments, Case};
use oxicub_test::cases::{poison, F32_SPECIALS, POISON_INDEX};
use oxicub_test::for_every_env;
use oxicub_test::oracle::RefKey;
use proptest::prelude::*;

/// Runs the case with offsets, per-segment k and directions (typed, as the host takes them);
/// returns keys, indices and the output stride. Outputs start as poison.
fn run_offsets<K: RefKey, E: Environment>(case: &Case<K>, env: &E) -> (Vec<K>, Vec<u64>, usize) {
    let stride = case.stride();
    let n = case.num_segments();
    let dirs = case.directions();
    let problem = Problem::offsets(
        &case.begin[..],
        &case.end[..],
        segment_size::PerSegment::<(), 0, 100_000>::new(())
            .with_bounds(0, case.max_size())
            .expect("size bounds"),
        k::PerSegment::<_, 0, 100_000>::new(&case.ks[..])
            .with_bounds(0, case.max_k())
            .expect("k bounds"),
        direction::PerSegment::<_>::new(&dirs[..]),
        num_segments::uniform(n as i64).expect("n"),
    );
    let len = n * stride;
    let mut out_keys = vec![poison::<K>(); len];
    let mut out_indices = vec![POISON_INDEX; len];
    batched_topk::select_indices(
        &Host::new(),
        &problem,
        &case.keys[..],
        &mut out_keys[..],
        &mut out_indices[..],
        env,
    )
    .expect("call")
    .check()
    .expect("every segment valid");
    (out_keys, out_indices, stride)
}

/// Runs the case with every segment its own slice (the listed layout).
fn run_listed<K: RefKey, E: Environment>(case: &Case<K>, env: &E) -> (Vec<K>, Vec<u64>) {
    let n = case.num_segments();
    let segments: Vec<&[K]> = (0..n)
        .map(|i| case.segment(i).expect("valid offsets"))
        .collect();
    let dirs = case.directions();
    let problem = Problem::listed(
        segment_size::PerSegment::<(), 0, 100_000>::new(())
            .with_bounds(0, case.max_size())
            .expect("size bounds"),
        k::PerSegment::<_, 0, 100_000>::new(&case.ks[..])
            .with_bounds(0, case.max_k())
            .expect("k bounds"),
        direction::PerSegment::<_>::new(&dirs[..]),
        num_segments::uniform(n as i64).expect("n"),
    );
    let len = n * case.stride();
    let (mut out_keys, mut out_indices) = (vec![poison::<K>(); len], vec![POISON_INDEX; len]);
    batched_topk::select_indices_listed(
        &Host::new(),
        &problem,
        &segments,
        &mut out_keys[..],
        &mut out_indices[..],
        env,
    )
    .expect("call")
    .check()
    .expect("every segment valid");
    (out_keys, out_indices)
}

/// Checks the case with offsets and with every segment its own slice (the same results), each
/// segment against the oracle.
fn check_case<K: RefKey, E: Environment>(case: &Case<K>, env: &E) {
    let (out_keys, out_indices, _) = run_offsets(case, env);
    check_segments(case, env.resolved(), &out_keys, &out_indices);
    let (listed_keys, listed_indices) = run_listed(case, env);
    check_segments(case, env.resolved(), &listed_keys, &listed_indices);
}

// ---- The worked example, in every segment ----

#[test]
fn worked_example_in_every_segment_and_every_environment() {
    let one = [10i32, 8, 8, 8, 6, 5];
    let keys: Vec<i32> = one.iter().copied().cycle().take(4 * 6).collect();
    let dirs = [
        SelectDirection::Max,
        SelectDirection::Min,
        SelectDirection::Max,
        SelectDirection::Min,
    ]
    .map(|d| d as u8);
    let case = Case::contiguous(keys, &[6; 4], &[3, 3, 3, 3], &dirs);
    for_every_env!(check_case(&case));
    // The pinned cells, literally: segment 0 (max) under the default and prefer-larger.
    let (_, at, _) = run_offsets(&case, &Env::new());
    assert_eq!(&at[..3], &[0, 1, 2]);
    let (_, at, _) = run_offsets(&case, &require!(tie_break::PreferLargerIndex));
    assert_eq!(&at[..3], &[0, 2, 3]);
    assert_eq!(
        &at[3..6],
        &[5, 4, 3],
        "min: 5, 6, then the tied 8 with the larger index"
    );
}

// ---- Adversarial segments ----

fn check_adversarial<K: RefKey>(keys: Vec<K>, seed: u64) {
    let case = Case::adversarial(keys, seed);
    for_every_env!(check_case(&case));
}

#[test]
fn every_key_type_with_ties_empty_segments_and_k_above_size() {
    let small = |len: usize, seed: u64| {
        let mut rng = oxicub_test::SplitMix64::new(seed);
        (0..len).map(move |_| rng.next_u64() % 5)
    };
    check_adversarial(small(700, 1).map(|v| v as u8).collect::<Vec<_>>(), 1);
    check_adversarial(small(700, 2).map(|v| v as i16 - 2).collect::<Vec<_>>(), 2);
    check_adversarial(small(700, 3).map(|v| v as u32).collect::<Vec<_>>(), 3);
    check_adversarial(
        small(700, 4)
            .map(|v| (v as i64 - 2) << 50)
            .collect::<Vec<_>>(),
        4,
    );
    check_adversarial(oxicub_test::sample_keys::<f32>(900, 5), 5);
    check_adversarial(oxicub_test::sample_keys::<f64>(900, 6), 6);
    check_adversarial(oxicub_test::sample_keys::<half::f16>(900, 7), 7);
    check_adversarial(oxicub_test::sample_keys::<half::bf16>(900, 8), 8);
    // All equal, NaNs and signed zeros.
    check_adversarial(vec![7u32; 500], 9);
    check_adversarial(
        F32_SPECIALS
            .iter()
            .copied()
            .cycle()
            .take(600)
            .collect::<Vec<f32>>(),
        10,
    );
}

#[test]
fn one_huge_segment_among_tiny_ones() {
    let mut keys: Vec<u32> = oxicub_test::sample_keys(70_000, 11);
    for key in keys.iter_mut().step_by(5) {
        *key = 1 << 31; // a heavy tie around the boundary
    }
    let sizes = [3, 0, 69_990, 7];
    let ks = [2, 4, 2048, 9];
    let dirs = [SelectDirection::Max as u8; 4];
    let case = Case::contiguous(keys, &sizes, &ks, &dirs);
    check_case(&case, &Env::new());
    check_case(&case, &require!(tie_break::PreferLargerIndex));
}

// ---- Every parameter kind ----

#[test]
fn static_uniform_and_per_segment_parameters_agree() {
    let rows = 37usize;
    let cols = 64usize;
    let keys: Vec<f32> = oxicub_test::sample_keys(rows * cols, 12);
    let expected = {
        let ks = vec![6i64; rows];
        let dirs = vec![SelectDirection::Max as u8; rows];
        let case = Case::contiguous(keys.clone(), &vec![cols; rows], &ks, &dirs);
        run_offsets(&case, &Env::new())
    };
    let host = Host::new();
    let run = |problem_out: &mut dyn FnMut(&mut [f32], &mut [u32])| {
        let mut top = vec![0f32; rows * 6];
        let mut at = vec![0u32; rows * 6];
        problem_out(&mut top, &mut at);
        let at: Vec<u64> = at.into_iter().map(u64::from).collect();
        assert_eq!(at, expected.1);
        let bits: Vec<u32> = top.iter().map(|v| v.to_bits()).collect();
        let expected_bits: Vec<u32> = expected.0.iter().map(|v| v.to_bits()).collect();
        assert_eq!(bits, expected_bits);
    };
    let env = Env::new();
    // All static but the count.
    run(&mut |top, at| {
        let p = Problem::strided(
            cols,
            segment_size::Static::<64>::new(),
            k::Static::<6>::new(),
            direction::Max,
            num_segments::uniform(rows as i64).unwrap(),
        );
        batched_topk::select_indices(&host, &p, &keys[..], top, at, &env)
            .unwrap()
            .check()
            .unwrap();
    });
    // Uniform with bounds, a runtime direction choice, static count.
    run(&mut |top, at| {
        let p = Problem::strided(
            cols,
            segment_size::Uniform::<1, 256>::new(64).unwrap(),
            k::Uniform::<1, 8>::new(6).unwrap(),
            direction::Choice::<direction::Either>::new(SelectDirection::Max).unwrap(),
            num_segments::Static::<37>::new(),
        );
        batched_topk::select_indices(&host, &p, &keys[..], top, at, &env)
            .unwrap()
            .check()
            .unwrap();
    });
    // Per-segment everything, a deferred count.
    let sizes = vec![64i64; rows];
    let ks = vec![6i64; rows];
    let dirs = vec![0u8; rows];
    let count = rows as i64;
    run(&mut |top, at| {
        let p = Problem::strided(
            cols,
            segment_size::PerSegment::<_, 1, 64>::new(&sizes[..]),
            k::PerSegment::<_, 1, 8>::new(&ks[..])
                .with_bounds(1, 6)
                .unwrap(),
            direction::PerSegment::<_, direction::Max>::new(&dirs[..]),
            num_segments::Deferred::<_, 0, 64>::new(&count)
                .with_bounds(1, 37)
                .unwrap(),
        );
        batched_topk::select_indices(&host, &p, &keys[..], top, at, &env)
            .unwrap()
            .check()
            .unwrap();
    });
}

#[test]
fn strided_rows_may_be_partly_used_and_pairs_carry_values() {
    // Rows of stride 5 holding 3 keys each (the rest is padding that must be ignored).
    let keys = [1u32, 9, 5, 100, 100, /**/ 4, 4, 8, 100, 100];
    let values: Vec<u64> = (0..10).map(|v| v * 10).collect();
    let p = Problem::strided(
        5,
        segment_size::Uniform::<0, 5>::new(3).unwrap(),
        k::Static::<2>::new(),
        direction::Max,
        num_segments::uniform(2).unwrap(),
    );
    let (mut top, mut v) = ([0u32; 4], [0u64; 4]);
    batched_topk::select_pairs(
        &Host::new(),
        &p,
        &keys[..],
        &values[..],
        &mut top[..],
        &mut v[..],
        &Env::new(),
    )
    .unwrap()
    .check()
    .unwrap();
    assert_eq!(top, [9, 5, 8, 4]);
    assert_eq!(v, [10, 20, 70, 50]);
    // An explicit, larger output stride.
    let p = p.out_stride(3);
    let (mut top, mut v) = ([0u32; 6], [7u64; 6]);
    batched_topk::select_pairs(
        &Host::new(),
        &p,
        &keys[..],
        &values[..],
        &mut top[..],
        &mut v[..],
        &Env::new(),
    )
    .unwrap()
    .check()
    .unwrap();
    assert_eq!(top, [9, 5, 0, 8, 4, 0]);
    assert_eq!(v, [10, 20, 7, 70, 50, 7]);
}

#[test]
fn num_segments_zero_and_empty_inputs_write_nothing() {
    let mut out = [3u8; 2];
    let p = Problem::strided(
        4,
        segment_size::Static::<4>::new(),
        k::Static::<2>::new(),
        direction::Max,
        num_segments::uniform(0).unwrap(),
    );
    batched_topk::select_keys(&Host::new(), &p, &[0u8; 0][..], &mut out[..0], &Env::new())
        .unwrap()
        .check()
        .unwrap();
    assert_eq!(out, [3, 3]);
}

// ---- Proptests against the reference ----

fn segments_strategy() -> impl Strategy<Value = (Vec<i16>, Vec<usize>, Vec<i64>, Vec<bool>)> {
    prop::collection::vec((0usize..40, 0i64..45, any::<bool>()), 0..12).prop_flat_map(|segs| {
        let total: usize = segs.iter().map(|s| s.0).sum();
        let sizes: Vec<usize> = segs.iter().map(|s| s.0).collect();
        let ks: Vec<i64> = segs.iter().map(|s| s.1).collect();
        let dirs: Vec<bool> = segs.iter().map(|s| s.2).collect();
        (
            prop::collection::vec(-4i16..4, total),
            Just(sizes),
            Just(ks),
            Just(dirs),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn random_segments_every_mode((keys, sizes, ks, max) in segments_strategy()) {
        let dirs: Vec<u8> = max.iter().map(|&m| if m { SelectDirection::Max } else { SelectDirection::Min } as u8).collect();
        let case = Case::contiguous(keys, &sizes, &ks, &dirs);
        for_every_env!(check_case(&case));
    }

    #[test]
    fn random_float_segments_pinned((keys, sizes, ks, max) in segments_strategy(), scale in prop_oneof![Just(0.0f32), Just(-0.0f32), Just(f32::NAN), Just(1.5f32)]) {
        let keys: Vec<f32> = keys.iter().map(|&v| if v == 0 { scale } else { f32::from(v) }).collect();
        let dirs: Vec<u8> = max.iter().map(|&m| if m { SelectDirection::Max } else { SelectDirection::Min } as u8).collect();
        let case = Case::contiguous(keys, &sizes, &ks, &dirs);
        check_case(&case, &Env::new());
        check_case(&case, &require!(tie_break::PreferLargerIndex));
    }
}

/// Per-row sizes and `k` held as `i32` give what the same values as `i64` give, on `Host` and
/// on `AnyBackend` (which copies them to the device as they are); a negative `i32` value is
/// reported with its value, not truncated.
#[test]
fn i32_sizes_and_k_equal_their_i64_form() {
    use oxicub_algorithms::AnyBackend;
    let (rows, cols) = (50usize, 40usize);
    let keys: Vec<f32> = oxicub_test::sample_keys(rows * cols, 71);
    let mut rng = oxicub_test::SplitMix64::new(72);
    let sizes: Vec<i64> = (0..rows).map(|_| (rng.next_u64() % 41) as i64).collect();
    let mut ks: Vec<i64> = (0..rows).map(|_| (rng.next_u64() % 9) as i64).collect();
    let narrow = |v: &[i64]| v.iter().map(|&x| x as i32).collect::<Vec<i32>>();
    macro_rules! run {
        ($backend:expr, $sizes:expr, $ks:expr) => {{
            let problem = Problem::strided(
                cols,
                segment_size::PerSegment::<_, 0, 40>::new($sizes),
                k::PerSegment::<_, 0, 8>::new($ks),
                direction::Max,
                num_segments::uniform(rows as i64).expect("n"),
            )
            .fill_past_k(f32::NEG_INFINITY, -1);
            let (mut top, mut at) = (vec![poison::<f32>(); rows * 8], vec![7i32; rows * 8]);
            let result = batched_topk::select_indices(
                $backend,
                &problem,
                &keys[..],
                &mut top[..],
                &mut at[..],
                &Env::new(),
            )
            .expect("front check")
            .check();
            let bits: Vec<u32> = top.iter().map(|v| v.to_bits()).collect();
            (result.map_err(|e| e.to_string()), bits, at)
        }};
    }
    let wide = run!(&Host::new(), &sizes[..], &ks[..]);
    assert!(wide.0.is_ok(), "{:?}", wide.0);
    let (sizes32, ks32) = (narrow(&sizes), narrow(&ks));
    assert!(run!(&Host::new(), &sizes32[..], &ks32[..]) == wide);
    let any = AnyBackend::Host(Host::new());
    assert!(run!(&any, &sizes32[..], &ks32[..]) == wide);
    ks[17] = -3;
    let ks32 = narrow(&ks);
    let (result, ..) = run!(&Host::new(), &sizes32[..], &ks32[..]);
    assert_eq!(
        result,
        Err("segment 17: k = -3 is outside its bounds [0, 8]".to_owned())
    );
    // An i32 buffer shorter than the segments is refused before anything runs.
    let short = [1i32; 3];
    let problem = Problem::strided(
        cols,
        segment_size::PerSegment::<_, 0, 40>::new(&sizes32[..]),
        k::PerSegment::<_, 0, 8>::new(&short[..]),
        direction::Max,
        num_segments::uniform(rows as i64).expect("n"),
    );
    let mut top = vec![0f32; rows * 8];
    match batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut top[..], &Env::new()) {
        Err(oxicub_algorithms::Error::BufferTooSmall {
            arg: "k", len: 3, ..
        }) => {}
        other => panic!("a short i32 k: {other:?}"),
    }
}
