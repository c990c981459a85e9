//! Batched top-k on the host backend, the bad inputs: per-segment values outside their bounds
//! (reported for their segment, which writes nothing, while the others run), sizes above the
//! stride or past the buffer, offsets out of order, directions outside the compiled options, a
//! deferred count outside its bounds, listed segments without their values, buffers and layout
//! arguments (checked before the call), and the `TotalItems` guarantee.

use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::{Error, Host};
use oxicub_env::Env;
use oxicub_params::{direction, k, num_segments, segment_size};

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

/// The front check reports in one order, whatever else is wrong: the layout and the scalar
/// arguments (here `out_stride`) before the per-segment buffers (here a `k` per segment for
/// one of two segments), and those before the outputs.
#[test]
fn scalar_arguments_are_reported_before_per_segment_buffers() {
    let keys = [0u32; 8];
    let ks = [2i64]; // two segments, one k
    let problem = Problem::strided(
        4,
        segment_size::Static::<4>::new(),
        k::PerSegment::<_, 0, 4>::new(&ks[..]),
        direction::Max,
        num_segments::uniform(2).expect("count"),
    );
    let mut out = [0u32; 8];
    let host = Host::new();
    let narrow = problem.out_stride(1);
    let err = batched_topk::select_keys(&host, &narrow, &keys[..], &mut out[..], &Env::new())
        .expect_err("an error");
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                arg: "out_stride",
                ..
            }
        ),
        "{err:?}"
    );
    let err = batched_topk::select_keys(&host, &problem, &keys[..], &mut out[..1], &Env::new())
        .expect_err("an error");
    assert!(
        matches!(err, Error::BufferTooSmall { arg: "k", .. }),
        "{err:?}"
    );
}

/// The public contract merges the bounds in the order of its arguments: a call that breaks the
/// guarantees on both `k` and `num_segments` is reported for `k`.
#[test]
fn the_contract_reports_k_before_num_segments() {
    use oxicub_params::guarantee::{MaxK, MaxNumSegments};
    use oxicub_params::ParamError;
    let env = Env::new()
        .guarantee(MaxK::<4>::new())
        .guarantee(MaxNumSegments::<1024>::new());
    let err = oxicub_algorithms::contract::batched_topk(
        &segment_size::Static::<64>::new(),
        &k::uniform(8).expect("k"),
        &direction::Max,
        &num_segments::uniform(4096).expect("count"),
        &env,
    )
    .unwrap_err();
    assert!(
        matches!(err, ParamError::OutOfBounds { param: "k", .. }),
        "{err:?}"
    );
}

/// A call may have up to 2^63 segments that write nothing (stride 0, size 0): the host decides
/// for all of them at once, instead of building one result per segment (which panicked at
/// i64::MAX segments and aborted on a 3.8 TB allocation at 2^36).
#[test]
fn a_huge_count_of_segments_that_write_nothing_is_not_visited() {
    let keys = [0u32; 4];
    let mut out: [u32; 0] = [];
    for n in [1i64 << 36, i64::MAX] {
        let problem = Problem::strided(
            0,
            segment_size::Uniform::<0, 4>::new(0).expect("size"),
            k::Static::<1>::new(),
            direction::Max,
            num_segments::uniform(n).expect("count"),
        );
        batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut out[..], &Env::new())
            .expect("checked")
            .check()
            .expect("every segment is valid and empty");
    }
    // The same through a deferred count the host reads: also every segment at once.
    let count = i64::MAX;
    let problem = Problem::strided(
        0,
        segment_size::Uniform::<0, 4>::new(0).expect("size"),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::Deferred::<_, 0, { i64::MAX }>::new(&count),
    );
    batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut out[..], &Env::new())
        .expect("checked")
        .check()
        .expect("every segment is valid and empty");
}

/// `reject_k_above_size`: a segment whose k is above its size writes nothing and the smallest
/// such segment is reported, naming `k` and its value; the others run. Without it the same
/// call clamps (the default). Per-segment sizes, per-segment k, offsets and a uniform k above
/// a uniform size (every segment: segment 0 reported).
#[test]
fn a_refused_k_above_a_segments_size_is_reported() {
    let keys = [5u32, 1, 9, 3, /**/ 8, 2, 0, 0, /**/ 7, 6, 4, 0];
    let sizes = [4i64, 2, 3];
    let ks = [2i64, 3, 3];
    let run = |reject: bool| {
        let problem = Problem::strided(
            4,
            segment_size::PerSegment::<_, 0, 4>::new(&sizes[..]),
            k::PerSegment::<_, 0, 3>::new(&ks[..]),
            direction::Max,
            num_segments::uniform(3).expect("n"),
        );
        let problem = if reject {
            problem.reject_k_above_size()
        } else {
            problem
        };
        let mut top = [u32::MAX; 9];
        let result =
            batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut top[..], &Env::new())
                .expect("front check")
                .check();
        (result, top)
    };
    let (clamped, top) = run(false);
    clamped.expect("clamped by default");
    assert_eq!(top, [9, 5, u32::MAX, 8, 2, u32::MAX, 7, 6, 4]);
    let (refused, top) = run(true);
    match refused {
        Err(Error::InvalidSegment {
            segment: 1,
            arg: "k",
            value: 3,
            reason,
        }) => assert!(reason.contains("reject_k_above_size"), "{reason}"),
        other => panic!("segment 1's k = 3 above its size 2: {other:?}"),
    }
    assert_eq!(top, [9, 5, u32::MAX, u32::MAX, u32::MAX, u32::MAX, 7, 6, 4]);

    // Offsets, k uniform: segment 2 (one key) refuses k = 2.
    let (begin, end) = ([0i64, 4, 8], [3i64, 6, 9]);
    let problem = Problem::offsets(
        &begin[..],
        &end[..],
        segment_size::PerSegment::<(), 0, 4>::new(()),
        k::uniform(2).expect("k"),
        direction::Min,
        num_segments::uniform(3).expect("n"),
    )
    .reject_k_above_size();
    let mut low = [u32::MAX; 6];
    let err =
        batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut low[..], &Env::new())
            .expect("front check")
            .check()
            .expect_err("segment 2 holds one key");
    assert!(matches!(
        err,
        Error::InvalidSegment {
            segment: 2,
            arg: "k",
            value: 2,
            ..
        }
    ));
    assert_eq!(low, [1, 5, 2, 8, u32::MAX, u32::MAX]);

    // Every segment alike, k above the size: segment 0 is reported, nothing written.
    let problem = Problem::strided(
        4,
        segment_size::uniform(3).expect("size"),
        k::uniform(4).expect("k"),
        direction::Max,
        num_segments::uniform(3).expect("n"),
    )
    .reject_k_above_size()
    .out_stride(4);
    let mut top = [u32::MAX; 12];
    let err =
        batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut top[..], &Env::new())
            .expect("front check")
            .check()
            .expect_err("every segment");
    assert!(matches!(
        err,
        Error::InvalidSegment {
            segment: 0,
            arg: "k",
            value: 4,
            ..
        }
    ));
    assert!(top.iter().all(|&v| v == u32::MAX));
}

/// `fill_past_k`: each valid segment's key slots past its results (up to the most one segment
/// writes) get the fill key, and its index slots the fill index when the call writes indices;
/// copied values and an invalid segment's slots stay as they were. A fill key of another type,
/// or an index its type cannot hold, is refused before anything runs.
#[test]
fn slots_past_k_take_the_fill() {
    let keys = [
        5.0f32, 1.0, 9.0, 3.0, /**/ 8.0, 2.0, 0.0, 0.0, /**/ 7.0, 6.0, 4.0, 0.0,
    ];
    let sizes = [4i64, 2, 3];
    let ks = [3i64, 3, 1];
    let problem = |bad_k: bool| {
        let ks = if bad_k { [3i64, 9, 1] } else { ks };
        (ks, sizes)
    };
    let run_indices = |ks: &[i64]| {
        let problem = Problem::strided(
            4,
            segment_size::PerSegment::<_, 0, 4>::new(&sizes[..]),
            k::PerSegment::<_, 0, 3>::new(ks),
            direction::Max,
            num_segments::uniform(3).expect("n"),
        )
        .fill_past_k(f32::NEG_INFINITY, -1);
        let (mut top, mut at) = ([0.5f32; 9], [7i32; 9]);
        let result = batched_topk::select_indices(
            &Host::new(),
            &problem,
            &keys[..],
            &mut top[..],
            &mut at[..],
            &Env::new(),
        )
        .expect("front check")
        .check();
        (result, top, at)
    };
    let (ks_ok, _) = problem(false);
    let (result, top, at) = run_indices(&ks_ok);
    result.expect("valid");
    let ninf = f32::NEG_INFINITY;
    assert_eq!(top, [9.0, 5.0, 3.0, 8.0, 2.0, ninf, 7.0, ninf, ninf]);
    assert_eq!(at, [2, 0, 3, 0, 1, -1, 0, -1, -1]);
    // Segment 1 invalid (k = 9 outside its bounds): its slots are untouched, the others filled.
    let (ks_bad, _) = problem(true);
    let (result, top, at) = run_indices(&ks_bad);
    assert!(matches!(
        result,
        Err(Error::InvalidSegment { segment: 1, .. })
    ));
    assert_eq!(top, [9.0, 5.0, 3.0, 0.5, 0.5, 0.5, 7.0, ninf, ninf]);
    assert_eq!(at, [2, 0, 3, 7, 7, 7, 0, -1, -1]);

    // Pairs: the keys filled, the copied values' slots untouched.
    let values: Vec<u64> = (100..112).collect();
    let problem = Problem::strided(
        4,
        segment_size::PerSegment::<_, 0, 4>::new(&sizes[..]),
        k::PerSegment::<_, 0, 3>::new(&ks[..]),
        direction::Max,
        num_segments::uniform(3).expect("n"),
    )
    .fill_past_k(-1.0f32, -1);
    let (mut top, mut carried) = ([0.5f32; 9], [0u64; 9]);
    batched_topk::select_pairs(
        &Host::new(),
        &problem,
        &keys[..],
        &values[..],
        &mut top[..],
        &mut carried[..],
        &Env::new(),
    )
    .and_then(|outcome| outcome.check())
    .expect("pairs");
    assert_eq!(top, [9.0, 5.0, 3.0, 8.0, 2.0, -1.0, 7.0, -1.0, -1.0]);
    assert_eq!(carried, [102, 100, 103, 104, 105, 0, 108, 0, 0]);

    // Offsets, keys only, u8 keys: the fill key's type must be the keys'.
    let bytes = [3u8, 9, 1, 4];
    let (begin, end) = ([0i64, 3], [3i64, 4]);
    let offsets = || {
        Problem::offsets(
            &begin[..],
            &end[..],
            segment_size::PerSegment::<(), 0, 3>::new(()),
            k::uniform(2).expect("k"),
            direction::Min,
            num_segments::uniform(2).expect("n"),
        )
    };
    let problem = offsets().fill_past_k(u8::MAX, 0);
    let mut low = [0u8; 4];
    batched_topk::select_keys(
        &Host::new(),
        &problem,
        &bytes[..],
        &mut low[..],
        &Env::new(),
    )
    .and_then(|outcome| outcome.check())
    .expect("keys");
    assert_eq!(low, [1, 3, 4, u8::MAX]);
    let wrong_type = offsets().fill_past_k(u16::MAX, 0);
    let err = batched_topk::select_keys(
        &Host::new(),
        &wrong_type,
        &bytes[..],
        &mut low[..],
        &Env::new(),
    )
    .expect_err("a u16 fill for u8 keys");
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                arg: "fill_past_k",
                ..
            }
        ),
        "{err}"
    );
    // -1 does not fit u32 indices.
    let problem = offsets().fill_past_k(0u8, -1);
    let mut at = [0u32; 4];
    let err = batched_topk::select_indices(
        &Host::new(),
        &problem,
        &bytes[..],
        &mut low[..],
        &mut at[..],
        &Env::new(),
    )
    .expect_err("-1 as u32");
    assert!(
        matches!(
            err,
            Error::InvalidArgument {
                arg: "fill_past_k",
                ..
            }
        ),
        "{err}"
    );
}
