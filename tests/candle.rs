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
