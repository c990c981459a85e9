//! Batched set operations on the host backend against one single call per pair (the batched
//! form's oracle): every operation for several key types in both orders over batches of
//! power-law pairs with unsorted gaps between segments, strided and offsets layouts, and every
//! bad batch reported as a typed error.

use oxicub_algorithms::segments::{Offsets, Strided};
use oxicub_algorithms::sets::{self, op, Batch, SetOperation};
use oxicub_algorithms::{Error, Host, Pending};
use oxicub_env::Env;
use oxicub_params::{num_segments, order, segment_size, SortOrder};
use oxicub_test::cases::poison;
use oxicub_test::oracle::RefKey;
use oxicub_test::set_batches::{host_batched, power_law_sizes, set_batch, SetBatch};

/// A batched call's results: the checked count (or the error's text), the keys, the source
/// positions and the offsets.
type Batched<K> = (Result<usize, String>, Vec<K>, Vec<u64>, Vec<i64>);

fn choice(order: SortOrder) -> order::Choice<order::Either> {
    order::Choice::<order::Either>::new(order).expect("order")
}

/// `sets::batched_indices` over `batch` on the host (outputs poisoned first).
fn batched<K: RefKey, Op: SetOperation>(
    operation: Op,
    order: SortOrder,
    batch: &SetBatch<K>,
) -> Batched<K> {
    host_batched(operation, order, batch, &Env::new())
}

/// The same, one single call per pair: positions moved from the pair's slices into the whole
/// inputs, outputs appended.
fn pair_by_pair<K: RefKey, Op: SetOperation>(
    operation: Op,
    order: SortOrder,
    batch: &SetBatch<K>,
) -> Batched<K> {
    let bound = operation.bound(batch.a.len() as u64, batch.b.len() as u64) as usize;
    let (mut keys, mut from) = (vec![poison::<K>(); bound], vec![u64::MAX; bound]);
    let mut offsets = vec![0i64; batch.pairs() + 1];
    let mut written = 0;
    for (i, offset) in offsets.iter_mut().take(batch.pairs()).enumerate() {
        *offset = written as i64;
        let a = &batch.a[batch.a_begin[i] as usize..batch.a_end[i] as usize];
        let b = &batch.b[batch.b_begin[i] as usize..batch.b_end[i] as usize];
        let n = sets::indices(
            &Host::new(),
            operation,
            choice(order),
            a,
            b,
            &mut keys[written..],
            &mut from[written..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("each pair is sorted");
        for position in &mut from[written..written + n] {
            *position = if (*position as usize) < a.len() {
                batch.a_begin[i] as u64 + *position
            } else {
                batch.a.len() as u64 + batch.b_begin[i] as u64 + (*position - a.len() as u64)
            };
        }
        written += n;
    }
    offsets[batch.pairs()] = written as i64;
    (Ok(written), keys, from, offsets)
}

fn same<K: RefKey>(what: &str, order: SortOrder, batch: &SetBatch<K>) {
    fn one<K: RefKey, Op: SetOperation>(
        what: &str,
        operation: Op,
        order: SortOrder,
        batch: &SetBatch<K>,
    ) {
        let (count, keys, from, offsets) = batched(operation, order, batch);
        let expected = pair_by_pair(operation, order, batch);
        assert_eq!(count, expected.0, "{what} {}: the count", Op::NAME);
        assert_eq!(offsets, expected.3, "{what} {}: the offsets", Op::NAME);
        assert_eq!(from, expected.2, "{what} {}: the positions", Op::NAME);
        let bits = |keys: &[K]| keys.iter().map(|k| k.to_bits()).collect::<Vec<_>>();
        assert!(
            bits(&keys) == bits(&expected.1),
            "{what} {}: the keys",
            Op::NAME
        );
    }
    one(what, op::Intersection, order, batch);
    one(what, op::Union, order, batch);
    one(what, op::Difference, order, batch);
    one(what, op::SymmetricDifference, order, batch);
    one(what, op::Merge, order, batch);
}

#[test]
fn every_operation_pair_by_pair() {
    for (seed, order) in [(1u64, SortOrder::Ascending), (2, SortOrder::Descending)] {
        let sizes = power_law_sizes(300, 400, seed);
        same(
            "u32 power law",
            order,
            &set_batch::<u32>(&sizes, 50, true, order == SortOrder::Descending, seed),
        );
        same(
            "f32 power law",
            order,
            &set_batch::<f32>(&sizes, 20, true, order == SortOrder::Descending, seed),
        );
        same(
            "i64 few keys",
            order,
            &set_batch::<i64>(&sizes, 3, false, order == SortOrder::Descending, seed),
        );
        same(
            "u8 power law",
            order,
            &set_batch::<u8>(&sizes, 256, true, order == SortOrder::Descending, seed),
        );
    }
    // Empty pairs everywhere, empty sides, a batch of nothing.
    let empties = [(0, 0), (0, 0), (3, 0), (0, 4), (0, 0), (5, 5), (0, 0)];
    same(
        "empties",
        SortOrder::Ascending,
        &set_batch::<i32>(&empties, 4, true, false, 7),
    );
    same(
        "nothing",
        SortOrder::Ascending,
        &set_batch::<i32>(&[], 4, false, false, 8),
    );
    same(
        "one pair",
        SortOrder::Ascending,
        &set_batch::<i32>(&[(1000, 700)], 30, true, false, 9),
    );
}

#[test]
fn strided_rows_with_per_segment_sizes() {
    // Three rows of a [3 x 4] matrix, using 2, 4 and 0 of each; b's rows of 3, all used.
    let a = [1u32, 5, 99, 0, /**/ 2, 3, 3, 8, /**/ 7, 7, 7, 7];
    let b = [5u32, 6, 7, /**/ 3, 3, 4, /**/ 1, 2, 3];
    let a_sizes = [2i64, 4, 0];
    let batch = Batch::new(
        Strided::new(4),
        segment_size::PerSegment::<_>::new(&a_sizes[..]),
        Strided::new(3),
        segment_size::Static::<3>::new(),
        num_segments::uniform(3).expect("count"),
    );
    let (mut keys, mut offsets) = ([0u32; 21], [0i64; 4]);
    let n = sets::batched_keys(
        &Host::new(),
        op::Union,
        order::Ascending,
        &batch,
        &a[..],
        &b[..],
        &mut keys[..],
        &mut offsets[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("union");
    assert_eq!(&keys[..n], &[1, 5, 6, 7, /**/ 2, 3, 3, 4, 8, /**/ 1, 2, 3]);
    assert_eq!(offsets, [0, 4, 9, 12]);
}

/// The error a batched union over these offsets reports (`Ok` when it runs).
fn union_error(
    a: &[i32],
    a_offsets: (&[i64], &[i64]),
    b: &[i32],
    b_offsets: (&[i64], &[i64]),
    pairs: i64,
) -> Result<usize, Error> {
    let batch = Batch::new(
        Offsets::new(a_offsets.0, a_offsets.1),
        segment_size::PerSegment::<(), 0, 100>::new(()),
        Offsets::new(b_offsets.0, b_offsets.1),
        segment_size::PerSegment::<()>::new(()),
        num_segments::uniform(pairs).expect("count"),
    );
    let mut keys = vec![0i32; a.len() + b.len()];
    let mut offsets = vec![0i64; pairs as usize + 1];
    sets::batched_keys(
        &Host::new(),
        op::Union,
        order::Ascending,
        &batch,
        a,
        b,
        &mut keys[..],
        &mut offsets[..],
        &Env::new(),
    )?
    .check()
}

#[test]
fn bad_batches_are_typed_errors() {
    let a = [1, 2, 3, 9, 0, 4, 5];
    let b = [1, 2, 5, 6];
    // Sorted within each segment; the key between them (9 before 0) is no segment's.
    let fine = union_error(&a, (&[0, 5], &[3, 7]), &b, (&[0, 2], &[2, 4]), 2);
    assert_eq!(fine.map_err(|e| e.to_string()), Ok(6));
    // a's segment 1 overlaps segment 0.
    match union_error(&a, (&[0, 2], &[3, 7]), &b, (&[0, 2], &[2, 4]), 2) {
        Err(Error::InvalidSegment {
            segment: 1,
            arg: "a_offsets",
            value: 2,
            ..
        }) => {}
        other => panic!("overlap: {other:?}"),
    }
    // b's segment 0 ends past b.
    match union_error(&a, (&[0, 5], &[3, 7]), &b, (&[0, 2], &[5, 4]), 2) {
        Err(Error::InvalidSegment {
            segment: 0,
            arg: "b_offsets",
            value: 5,
            ..
        }) => {}
        other => panic!("past b: {other:?}"),
    }
    // A begin above its end.
    match union_error(&a, (&[0, 5], &[3, 4]), &b, (&[0, 2], &[2, 4]), 2) {
        Err(Error::InvalidSegment {
            segment: 1,
            arg: "a_offsets",
            ..
        }) => {}
        other => panic!("out of order: {other:?}"),
    }
    // Unsorted inside a's segment 1 ([3, 7): 9, 0, 4, 5): 0 at position 4.
    match union_error(&a, (&[0, 3], &[3, 7]), &b, (&[0, 2], &[2, 4]), 2) {
        Err(Error::NotSorted {
            arg: "a",
            position: 4,
            ..
        }) => {}
        other => panic!("unsorted: {other:?}"),
    }
    // Too few offsets for the outputs.
    let batch = Batch::new(
        Offsets::new(&[0i64][..], &[3i64][..]),
        segment_size::PerSegment::<()>::new(()),
        Offsets::new(&[0i64][..], &[2i64][..]),
        segment_size::PerSegment::<()>::new(()),
        num_segments::uniform(1).expect("count"),
    );
    let (mut keys, mut offsets) = ([0i32; 7], [0i64; 1]);
    match sets::batched_keys(
        &Host::new(),
        op::Merge,
        order::Ascending,
        &batch,
        &a[..3],
        &b[..2],
        &mut keys[..],
        &mut offsets[..],
        &Env::new(),
    ) {
        Err(Error::BufferTooSmall {
            arg: "out_offsets",
            required: 2,
            ..
        }) => {}
        other => panic!("offsets: {other:?}"),
    }
    // A strided size above the stride.
    let batch = Batch::new(
        Strided::new(2),
        segment_size::Static::<3>::new(),
        Strided::new(2),
        segment_size::Static::<2>::new(),
        num_segments::uniform(1).expect("count"),
    );
    let mut offsets = [0i64; 2];
    match sets::batched_keys(
        &Host::new(),
        op::Merge,
        order::Ascending,
        &batch,
        &a[..3],
        &b[..2],
        &mut keys[..],
        &mut offsets[..],
        &Env::new(),
    ) {
        Err(Error::InvalidArgument {
            arg: "a_segment_sizes",
            ..
        }) => {}
        other => panic!("stride: {other:?}"),
    }
}

#[test]
fn a_deferred_count_outside_its_bounds_is_reported() {
    let (a, b) = ([1u32, 2, 3, 4], [2u32, 4]);
    let (a_ptr, b_ptr) = ([0i64, 2, 4], [0i64, 1, 2]);
    let count = 3i64; // one more pair than the bounds allow
    let batch = Batch::new(
        Offsets::new(&a_ptr[..2], &a_ptr[1..]),
        segment_size::PerSegment::<()>::new(()),
        Offsets::new(&b_ptr[..2], &b_ptr[1..]),
        segment_size::PerSegment::<()>::new(()),
        num_segments::Deferred::<_, 0, 2>::new(&count),
    );
    let (mut keys, mut offsets) = ([0u32; 2], [0i64; 3]);
    let result = sets::batched_keys(
        &Host::new(),
        op::Intersection,
        order::Ascending,
        &batch,
        &a[..],
        &b[..],
        &mut keys[..],
        &mut offsets[..],
        &Env::new(),
    )
    .expect("the front check passes")
    .check();
    assert!(matches!(result, Err(Error::Param(_))), "{result:?}");
}
