//! What safe calls cannot make the GPU do (issue 23): allocate less scratch than the kernels
//! write (sizes from huge bounds are checked before allocating), read a listed segment past its
//! view or a view of another context. Each test skips without a GPU (fails with
//! OXICUB_REQUIRE_GPU=1); run them under compute-sanitizer memcheck, which must report nothing.

use cudarc::driver::CudaContext;
use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::{Error, KernelError};
use oxicub_env::Env;
use oxicub_kernels::families::batched_topk::{
    batched_topk, BatchedLayout, BatchedTiers, BatchedTopKPlan,
};
use oxicub_kernels::families::{HostOrDevice, SelectedValues};
use oxicub_params::guarantee::TotalItems;
use oxicub_params::{direction, k, num_segments, segment_size};
use oxicub_test::gpu_or_skip;

/// A segment count read on the device sizes the scratch by its bound. The case:
/// stride 0, segments of size 0, a deferred count bounded by 2^60 + 1 (100,000 on the device)
/// and a TotalItems guarantee of [0, 0]: the descriptors' 2^62 + 4 words are 2^65 + 32 bytes,
/// which a plain multiplication wraps to a 32-byte buffer that the control stage then wrote
/// 3.2 MB past. Now the call is refused before anything is allocated or launched; so is a
/// bound whose scratch does not wrap but exceeds the device's memory. The backend stays usable.
#[test]
fn scratch_sized_from_a_huge_deferred_bound_is_refused() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys = cuda.upload(&[1.0f32]).expect("upload");
    let count = cuda.upload(&[100_000i64]).expect("upload");
    let mut out = cuda.upload(&[-1.0f32]).expect("upload");
    let env = Env::new().guarantee(TotalItems::<0, 0>::new());

    let wrapping = Problem::strided(
        0,
        segment_size::Static::<0>::new(),
        k::Static::<0>::new(),
        direction::Max,
        num_segments::Deferred::<_, 0, { (1 << 60) + 1 }>::new(count.as_view()),
    );
    let result =
        batched_topk::select_keys(&cuda, &wrapping, keys.as_view(), out.as_view_mut(), &env);
    let words = ((1u64 << 60) + 1) * 4;
    match result {
        Err(Error::Kernel(KernelError::AllocationTooLarge {
            buffer: "descriptors",
            count,
            element_bytes: 8,
            ..
        })) if count == words => {}
        Err(other) => panic!("expected the descriptors refused, got {other}"),
        Ok(_) => panic!("a call whose scratch size wraps was launched"),
    }

    let past_the_device = Problem::strided(
        0,
        segment_size::Static::<0>::new(),
        k::Static::<0>::new(),
        direction::Max,
        num_segments::Deferred::<_, 0, { 1 << 40 }>::new(count.as_view()),
    );
    let result = batched_topk::select_keys(
        &cuda,
        &past_the_device,
        keys.as_view(),
        out.as_view_mut(),
        &env,
    );
    match result {
        Err(Error::Kernel(KernelError::AllocationTooLarge { limit, .. })) => {
            assert_eq!(limit, cuda.facts().total_memory.min(isize::MAX as u64));
        }
        Err(other) => panic!("expected an allocation refused, got {other}"),
        Ok(_) => panic!("a call whose scratch exceeds the device's memory was launched"),
    }
    assert_eq!(cuda.download(&out.as_view()).expect("download"), [-1.0]);

    // The same shape with a bound the device holds runs, and writes nothing (size 0).
    let fitting = Problem::strided(
        0,
        segment_size::Static::<0>::new(),
        k::Static::<0>::new(),
        direction::Max,
        num_segments::Deferred::<_, 0, 100_000>::new(count.as_view()),
    );
    batched_topk::select_keys(&cuda, &fitting, keys.as_view(), out.as_view_mut(), &env)
        .expect("call")
        .check()
        .expect("every segment is empty");
    assert_eq!(cuda.download(&out.as_view()).expect("download"), [-1.0]);
}

/// A plan of the listed layout: `n` segments of any size, `k` on the host, the tiers those
/// bounds allow, sorted output.
fn listed_plan<'a, 'b>(
    segments: &'b [cudarc::driver::CudaView<'a, u32>],
    n: u64,
    k: u64,
) -> BatchedTopKPlan<'a, 'b, u32> {
    BatchedTopKPlan {
        layout: BatchedLayout::Listed { segments },
        k: HostOrDevice::Host(k),
        direction: HostOrDevice::Host(0),
        direction_mask: 1,
        num_segments: HostOrDevice::Host(n),
        num_segments_bounds: (n, n),
        size_bounds: (0, 1 << 40),
        k_bounds: (k, k),
        total_bounds: (0, u64::MAX),
        out_stride: k,
        per_segment_max: k,
        tiers: BatchedTiers::for_bounds((0, 1 << 40), (k as i64, k as i64)),
        warp_items: 8,
        prefer_larger_index: false,
        sorted: true,
        stable: true,
    }
}

/// The kernels' listed layout takes the segments' views, not addresses: a segment is exactly
/// its view, so the larger keys right after a view in its allocation are never selected, and
/// values views shorter than their segments, or fewer segments than the plan's count, are
/// refused.
#[test]
fn listed_segments_are_their_views_and_nothing_past_them() {
    let Some(cuda) = gpu_or_skip() else { return };
    // Each allocation: the segment's keys, then larger keys past the view.
    let first = cuda.upload(&[3u32, 1, 2, 900, 901, 902]).expect("upload");
    let second = cuda.upload(&[7u32, 5, 800, 801]).expect("upload");
    let views = [first.slice(0..3), second.slice(0..2)];
    let values = cuda.upload(&[30u32, 10, 20, 70, 50]).expect("upload");
    let value_views = [values.slice(0..3), values.slice(3..5)];
    // k = 4 is more than either segment holds: each writes all of its own keys. (Room for
    // three segments' outputs, for the call of three below.)
    let mut out_keys = cuda.upload(&[u32::MAX; 12]).expect("upload");
    let mut out_values = cuda.upload(&[u32::MAX; 12]).expect("upload");
    let status = batched_topk::<u32, u32>(
        cuda.runtime(),
        cuda.stream(),
        listed_plan(&views, 2, 4),
        None,
        &mut out_keys.as_view_mut(),
        SelectedValues::Listed {
            values: &value_views,
            out: &mut out_values.as_view_mut(),
        },
    )
    .expect("launch");
    let report = status.decode(cuda.stream()).expect("status");
    assert_eq!(report.violation, None);
    let keys = cuda.download(&out_keys.as_view()).expect("download");
    let got_values = cuda.download(&out_values.as_view()).expect("download");
    let m = u32::MAX;
    let expected = [3, 2, 1, m, 7, 5, m, m, m, m, m, m];
    assert_eq!(keys, expected);
    assert_eq!(got_values, [30, 20, 10, m, 70, 50, m, m, m, m, m, m]);

    // A values view shorter than its segment, and fewer views than segments.
    let short_values = [values.slice(0..3), values.slice(3..4)];
    let result = batched_topk::<u32, u32>(
        cuda.runtime(),
        cuda.stream(),
        listed_plan(&views, 2, 4),
        None,
        &mut out_keys.as_view_mut(),
        SelectedValues::Listed {
            values: &short_values,
            out: &mut out_values.as_view_mut(),
        },
    );
    assert!(
        matches!(
            result,
            Err(KernelError::LengthMismatch {
                buffer: "values",
                actual: 1,
                expected: 2
            })
        ),
        "{result:?}"
    );
    let result = batched_topk::<u32, u32>(
        cuda.runtime(),
        cuda.stream(),
        listed_plan(&views, 3, 4),
        None,
        &mut out_keys.as_view_mut(),
        SelectedValues::None,
    );
    assert!(
        matches!(
            result,
            Err(KernelError::LengthMismatch {
                buffer: "segments",
                actual: 2,
                expected: 3
            })
        ),
        "{result:?}"
    );
    let keys = cuda.download(&out_keys.as_view()).expect("download");
    assert_eq!(keys, expected, "a refused call wrote");
}

/// A listed segment, or its values, in another context (here a second context on the same
/// device) is refused with `WrongContext` before anything touches it.
#[test]
fn listed_views_of_another_context_are_refused() {
    let Some(cuda) = gpu_or_skip() else { return };
    let other = CudaContext::new_non_primary(0, 0).expect("a second context");
    let other_stream = other.default_stream();
    let foreign = other_stream.clone_htod(&[4.0f32, 8.0]).expect("upload");
    let foreign_values = other_stream.clone_htod(&[40u32, 80]).expect("upload");
    let own = cuda.upload(&[1.0f32, 2.0]).expect("upload");
    let own_values = cuda.upload(&[10u32, 20]).expect("upload");
    let problem = Problem::listed(
        segment_size::PerSegment::<(), 0, 16>::new(()),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(2).expect("n"),
    );
    let mut out_keys = cuda.upload(&[0.0f32; 2]).expect("upload");
    let mut out_values = cuda.upload(&[0u32; 2]).expect("upload");
    let wrong_context = |result: Result<_, Error>, list: &str| match result {
        Err(Error::Kernel(KernelError::WrongContext { buffer, .. })) => {
            assert_eq!(buffer, list);
        }
        Err(other) => panic!("{list}: expected WrongContext, got {other}"),
        Ok(_) => panic!("{list}: a view of another context was launched on"),
    };
    let result = batched_topk::select_keys_listed(
        &cuda,
        &problem,
        &[own.as_view(), foreign.as_view()],
        out_keys.as_view_mut(),
        &Env::new(),
    );
    wrong_context(result, "segments");
    let result = batched_topk::select_pairs_listed(
        &cuda,
        &problem,
        &[own.as_view(), own.as_view()],
        &[own_values.as_view(), foreign_values.as_view()],
        out_keys.as_view_mut(),
        out_values.as_view_mut(),
        &Env::new(),
    );
    wrong_context(result, "values");
    // The same call with views of the backend's context runs.
    batched_topk::select_pairs_listed(
        &cuda,
        &problem,
        &[own.as_view(), own.as_view()],
        &[own_values.as_view(), own_values.as_view()],
        out_keys.as_view_mut(),
        out_values.as_view_mut(),
        &Env::new(),
    )
    .expect("call")
    .check()
    .expect("valid");
    assert_eq!(
        cuda.download(&out_keys.as_view()).expect("download"),
        [2.0, 2.0]
    );
    assert_eq!(
        cuda.download(&out_values.as_view()).expect("download"),
        [20, 20]
    );
}

/// The stream tier needs 100-160 KiB of shared memory per block; on a device with less (sm_86
/// and sm_89 have 99 KiB, simulated here on the lent GPU by lowering the runtime's limit) the
/// multi-block tier takes its segments and the call gives the same exact results, where it
/// failed with `Resources` when the tier was chosen without the device's limits.
#[test]
fn a_device_with_99_kib_of_shared_memory_runs_the_stream_tiers_segments() {
    use oxicub_kernels::families::batched_topk::clustered_launches;
    use oxicub_kernels::KernelRuntime;
    let Some(cuda) = gpu_or_skip() else { return };
    let (rows, size, k) = (8usize, 131_072usize, 2048usize);
    let keys: Vec<u32> = oxicub_test::sample_keys(rows * size, 23);
    let device_keys = cuda.upload(&keys).expect("upload");
    let plan = BatchedTopKPlan {
        layout: BatchedLayout::Strided {
            stride: size as u64,
            sizes: HostOrDevice::Host(size as u64),
        },
        k: HostOrDevice::Host(k as u64),
        direction: HostOrDevice::Host(0),
        direction_mask: 1,
        num_segments: HostOrDevice::Host(rows as u64),
        num_segments_bounds: (rows as u64, rows as u64),
        size_bounds: (size as u64, size as u64),
        k_bounds: (k as u64, k as u64),
        total_bounds: (0, u64::MAX),
        out_stride: k as u64,
        per_segment_max: k as u64,
        tiers: BatchedTiers::for_bounds((size as i64, size as i64), (k as i64, k as i64)),
        warp_items: 8,
        prefer_larger_index: false,
        sorted: true,
        stable: true,
    };
    assert_eq!(plan.tiers, BatchedTiers::STREAM);
    // Every row's best k keys, larger first, equal keys by smaller index.
    let mut expected_keys = Vec::with_capacity(rows * k);
    let mut expected_indices = Vec::with_capacity(rows * k);
    for row in keys.chunks(size) {
        let mut order: Vec<u32> = (0..size as u32).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(row[i as usize]), i));
        expected_keys.extend(order[..k].iter().map(|&i| row[i as usize]));
        expected_indices.extend_from_slice(&order[..k]);
    }
    let small = KernelRuntime::new(cuda.context().clone())
        .expect("runtime")
        .with_shared_memory_limit(99 * 1024);
    for (what, runtime) in [("the device", cuda.runtime()), ("99 KiB", &small)] {
        let mut out_keys = cuda.alloc_zeros::<u32>(rows * k).expect("alloc");
        let mut out_indices = cuda.alloc_zeros::<u32>(rows * k).expect("alloc");
        let clustered = clustered_launches();
        batched_topk::<u32, u32>(
            runtime,
            cuda.stream(),
            plan,
            Some(&device_keys.as_view()),
            &mut out_keys.as_view_mut(),
            SelectedValues::Index {
                out: &mut out_indices.as_view_mut(),
            },
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"))
        .decode(cuda.stream())
        .expect("status");
        let got_keys = cuda.download(&out_keys.as_view()).expect("download");
        let got_indices = cuda.download(&out_indices.as_view()).expect("download");
        assert!(got_keys == expected_keys, "{what}: keys differ");
        assert!(got_indices == expected_indices, "{what}: indices differ");
        if what == "99 KiB" {
            assert_eq!(
                clustered_launches(),
                clustered,
                "no clustered launch on 99 KiB"
            );
        }
    }
}
