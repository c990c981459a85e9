//! Top-k on the host backend: the seeds' worked example (every cell of its matrix) as literal
//! tests, proptests of every mode against the sequential reference, and the bad inputs.

use half::{bf16, f16};
use oxicub_algorithms::segments::{Outcome, Pending};
use oxicub_algorithms::{topk, Error, Host};
use oxicub_env::{
    determinism, output_ordering, require, tie_break, Env, Environment, OutputOrdering, TieBreak,
};
use oxicub_params::{direction, k, SelectDirection};
use oxicub_test::for_every_env;
use oxicub_test::oracle::{check_top_k, top_k, RefKey};
use proptest::prelude::*;

/// Runs top-k on the host, returning keys and source indices.
fn host_topk<K: RefKey, E: Environment>(
    keys: &[K],
    k: usize,
    dir: SelectDirection,
    env: &E,
) -> Result<(Vec<K>, Vec<u64>), Error> {
    let choice = direction::Choice::<direction::Either>::new(dir)?;
    topk::select_indices_owned(&Host::new(), &choice, keys, &k::uniform(k as i64)?, env)
        .and_then(Pending::check)
}

fn check_host<K: RefKey, E: Environment>(keys: &[K], k: usize, dir: SelectDirection, env: &E) {
    let what = format!(
        "{} n={} k={k} {dir} {:?}",
        K::KEY_TYPE,
        keys.len(),
        env.resolved()
    );
    let (out_keys, out_indices) = host_topk(keys, k, dir, env).expect(&what);
    check_top_k(&what, keys, k, dir, env.resolved(), &out_keys, &out_indices);
}

// ---- The worked example: K = 3 on `10 8 8 8 6 5` ----

const EXAMPLE: [i32; 6] = [10, 8, 8, 8, 6, 5];

fn example<E: Environment>(env: &E) -> Vec<(i32, u64)> {
    let (keys, indices) = host_topk(&EXAMPLE, 3, SelectDirection::Max, env).expect("example");
    keys.into_iter().zip(indices).collect()
}

fn set_of(run: &[(i32, u64)]) -> Vec<u64> {
    let mut set: Vec<u64> = run.iter().map(|&(_, i)| i).collect();
    set.sort_unstable();
    set
}

/// Checks one cell of the matrix: the set (exactly where the row pins it, else a valid one),
/// the order the column asks for, the literal output where both pin it; and that two runs agree
/// on the set where the row is deterministic.
fn example_cell<E: Environment>(
    env: &E,
    pinned_set: Option<[u64; 3]>,
    literal: Option<[(i32, u64); 3]>,
) {
    let r = env.resolved();
    let (run1, run2) = (example(env), example(env));
    for run in [&run1, &run2] {
        let keys: Vec<i32> = run.iter().map(|&(k, _)| k).collect();
        let idx: Vec<u64> = run.iter().map(|&(_, i)| i).collect();
        check_top_k("example", &EXAMPLE, 3, SelectDirection::Max, r, &keys, &idx);
        let set = set_of(run);
        assert!(
            set[0] == 0 && set[1..].iter().all(|i| (1..=3).contains(i)),
            "{r:?}: {run:?}"
        );
        if let Some(expected) = pinned_set {
            assert_eq!(set, expected, "{r:?}");
        }
        if let Some(expected) = literal {
            assert_eq!(run.as_slice(), expected, "{r:?}");
        }
    }
    if r.is_deterministic() {
        assert_eq!(set_of(&run1), set_of(&run2), "{r:?}: run to run");
    }
}

#[test]
fn worked_example_default_contract_is_fully_pinned() {
    assert_eq!(example(&Env::new()), [(10, 0), (8, 1), (8, 2)]);
}

#[test]
fn worked_example_not_guaranteed_row() {
    let ng = determinism::NotGuaranteed;
    example_cell(&require!(ng, output_ordering::Unsorted), None, None);
    example_cell(&require!(ng, output_ordering::Sorted), None, None);
    example_cell(&require!(ng, output_ordering::StableSorted), None, None);
}

#[test]
fn worked_example_deterministic_rows() {
    macro_rules! row {
        ($d:expr) => {{
            let (smaller, larger) = ([0, 1, 2], [0, 2, 3]);
            let u = tie_break::Unspecified;
            example_cell(&require!($d, u, output_ordering::Unsorted), None, None);
            example_cell(&require!($d, u, output_ordering::Sorted), None, None);
            example_cell(&require!($d, u, output_ordering::StableSorted), None, None);
            let s = tie_break::PreferSmallerIndex;
            example_cell(
                &require!($d, s, output_ordering::Unsorted),
                Some(smaller),
                None,
            );
            example_cell(
                &require!($d, s, output_ordering::Sorted),
                Some(smaller),
                None,
            );
            let stable = Some([(10, 0), (8, 1), (8, 2)]);
            example_cell(
                &require!($d, s, output_ordering::StableSorted),
                Some(smaller),
                stable,
            );
            let l = tie_break::PreferLargerIndex;
            example_cell(
                &require!($d, l, output_ordering::Unsorted),
                Some(larger),
                None,
            );
            example_cell(
                &require!($d, l, output_ordering::Sorted),
                Some(larger),
                None,
            );
            let stable = Some([(10, 0), (8, 2), (8, 3)]);
            example_cell(
                &require!($d, l, output_ordering::StableSorted),
                Some(larger),
                stable,
            );
        }};
    }
    row!(determinism::RunToRun);
    row!(determinism::GpuToGpu);
}

#[test]
fn worked_example_in_every_environment_meets_its_contract() {
    for_every_env!(check_host(&EXAMPLE[..], 3, SelectDirection::Max));
    for_every_env!(check_host(&EXAMPLE[..], 3, SelectDirection::Min));
}

// ---- Every key type, adversarial inputs ----

fn check_all_modes<K: RefKey>(keys: &[K]) {
    let n = keys.len();
    for k in [0, 1, 2, n / 2, n.saturating_sub(1), n] {
        if k > n {
            continue;
        }
        for dir in [SelectDirection::Max, SelectDirection::Min] {
            for_every_env!(check_host(keys, k, dir));
        }
    }
}

#[test]
fn every_key_type_with_many_ties() {
    let sample = |len: usize, seed: u64| {
        let mut rng = oxicub_test::SplitMix64::new(seed);
        (0..len).map(move |_| rng.next_u64() % 7)
    };
    check_all_modes(&sample(300, 1).map(|v| v as u8).collect::<Vec<_>>());
    check_all_modes(&sample(300, 2).map(|v| v as u16).collect::<Vec<_>>());
    check_all_modes(&sample(300, 3).map(|v| v as u32).collect::<Vec<_>>());
    check_all_modes(&sample(300, 4).map(|v| v << 60).collect::<Vec<u64>>());
    check_all_modes(&sample(300, 5).map(|v| v as i8 - 3).collect::<Vec<_>>());
    check_all_modes(&sample(300, 6).map(|v| v as i16 - 3).collect::<Vec<_>>());
    check_all_modes(&sample(300, 7).map(|v| v as i32 - 3).collect::<Vec<_>>());
    check_all_modes(
        &sample(300, 8)
            .map(|v| (v as i64 - 3) << 40)
            .collect::<Vec<_>>(),
    );
}

fn special_floats() -> Vec<f64> {
    vec![
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1.0,
        -1.0,
        1.0,
        0.0,
        -0.0,
        f64::NAN,
        2.5,
    ]
}

#[test]
fn every_float_type_with_nan_signed_zeros_and_infinities() {
    let base = special_floats();
    check_all_modes(&base);
    check_all_modes(&base.iter().map(|&v| v as f32).collect::<Vec<_>>());
    check_all_modes(&base.iter().map(|&v| f16::from_f64(v)).collect::<Vec<_>>());
    check_all_modes(&base.iter().map(|&v| bf16::from_f64(v)).collect::<Vec<_>>());
    for keys in [
        oxicub_test::sample_keys::<f32>(1000, 9),
        oxicub_test::sample_keys::<f32>(777, 10),
    ] {
        check_all_modes(&keys);
    }
    check_all_modes(&oxicub_test::sample_keys::<f64>(1000, 11));
    check_all_modes(&oxicub_test::sample_keys::<f16>(1000, 12));
    check_all_modes(&oxicub_test::sample_keys::<bf16>(1000, 13));
}

#[test]
fn nan_ranks_above_infinity_and_keeps_its_bits() {
    let payload = f32::from_bits(0x7FC0_1234);
    let keys = [1.0f32, f32::INFINITY, payload, -0.0, 0.0];
    let (top, at) = host_topk(&keys, 2, SelectDirection::Max, &Env::new()).expect("max");
    assert_eq!(at, [2, 1]);
    assert_eq!(
        top[0].to_bits(),
        0x7FC0_1234,
        "the input key is written, payload kept"
    );
    let (low, at) = host_topk(&keys, 4, SelectDirection::Min, &Env::new()).expect("min");
    assert_eq!(at, [3, 4, 0, 1], "-0.0 below +0.0, NaN last");
    assert_eq!(
        (low[0].to_bits(), low[1].to_bits()),
        ((-0.0f32).to_bits(), 0)
    );
}

#[test]
fn all_equal_keys_follow_the_tie_break() {
    let keys = vec![5u32; 1000];
    let (_, at) = host_topk(&keys, 10, SelectDirection::Max, &Env::new()).expect("smaller");
    assert_eq!(at, (0..10).collect::<Vec<u64>>());
    let env = require!(tie_break::PreferLargerIndex);
    let (_, at) = host_topk(&keys, 10, SelectDirection::Min, &env).expect("larger");
    assert_eq!(at, (990..1000).collect::<Vec<u64>>());
}

#[test]
fn large_input_with_a_tie_at_the_boundary() {
    let n = 200_003usize;
    let mut keys: Vec<u32> = oxicub_test::sample_keys::<u32>(n, 21);
    for key in keys.iter_mut().step_by(3) {
        *key = 0x8000_0000; // a third of the keys tie near the median
    }
    for k in [1, 1000, n / 2, n - 1] {
        check_host(&keys, k, SelectDirection::Max, &Env::new());
        check_host(
            &keys,
            k,
            SelectDirection::Min,
            &require!(tie_break::PreferLargerIndex),
        );
        check_host(
            &keys,
            k,
            SelectDirection::Max,
            &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        );
    }
}

// ---- Entry points: pairs, buffers, deferred k, returned buffers ----

#[test]
fn pairs_carry_each_value_with_its_key() {
    let keys = [3i16, 9, -1, 9, 4];
    let values = [30.0f64, 90.0, -10.0, 91.0, 40.0];
    let (mut top, mut v) = ([0i16; 3], [0f64; 3]);
    topk::max_pairs(
        &Host::new(),
        &keys[..],
        &values[..],
        &mut top[..],
        &mut v[..],
        &k::Static::<3>::new(),
        &Env::new(),
    )
    .and_then(Outcome::check)
    .expect("pairs");
    assert_eq!((top, v), ([9, 9, 4], [90.0, 91.0, 40.0]));
    let (low, lv) = topk::select_pairs_owned(
        &Host::new(),
        &direction::Min,
        &keys[..],
        &values[..],
        &k::Static::<2>::new(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("owned");
    assert_eq!((low, lv), (vec![-1, 3], vec![-10.0, 30.0]));
    // Eight-byte values of a user type.
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(C)]
    struct Token(u32, u32);
    // SAFETY: two `u32`s in a `#[repr(C)]` struct of 8 bytes: no padding, and every bit pattern
    // is a value.
    unsafe impl oxicub_algorithms::DeviceValue for Token {}
    let tokens: Vec<Token> = (0..5).map(|i| Token(i, i * 10)).collect();
    let (mut top, mut t) = ([0i16; 1], [Token(0, 0); 1]);
    topk::min_pairs(
        &Host::new(),
        &keys[..],
        &tokens[..],
        &mut top[..],
        &mut t[..],
        &k::Static::<1>::new(),
        &Env::new(),
    )
    .and_then(Outcome::check)
    .expect("user values");
    assert_eq!(t, [Token(2, 20)]);
}

#[test]
fn longer_outputs_keep_their_tail_and_sizes_are_checked() {
    let keys = [1u8, 7, 3];
    let mut out = [0xEEu8; 5];
    topk::max_keys(
        &Host::new(),
        &keys[..],
        &mut out[..],
        &k::Static::<2>::new(),
        &Env::new(),
    )
    .and_then(Outcome::check)
    .expect("longer");
    assert_eq!(out, [7, 3, 0xEE, 0xEE, 0xEE]);

    let err = topk::max_keys(
        &Host::new(),
        &keys[..],
        &mut out[..1],
        &k::Static::<2>::new(),
        &Env::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                arg: "out_keys",
                len: 1,
                required: 2,
                ..
            }
        ),
        "{err}"
    );
    let mut idx = [0u32; 1];
    let err = topk::max_indices(
        &Host::new(),
        &keys[..],
        &mut out[..],
        &mut idx[..],
        &k::Static::<2>::new(),
        &Env::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                arg: "out_indices",
                ..
            }
        ),
        "{err}"
    );
    let err = topk::max_pairs(
        &Host::new(),
        &keys[..],
        &[1u32, 2][..],
        &mut out[..],
        &mut [0u32; 3][..],
        &k::Static::<2>::new(),
        &Env::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::LengthMismatch {
                arg: "values",
                actual: 2,
                expected: 3,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn k_above_num_items_is_an_error_naming_k() {
    let keys = [1u32, 2, 3];
    let err = topk::max_keys(
        &Host::new(),
        &keys[..],
        &mut [0u32; 4][..],
        &k::Static::<4>::new(),
        &Env::new(),
    )
    .unwrap_err();
    assert!(matches!(&err, Error::Param(e) if e.param() == "k"), "{err}");
    assert_eq!(
        err.to_string(),
        "k = 4 is outside its runtime bounds [0, 3]"
    );
    let err = topk::min_keys(
        &Host::new(),
        &[0u32; 0][..],
        &mut [0u32; 1][..],
        &k::uniform(1).unwrap(),
        &Env::new(),
    )
    .unwrap_err();
    assert!(matches!(&err, Error::Param(e) if e.param() == "k"), "{err}");
}

#[test]
fn k_zero_and_empty_input_write_nothing() {
    let mut out = [9u64; 2];
    topk::max_keys(
        &Host::new(),
        &[1u64, 2][..],
        &mut out[..],
        &k::Static::<0>::new(),
        &Env::new(),
    )
    .and_then(Outcome::check)
    .expect("k = 0");
    assert_eq!(out, [9, 9]);
    topk::max_keys(
        &Host::new(),
        &[0u64; 0][..],
        &mut out[..0],
        &k::Static::<0>::new(),
        &Env::new(),
    )
    .and_then(Outcome::check)
    .expect("n = 0");
    let top = topk::select_keys_owned(
        &Host::new(),
        &direction::Max,
        &[0u64; 0][..],
        &k::uniform(0).unwrap(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("owned n = 0");
    assert!(top.is_empty());
    // k = n: everything, sorted.
    let all = topk::select_keys_owned(
        &Host::new(),
        &direction::Min,
        &[3i8, -1, 2][..],
        &k::Static::<3>::new(),
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("k = n");
    assert_eq!(all, [-1, 2, 3]);
}

#[test]
fn deferred_k_is_clamped_into_its_bounds_and_num_items() {
    use oxicub_params::{BoundOrigin, Bounds, ParamError};
    let keys = [5u32, 1, 4, 2];
    // (k, written, the bounds broken and their origin): the check reports a k outside its
    // bounds; the call has selected with k clamped into them (and to the number of keys).
    let runtime = (Bounds::new(1, 3), BoundOrigin::Runtime);
    let type_bounds = (Bounds::new(0, 8), BoundOrigin::Static);
    let cases = [
        (2i64, 2usize, None),
        (0, 1, Some(runtime)),
        (7, 3, Some(runtime)),
        (-3, 1, Some(type_bounds)),
        (100, 3, Some(type_bounds)),
    ];
    for (value, written, report) in cases {
        let k = k::Deferred::<_, 0, 8>::new(&value)
            .with_bounds(1, 3)
            .expect("bounds");
        let mut out = [0u32; 4];
        let outcome = topk::max_keys(&Host::new(), &keys[..], &mut out[..], &k, &Env::new())
            .expect("the front check passes");
        match (outcome.check(), report) {
            (Ok(()), None) => {}
            (Err(Error::Param(e)), Some((bounds, origin))) => assert_eq!(
                e,
                ParamError::OutOfBounds {
                    param: "k",
                    value,
                    bounds,
                    origin
                },
                "k = {value}"
            ),
            (result, _) => panic!("k = {value}: {result:?}"),
        }
        assert_eq!(&out[..written], &[5, 4, 2][..written], "k = {value}");
        assert!(
            out[written..].iter().all(|&v| v == 0),
            "k = {value}: tail untouched"
        );
    }
    // The outputs must hold min(bounds.max, n).
    let value = 1i64;
    let k = k::Deferred::<_, 0, 8>::new(&value)
        .with_bounds(0, 3)
        .expect("bounds");
    let err =
        topk::max_keys(&Host::new(), &keys[..], &mut [0u32; 2][..], &k, &Env::new()).unwrap_err();
    assert!(
        matches!(err, Error::BufferTooSmall { required: 3, .. }),
        "{err}"
    );
}

#[test]
fn a_per_segment_direction_is_rejected() {
    let dirs = [SelectDirection::Max];
    let per_segment = direction::PerSegment::<_>::new(&dirs[..]);
    let err = topk::select_keys(
        &Host::new(),
        &per_segment,
        &[1u8][..],
        &mut [0u8][..],
        &k::Static::<1>::new(),
        &Env::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                arg: "direction",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn guarantees_bound_k() {
    use oxicub_params::guarantee::MaxK;
    let env = Env::new().guarantee(MaxK::<2>::new());
    let err = topk::max_keys(
        &Host::new(),
        &[1u8, 2, 3][..],
        &mut [0u8; 3][..],
        &k::uniform(3).unwrap(),
        &env,
    )
    .unwrap_err();
    assert!(matches!(&err, Error::Param(e) if e.param() == "k"), "{err}");
}

// ---- Proptests against the reference ----

fn check_pinned_against_reference<K: RefKey>(
    keys: &[K],
    k: usize,
    dir: SelectDirection,
    tie: TieBreak,
) {
    let expected = top_k(keys, k, dir, tie);
    let got = match tie {
        TieBreak::PreferLargerIndex => {
            host_topk(keys, k, dir, &require!(tie_break::PreferLargerIndex))
        }
        _ => host_topk(keys, k, dir, &Env::new()),
    }
    .expect("pinned");
    let got: Vec<usize> = got.1.iter().map(|&i| i as usize).collect();
    assert_eq!(got, expected);
}

fn float_key() -> impl Strategy<Value = f32> {
    prop_oneof![
        (-4i32..4).prop_map(|v| v as f32 * 0.5),
        Just(f32::NAN),
        Just(-f32::NAN),
        Just(-0.0f32),
        Just(f32::INFINITY),
        Just(f32::NEG_INFINITY),
        any::<f32>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn small_ints_every_mode(keys in prop::collection::vec(-5i16..5, 0..200), k_frac in 0.0f64..=1.0, max in any::<bool>()) {
        let k = (keys.len() as f64 * k_frac) as usize;
        let dir = if max { SelectDirection::Max } else { SelectDirection::Min };
        for_every_env!(check_host(&keys[..], k, dir));
        check_pinned_against_reference(&keys, k, dir, TieBreak::PreferSmallerIndex);
        check_pinned_against_reference(&keys, k, dir, TieBreak::PreferLargerIndex);
    }

    #[test]
    fn floats_every_mode(keys in prop::collection::vec(float_key(), 0..200), k_frac in 0.0f64..=1.0, max in any::<bool>()) {
        let k = (keys.len() as f64 * k_frac) as usize;
        let dir = if max { SelectDirection::Max } else { SelectDirection::Min };
        for_every_env!(check_host(&keys[..], k, dir));
        check_pinned_against_reference(&keys, k, dir, TieBreak::PreferSmallerIndex);
        check_pinned_against_reference(&keys, k, dir, TieBreak::PreferLargerIndex);
    }

    #[test]
    fn wide_ints_pinned(keys in prop::collection::vec(any::<u64>(), 0..300), k_frac in 0.0f64..=1.0, max in any::<bool>()) {
        let k = (keys.len() as f64 * k_frac) as usize;
        let dir = if max { SelectDirection::Max } else { SelectDirection::Min };
        check_pinned_against_reference(&keys, k, dir, TieBreak::PreferSmallerIndex);
        let _ = OutputOrdering::StableSorted;
    }
}

/// A `MaxNumItems` guarantee in the environment bounds the number of keys a call may take.
#[test]
fn more_keys_than_the_num_items_guarantee_is_an_error_naming_num_items() {
    use oxicub_params::guarantee::MaxNumItems;
    let env = Env::new().guarantee(MaxNumItems::<4>::new());
    let mut top = [0u32; 1];
    let err = topk::max_keys(
        &Host::new(),
        &[1u32, 2, 3, 4, 5][..],
        &mut top[..],
        &k::Static::<1>::new(),
        &env,
    )
    .unwrap_err();
    assert!(
        matches!(err, Error::Param(ref e) if e.param() == "num_items"),
        "{err:?}"
    );
    topk::max_keys(
        &Host::new(),
        &[1u32, 2, 3, 4][..],
        &mut top[..],
        &k::Static::<1>::new(),
        &env,
    )
    .and_then(Outcome::check)
    .expect("four keys are within the guarantee");
}
