//! What keeps safe code from writing memory it was not given, on the GPU: the kernel
//! launchers' own checks of a plan against its buffers, the copy of values into page-locked
//! host memory, and the contract's error for an empty deferred value.

use cudarc::driver::{CudaSlice, CudaView};
use oxicub_algorithms::{topk, Error, KernelError};
use oxicub_env::Env;
use oxicub_kernels::families::batched_topk::{
    batched_topk, BatchedLayout, BatchedTiers, BatchedTopKPlan,
};
use oxicub_kernels::families::topk_radix_select::{topk_radix_select, TopKPlan};
use oxicub_kernels::families::{HostOrDevice, SelectedValues};
use oxicub_kernels::{Direction, Scratch};
use oxicub_params::k;
use oxicub_test::gpu_or_skip;

/// A launcher is a safe function: a plan whose k is more than its outputs hold is refused,
/// not run.
#[test]
fn topk_launcher_refuses_a_k_above_what_the_outputs_hold() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys = cuda
        .upload(&(0..200u32).collect::<Vec<_>>())
        .expect("upload");
    let mut out: CudaSlice<u32> = cuda.alloc_zeros(1).expect("alloc");
    let plan = TopKPlan {
        direction: Direction::Descending,
        prefer_larger_index: false,
        sorted: true,
        deterministic: true,
        k: HostOrDevice::Host(32),
        k_bounds: (32, 32),
        max_written: 1,
    };
    let result = topk_radix_select::<u32, u32>(
        cuda.runtime(),
        cuda.stream(),
        &Scratch::allocate(),
        plan,
        &keys.as_view(),
        &mut out.as_view_mut(),
        SelectedValues::None,
    );
    assert!(
        matches!(result, Err(KernelError::InvalidSpec { .. })),
        "{result:?}"
    );
}

/// A batched plan must lay its outputs out for the most a segment can write, and segments'
/// outputs must not overlap.
#[test]
fn batched_launcher_refuses_outputs_laid_out_for_less_than_a_segment_writes() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys = cuda.upload(&vec![1.0f32; 4 * 256]).expect("upload");
    let mut out: CudaSlice<f32> = cuda.alloc_zeros(4).expect("alloc");
    let plan = |per_segment_max: u64, out_stride: u64| BatchedTopKPlan {
        layout: BatchedLayout::Strided {
            stride: 256,
            sizes: HostOrDevice::Host(256),
        },
        k: HostOrDevice::Host(8),
        direction: HostOrDevice::Host(0),
        direction_mask: 1,
        num_segments: HostOrDevice::Host(4),
        num_segments_bounds: (4, 4),
        size_bounds: (256, 256),
        k_bounds: (8, 8),
        total_bounds: (0, u64::MAX),
        out_stride,
        per_segment_max,
        tiers: BatchedTiers::WARP,
        warp_items: 8,
        prefer_larger_index: false,
        sorted: true,
        stable: true,
        reject_k_above_size: false,
        fill: None,
    };
    for (per_segment_max, out_stride) in [(1, 1), (8, 1)] {
        let result = batched_topk::<f32, u32>(
            cuda.runtime(),
            cuda.stream(),
            &Scratch::allocate(),
            plan(per_segment_max, out_stride),
            Some(&keys.as_view()),
            &mut out.as_view_mut(),
            SelectedValues::None,
        );
        assert!(
            matches!(result, Err(KernelError::InvalidSpec { .. })),
            "per_segment_max {per_segment_max}, out_stride {out_stride}: {result:?}"
        );
    }
}

/// Into page-locked memory a device-to-host copy is asynchronous: `download_into` returns only
/// once every value has landed.
#[test]
fn download_into_page_locked_memory_waits_for_the_copy() {
    let Some(cuda) = gpu_or_skip() else { return };
    let n = 64 << 20; // 256 MiB: the copy outlasts the call's return by far if nothing waits
    let values = cuda.upload_values(&vec![7u32; n]).expect("upload");
    cuda.stream().synchronize().expect("sync");
    // SAFETY: the page-locked buffer is fully written (filled) before it is read.
    let mut pinned = unsafe { cuda.context().alloc_pinned::<u32>(n) }.expect("pinned");
    let out = pinned.as_mut_slice().expect("host slice");
    out.fill(0);
    values.download_into(&cuda, out).expect("download");
    let stale = out.iter().rev().take(1 << 20).filter(|&&v| v != 7).count();
    assert_eq!(stale, 0, "download_into returned before the copy landed");
}

/// A deferred `k` is read from a one-element buffer: an empty one is the contract's error,
/// named, before anything is launched.
#[test]
fn an_empty_deferred_k_is_a_named_error() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys = cuda.upload(&[1u32, 2, 3]).expect("upload");
    let one = cuda.alloc_zeros::<i64>(1).expect("alloc");
    let empty: CudaView<'_, i64> = one.slice(0..0);
    let mut out = cuda.alloc_zeros::<u32>(3).expect("alloc");
    let result = topk::max_keys(
        &cuda,
        keys.as_view(),
        out.as_view_mut(),
        &k::Deferred::<_, 0, 3>::new(empty),
        &Env::new(),
    );
    assert!(
        matches!(result, Err(Error::BufferTooSmall { arg: "k", .. })),
        "{result:?}"
    );
}
