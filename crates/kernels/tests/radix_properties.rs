//! Property tests of the radix transforms for the 32- and 64-bit key types (the 8- and 16-bit
//! ones are tested exhaustively in the unit tests): order preservation against the type's own
//! comparison, and the round trip.

use std::cmp::Ordering;

use oxicub_kernels::radix::RadixKey;
use proptest::prelude::*;

/// The oracle: `a < b` by the type's own comparison, with -0.0 below +0.0 (the documented
/// policy). `None` when either is NaN.
fn oracle_cmp<K: RadixKey + PartialOrd>(a: K, b: K) -> Option<Ordering> {
    let ord = a.partial_cmp(&b)?;
    Some(ord.then_with(|| b.to_bits().cmp(&a.to_bits())))
}

fn check_pair<K: RadixKey + PartialOrd>(a: K, b: K) -> Result<(), TestCaseError> {
    if let Some(ord) = oracle_cmp(a, b) {
        prop_assert_eq!(a.to_radix().cmp(&b.to_radix()), ord, "{:?} vs {:?}", a, b);
    }
    Ok(())
}

fn check_round_trip<K: RadixKey>(k: K, is_nan: bool) -> Result<(), TestCaseError> {
    let back = K::from_radix(k.to_radix());
    if is_nan {
        prop_assert_eq!(k.to_radix(), K::from_radix(k.to_radix()).to_radix());
    } else {
        prop_assert_eq!(back.to_bits(), k.to_bits());
    }
    Ok(())
}

/// Floats from random bit patterns (all NaN payloads, subnormals, infinities) mixed with the
/// edge values.
fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        any::<u32>().prop_map(f32::from_bits),
        prop::sample::select(vec![
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::MIN
        ]),
    ]
}

fn any_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<u64>().prop_map(f64::from_bits),
        prop::sample::select(vec![
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            -f64::NAN,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN
        ]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn u32_order_and_round_trip(a: u32, b: u32) {
        check_pair(a, b)?;
        check_round_trip(a, false)?;
    }

    #[test]
    fn u64_order_and_round_trip(a: u64, b: u64) {
        check_pair(a, b)?;
        check_round_trip(a, false)?;
    }

    #[test]
    fn i32_order_and_round_trip(a: i32, b: i32) {
        check_pair(a, b)?;
        check_round_trip(a, false)?;
    }

    #[test]
    fn i64_order_and_round_trip(a: i64, b: i64) {
        check_pair(a, b)?;
        check_round_trip(a, false)?;
    }

    #[test]
    fn f32_order_and_round_trip(a in any_f32(), b in any_f32()) {
        check_pair(a, b)?;
        check_round_trip(a, a.is_nan())?;
        if a.is_nan() {
            prop_assert_eq!(a.to_radix(), u32::MAX);
        } else {
            prop_assert!(a.to_radix() < f32::NAN.to_radix());
        }
    }

    #[test]
    fn f64_order_and_round_trip(a in any_f64(), b in any_f64()) {
        check_pair(a, b)?;
        check_round_trip(a, a.is_nan())?;
        if a.is_nan() {
            prop_assert_eq!(a.to_radix(), u64::MAX);
        } else {
            prop_assert!(a.to_radix() < f64::NAN.to_radix());
        }
    }
}
