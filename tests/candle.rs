//! `oxicub::candle` (feature `candle`) on CPU tensors: each key type's rows equal oxicub's host
//! call on the same slice, bit for bit (NaN, -0.0, ties included), and candle's own sort where
//! the keys are distinct; k = 0, k above the row, empty rows, offsets into the storage, every
//! index type; a strided view, a wrong rank and an unsupported type are clear errors.
#![cfg(feature = "candle")]

use candle_core::{DType, Device, Tensor, WithDType, D};
use half::{bf16, f16};
use oxicub::batched_topk::{self, Problem};
use oxicub::candle::{batched_topk as rows_topk, topk};
use oxicub::params::{direction, k, num_segments, segment_size, SelectDirection};
use oxicub::radix::{RadixBits, RadixKey};
use oxicub::{Env, Error, Host, Pending};
use oxicub_test::sample_keys;

/// The host call the candle function wraps, on the raw keys: `(keys, positions)` of each row.
fn host_rows<K: RadixKey + WithDType>(
    keys: &[K],
    n: usize,
    top: usize,
    dir: SelectDirection,
) -> (Vec<K>, Vec<u32>) {
    let written = top.min(n);
    let rows = keys.len() / n;
    let (mut out, mut at) = (
        vec![K::from_f64(0.0); rows * written],
        vec![0u32; rows * written],
    );
    let problem = Problem::strided(
        n,
        segment_size::uniform(n as i64).expect("n"),
        k::uniform(top as i64).expect("k"),
        direction::Choice::<direction::Either>::new(dir).expect("direction"),
        num_segments::uniform(rows as i64).expect("rows"),
    )
    .out_stride(written);
    batched_topk::select_indices(
        &Host::new(),
        &problem,
        keys,
        &mut out[..],
        &mut at[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host");
    (out, at)
}

fn bits<K: RadixKey>(keys: &[K]) -> Vec<u64> {
    keys.iter().map(|k| k.to_bits().to_u64()).collect()
}

fn same_as_host<K: RadixKey + WithDType>(rows: usize, n: usize, top: usize, seed: u64) {
    let keys: Vec<K> = sample_keys(rows * n, seed);
    let tensor = Tensor::from_vec(keys.clone(), (rows, n), &Device::Cpu).expect("tensor");
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        let (got, at) = rows_topk::<u32>(&tensor, top, dir).expect("candle rows");
        assert_eq!(got.dims(), [rows, top.min(n)], "{:?}", K::DTYPE);
        let (want, want_at) = host_rows(&keys, n, top, dir);
        let got_keys = got
            .flatten_all()
            .and_then(|t| t.to_vec1::<K>())
            .expect("keys");
        assert_eq!(bits(&got_keys), bits(&want), "{:?} {dir:?}: keys", K::DTYPE);
        assert_eq!(
            at.flatten_all()
                .and_then(|t| t.to_vec1::<u32>())
                .expect("at"),
            want_at
        );
    }
}

#[test]
fn every_key_type_equals_the_host_call() {
    same_as_host::<f32>(37, 300, 8, 1);
    same_as_host::<f64>(5, 1000, 64, 2);
    same_as_host::<f16>(16, 256, 8, 3);
    same_as_host::<bf16>(16, 256, 8, 4);
    same_as_host::<u8>(9, 77, 10, 5); // many ties
    same_as_host::<u32>(3, 4096, 100, 6);
    same_as_host::<i16>(4, 500, 7, 7);
    same_as_host::<i32>(4, 500, 7, 8);
    same_as_host::<i64>(4, 500, 7, 9);
}

#[test]
fn distinct_keys_route_as_candles_sort() {
    let n = 160;
    let keys: Vec<f32> = (0..20 * n)
        .map(|i| ((i * 7919) % 3203) as f32 * 0.25 - 300.0)
        .collect();
    let tensor = Tensor::from_vec(keys, (20, n), &Device::Cpu).expect("tensor");
    for (dir, ascending) in [(SelectDirection::Max, false), (SelectDirection::Min, true)] {
        let (_, at) = rows_topk::<i64>(&tensor, 12, dir).expect("rows");
        let by_sort = tensor
            .arg_sort_last_dim(ascending)
            .and_then(|t| t.narrow(D::Minus1, 0, 12))
            .and_then(|t| t.to_dtype(DType::I64))
            .expect("sort");
        assert_eq!(
            at.to_vec2::<i64>().expect("at"),
            by_sort.to_vec2::<i64>().expect("sort")
        );
    }
}

#[test]
fn edge_shapes_and_index_types() {
    let cpu = Device::Cpu;
    let x = Tensor::new(&[[3f32, -0.0, 0.0, f32::NAN], [1.0, 1.0, 1.0, 1.0]], &cpu).expect("x");
    // k = 0: rows of nothing.
    let (top, at) = rows_topk::<i32>(&x, 0, SelectDirection::Max).expect("k = 0");
    assert_eq!(
        (top.dims(), at.dims()),
        ([2, 0].as_slice(), [2, 0].as_slice())
    );
    // k above the row: the whole row, sorted; NaN first for Max, +0.0 above -0.0; ties by index.
    let (top, at) = rows_topk::<i32>(&x, 9, SelectDirection::Max).expect("k > n");
    let top = top.to_vec2::<f32>().expect("top");
    assert!(top[0][0].is_nan());
    assert_eq!(
        top[0][1..].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        [3f32, 0.0, -0.0].map(f32::to_bits)
    );
    assert_eq!(
        at.to_vec2::<i32>().expect("at"),
        [[3, 0, 2, 1], [0, 1, 2, 3]]
    );
    // Rows of nothing, and no rows.
    let empty = Tensor::zeros((3, 0), DType::F32, &cpu).expect("empty rows");
    assert_eq!(
        rows_topk::<u32>(&empty, 4, SelectDirection::Max)
            .expect("empty")
            .0
            .dims(),
        [3, 0]
    );
    let none = Tensor::zeros((0, 5), DType::F32, &cpu).expect("no rows");
    assert_eq!(
        rows_topk::<u32>(&none, 4, SelectDirection::Max)
            .expect("none")
            .0
            .dims(),
        [0, 4]
    );
    // A contiguous view at an offset into its storage: the view's rows, not the storage's first.
    let big = Tensor::from_vec((0..40).map(|v| v as f32).collect(), (10, 4), &cpu).expect("big");
    let view = big.narrow(0, 7, 2).expect("rows 7 and 8");
    let (top, _) = rows_topk::<u32>(&view, 1, SelectDirection::Min).expect("view");
    assert_eq!(top.to_vec2::<f32>().expect("top"), [[28.0], [32.0]]);
    // One dimension: single-problem top-k, positions as i64.
    let line = Tensor::new(&[5u32, 9, 1, 9], &cpu).expect("line");
    let (top, at) = topk::<i64>(&line, 3, SelectDirection::Max).expect("topk");
    assert_eq!(top.to_vec1::<u32>().expect("top"), [9, 9, 5]);
    assert_eq!(at.to_vec1::<i64>().expect("at"), [1, 3, 0]);
}

#[test]
fn bad_tensors_are_clear_errors() {
    let cpu = Device::Cpu;
    let x = Tensor::new(&[[1f32, 2.0, 3.0], [4.0, 5.0, 6.0]], &cpu).expect("x");
    let reason = |result: Result<(Tensor, Tensor), Error>| match result {
        Err(Error::InvalidArgument {
            arg: "tensor",
            reason,
        }) => reason,
        other => panic!("expected an error about the tensor: {other:?}"),
    };
    let strided = x.t().expect("transpose");
    assert!(reason(rows_topk::<u32>(&strided, 1, SelectDirection::Max)).contains(".contiguous()"));
    assert!(reason(topk::<u32>(&x, 1, SelectDirection::Max)).contains("one-dimensional"));
    let scalar = Tensor::new(1f32, &cpu).expect("scalar");
    assert!(reason(rows_topk::<u32>(&scalar, 1, SelectDirection::Max)).contains("at least one"));
    let fp8 = x.to_dtype(DType::F8E4M3).expect("fp8");
    assert!(reason(rows_topk::<u32>(&fp8, 1, SelectDirection::Max)).contains("F8E4M3"));
    // Single-problem top-k keeps oxicub's contract: k above the length is an error.
    let line = Tensor::new(&[1f32, 2.0], &cpu).expect("line");
    assert!(topk::<u32>(&line, 3, SelectDirection::Max).is_err());
}

#[test]
fn sorted_rows_equal_candles_stable_sort() {
    use oxicub::candle::sort;
    use oxicub::params::SortOrder;
    // Many ties (u8 keys): the positions of equal keys stay in order, as a stable sort keeps
    // them; candle's arg_sort of distinct keys gives the same permutation.
    let keys: Vec<u8> = sample_keys(12 * 100, 21);
    let x = Tensor::from_vec(keys.clone(), (12, 100), &Device::Cpu).expect("x");
    for (order, ascending) in [(SortOrder::Ascending, true), (SortOrder::Descending, false)] {
        let (sorted, at) = sort::<u32>(&x, order).expect("sort");
        let (sorted, at) = (
            sorted.to_vec2::<u8>().expect("sorted"),
            at.to_vec2::<u32>().expect("at"),
        );
        for (r, (row, at)) in sorted.iter().zip(&at).enumerate() {
            let mut want: Vec<(u8, u32)> = (0..100u32)
                .map(|j| (keys[r * 100 + j as usize], j))
                .collect();
            want.sort_by(|p, q| {
                if ascending {
                    p.0.cmp(&q.0)
                } else {
                    q.0.cmp(&p.0)
                }
            });
            assert_eq!(row, &want.iter().map(|p| p.0).collect::<Vec<_>>());
            assert_eq!(at, &want.iter().map(|p| p.1).collect::<Vec<_>>());
        }
    }
    let distinct: Vec<f32> = (0..8 * 50)
        .map(|i| ((i * 7919) % 3203) as f32 - 1600.0)
        .collect();
    let x = Tensor::from_vec(distinct, (8, 50), &Device::Cpu).expect("x");
    let (_, at) = sort::<i64>(&x, SortOrder::Descending).expect("sort");
    let by_candle = x
        .arg_sort_last_dim(false)
        .and_then(|t| t.to_dtype(DType::I64))
        .expect("candle");
    assert_eq!(
        at.to_vec2::<i64>().expect("at"),
        by_candle.to_vec2::<i64>().expect("candle")
    );
    // Specials sort as oxicub orders them: NaN above every number, -0.0 below +0.0.
    let x = Tensor::new(&[2f32, f32::NAN, 0.0, -0.0, -1.0], &Device::Cpu).expect("x");
    let (sorted, at) = sort::<u32>(&x, SortOrder::Ascending).expect("sort");
    let sorted = sorted.to_vec1::<f32>().expect("sorted");
    assert_eq!(at.to_vec1::<u32>().expect("at"), [4, 3, 2, 0, 1]);
    assert!(sorted[4].is_nan() && sorted[1].is_sign_negative() && sorted[2].is_sign_positive());
}

#[test]
fn set_operations_equal_the_host_call_and_refuse_bad_tensors() {
    use oxicub::candle::set_operation;
    use oxicub::params::{order, SortOrder};
    use oxicub::sets::{self, op};
    let a: Vec<i32> = {
        let mut v: Vec<i32> = sample_keys::<i32>(3000, 31)
            .iter()
            .map(|k| k % 500)
            .collect();
        v.sort_unstable();
        v
    };
    let b: Vec<i32> = {
        let mut v: Vec<i32> = sample_keys::<i32>(2000, 32)
            .iter()
            .map(|k| k % 500)
            .collect();
        v.sort_unstable();
        v
    };
    let (ta, tb) = (
        Tensor::from_vec(a.clone(), a.len(), &Device::Cpu).expect("a"),
        Tensor::from_vec(b.clone(), b.len(), &Device::Cpu).expect("b"),
    );
    macro_rules! same {
        ($op:expr) => {{
            let got = set_operation($op, SortOrder::Ascending, &ta, &tb).expect("candle");
            let mut want = vec![0i32; a.len() + b.len()];
            let n = sets::keys(
                &Host::new(),
                $op,
                order::Ascending,
                &a[..],
                &b[..],
                &mut want[..],
                &Env::new(),
            )
            .and_then(Pending::check)
            .expect("host");
            assert_eq!(got.to_vec1::<i32>().expect("got"), want[..n]);
        }};
    }
    same!(op::Intersection);
    same!(op::Union);
    same!(op::Difference);
    same!(op::SymmetricDifference);
    same!(op::Merge);
    // Out of order, another type, another rank: clear errors.
    let unsorted = Tensor::new(&[3i32, 1], &Device::Cpu).expect("unsorted");
    assert!(matches!(
        set_operation(op::Union, SortOrder::Ascending, &unsorted, &tb),
        Err(Error::NotSorted { .. })
    ));
    let floats = Tensor::new(&[1f32], &Device::Cpu).expect("floats");
    assert!(matches!(
        set_operation(op::Union, SortOrder::Ascending, &ta, &floats),
        Err(Error::InvalidArgument { arg: "b", .. })
    ));
    // A column of a matrix: one dimension, stride 2.
    let strided = Tensor::new(&[[1i32, 2], [3, 4]], &Device::Cpu)
        .and_then(|t| t.narrow(1, 0, 1))
        .and_then(|t| t.squeeze(1))
        .expect("a strided view");
    assert!(!strided.is_contiguous());
    assert!(matches!(
        set_operation(op::Union, SortOrder::Ascending, &ta, &strided),
        Err(Error::InvalidArgument { arg: "b", .. })
    ));
    let rows = Tensor::new(&[[1i32]], &Device::Cpu).expect("rows");
    assert!(matches!(
        set_operation(op::Union, SortOrder::Ascending, &rows, &tb),
        Err(Error::InvalidArgument { arg: "a", .. })
    ));
}
