//! Fuzz: batched top-k on the host backend against the oracle's prediction
//! (`oxicub_test::fuzz::batched`): `select_keys`, `select_pairs`, `select_indices` and their
//! `*_listed` forms over the strided, offsets and listed layouts; sizes, `k` and direction
//! static, uniform or per segment; the count static, uniform or deferred; guarantees on every
//! role; `out_stride`. Every bad input gets its exact error, every call that runs its outcome,
//! each segment its selection and every other output slot stays poison.
//!
//! The main product runs every combination of the kinds whose behaviour differs at run time
//! (uniform or per-segment sizes, `k` and direction; bounds-only sizes; uniform or deferred
//! count); the side test runs each remaining kind (static sizes, `k` and count; the static
//! directions, per-segment sets of one direction, typed directions) with the others fixed.
//! The number of cases is each test's constant, or `PROPTEST_CASES` (see docs/testing.md).

use oxicub_params::{direction, k, num_segments, role, segment_size};
use oxicub_test::fuzz::batched::{
    BatchedCall, Direction, DirectionKind, DirectionOnHost, DirectionSet, KArg, KKind, KOnHost,
    Kinds, LayoutKind, Sizes, SizesKind, SizesOnHost, STATIC_K, STATIC_NUM_SEGMENTS, STATIC_SIZE,
};
use oxicub_test::fuzz::{
    self, bounds_only, deferred, per_segment, Entry, GuaranteeEnv, PrintOnPanic, Single,
    SingleKind, Tape,
};
use proptest::prelude::*;

/// Cases of [`main_product`] in CI.
const MAIN_CASES: u32 = 40_000;
/// Cases of [`side_kinds`] in CI.
const SIDE_CASES: u32 = 12_000;

const ENTRIES: &[Entry] = &[Entry::Indices, Entry::Keys, Entry::Pairs];
const LAYOUTS: &[LayoutKind] = &[LayoutKind::Strided, LayoutKind::Offsets, LayoutKind::Listed];

const MAIN_KINDS: Kinds = Kinds {
    entries: ENTRIES,
    layouts: LAYOUTS,
    sizes: &[
        SizesKind::PerSegment,
        SizesKind::Uniform,
        SizesKind::BoundsOnly,
    ],
    k: &[KKind::PerSegment, KKind::Uniform],
    directions: &[
        DirectionKind::Bytes(DirectionSet::Either),
        DirectionKind::Choice,
    ],
    counts: &[SingleKind::Uniform, SingleKind::Deferred],
};

/// One kind outside the main product each, the other parameters fixed.
const SIDE_KINDS: [Kinds; 4] = [
    Kinds {
        sizes: &[SizesKind::Static],
        ..FIXED
    },
    Kinds {
        k: &[KKind::Static],
        ..FIXED
    },
    Kinds {
        counts: &[SingleKind::Static],
        ..FIXED
    },
    Kinds {
        directions: &[
            DirectionKind::Max,
            DirectionKind::Min,
            DirectionKind::Bytes(DirectionSet::Max),
            DirectionKind::Bytes(DirectionSet::Min),
            DirectionKind::Typed,
        ],
        ..FIXED
    },
];

/// The fixed parameters of the side test: uniform sizes (valid in every layout), per-segment
/// `k` and direction bytes of either direction, a uniform count.
const FIXED: Kinds = Kinds {
    entries: ENTRIES,
    layouts: LAYOUTS,
    sizes: &[SizesKind::Uniform],
    k: &[KKind::PerSegment],
    directions: &[DirectionKind::Bytes(DirectionSet::Either)],
    counts: &[SingleKind::Uniform],
};

type Call = BatchedCall<f32>;

fn main_sizes(call: &Call) {
    let env = call.guarantees.env();
    match &call.sizes {
        Sizes::Uniform(v) => main_k(call, &env, segment_size::uniform(*v).expect("a count")),
        Sizes::PerSegment { values, bounds } => main_k(
            call,
            &env,
            per_segment::<role::SegmentSize>(values, *bounds),
        ),
        Sizes::BoundsOnly { bounds } => main_k(call, &env, bounds_only(*bounds)),
        Sizes::Static => unreachable!("not among MAIN_KINDS"),
    }
}

fn main_k<S: SizesOnHost>(call: &Call, env: &GuaranteeEnv, sizes: S) {
    match &call.k {
        KArg::Uniform(v) => main_direction(call, env, sizes, k::uniform(*v).expect("a count")),
        KArg::PerSegment { values, bounds } => {
            main_direction(call, env, sizes, per_segment::<role::K>(values, *bounds))
        }
        KArg::Static => unreachable!("not among MAIN_KINDS"),
    }
}

fn main_direction<S: SizesOnHost, Kp: KOnHost>(call: &Call, env: &GuaranteeEnv, sizes: S, k: Kp) {
    match &call.direction {
        Direction::Choice(d) => {
            let choice = direction::Choice::<direction::Either>::new(*d).expect("either");
            main_count(call, env, sizes, k, choice)
        }
        Direction::Bytes {
            set: DirectionSet::Either,
            bytes,
        } => main_count(
            call,
            env,
            sizes,
            k,
            direction::PerSegment::<_>::new(&bytes[..]),
        ),
        _ => unreachable!("not among MAIN_KINDS"),
    }
}

fn main_count<S: SizesOnHost, Kp: KOnHost, D: DirectionOnHost>(
    call: &Call,
    env: &GuaranteeEnv,
    sizes: S,
    k: Kp,
    direction: D,
) {
    match &call.num_segments {
        Single::Uniform(n) => {
            let count = num_segments::uniform(*n).expect("a count");
            call.run_on_host::<u64, u32, _, _, _, _, _>(env, sizes, k, direction, count)
        }
        Single::Deferred { value, bounds } => {
            let count = deferred::<role::NumSegments>(value, *bounds);
            call.run_on_host::<u64, u32, _, _, _, _, _>(env, sizes, k, direction, count)
        }
        Single::Static => unreachable!("not among MAIN_KINDS"),
    }
}

/// Runs a call of [`SIDE_KINDS`]: each arm is one of the kinds outside the main product.
fn run_side(call: &Call) {
    let env = call.guarantees.env();
    let sizes = || match &call.sizes {
        Sizes::Uniform(v) => segment_size::uniform(*v).expect("a count"),
        _ => unreachable!("fixed: uniform sizes"),
    };
    let ks = || match &call.k {
        KArg::PerSegment { values, bounds } => per_segment::<role::K>(values, *bounds),
        _ => unreachable!("fixed: per-segment k"),
    };
    let bytes = |set: DirectionSet| match &call.direction {
        Direction::Bytes { set: s, bytes } if *s == set => &bytes[..],
        _ => unreachable!("fixed: direction bytes"),
    };
    let either = || direction::PerSegment::<_>::new(bytes(DirectionSet::Either));
    let count = || match &call.num_segments {
        Single::Uniform(n) => num_segments::uniform(*n).expect("a count"),
        _ => unreachable!("fixed: a uniform count"),
    };
    macro_rules! run {
        ($sizes:expr, $k:expr, $direction:expr, $count:expr) => {
            call.run_on_host::<f64, i64, _, _, _, _, _>(&env, $sizes, $k, $direction, $count)
        };
    }
    match (&call.sizes, &call.k, &call.direction, &call.num_segments) {
        (Sizes::Static, ..) => {
            run!(
                segment_size::Static::<STATIC_SIZE>::new(),
                ks(),
                either(),
                count()
            )
        }
        (_, KArg::Static, ..) => run!(sizes(), k::Static::<STATIC_K>::new(), either(), count()),
        (.., Single::Static) => {
            let static_count = num_segments::Static::<STATIC_NUM_SEGMENTS>::new();
            run!(sizes(), ks(), either(), static_count)
        }
        (_, _, Direction::Max, _) => run!(sizes(), ks(), direction::Max, count()),
        (_, _, Direction::Min, _) => run!(sizes(), ks(), direction::Min, count()),
        (_, _, Direction::Typed(directions), _) => {
            run!(
                sizes(),
                ks(),
                direction::PerSegment::<_>::new(&directions[..]),
                count()
            )
        }
        (_, _, Direction::Bytes { set, .. }, _) => match set {
            DirectionSet::Max => {
                let max = direction::PerSegment::<_, direction::Max>::new(bytes(*set));
                run!(sizes(), ks(), max, count())
            }
            DirectionSet::Min => {
                let min = direction::PerSegment::<_, direction::Min>::new(bytes(*set));
                run!(sizes(), ks(), min, count())
            }
            DirectionSet::Either => unreachable!("in the main product"),
        },
        (_, _, Direction::Choice(_), _) => unreachable!("in the main product"),
    }
}

proptest! {
    #![proptest_config(fuzz::config(MAIN_CASES))]

    /// Every combination of the kinds that differ at run time, `f32` keys, `u64` values, `u32`
    /// indices.
    #[test]
    fn main_product(tape in fuzz::tapes()) {
        let call = Call::generate(&mut Tape::new(&tape), &MAIN_KINDS);
        let _print = PrintOnPanic(&call);
        main_sizes(&call);
    }
}

proptest! {
    #![proptest_config(fuzz::config(SIDE_CASES))]

    /// The kinds outside the main product, one at a time; `f64` values, `i64` indices.
    #[test]
    fn side_kinds(tape in fuzz::tapes(), side in 0..SIDE_KINDS.len()) {
        let call = Call::generate(&mut Tape::new(&tape), &SIDE_KINDS[side]);
        let _print = PrintOnPanic(&call);
        run_side(&call);
    }
}

// ---- Findings kept as tests until fixed ----

/// Runs `problem` (empty segments of a stride-0 layout, `k` = 1) over no keys and returns
/// whether the call returned instead of panicking.
fn returns_without_panic<P>(problem: &P) -> bool
where
    P: oxicub_algorithms::batched_topk::ProblemOn<oxicub_algorithms::Host>
        + std::panic::RefUnwindSafe,
{
    let call = || {
        let host = oxicub_algorithms::Host::new();
        let keys: [u32; 0] = [];
        let env = oxicub_env::Env::new();
        oxicub_algorithms::batched_topk::select_keys(&host, problem, &keys[..], &mut [][..], &env)
            .map(oxicub_algorithms::segments::Outcome::check)
    };
    std::panic::catch_unwind(call).is_ok()
}

/// Issue 23, defect 5: a host count of `i64::MAX` empty segments passes the front check (no
/// segment can write, so no buffer is needed) and the host backend then builds one result per
/// segment: it panics ("capacity overflow"). A count of 2^36 aborts the process instead (a
/// 3.8 TB allocation), which is why the generator keeps counts small. What the call should
/// return (an error naming `num_segments`, or `Ok` without a per-segment allocation) is the
/// fix's decision; this pins only that it returns.
#[test]
fn a_huge_host_count_of_empty_segments_returns() {
    let problem = oxicub_algorithms::batched_topk::Problem::strided(
        0,
        segment_size::Static::<0>::new(),
        k::uniform(1).expect("a count"),
        direction::Max,
        num_segments::uniform(i64::MAX).expect("a count"),
    );
    assert!(returns_without_panic(&problem));
}

/// Issue 23, defect 5, with a deferred count: its bounds admit `i64::MAX` (none were given),
/// no segment can write, and the host backend panics on the per-segment allocation.
#[test]
fn a_huge_deferred_count_of_empty_segments_returns() {
    let count = i64::MAX;
    let problem = oxicub_algorithms::batched_topk::Problem::strided(
        0,
        segment_size::Static::<0>::new(),
        k::uniform(1).expect("a count"),
        direction::Max,
        num_segments::Deferred::<_>::new(&count),
    );
    assert!(returns_without_panic(&problem));
}
