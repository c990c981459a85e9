//! Batched top-k on the host backend against a plain sequential per-segment reference (the
//! single-problem reference of `topk_support`, applied to each segment's slice): every
//! requirement combination, every parameter kind, both layouts, keys / pairs / indices, and
//! the bad inputs.

mod topk_support;

use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::{Error, Host};
use oxicub_env::{require, tie_break, Env, Environment};
use oxicub_params::{direction, k, num_segments, segment_size, SelectDirection};
use proptest::prelude::*;
use topk_support::{check_contract, reference, RefKey};

const POISON_INDEX: u64 = 0xDEAD_BEEF;

/// One test case: segments given by offsets into `keys`, a k and a direction per segment.
#[derive(Clone, Debug)]
struct Case<K> {
    keys: Vec<K>,
    begin: Vec<i64>,
    end: Vec<i64>,
    ks: Vec<i64>,
    dirs: Vec<SelectDirection>,
}

impl<K: RefKey> Case<K> {
    fn max_size(&self) -> i64 {
        (0..self.ks.len())
            .map(|i| self.end[i] - self.begin[i])
            .max()
            .unwrap_or(0)
    }

    fn max_k(&self) -> i64 {
        self.ks.iter().copied().max().unwrap_or(0)
    }

    /// The default output stride: the most one segment can write under the runtime bounds
    /// the tests declare (exactly the largest size and the largest k).
    fn out_stride(&self) -> usize {
        self.max_size().min(self.max_k()) as usize
    }

    /// Checks the outputs of every segment against the contract (and the reference where the
    /// requirements pin the output), and the slots past each segment's results.
    fn check<E: Environment>(&self, env: &E, out_keys: &[K], out_indices: &[u64], stride: usize) {
        let r = env.resolved();
        for i in 0..self.ks.len() {
            let seg = &self.keys[self.begin[i] as usize..self.end[i] as usize];
            let written = (self.ks[i] as usize).min(seg.len());
            let what = format!(
                "segment {i} of {} (size {}, k {}, {}) {r:?}",
                self.ks.len(),
                seg.len(),
                self.ks[i],
                self.dirs[i]
            );
            let base = i * stride;
            check_contract(
                &what,
                seg,
                written,
                self.dirs[i],
                r,
                &out_keys[base..base + written],
                &out_indices[base..base + written],
            );
            if r.pins_output() {
                let expected = reference(seg, written, self.dirs[i], r.tie_break);
                let got: Vec<usize> = out_indices[base..base + written]
                    .iter()
                    .map(|&x| x as usize)
                    .collect();
                assert_eq!(got, expected, "{what}");
            }
            let end = if i + 1 < self.ks.len() {
                base + stride
            } else {
                out_indices.len()
            };
            assert!(
                out_indices[base + written..end]
                    .iter()
                    .all(|&x| x == POISON_INDEX),
                "{what}: a slot past the results was written"
            );
        }
    }
}

/// Runs the case with offsets, per-segment k and directions; returns keys and indices.
fn run_offsets<K: RefKey, E: Environment>(case: &Case<K>, env: &E) -> (Vec<K>, Vec<u64>, usize) {
    let stride = case.out_stride();
    let n = case.ks.len();
    let problem = Problem::offsets(
        &case.begin[..],
        &case.end[..],
        segment_size::PerSegment::<(), 0, 100_000>::new(())
            .with_bounds(0, case.max_size())
            .expect("size bounds"),
        k::PerSegment::<_, 0, 100_000>::new(&case.ks[..])
            .with_bounds(0, case.max_k())
            .expect("k bounds"),
        direction::PerSegment::<_>::new(&case.dirs[..]),
        num_segments::uniform(n as i64).expect("n"),
    );
    let len = n * stride;
    let mut out_keys = vec![
        case.keys
            .first()
            .copied()
            .unwrap_or(K::from_bits(Default::default()));
        len
    ];
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
    let n = case.ks.len();
    let segments: Vec<&[K]> = (0..n)
        .map(|i| &case.keys[case.begin[i] as usize..case.end[i] as usize])
        .collect();
    let problem = Problem::listed(
        segment_size::PerSegment::<(), 0, 100_000>::new(())
            .with_bounds(0, case.max_size())
            .expect("size bounds"),
        k::PerSegment::<_, 0, 100_000>::new(&case.ks[..])
            .with_bounds(0, case.max_k())
            .expect("k bounds"),
        direction::PerSegment::<_>::new(&case.dirs[..]),
        num_segments::uniform(n as i64).expect("n"),
    );
    let len = n * case.out_stride();
    let fill = case
        .keys
        .first()
        .copied()
        .unwrap_or(K::from_bits(Default::default()));
    let (mut out_keys, mut out_indices) = (vec![fill; len], vec![POISON_INDEX; len]);
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

/// Checks the case with offsets and with every segment its own slice (the same results).
fn check_case<K: RefKey, E: Environment>(case: &Case<K>, env: &E) {
    let (out_keys, out_indices, stride) = run_offsets(case, env);
    case.check(env, &out_keys, &out_indices, stride);
    let (listed_keys, listed_indices) = run_listed(case, env);
    case.check(env, &listed_keys, &listed_indices, stride);
}

#[test]
fn listed_values_must_match_their_segments() {
    let (a, b) = ([1u32, 2, 3], [4u32, 5]);
    let problem = Problem::listed(
        segment_size::PerSegment::<(), 0, 8>::new(()),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(2).expect("n"),
    );
    let (mut top, mut vals) = ([0u32; 2], [0u64; 2]);
    let short = [7u64, 8];
    let err = batched_topk::select_pairs_listed(
        &Host::new(),
        &problem,
        &[&a[..], &b[..]],
        &[&short[..], &short[..]],
        &mut top[..],
        &mut vals[..],
        &Env::new(),
    )
    .expect_err("values[0] is shorter than segments[0]");
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
    let err = batched_topk::select_pairs_listed(
        &Host::new(),
        &problem,
        &[&a[..], &b[..]],
        &[&short[..]],
        &mut top[..],
        &mut vals[..],
        &Env::new(),
    )
    .expect_err("one value list for two segments");
    assert!(
        matches!(
            err,
            Error::LengthMismatch {
                arg: "values",
                actual: 1,
                expected: 2,
                ..
            }
        ),
        "{err}"
    );
    let err = batched_topk::select_keys_listed(
        &Host::new(),
        &problem,
        &[&a[..]],
        &mut top[..],
        &Env::new(),
    )
    .expect_err("one slice for two segments");
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                arg: "segments",
                len: 1,
                required: 2,
                ..
            }
        ),
        "{err}"
    );
    let sized = Problem::listed(
        segment_size::PerSegment::<_, 0, 8>::new(&[3i64, 2][..]),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(2).expect("n"),
    );
    let err = batched_topk::select_keys_listed(
        &Host::new(),
        &sized,
        &[&a[..], &b[..]],
        &mut top[..],
        &Env::new(),
    );
    assert!(
        matches!(
            err,
            Err(Error::InvalidArgument {
                arg: "segment_sizes",
                ..
            })
        ),
        "{err:?}"
    );
}

/// A case of `sizes.len()` contiguous segments.
fn case_from<K: RefKey>(
    keys: Vec<K>,
    sizes: &[usize],
    ks: &[i64],
    dirs: &[SelectDirection],
) -> Case<K> {
    let mut begin = Vec::new();
    let mut end = Vec::new();
    let mut at = 0i64;
    for &s in sizes {
        begin.push(at);
        at += s as i64;
        end.push(at);
    }
    assert_eq!(at as usize, keys.len());
    Case {
        keys,
        begin,
        end,
        ks: ks.to_vec(),
        dirs: dirs.to_vec(),
    }
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
    ];
    let case = case_from(keys, &[6; 4], &[3, 3, 3, 3], &dirs);
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

fn adversarial<K: RefKey>(keys: Vec<K>, seed: u64) {
    let mut rng = oxicub_test::SplitMix64::new(seed);
    let mut sizes = Vec::new();
    let mut left = keys.len();
    while left > 0 {
        let s = match rng.next_u64() % 6 {
            0 => 0,
            1 => 1,
            2 => left.min(300),
            _ => (rng.next_u64() as usize % 40).min(left),
        };
        sizes.push(s);
        left -= s;
    }
    sizes.push(0); // an empty segment at the end
    let ks: Vec<i64> = sizes
        .iter()
        .map(|&s| match rng.next_u64() % 5 {
            0 => 0,
            1 => s as i64,
            2 => s as i64 + 3, // k > size: clamped
            _ => (rng.next_u64() % 9) as i64,
        })
        .collect();
    let dirs: Vec<SelectDirection> = sizes
        .iter()
        .map(|_| {
            if rng.next_u64() % 2 == 0 {
                SelectDirection::Max
            } else {
                SelectDirection::Min
            }
        })
        .collect();
    let case = case_from(keys, &sizes, &ks, &dirs);
    for_every_env!(check_case(&case));
}

#[test]
fn every_key_type_with_ties_empty_segments_and_k_above_size() {
    let small = |len: usize, seed: u64| {
        let mut rng = oxicub_test::SplitMix64::new(seed);
        (0..len).map(move |_| rng.next_u64() % 5)
    };
    adversarial(small(700, 1).map(|v| v as u8).collect::<Vec<_>>(), 1);
    adversarial(small(700, 2).map(|v| v as i16 - 2).collect::<Vec<_>>(), 2);
    adversarial(small(700, 3).map(|v| v as u32).collect::<Vec<_>>(), 3);
    adversarial(
        small(700, 4)
            .map(|v| (v as i64 - 2) << 50)
            .collect::<Vec<_>>(),
        4,
    );
    adversarial(oxicub_test::sample_keys::<f32>(900, 5), 5);
    adversarial(oxicub_test::sample_keys::<f64>(900, 6), 6);
    adversarial(oxicub_test::sample_keys::<half::f16>(900, 7), 7);
    adversarial(oxicub_test::sample_keys::<half::bf16>(900, 8), 8);
    // All equal, NaNs and signed zeros.
    adversarial(vec![7u32; 500], 9);
    let specials = [f32::NAN, -0.0, 0.0, f32::INFINITY, -f32::NAN, 1.0, -0.0];
    adversarial(
        specials
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
    let dirs = [SelectDirection::Max; 4];
    let case = case_from(keys, &sizes, &ks, &dirs);
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
        let dirs = vec![SelectDirection::Max; rows];
        let case = case_from(keys.clone(), &vec![cols; rows], &ks, &dirs);
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

// ---- Bad input ----

fn invalid_segment(err: Error) -> (u64, &'static str, i64) {
    match err {
        Error::InvalidSegment {
            segment,
            arg,
            value,
            ..
        } => (segment, arg, value),
        other => panic!("expected InvalidSegment, got {other}"),
    }
}

#[test]
fn per_segment_values_outside_their_bounds_are_reported_and_skipped() {
    let keys = [5u32, 1, 3, /**/ 2, 9, 4, /**/ 7, 7, 1];
    let ks = [2i64, 9, 1]; // 9 is outside k's bounds [0, 3]
    let p = Problem::strided(
        3,
        segment_size::Static::<3>::new(),
        k::PerSegment::<_, 0, 3>::new(&ks[..]),
        direction::Max,
        num_segments::uniform(3).unwrap(),
    );
    let mut out = [0u32; 9];
    let outcome =
        batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new()).unwrap();
    let err = outcome.check().unwrap_err();
    assert_eq!(
        err.to_string(),
        "segment 1: k = 9 is outside its bounds [0, 3]"
    );
    // The valid segments were processed; the invalid one wrote nothing.
    assert_eq!(out, [5, 3, 0, 0, 0, 0, 7, 0, 0]);

    // Runtime bounds narrower than static ones are enforced too; the smallest index wins.
    let sizes = [3i64, 2, 4];
    let p = Problem::strided(
        3,
        segment_size::PerSegment::<_, 0, 8>::new(&sizes[..])
            .with_bounds(1, 3)
            .unwrap(),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(3).unwrap(),
    );
    let mut out = [0u32; 3];
    let err = batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new())
        .unwrap()
        .check()
        .unwrap_err();
    assert_eq!(invalid_segment(err), (2, "segment_sizes", 4));
    assert_eq!(out, [5, 9, 0]);
}

#[test]
fn a_size_above_the_stride_or_past_the_buffer_is_reported() {
    let keys = [1u8; 8];
    let sizes = [2i64, 5, 2];
    let p = Problem::strided(
        3,
        segment_size::PerSegment::<_, 0, 8>::new(&sizes[..]),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(3).unwrap(),
    );
    let mut out = [0u8; 3];
    let err = batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new())
        .unwrap()
        .check()
        .unwrap_err();
    assert_eq!(invalid_segment(err), (1, "segment_sizes", 5));
    let sizes = [2i64, 2, 3]; // segment 2 ends at 9 > 8
    let p = Problem::strided(
        3,
        segment_size::PerSegment::<_, 0, 8>::new(&sizes[..]),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(3).unwrap(),
    );
    let err = batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new())
        .unwrap()
        .check()
        .unwrap_err();
    assert_eq!(invalid_segment(err), (2, "offsets", 9));
    // A host-known size above the stride, or keys too short for it, fail before the call.
    let p = Problem::strided(
        3,
        segment_size::Static::<4>::new(),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(2).unwrap(),
    );
    let err = batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new())
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                arg: "segment_sizes",
                ..
            }
        ),
        "{err}"
    );
    let p = Problem::strided(
        3,
        segment_size::Static::<3>::new(),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(3).unwrap(),
    );
    let err = batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new())
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                arg: "keys",
                required: 9,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn offsets_out_of_order_or_past_the_buffer_are_reported() {
    let keys = [1i64, 2, 3, 4];
    let bounds_only = segment_size::PerSegment::<(), 0, 4>::new(());
    let check = |begin: &[i64], end: &[i64], expected: (u64, &str, i64)| {
        let p = Problem::offsets(
            begin,
            end,
            bounds_only,
            k::Static::<1>::new(),
            direction::Min,
            num_segments::uniform(2).unwrap(),
        );
        let mut out = [0i64; 2];
        let err = batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new())
            .unwrap()
            .check()
            .unwrap_err();
        assert_eq!(invalid_segment(err), expected);
    };
    check(&[0, 3], &[2, 2], (1, "offsets", 3));
    check(&[-1, 0], &[2, 2], (0, "offsets", -1));
    check(&[0, 2], &[2, 5], (1, "offsets", 5));
    // A size outside the bounds-only parameter's bounds.
    let p = Problem::offsets(
        &[0i64, 0][..],
        &[1i64, 4][..],
        segment_size::PerSegment::<(), 0, 3>::new(()),
        k::Static::<1>::new(),
        direction::Min,
        num_segments::uniform(2).unwrap(),
    );
    let err =
        batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut [0i64; 2][..], &Env::new())
            .unwrap()
            .check()
            .unwrap_err();
    assert_eq!(invalid_segment(err), (1, "segment_sizes", 4));
    // Overlapping segments are fine: each is read independently.
    let p = Problem::offsets(
        &[0i64, 1][..],
        &[3i64, 4][..],
        bounds_only,
        k::Static::<1>::new(),
        direction::Min,
        num_segments::uniform(2).unwrap(),
    );
    let mut out = [0i64; 2];
    batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new())
        .unwrap()
        .check()
        .unwrap();
    assert_eq!(out, [1, 2]);
}

#[test]
fn a_direction_outside_the_compiled_options_is_reported() {
    let keys = [1u16, 2, 3, 4];
    let dirs = [0u8, 2];
    let p = Problem::strided(
        2,
        segment_size::Static::<2>::new(),
        k::Static::<1>::new(),
        direction::PerSegment::<_>::new(&dirs[..]),
        num_segments::uniform(2).unwrap(),
    );
    let mut out = [0u16; 2];
    let err = batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new())
        .unwrap()
        .check()
        .unwrap_err();
    assert_eq!(invalid_segment(err), (1, "direction", 2));
    assert_eq!(out, [2, 0]);
    // Min is valid, but not in a Max-only set.
    let dirs = [0u8, 1];
    let p = Problem::strided(
        2,
        segment_size::Static::<2>::new(),
        k::Static::<1>::new(),
        direction::PerSegment::<_, direction::Max>::new(&dirs[..]),
        num_segments::uniform(2).unwrap(),
    );
    let err = batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new())
        .unwrap()
        .check()
        .unwrap_err();
    assert_eq!(invalid_segment(err), (1, "direction", 1));
}

#[test]
fn a_deferred_num_segments_outside_its_bounds_is_clamped_and_reported() {
    let keys = [1u32, 2, 3, 4, 5, 6];
    let count = 7i64;
    let p = Problem::strided(
        2,
        segment_size::Static::<2>::new(),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::Deferred::<_, 0, 3>::new(&count),
    );
    let mut out = [0u32; 3];
    let err = batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new())
        .unwrap()
        .check()
        .unwrap_err();
    assert!(
        matches!(&err, Error::Param(e) if e.param() == "num_segments"),
        "{err}"
    );
    assert_eq!(out, [2, 4, 6], "clamped to its upper bound 3");
    let count = 2i64;
    let p = Problem::strided(
        2,
        segment_size::Static::<2>::new(),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::Deferred::<_, 0, 3>::new(&count),
    );
    let mut out = [0u32; 3];
    batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut out[..], &Env::new())
        .unwrap()
        .check()
        .unwrap();
    assert_eq!(out, [2, 4, 0]);
}

#[test]
fn buffers_and_layout_arguments_are_checked_before_the_call() {
    let keys = [1u32; 8];
    let p = Problem::strided(
        4,
        segment_size::Static::<4>::new(),
        k::Static::<3>::new(),
        direction::Max,
        num_segments::uniform(2).unwrap(),
    );
    let err =
        batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut [0u32; 5][..], &Env::new())
            .unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                arg: "out_keys",
                len: 5,
                required: 6,
                ..
            }
        ),
        "{err}"
    );
    let err = batched_topk::select_keys(
        &Host::new(),
        &p.out_stride(2),
        &keys[..],
        &mut [0u32; 8][..],
        &Env::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                arg: "out_stride",
                ..
            }
        ),
        "{err}"
    );
    let ks = [1i64];
    let p = Problem::strided(
        4,
        segment_size::Static::<4>::new(),
        k::PerSegment::<_, 0, 4>::new(&ks[..]),
        direction::Max,
        num_segments::uniform(2).unwrap(),
    );
    let err =
        batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut [0u32; 8][..], &Env::new())
            .unwrap_err();
    assert!(
        matches!(err, Error::BufferTooSmall { arg: "k", .. }),
        "{err}"
    );
    // A strided layout needs sizes; offsets take only bounds.
    let p = Problem::strided(
        4,
        segment_size::PerSegment::<(), 0, 4>::new(()),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(2).unwrap(),
    );
    let err =
        batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut [0u32; 2][..], &Env::new())
            .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                arg: "segment_sizes",
                ..
            }
        ),
        "{err}"
    );
    let sizes = [4i64, 4];
    let p = Problem::offsets(
        &[0i64, 4][..],
        &[4i64, 8][..],
        segment_size::PerSegment::<_, 0, 4>::new(&sizes[..]),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(2).unwrap(),
    );
    let err =
        batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut [0u32; 2][..], &Env::new())
            .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                arg: "segment_sizes",
                ..
            }
        ),
        "{err}"
    );
    // A guarantee of the environment bounds the count.
    let env = Env::new().guarantee(oxicub_params::guarantee::MaxNumSegments::<1>::new());
    let p = Problem::strided(
        4,
        segment_size::Static::<4>::new(),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(2).unwrap(),
    );
    let err = batched_topk::select_keys(&Host::new(), &p, &keys[..], &mut [0u32; 2][..], &env)
        .unwrap_err();
    assert!(
        matches!(&err, Error::Param(e) if e.param() == "num_segments"),
        "{err}"
    );
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
        let dirs: Vec<SelectDirection> = max.iter().map(|&m| if m { SelectDirection::Max } else { SelectDirection::Min }).collect();
        let case = case_from(keys, &sizes, &ks, &dirs);
        for_every_env!(check_case(&case));
    }

    #[test]
    fn random_float_segments_pinned((keys, sizes, ks, max) in segments_strategy(), scale in prop_oneof![Just(0.0f32), Just(-0.0f32), Just(f32::NAN), Just(1.5f32)]) {
        let keys: Vec<f32> = keys.iter().map(|&v| if v == 0 { scale } else { f32::from(v) }).collect();
        let dirs: Vec<SelectDirection> = max.iter().map(|&m| if m { SelectDirection::Max } else { SelectDirection::Min }).collect();
        let case = case_from(keys, &sizes, &ks, &dirs);
        check_case(&case, &Env::new());
        check_case(&case, &require!(tie_break::PreferLargerIndex));
    }
}

#[test]
fn the_total_items_guarantee_is_checked_against_the_sizes() {
    use oxicub_params::guarantee::TotalItems;
    let keys = [5u32, 1, 4, 2, 8, 7];
    let (begin, end) = ([0i64, 2, 3], [2i64, 3, 6]);
    let problem = Problem::offsets(
        &begin[..],
        &end[..],
        segment_size::PerSegment::<(), 0, 8>::new(()),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(3).expect("n"),
    );
    let mut top = [0u32; 3];
    let fits = Env::new().guarantee(TotalItems::<0, 6>::new());
    batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut top[..], &fits)
        .expect("call")
        .check()
        .expect("6 items in all");
    assert_eq!(top, [5, 4, 8]);
    let short = Env::new().guarantee(TotalItems::<0, 5>::new());
    let err = batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut top[..], &short)
        .expect("call")
        .check()
        .expect_err("6 items against a guarantee of 5");
    assert_eq!(
        err.to_string(),
        Error::from(oxicub_params::ParamError::OutOfBounds {
            param: "total_items",
            value: 6,
            bounds: oxicub_params::Bounds::new(0, 5),
            origin: oxicub_params::BoundOrigin::Guarantee,
        })
        .to_string()
    );
    // Strided with a host size and count: known before the call.
    let rows = Problem::strided(
        2,
        segment_size::Static::<2>::new(),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(3).expect("n"),
    );
    let err = batched_topk::select_keys(&Host::new(), &rows, &keys[..], &mut top[..], &short)
        .expect_err("3 rows of 2 against a guarantee of 5");
    assert!(matches!(err, Error::Param(_)), "{err}");
}
