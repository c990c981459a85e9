//! Segmented sort on the host backend: the seed's four demonstrations literally (their printed
//! inputs, heads and outputs), random and adversarial segments against a sequential oracle
//! (outputs poisoned first: unwritten slots are caught), and every bad input's typed error.

use oxicub_algorithms::segmented_sort::{self, Problem};
use oxicub_algorithms::segments::{offsets_from_head_flags, offsets_from_head_indices};
use oxicub_algorithms::{locality_sort, Error, Host, Pending};
use oxicub_env::{output_ordering, require, Env};
use oxicub_params::{num_segments, order, segment_size, SortOrder};
use oxicub_test::cases::poison;
use oxicub_test::oracle::RefKey;
use oxicub_test::seed_sort::*;
use oxicub_test::{sample_keys, SplitMix64};

/// Sorts `keys` over `begin`/`end` (ascending, stable), with the source positions as values.
fn sort_offsets(keys: &[i32], begin: &[i64], end: &[i64]) -> (Vec<i32>, Vec<u32>) {
    let problem = Problem::offsets(
        begin,
        end,
        segment_size::PerSegment::<()>::new(()),
        order::Ascending,
        num_segments::uniform(begin.len() as i64).expect("count"),
    );
    let values: Vec<u32> = (0..keys.len() as u32).collect();
    let (mut out, mut out_values) = (vec![i32::MIN; keys.len()], vec![u32::MAX; keys.len()]);
    segmented_sort::sort_pairs(
        &Host::new(),
        &problem,
        keys,
        &values[..],
        &mut out[..],
        &mut out_values[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("sort");
    (out, out_values)
}

#[test]
fn seed_segmented_sort_keys_demonstration() {
    let (begin, end) = offsets_from_head_indices(&HEADS, 100).expect("heads");
    assert_eq!(begin.len(), 11);
    let (keys, _) = sort_offsets(&SEGSORT_KEYS_INPUT, &begin, &end);
    assert_eq!(keys, SEGSORT_KEYS_SORTED);
}

#[test]
fn seed_segmented_sort_pairs_demonstration() {
    let (begin, end) = offsets_from_head_indices(&HEADS, 100).expect("heads");
    let (keys, values) = sort_offsets(&SEGSORT_PAIRS_INPUT, &begin, &end);
    assert_eq!(keys, SEGSORT_PAIRS_SORTED);
    let expected: Vec<u32> = SEGSORT_PAIRS_INDICES.iter().map(|&i| i as u32).collect();
    assert_eq!(values, expected);
    // The same heads as a flags bitfield (the seed's `FromFlags`) cut the same segments.
    let mut flags = [0u32; 4];
    for &h in &HEADS {
        flags[h as usize / 32] |= 1 << (h % 32);
    }
    let from_flags = offsets_from_head_flags(&flags, 100).expect("flags");
    assert_eq!(from_flags, (begin, end));
}

/// The seed's locality sort demonstrations through `locality_sort` (keys, and pairs whose
/// values are the source positions).
#[test]
fn seed_locality_sort_demonstrations() {
    let host = Host::new();
    let mut keys = [0i32; 100];
    locality_sort::sort_keys(
        &host,
        &order::Ascending,
        &LOCALITY_KEYS_INPUT[..],
        &mut keys[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("keys");
    assert_eq!(keys, LOCALITY_KEYS_SORTED);
    let positions: Vec<i32> = (0..100).collect();
    let (mut keys, mut values) = ([0i32; 100], [0i32; 100]);
    locality_sort::sort_pairs(
        &host,
        &order::Ascending,
        &LOCALITY_PAIRS_INPUT[..],
        &positions[..],
        &mut keys[..],
        &mut values[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("pairs");
    assert_eq!(keys, LOCALITY_PAIRS_SORTED);
    assert_eq!(values, LOCALITY_PAIRS_INDICES);
}

/// The sequential oracle: each segment's (key, position) pairs ordered by the key's total
/// order (`RefKey::ref_cmp`: NaN above +inf, -0.0 below +0.0), descending reversed, equal
/// keys by position.
fn oracle<K: RefKey>(keys: &[K], segments: &[(usize, usize, SortOrder)]) -> Vec<(usize, Vec<u32>)> {
    segments
        .iter()
        .map(|&(begin, size, order)| {
            let mut at: Vec<u32> = (0..size as u32).collect();
            at.sort_by(|&a, &b| {
                let (x, y) = (keys[begin + a as usize], keys[begin + b as usize]);
                let by_key = match order {
                    SortOrder::Ascending => x.ref_cmp(&y),
                    SortOrder::Descending => y.ref_cmp(&x),
                };
                by_key.then(a.cmp(&b))
            });
            (begin, at)
        })
        .collect()
}

/// Random segments (empty ones, single keys, long ones) with gaps between them, per-segment
/// orders, keys of type `K`: keys and indices equal the oracle's bit for bit; the gaps keep
/// their poison.
fn random_case<K: RefKey>(seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let (mut begin, mut end, mut orders, mut segments) = (vec![], vec![], vec![], vec![]);
    let mut at = 0usize;
    for _ in 0..40 {
        at += (rng.next_u64() % 3) as usize; // a gap of 0..2 keys
        let size = match rng.next_u64() % 5 {
            0 => 0,
            1 => 1,
            2 => (rng.next_u64() % 2000) as usize,
            _ => (rng.next_u64() % 40) as usize,
        };
        let order = if rng.next_u64() % 2 == 0 {
            SortOrder::Ascending
        } else {
            SortOrder::Descending
        };
        begin.push(at as i64);
        end.push((at + size) as i64);
        orders.push(order);
        segments.push((at, size, order));
        at += size;
    }
    let keys: Vec<K> = sample_keys(at + 1, seed);
    let problem = Problem::offsets(
        &begin[..],
        &end[..],
        segment_size::PerSegment::<()>::new(()),
        order::PerSegment::<_>::new(&orders[..]),
        num_segments::uniform(begin.len() as i64).expect("count"),
    );
    let (mut out, mut out_at) = (vec![poison::<K>(); keys.len()], vec![u64::MAX; keys.len()]);
    segmented_sort::sort_indices(
        &Host::new(),
        &problem,
        &keys[..],
        &mut out[..],
        &mut out_at[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("sort");
    let mut written = vec![false; keys.len()];
    for (begin, at) in oracle(&keys, &segments) {
        for (j, &a) in at.iter().enumerate() {
            let what = format!("{} seed {seed}: position {}", K::KEY_TYPE, begin + j);
            assert_eq!(out_at[begin + j], u64::from(a), "{what}: index");
            assert!(
                out[begin + j].to_bits() == keys[begin + a as usize].to_bits(),
                "{what}: key"
            );
            written[begin + j] = true;
        }
    }
    for (j, w) in written.iter().enumerate() {
        if !w {
            assert!(
                out[j].to_bits() == poison::<K>().to_bits(),
                "gap {j} was written"
            );
            assert_eq!(out_at[j], u64::MAX, "gap {j} was written");
        }
    }
}

#[test]
fn random_segments_every_key_type_against_the_oracle() {
    for seed in 0..4 {
        random_case::<u8>(seed);
        random_case::<i8>(seed);
        random_case::<u16>(seed);
        random_case::<i16>(seed);
        random_case::<u32>(seed);
        random_case::<i32>(seed);
        random_case::<u64>(seed);
        random_case::<i64>(seed);
        random_case::<half::f16>(seed);
        random_case::<half::bf16>(seed);
        random_case::<f32>(seed);
        random_case::<f64>(seed);
    }
}

/// NaN, infinities and signed zeros in one row: NaN last ascending and first descending, -0.0
/// just below +0.0, NaN payloads kept; all-equal rows keep their values in input order.
#[test]
fn nan_signed_zeros_and_all_equal_keys() {
    let nan = f32::from_bits(0x7fc0_0001);
    let keys = [
        1.0f32,
        nan,
        -0.0,
        f32::NEG_INFINITY,
        0.0,
        f32::NAN,
        f32::INFINITY,
        -0.0,
    ];
    let problem = |o| {
        Problem::strided(
            8,
            segment_size::Static::<8>::new(),
            order::Choice::<order::Either>::new(o).expect("order"),
            num_segments::uniform(1).expect("count"),
        )
    };
    let run = |o| {
        let (mut out, mut at) = ([0f32; 8], [0u32; 8]);
        segmented_sort::sort_indices(
            &Host::new(),
            &problem(o),
            &keys[..],
            &mut out[..],
            &mut at[..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("sort");
        (out.map(f32::to_bits), at)
    };
    let (asc, asc_at) = run(SortOrder::Ascending);
    assert_eq!(asc_at, [3, 2, 7, 4, 0, 6, 1, 5]);
    assert_eq!(
        asc[..3],
        [
            f32::NEG_INFINITY.to_bits(),
            (-0.0f32).to_bits(),
            (-0.0f32).to_bits()
        ]
    );
    assert_eq!(asc[6], nan.to_bits());
    let (_, desc_at) = run(SortOrder::Descending);
    assert_eq!(desc_at, [1, 5, 6, 0, 4, 2, 7, 3]);
    // All equal: the identity permutation, under stable_sorted.
    let same = [7u16; 300];
    let rows = Problem::strided(
        100,
        segment_size::Static::<100>::new(),
        order::Descending,
        num_segments::uniform(3).expect("n"),
    );
    let (mut out, mut at) = ([0u16; 300], [0u32; 300]);
    segmented_sort::sort_indices(
        &Host::new(),
        &rows,
        &same[..],
        &mut out[..],
        &mut at[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("sort");
    let identity: Vec<u32> = (0..300).map(|i| i % 100).collect();
    assert_eq!(at[..], identity[..]);
    // `sorted` (unstable) is accepted and gives sorted keys.
    let env = require!(output_ordering::Sorted);
    segmented_sort::sort_keys(&Host::new(), &rows, &same[..], &mut out[..], &env)
        .and_then(Pending::check)
        .expect("sort");
    assert!(out.iter().all(|&k| k == 7));
}

/// Rows of a matrix with sizes per row (`[rows x stride]`, each row sorted over its first
/// `size_i` keys); the rest of each row is untouched.
#[test]
fn strided_rows_with_per_row_sizes() {
    let keys: Vec<i64> = sample_keys(4 * 10, 5);
    let sizes = [10i64, 0, 3, 7];
    let problem = Problem::strided(
        10,
        segment_size::PerSegment::<_, 0, 10>::new(&sizes[..]),
        order::Ascending,
        num_segments::uniform(4).expect("count"),
    );
    let mut out = vec![i64::MIN; 40];
    segmented_sort::sort_keys(&Host::new(), &problem, &keys[..], &mut out[..], &Env::new())
        .and_then(Pending::check)
        .expect("sort");
    for (row, &size) in sizes.iter().enumerate() {
        let mut expected = keys[row * 10..][..size as usize].to_vec();
        expected.sort_unstable();
        assert_eq!(out[row * 10..][..size as usize], expected[..], "row {row}");
        assert!(out[row * 10 + size as usize..(row + 1) * 10]
            .iter()
            .all(|&k| k == i64::MIN));
    }
}

/// Bad inputs: front-check errors name the argument and write nothing; per-segment violations
/// skip their segment, sort the others and report the smallest one.
#[test]
fn bad_inputs_are_typed_errors() {
    let keys = [3u32, 1, 2, 9, 8, 7];
    let host = Host::new();
    let sizes = segment_size::PerSegment::<()>::new(());
    let count = |n| num_segments::uniform(n).expect("count");
    // Outputs shorter than the keys.
    let problem = Problem::strided(
        3,
        segment_size::Static::<3>::new(),
        order::Ascending,
        count(2),
    );
    let err =
        segmented_sort::sort_keys(&host, &problem, &keys[..], &mut [0u32; 5][..], &Env::new())
            .expect_err("short output");
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                arg: "out_keys",
                required: 6,
                ..
            }
        ),
        "{err}"
    );
    // Values of another length.
    let err = segmented_sort::sort_pairs(
        &host,
        &problem,
        &keys[..],
        &[0u32; 5][..],
        &mut [0u32; 6][..],
        &mut [0u32; 6][..],
        &Env::new(),
    )
    .expect_err("values");
    assert!(
        matches!(err, Error::LengthMismatch { arg: "values", .. }),
        "{err}"
    );
    // Offsets: overlapping or out of order (reported; nothing is written, since no segment
    // can be trusted to be disjoint from the others), past the keys (reported; the others are
    // sorted).
    for (begin, end, bad_value, sorted) in [
        ([0i64, 2, 4], [3i64, 4, 6], 2i64, false),
        ([0, 3, 4], [3, 2, 6], 3, false),
        ([0, 3, 9], [3, 9, 9], 9, true),
    ] {
        let problem = Problem::offsets(&begin[..], &end[..], sizes, order::Ascending, count(3));
        let mut out = [u32::MAX; 6];
        let err = segmented_sort::sort_keys(&host, &problem, &keys[..], &mut out[..], &Env::new())
            .expect("the front check passes")
            .check()
            .expect_err("a bad segment");
        match err {
            Error::InvalidSegment {
                segment: 1,
                arg: "offsets",
                value,
                ..
            } => assert_eq!(value, bad_value, "{begin:?} {end:?}"),
            err => panic!("{begin:?} {end:?}: {err}"),
        }
        let expected = if sorted { [1, 2, 3] } else { [u32::MAX; 3] };
        assert_eq!(out[..3], expected, "{begin:?} {end:?}: segment 0");
        assert!(out[3..].iter().all(|&k| k == u32::MAX), "{begin:?} {end:?}");
    }
    // A per-segment order byte outside the compiled set.
    let bytes = [0u8, 7];
    let problem = Problem::strided(
        3,
        segment_size::Static::<3>::new(),
        order::PerSegment::<_>::new(&bytes[..]),
        count(2),
    );
    let mut out = [u32::MAX; 6];
    let err = segmented_sort::sort_keys(&host, &problem, &keys[..], &mut out[..], &Env::new())
        .expect("front")
        .check()
        .expect_err("order byte");
    assert!(
        matches!(
            err,
            Error::InvalidSegment {
                segment: 1,
                arg: "order",
                value: 7,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(out, [1, 2, 3, u32::MAX, u32::MAX, u32::MAX]);
    // Heads that do not describe a cut are refused before anything runs.
    let err = offsets_from_head_indices(&[2, 1], 6).expect_err("unsorted heads");
    assert!(
        matches!(err, Error::InvalidArgument { arg: "heads", .. }),
        "{err}"
    );
}

/// The in-place forms equal the sorts into second buffers: segments with gaps (untouched
/// positions keep their keys), pairs, and the locality sort.
#[test]
fn in_place_sorts_equal_the_sorts_into_second_buffers() {
    let mut rng = SplitMix64::new(77);
    let (mut begin, mut end) = (vec![], vec![]);
    let mut at = 0i64;
    for _ in 0..200 {
        at += (rng.next_u64() % 3) as i64;
        let size = (rng.next_u64() % 300) as i64;
        begin.push(at);
        end.push(at + size);
        at += size;
    }
    let keys: Vec<i32> = sample_keys(at as usize + 2, 78);
    let values: Vec<u32> = (0..keys.len() as u32).collect();
    let problem = Problem::offsets(
        &begin[..],
        &end[..],
        segment_size::PerSegment::<()>::new(()),
        order::Descending,
        num_segments::uniform(begin.len() as i64).expect("count"),
    );
    let host = Host::new();
    // Into second buffers that start as copies of the input (positions outside every segment
    // keep their keys, as in place).
    let (mut out, mut out_values) = (keys.clone(), values.clone());
    segmented_sort::sort_pairs(
        &host,
        &problem,
        &keys[..],
        &values[..],
        &mut out[..],
        &mut out_values[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("sort");
    let (mut in_place, mut in_place_values) = (keys.clone(), values.clone());
    segmented_sort::sort_pairs_in_place(
        &host,
        &problem,
        &mut in_place[..],
        &mut in_place_values[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("in place");
    assert_eq!((&in_place, &in_place_values), (&out, &out_values));
    let mut keys_only = keys.clone();
    segmented_sort::sort_keys_in_place(&host, &problem, &mut keys_only[..], &Env::new())
        .and_then(Pending::check)
        .expect("keys in place");
    assert_eq!(keys_only, out);
    let mut whole = keys.clone();
    locality_sort::sort_keys_in_place(&host, &order::Ascending, &mut whole[..], &Env::new())
        .and_then(Pending::check)
        .expect("locality in place");
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(whole, sorted);
}

/// A segment invalid by its size does not hide that the next one begins below its end: the
/// valid segments around it would overlap, so nothing is written and the smallest invalid
/// segment is reported.
#[test]
fn an_invalid_segment_does_not_hide_an_overlap() {
    let keys: Vec<i32> = sample_keys(5000, 3);
    let begin: Vec<i64> = [3000i64, 0].repeat(4);
    let end: Vec<i64> = [5000i64, 3000].repeat(4);
    let problem = Problem::offsets(
        &begin[..],
        &end[..],
        segment_size::PerSegment::<()>::new(())
            .with_bounds(0, 2500)
            .expect("bounds"),
        order::Ascending,
        num_segments::uniform(begin.len() as i64).expect("count"),
    );
    let mut out = vec![i32::MIN; keys.len()];
    let err =
        segmented_sort::sort_keys(&Host::new(), &problem, &keys[..], &mut out[..], &Env::new())
            .expect("the front check passes")
            .check()
            .expect_err("segment 1 is too long");
    assert!(err.to_string().contains("segment 1"), "{err}");
    assert!(out.iter().all(|&k| k == i32::MIN), "nothing is written");
}

/// Listed segments (each its own slice) sort exactly as the same segments joined under the
/// offsets layout: into one joined output, with indices, and in place slice by slice; a count
/// below the list's length leaves the later slices alone; bad lists are typed errors.
#[test]
fn listed_segments_sort_as_their_offsets() {
    let mut rng = SplitMix64::new(24);
    let sizes: Vec<usize> = (0..60)
        .map(|i| match i % 5 {
            0 => 0,
            1 => 1,
            _ => (rng.next_u64() % 300) as usize,
        })
        .collect();
    let lists: Vec<Vec<i32>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            sample_keys::<i32>(n, 100 + i as u64)
                .into_iter()
                .map(|k| k % 7)
                .collect()
        })
        .collect();
    let slices: Vec<&[i32]> = lists.iter().map(|l| &l[..]).collect();
    let joined: Vec<i32> = lists.concat();
    let (mut begin, mut end, mut at) = (vec![], vec![], 0i64);
    for &n in &sizes {
        begin.push(at);
        at += n as i64;
        end.push(at);
    }
    let (expected, expected_at) = sort_offsets(&joined, &begin, &end);
    // Indices within each segment: the joined positions less the segment's begin.
    let within: Vec<u32> = (0..joined.len())
        .map(|j| {
            let s = end.iter().position(|&e| e > j as i64).expect("a segment");
            expected_at[j] - begin[s] as u32
        })
        .collect();
    let count = num_segments::uniform(sizes.len() as i64).expect("count");
    let problem = Problem::listed(
        segment_size::PerSegment::<()>::new(()),
        order::Ascending,
        count,
    );
    let (mut out, mut out_at) = (vec![i32::MIN; joined.len()], vec![u32::MAX; joined.len()]);
    segmented_sort::sort_indices_listed(
        &Host::new(),
        &problem,
        &slices,
        &mut out[..],
        &mut out_at[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("listed indices");
    assert_eq!((&out, &out_at), (&expected, &within));

    let mut in_place = lists.clone();
    let mut values: Vec<Vec<u32>> = lists
        .iter()
        .map(|l| (0..l.len() as u32).collect())
        .collect();
    {
        let mut keys: Vec<&mut [i32]> = in_place.iter_mut().map(|l| &mut l[..]).collect();
        let mut vals: Vec<&mut [u32]> = values.iter_mut().map(|l| &mut l[..]).collect();
        segmented_sort::sort_pairs_listed_in_place(
            &Host::new(),
            &problem,
            &mut keys,
            &mut vals,
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("listed in place");
    }
    assert_eq!(in_place.concat(), expected);
    assert_eq!(values.concat(), within);

    // Only the first 10 slices: the later ones (and their outputs) are left alone.
    let first = Problem::listed(
        segment_size::PerSegment::<()>::new(()),
        order::Ascending,
        num_segments::uniform(10).expect("count"),
    );
    let mut partial = lists.clone();
    let mut keys: Vec<&mut [i32]> = partial.iter_mut().map(|l| &mut l[..]).collect();
    segmented_sort::sort_keys_listed_in_place(&Host::new(), &first, &mut keys, &Env::new())
        .and_then(Pending::check)
        .expect("partial");
    let cut = end[9] as usize;
    assert_eq!(partial.concat()[..cut], expected[..cut]);
    assert_eq!(partial[10..], lists[10..]);

    // Bad lists: too few slices, values of another length, a slice above the size bound, an
    // output shorter than the slices' total.
    let many = Problem::listed(
        segment_size::PerSegment::<()>::new(()),
        order::Ascending,
        num_segments::uniform(61).expect("count"),
    );
    let mut out = vec![0i32; joined.len()];
    let err =
        segmented_sort::sort_keys_listed(&Host::new(), &many, &slices, &mut out[..], &Env::new());
    assert!(
        matches!(
            err,
            Err(Error::BufferTooSmall {
                arg: "segments",
                ..
            })
        ),
        "{err:?}"
    );
    let short: Vec<Vec<u8>> = lists
        .iter()
        .map(|l| vec![0u8; l.len().saturating_sub(1)])
        .collect();
    let short: Vec<&[u8]> = short.iter().map(|l| &l[..]).collect();
    let mut out_values = vec![0u8; joined.len()];
    let err = segmented_sort::sort_pairs_listed(
        &Host::new(),
        &problem,
        &slices,
        &short,
        &mut out[..],
        &mut out_values[..],
        &Env::new(),
    );
    assert!(
        matches!(err, Err(Error::LengthMismatch { arg: "values", .. })),
        "{err:?}"
    );
    let bounded = Problem::listed(
        segment_size::PerSegment::<()>::new(())
            .with_bounds(0, 100)
            .expect("bounds"),
        order::Ascending,
        num_segments::uniform(sizes.len() as i64).expect("count"),
    );
    let first_long = sizes.iter().position(|&n| n > 100).expect("a long slice");
    match segmented_sort::sort_keys_listed(
        &Host::new(),
        &bounded,
        &slices,
        &mut out[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    {
        Err(Error::InvalidSegment { segment, .. }) => assert_eq!(segment, first_long as u64),
        other => panic!("a slice above the bound: {other:?}"),
    }
    let mut small = vec![0i32; joined.len() - 1];
    let err = segmented_sort::sort_keys_listed(
        &Host::new(),
        &problem,
        &slices,
        &mut small[..],
        &Env::new(),
    );
    assert!(
        matches!(
            err,
            Err(Error::BufferTooSmall {
                arg: "out_keys",
                ..
            })
        ),
        "{err:?}"
    );
}
