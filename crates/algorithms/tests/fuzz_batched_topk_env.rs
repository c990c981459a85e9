//! Fuzz: batched top-k on the host backend under every requirement set and with every key
//! type, against the oracle's prediction (`oxicub_test::fuzz::batched`). The calls are those of
//! `fuzz_batched_topk.rs` with one shape (offsets or listed layout, bounds-only sizes,
//! per-segment `k` and direction bytes, a deferred count), so that the 22 environments and 12
//! key types stay cheap to build. The number of cases is each test's constant, or
//! `PROPTEST_CASES` (see docs/testing.md).

use oxicub_algorithms::SourceIndex;
use oxicub_env::Environment;
use oxicub_params::{direction, role};
use oxicub_test::fuzz::batched::{
    BatchedCall, Direction, DirectionKind, DirectionSet, KArg, KKind, Kinds, LayoutKind, Sizes,
    SizesKind,
};
use oxicub_test::fuzz::{
    self, bounds_only, deferred, per_segment, Entry, FuzzValue, Single, SingleKind,
};
use oxicub_test::fuzz::{PrintOnPanic, Tape};
use oxicub_test::oracle::RefKey;
use oxicub_test::with_requirements;
use proptest::prelude::*;

/// Cases of each test in CI.
const CASES: u32 = 10_000;

const KINDS: Kinds = Kinds {
    entries: &[Entry::Indices, Entry::Keys, Entry::Pairs],
    layouts: &[LayoutKind::Offsets, LayoutKind::Listed],
    sizes: &[SizesKind::BoundsOnly],
    k: &[KKind::PerSegment],
    directions: &[DirectionKind::Bytes(DirectionSet::Either)],
    counts: &[SingleKind::Deferred],
};

fn run<Key: RefKey, V: FuzzValue, I: FuzzValue + SourceIndex, E: Environment>(
    call: &BatchedCall<Key>,
    env: &E,
) {
    let (Sizes::BoundsOnly { bounds: sizes }, KArg::PerSegment { values, bounds }) =
        (&call.sizes, &call.k)
    else {
        unreachable!("KINDS: bounds-only sizes, per-segment k")
    };
    let Direction::Bytes { bytes, .. } = &call.direction else {
        unreachable!("KINDS: direction bytes")
    };
    let Single::Deferred {
        value,
        bounds: count_bounds,
    } = &call.num_segments
    else {
        unreachable!("KINDS: a deferred count")
    };
    call.run_on_host::<V, I, _, _, _, _, _>(
        env,
        bounds_only(*sizes),
        per_segment::<role::K>(values, *bounds),
        direction::PerSegment::<_>::new(&bytes[..]),
        deferred::<role::NumSegments>(value, *count_bounds),
    )
}

/// One case of [`every_key_type`] for key type `Key`.
fn key_type_case<Key: RefKey, V: FuzzValue, I: FuzzValue + SourceIndex>(tape: &[u32]) {
    let call = BatchedCall::<Key>::generate(&mut Tape::new(tape), &KINDS);
    let _print = PrintOnPanic(&call);
    run::<Key, V, I, _>(&call, &call.guarantees.env());
}

proptest! {
    #![proptest_config(fuzz::config(CASES))]

    /// Every requirement set (the default and the 21 combinations), `i8` keys (ties in
    /// every segment).
    #[test]
    fn every_requirement_set(tape in fuzz::tapes(), set in 0..fuzz::REQUIREMENT_SETS) {
        let call = BatchedCall::<i8>::generate(&mut Tape::new(&tape), &KINDS);
        let _print = PrintOnPanic(&(set, &call));
        with_requirements!(set, call.guarantees.env(), |env| run::<i8, u32, u64, _>(&call, env));
    }

    /// Every key type, with value and index types of both widths.
    #[test]
    fn every_key_type(tape in fuzz::tapes(), key_type in 0..12usize) {
        match key_type {
            0 => key_type_case::<u8, f32, u32>(&tape),
            1 => key_type_case::<u16, u64, i64>(&tape),
            2 => key_type_case::<u32, f64, u64>(&tape),
            3 => key_type_case::<u64, i32, u32>(&tape),
            4 => key_type_case::<i8, i64, u64>(&tape),
            5 => key_type_case::<i16, u32, i64>(&tape),
            6 => key_type_case::<i32, f32, u32>(&tape),
            7 => key_type_case::<i64, u64, u64>(&tape),
            8 => key_type_case::<half::f16, f64, i64>(&tape),
            9 => key_type_case::<half::bf16, i32, u32>(&tape),
            10 => key_type_case::<f32, i64, u64>(&tape),
            _ => key_type_case::<f64, u32, i64>(&tape),
        }
    }
}
