//! Set operations on the host backend: the seed's two demonstrations literally (their printed
//! inputs and outputs), every operation against a multiset oracle written from the counting
//! semantics (not the merge loops under test), adversarial inputs, and every bad input's typed
//! error.

use oxicub_algorithms::sets::{self, op, SetOperation};
use oxicub_algorithms::{Error, Host, Pending};
use oxicub_env::{output_ordering, require, Env};
use oxicub_params::{guarantee, order, SortOrder};
use oxicub_test::cases::sorted_keys;
use oxicub_test::oracle::RefKey;
use oxicub_test::seed_sets::*;
use std::cmp::Ordering;

/// `op` over `a` and `b` (ascending) with the source positions as values (`b`'s from
/// `a.len()`), on the host.
fn run<Op: SetOperation>(operation: Op, a: &[i32], b: &[i32]) -> (Vec<i32>, Vec<u32>) {
    let bound = operation.bound(a.len() as u64, b.len() as u64) as usize;
    let (mut keys, mut from) = (vec![i32::MIN; bound], vec![u32::MAX; bound]);
    let n = sets::indices(
        &Host::new(),
        operation,
        order::Ascending,
        a,
        b,
        &mut keys[..],
        &mut from[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("set operation");
    keys.truncate(n);
    from.truncate(n);
    (keys, from)
}

#[test]
fn seed_multiset_keys_demonstration() {
    let (keys, _) = run(op::Intersection, &SETS_KEYS_A, &SETS_KEYS_B);
    assert_eq!(keys, SETS_KEYS_INTERSECTION);
    let (keys, _) = run(op::SymmetricDifference, &SETS_KEYS_A, &SETS_KEYS_B);
    assert_eq!(keys, SETS_KEYS_SYMMETRIC_DIFFERENCE);
}

#[test]
fn seed_multiset_pairs_demonstration() {
    // The seed's values: a counting iterator from 0 for A, from N = 100 for B.
    let a_values: Vec<i32> = (0..100).collect();
    let b_values: Vec<i32> = (100..200).collect();
    for (operation, keys, indices) in [
        (
            0,
            &SETS_PAIRS_INTERSECTION_KEYS[..],
            &SETS_PAIRS_INTERSECTION_INDICES[..],
        ),
        (
            1,
            &SETS_PAIRS_SYMMETRIC_DIFFERENCE_KEYS[..],
            &SETS_PAIRS_SYMMETRIC_DIFFERENCE_INDICES[..],
        ),
    ] {
        let (mut out, mut values) = ([0i32; 200], [0i32; 200]);
        let pending = if operation == 0 {
            sets::pairs(
                &Host::new(),
                op::Intersection,
                order::Ascending,
                &SETS_PAIRS_A[..],
                &a_values[..],
                &SETS_PAIRS_B[..],
                &b_values[..],
                &mut out[..],
                &mut values[..],
                &Env::new(),
            )
        } else {
            sets::pairs(
                &Host::new(),
                op::SymmetricDifference,
                order::Ascending,
                &SETS_PAIRS_A[..],
                &a_values[..],
                &SETS_PAIRS_B[..],
                &b_values[..],
                &mut out[..],
                &mut values[..],
                &Env::new(),
            )
        };
        let n = pending.and_then(Pending::check).expect("pairs");
        assert_eq!(&out[..n], keys);
        assert_eq!(&values[..n], indices);
    }
    // The indices form writes the same positions.
    let (_, from) = run(op::SymmetricDifference, &SETS_PAIRS_A, &SETS_PAIRS_B);
    let expected: Vec<u32> = SETS_PAIRS_SYMMETRIC_DIFFERENCE_INDICES
        .iter()
        .map(|&i| i as u32)
        .collect();
    assert_eq!(from, expected);
}

/// The seed's worked example: key-rank slots of 1 1 2 3 3 3 5 6 6 6 6 7 7 8 8 9 against
/// 1 2 2 3 3 3 3 6 6 6 6 8.
#[test]
fn seed_key_rank_example() {
    let a = [1, 1, 2, 3, 3, 3, 5, 6, 6, 6, 6, 7, 7, 8, 8, 9];
    let b = [1, 2, 2, 3, 3, 3, 3, 6, 6, 6, 6, 8];
    assert_eq!(
        run(op::Intersection, &a, &b).0,
        [1, 2, 3, 3, 3, 6, 6, 6, 6, 8]
    );
    assert_eq!(
        run(op::Union, &a, &b).0,
        [1, 1, 2, 2, 3, 3, 3, 3, 5, 6, 6, 6, 6, 7, 7, 8, 8, 9]
    );
    assert_eq!(run(op::Difference, &a, &b).0, [1, 5, 7, 7, 8, 9]);
    assert_eq!(
        run(op::SymmetricDifference, &a, &b).0,
        [1, 2, 3, 5, 7, 7, 8, 9]
    );
    let (merged, from) = run(op::Merge, &a, &b);
    assert_eq!(merged.len(), 28);
    assert!(merged.windows(2).all(|w| w[0] <= w[1]));
    // Equal keys: a's (positions below 16) before b's.
    assert_eq!(&from[..3], &[0, 1, 16]);
}

/// The oracle: for each distinct key (by the contract's order), `m` copies in `a` and `n` in
/// `b`; the outputs the counting semantics give, as source positions (`b`'s from `a.len()`).
fn oracle<K: RefKey>(which: u32, a: &[K], b: &[K], descending: bool) -> Vec<u64> {
    let cmp = |x: &K, y: &K| {
        let o = x.ref_cmp(y);
        if descending {
            o.reverse()
        } else {
            o
        }
    };
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() || j < b.len() {
        // The next key: the smaller of the two heads.
        let key = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => {
                if cmp(x, y) == Ordering::Greater {
                    *y
                } else {
                    *x
                }
            }
            (Some(x), None) => *x,
            (None, Some(y)) => *y,
            (None, None) => unreachable!(),
        };
        let i0 = i;
        while i < a.len() && cmp(&a[i], &key) == Ordering::Equal {
            i += 1;
        }
        let j0 = j;
        while j < b.len() && cmp(&b[j], &key) == Ordering::Equal {
            j += 1;
        }
        let (m, n) = (i - i0, j - j0);
        let from_a = |r: std::ops::Range<usize>| r.map(|k| (i0 + k) as u64);
        let from_b = |r: std::ops::Range<usize>| r.map(|k| (a.len() + j0 + k) as u64);
        match which {
            0 => out.extend(from_a(0..m.min(n))),
            1 => {
                out.extend(from_a(0..m));
                out.extend(from_b(m.min(n)..n));
            }
            2 => out.extend(from_a(n.min(m)..m)),
            3 => {
                out.extend(from_a(n.min(m)..m));
                out.extend(from_b(m.min(n)..n));
            }
            _ => {
                out.extend(from_a(0..m));
                out.extend(from_b(0..n));
            }
        }
    }
    out
}

/// Every operation over `a` and `b` in `order`, keys and positions, against the oracle.
fn check_all<K: RefKey>(what: &str, a: &[K], b: &[K], order: SortOrder) {
    fn one<K: RefKey, Op: SetOperation>(
        operation: Op,
        a: &[K],
        b: &[K],
        order: SortOrder,
    ) -> (Vec<u64>, Vec<u64>) {
        let bound = operation.bound(a.len() as u64, b.len() as u64) as usize;
        let (mut keys, mut from) = (
            vec![
                a.first()
                    .or(b.first())
                    .copied()
                    .unwrap_or_else(|| K::from_bits(Default::default()));
                bound
            ],
            vec![0u64; bound],
        );
        let n = sets::indices(
            &Host::new(),
            operation,
            order::Choice::<order::Either>::new(order).expect("order"),
            a,
            b,
            &mut keys[..],
            &mut from[..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("set operation");
        let bits = keys[..n]
            .iter()
            .map(|k| oxicub_algorithms::radix::RadixBits::to_u64(k.to_bits()))
            .collect();
        (bits, from[..n].to_vec())
    }
    let descending = order == SortOrder::Descending;
    let results = [
        one(op::Intersection, a, b, order),
        one(op::Union, a, b, order),
        one(op::Difference, a, b, order),
        one(op::SymmetricDifference, a, b, order),
        one(op::Merge, a, b, order),
    ];
    for (which, (bits, from)) in results.into_iter().enumerate() {
        let expected = oracle(which as u32, a, b, descending);
        assert_eq!(from, expected, "{what}: operation {which}: positions");
        let source_bits: Vec<u64> = expected
            .iter()
            .map(|&p| {
                let k = if (p as usize) < a.len() {
                    a[p as usize]
                } else {
                    b[p as usize - a.len()]
                };
                oxicub_algorithms::radix::RadixBits::to_u64(k.to_bits())
            })
            .collect();
        assert_eq!(
            bits, source_bits,
            "{what}: operation {which}: keys bit for bit"
        );
    }
}

#[test]
fn every_operation_against_the_oracle() {
    fn each<K: RefKey>(seed: u64) {
        for order in [SortOrder::Ascending, SortOrder::Descending] {
            let d = order == SortOrder::Descending;
            for (m, n, distinct) in [
                (0, 0, 1),
                (0, 50, 10),
                (70, 0, 10),
                (300, 200, 40),
                (1000, 1000, 1000),
                (500, 700, 3),
                (64, 64, 1),
            ] {
                let a: Vec<K> = sorted_keys(m, distinct, seed, d);
                let b: Vec<K> = sorted_keys(n, distinct, seed + 1, d);
                check_all(
                    &format!("{} {order:?} {m}x{n}/{distinct}", K::KEY_TYPE),
                    &a,
                    &b,
                    order,
                );
            }
        }
    }
    for seed in 0..3 {
        each::<u8>(seed);
        each::<i16>(seed);
        each::<u32>(seed);
        each::<i64>(seed);
        each::<half::f16>(seed);
        each::<half::bf16>(seed);
        each::<f32>(seed);
        each::<f64>(seed);
    }
}

#[test]
fn adversarial_inputs() {
    let asc = SortOrder::Ascending;
    // A == B; disjoint ranges; interleaved ranges; all keys equal (10^6 of them).
    let a: Vec<i32> = (0..1000).map(|i| i / 3).collect();
    check_all("a == b", &a, &a, asc);
    let low: Vec<u32> = (0..500).collect();
    let high: Vec<u32> = (500..900).collect();
    check_all("disjoint", &low, &high, asc);
    check_all("disjoint, b first", &high, &low, asc);
    let even: Vec<u64> = (0..800).map(|i| 2 * i).collect();
    let odd: Vec<u64> = (0..800).map(|i| 2 * i + 1).collect();
    check_all("interleaved", &even, &odd, asc);
    let same = vec![7i16; 1_000_000];
    let fewer = vec![7i16; 999_999];
    check_all("all equal", &same, &fewer, asc);
    // NaN (every payload one key, above +inf) and the signed zeros (-0.0 below +0.0).
    let a = [
        f32::NEG_INFINITY,
        -0.0,
        -0.0,
        0.0,
        1.0,
        f32::INFINITY,
        f32::NAN,
        f32::from_bits(0x7fc0_0001),
    ];
    let b = [
        -0.0f32,
        0.0,
        0.0,
        f32::INFINITY,
        f32::from_bits(0xffc0_0000),
    ];
    check_all("specials", &a, &b, asc);
    let mut a_desc = a;
    a_desc.reverse();
    let mut b_desc = b;
    b_desc.reverse();
    check_all(
        "specials descending",
        &a_desc,
        &b_desc,
        SortOrder::Descending,
    );
    // NaNs match whatever their payloads: the intersection keeps a's bits.
    let (mut out, mut from) = ([0f32; 5], [0u32; 5]);
    let n = sets::indices(
        &Host::new(),
        op::Intersection,
        order::Ascending,
        &a[..],
        &b[..],
        &mut out[..],
        &mut from[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("specials");
    assert_eq!(&from[..n], &[1, 3, 5, 6]);
    assert_eq!(out[3].to_bits(), f32::NAN.to_bits());
}

#[test]
fn bad_inputs_are_typed_errors() {
    let host = Host::new();
    let sorted = [1u32, 2, 2, 5];
    let unsorted = [1u32, 3, 2, 5];
    let mut out = [0u32; 8];
    // The count's buffer needs its one element.
    let err = sets::keys_with_count(
        &host,
        op::Union,
        order::Ascending,
        &sorted[..],
        &sorted[..],
        &mut out[..],
        &mut [0i64; 0][..],
        &Env::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                arg: "count",
                len: 0,
                required: 1,
                ..
            }
        ),
        "{err}"
    );
    let err = sets::keys(
        &host,
        op::Union,
        order::Ascending,
        &sorted[..],
        &unsorted[..],
        &mut out[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotSorted {
                arg: "b",
                position: 2,
                order: "ascending"
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "`b` is not sorted ascending: b[2] comes before b[1]"
    );
    let err = sets::keys(
        &host,
        op::Union,
        order::Descending,
        &sorted[..],
        &sorted[..],
        &mut out[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotSorted {
                arg: "a",
                position: 1,
                order: "descending"
            }
        ),
        "{err}"
    );
    // NoDuplicateKeys: a repeat is reported; distinct keys pass.
    let no_repeats = Env::new().guarantee(guarantee::NoDuplicateKeys::new());
    let err = sets::keys(
        &host,
        op::Intersection,
        order::Ascending,
        &sorted[..],
        &[0u32, 9][..],
        &mut out[..],
        &no_repeats,
    )
    .and_then(Pending::check)
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::RepeatedKey {
                arg: "a",
                position: 2
            }
        ),
        "{err}"
    );
    let n = sets::keys(
        &host,
        op::Intersection,
        order::Ascending,
        &[1u32, 2, 5][..],
        &[0u32, 2, 9][..],
        &mut out[..],
        &no_repeats,
    )
    .and_then(Pending::check)
    .expect("distinct keys");
    assert_eq!(&out[..n], &[2]);
    // SortedInputs skips the check: an unsorted input is then the caller's broken promise.
    let trusted = Env::new().guarantee(guarantee::SortedInputs::new());
    assert!(sets::keys(
        &host,
        op::Merge,
        order::Ascending,
        &unsorted[..],
        &sorted[..],
        &mut out[..],
        &trusted
    )
    .and_then(Pending::check)
    .is_ok());
    // Outputs below the operation's bound, before anything runs.
    let mut small = [0u32; 3];
    let err = sets::keys(
        &host,
        op::Intersection,
        order::Ascending,
        &sorted[..],
        &sorted[..],
        &mut small[..],
        &Env::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                arg: "out_keys",
                len: 3,
                required: 4,
                ..
            }
        ),
        "{err}"
    );
    let mut enough = [0u32; 4];
    let err = sets::keys(
        &host,
        op::Difference,
        order::Ascending,
        &sorted[..],
        &[0u32; 9][..],
        &mut enough[..],
        &Env::new(),
    );
    assert!(err.is_ok(), "a difference needs a.len() only");
    // Values of another length.
    let (mut k, mut v) = ([0u32; 8], [0u8; 8]);
    let err = sets::pairs(
        &host,
        op::Union,
        order::Ascending,
        &sorted[..],
        &[0u8; 3][..],
        &sorted[..],
        &[0u8; 4][..],
        &mut k[..],
        &mut v[..],
        &Env::new(),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::LengthMismatch {
                arg: "a_values",
                ..
            }
        ),
        "{err}"
    );
    // A stable or unstable ordering requirement both run.
    let env = require!(output_ordering::Sorted);
    assert!(sets::keys(
        &host,
        op::Union,
        order::Ascending,
        &sorted[..],
        &sorted[..],
        &mut out[..],
        &env
    )
    .is_ok());
}

/// i32 source positions (what most engines hold) are the u32 positions' values.
#[test]
fn i32_positions_equal_u32_positions() {
    let a = oxicub_test::cases::sorted_keys::<i16>(3000, 700, 5, false);
    let b = oxicub_test::cases::sorted_keys::<i16>(2000, 700, 6, false);
    let mut out = vec![0i16; 5000];
    let (mut wide, mut narrow) = (vec![0u32; 5000], vec![-1i32; 5000]);
    let host = oxicub_algorithms::Host::new();
    let asc = oxicub_params::order::Ascending;
    let n = oxicub_algorithms::sets::indices(
        &host,
        oxicub_algorithms::sets::op::SymmetricDifference,
        asc,
        &a[..],
        &b[..],
        &mut out[..],
        &mut wide[..],
        &oxicub_env::Env::new(),
    )
    .and_then(oxicub_algorithms::Pending::check)
    .expect("u32");
    let m = oxicub_algorithms::sets::indices(
        &host,
        oxicub_algorithms::sets::op::SymmetricDifference,
        asc,
        &a[..],
        &b[..],
        &mut out[..],
        &mut narrow[..],
        &oxicub_env::Env::new(),
    )
    .and_then(oxicub_algorithms::Pending::check)
    .expect("i32");
    assert_eq!(n, m);
    assert!(narrow[..n]
        .iter()
        .zip(&wide[..n])
        .all(|(&x, &y)| x as u32 == y));
}
