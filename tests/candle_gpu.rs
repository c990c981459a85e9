//! `oxicub::candle` (feature `candle-cuda`) on CUDA tensors: each key type's rows equal the
//! same call on the CPU tensor, bit for bit (NaN, -0.0, ties included), for both directions
//! and every index type; k = 0, k above the row, empty rows, no rows, a view at an offset into
//! its storage, single-problem top-k; the outputs are CUDA tensors on the input's device; the
//! calls share one kernel runtime; a strided view is refused. Skips without a GPU (fails with
//! OXICUB_REQUIRE_GPU=1).
#![cfg(feature = "candle-cuda")]

use candle_core::{DType, Device, Tensor, WithDType};
use half::{bf16, f16};
use oxicub::candle::{batched_topk as rows_topk, cuda_backend, topk, Position};
use oxicub::params::SelectDirection;
use oxicub::radix::{RadixBits, RadixKey};
use oxicub::Error;
use oxicub_test::{gpu_or_skip, sample_keys};

fn gpu() -> Option<Device> {
    gpu_or_skip()?;
    Some(Device::new_cuda(0).expect("candle's CUDA device 0"))
}

fn bits<K: RadixKey + WithDType>(t: &Tensor) -> Vec<u64> {
    let values = t
        .flatten_all()
        .and_then(|t| t.to_vec1::<K>())
        .expect("download");
    values.iter().map(|k| k.to_bits().to_u64()).collect()
}

fn indices<I: Position>(t: &Tensor) -> Vec<f64> {
    let values = t
        .flatten_all()
        .and_then(|t| t.to_vec1::<I>())
        .expect("download");
    values.iter().map(|i| i.to_f64()).collect()
}

/// Rows of `keys` as a tensor on `gpu` and on the CPU: every result on the GPU equals the
/// CPU's, for both directions and `top`.
fn same_on_both<K: RadixKey + WithDType, I: Position>(
    gpu: &Device,
    keys: Vec<K>,
    shape: &[usize],
    top: usize,
) {
    let on_cpu = Tensor::from_vec(keys, shape, &Device::Cpu).expect("cpu tensor");
    let on_gpu = on_cpu.to_device(gpu).expect("upload");
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        let (want, want_at) = rows_topk::<I>(&on_cpu, top, dir).expect("cpu");
        let (got, at) = rows_topk::<I>(&on_gpu, top, dir).expect("gpu");
        assert!(got.device().is_cuda() && at.device().is_cuda());
        assert_eq!(got.dims(), want.dims());
        assert_eq!(got.dtype(), K::DTYPE);
        let what = format!("{:?} {shape:?} top {top} {dir:?}", K::DTYPE);
        assert_eq!(bits::<K>(&got), bits::<K>(&want), "{what}: keys");
        assert_eq!(
            indices::<I>(&at),
            indices::<I>(&want_at),
            "{what}: positions"
        );
    }
}

#[test]
fn every_key_type_equals_the_cpu_call() {
    let Some(gpu) = gpu() else { return };
    same_on_both::<f32, u32>(&gpu, sample_keys(64 * 256, 1), &[64, 256], 8);
    same_on_both::<f32, i32>(&gpu, sample_keys(3 * 40000, 2), &[3, 40000], 2048);
    same_on_both::<f64, i64>(&gpu, sample_keys(5 * 1000, 3), &[5, 1000], 64);
    same_on_both::<f16, u32>(&gpu, sample_keys(16 * 256, 4), &[2, 8, 256], 8);
    same_on_both::<bf16, i32>(&gpu, sample_keys(512 * 128, 5), &[512, 128], 6);
    same_on_both::<u8, u32>(&gpu, sample_keys(9 * 77, 6), &[9, 77], 10);
    same_on_both::<u32, i64>(&gpu, sample_keys(3 * 4096, 7), &[3, 4096], 100);
    same_on_both::<i16, u32>(&gpu, sample_keys(4 * 500, 8), &[4, 500], 7);
    same_on_both::<i32, u32>(&gpu, sample_keys(4 * 500, 9), &[4, 500], 7);
    same_on_both::<i64, i32>(&gpu, sample_keys(4 * 500, 10), &[4, 500], 7);
}

#[test]
fn edge_shapes_views_and_single_problems() {
    let Some(gpu) = gpu() else { return };
    // Specials: NaN, -0.0 / +0.0, ties; k = 0; k above the row.
    let specials = vec![3f32, -0.0, 0.0, f32::NAN, 1.0, 1.0, 1.0, 1.0];
    for top in [0, 2, 4, 9] {
        same_on_both::<f32, i32>(&gpu, specials.clone(), &[2, 4], top);
    }
    // Rows of nothing, and no rows.
    for shape in [[3usize, 0], [0, 5]] {
        let empty = Tensor::zeros(&shape[..], DType::F32, &gpu).expect("empty");
        let (top, at) = rows_topk::<u32>(&empty, 4, SelectDirection::Max).expect("empty");
        let want = [shape[0], 4.min(shape[1])];
        assert_eq!((top.dims(), at.dims()), (&want[..], &want[..]));
    }
    // A contiguous view at an offset into its storage.
    let big = Tensor::from_vec((0..40).map(|v| v as f32).collect(), (10, 4), &gpu).expect("big");
    let view = big.narrow(0, 7, 2).expect("rows 7 and 8");
    let (top, at) = rows_topk::<u32>(&view, 1, SelectDirection::Min).expect("view");
    assert_eq!(top.to_vec2::<f32>().expect("top"), [[28.0], [32.0]]);
    assert_eq!(at.to_vec2::<u32>().expect("at"), [[0], [0]]);
    // Single-problem top-k.
    let keys: Vec<f32> = sample_keys(1 << 20, 11);
    let line_cpu = Tensor::from_vec(keys, 1 << 20, &Device::Cpu).expect("line");
    let line = line_cpu.to_device(&gpu).expect("upload");
    for k in [1, 100, 5000] {
        let (want, want_at) = topk::<i64>(&line_cpu, k, SelectDirection::Max).expect("cpu");
        let (got, at) = topk::<i64>(&line, k, SelectDirection::Max).expect("gpu");
        assert_eq!(bits::<f32>(&got), bits::<f32>(&want), "k = {k}");
        assert_eq!(indices::<i64>(&at), indices::<i64>(&want_at), "k = {k}");
    }
    // A strided view is refused, on the GPU as on the CPU.
    let x = Tensor::new(&[[1f32, 2.0, 3.0], [4.0, 5.0, 6.0]], &gpu).expect("x");
    let strided = x.t().expect("transpose");
    match rows_topk::<u32>(&strided, 1, SelectDirection::Max) {
        Err(Error::InvalidArgument { reason, .. }) => assert!(reason.contains(".contiguous()")),
        other => panic!("a strided view: {other:?}"),
    }
}

#[test]
fn calls_share_one_runtime_on_candles_stream() {
    let Some(gpu) = gpu() else { return };
    let Device::Cuda(device) = &gpu else {
        unreachable!("a CUDA device")
    };
    let first = cuda_backend(device).expect("backend");
    let second = cuda_backend(device).expect("backend");
    assert!(std::ptr::eq(first.runtime(), second.runtime()));
    assert!(std::sync::Arc::ptr_eq(
        first.stream(),
        &device.cuda_stream()
    ));
    // Steady state: after the first call of a shape, repeated calls allocate nothing of
    // oxicub's (the outputs are the caller's new tensors).
    let x = Tensor::from_vec(sample_keys::<f32>(512 * 256, 12), (512, 256), &gpu).expect("x");
    rows_topk::<u32>(&x, 8, SelectDirection::Max).expect("warm");
    let before = first.device_allocations();
    for _ in 0..20 {
        rows_topk::<u32>(&x, 8, SelectDirection::Max).expect("route");
    }
    assert_eq!(first.device_allocations(), before);
}

/// Rows sorted on the GPU equal the CPU's (stable: ties by position; NaN, -0.0), every width of
/// key, both orders; set operations of sorted CUDA tensors equal the CPU's, and an unsorted
/// input is the CPU's error.
#[test]
fn sorts_and_set_operations_equal_the_cpu_calls() {
    use oxicub::candle::{set_operation, sort};
    use oxicub::params::SortOrder;
    use oxicub::sets::op;
    let Some(gpu) = gpu() else { return };
    fn same_sort<K: RadixKey + WithDType>(gpu: &Device, keys: Vec<K>, shape: &[usize]) {
        let on_cpu = Tensor::from_vec(keys, shape, &Device::Cpu).expect("cpu tensor");
        let on_gpu = on_cpu.to_device(gpu).expect("upload");
        for order in [SortOrder::Ascending, SortOrder::Descending] {
            let (want, want_at) = sort::<i64>(&on_cpu, order).expect("cpu");
            let (got, at) = sort::<i64>(&on_gpu, order).expect("gpu");
            assert!(got.device().is_cuda() && got.dims() == want.dims());
            let what = format!("{:?} {shape:?} {order:?}", K::DTYPE);
            assert_eq!(bits::<K>(&got), bits::<K>(&want), "{what}: keys");
            assert_eq!(
                indices::<i64>(&at),
                indices::<i64>(&want_at),
                "{what}: positions"
            );
        }
    }
    same_sort::<f32>(&gpu, sample_keys(700 * 3000, 21), &[700, 3000]);
    same_sort::<bf16>(&gpu, sample_keys(64 * 256, 22), &[64, 256]);
    same_sort::<u8>(&gpu, sample_keys(16 * 5000, 23), &[16, 5000]);
    same_sort::<i64>(&gpu, sample_keys(1 << 20, 24), &[1 << 20]);
    same_sort::<f64>(&gpu, vec![2.0, f64::NAN, 0.0, -0.0, -1.0, 2.0], &[2, 3]);
    same_sort::<f32>(&gpu, vec![], &[4, 0]);
    let sorted = |seed: u64, len: usize, order: SortOrder| {
        let mut keys: Vec<f32> = sample_keys::<f32>(len, seed)
            .iter()
            .map(|k| (k * 64.0).floor())
            .filter(|k| !k.is_nan())
            .collect();
        keys.sort_by(|x, y| x.total_cmp(y));
        if order == SortOrder::Descending {
            keys.reverse();
        }
        Tensor::from_vec(keys.clone(), keys.len(), &Device::Cpu).expect("sorted")
    };
    for order in [SortOrder::Ascending, SortOrder::Descending] {
        let (a, b) = (sorted(25, 300_000, order), sorted(26, 200_000, order));
        let (ga, gb) = (a.to_device(&gpu).expect("a"), b.to_device(&gpu).expect("b"));
        macro_rules! same {
            ($op:expr) => {{
                let want = set_operation($op, order, &a, &b).expect("cpu");
                let got = set_operation($op, order, &ga, &gb).expect("gpu");
                assert!(got.device().is_cuda());
                assert_eq!(bits::<f32>(&got), bits::<f32>(&want), "{:?} {order:?}", $op);
            }};
        }
        same!(op::Intersection);
        same!(op::Union);
        same!(op::Difference);
        same!(op::SymmetricDifference);
        same!(op::Merge);
    }
    let unsorted = Tensor::new(&[3f32, 1.0, 2.0], &gpu).expect("unsorted");
    let cpu_unsorted = unsorted.to_device(&Device::Cpu).expect("cpu");
    let error = |r: Result<Tensor, Error>| r.expect_err("unsorted").to_string();
    assert_eq!(
        error(set_operation(
            op::Union,
            SortOrder::Ascending,
            &unsorted,
            &unsorted
        )),
        error(set_operation(
            op::Union,
            SortOrder::Ascending,
            &cpu_unsorted,
            &cpu_unsorted
        ))
    );
}
