//! What safe calls cannot make the GPU do (issue 23): allocate less scratch than the kernels
//! write (sizes from huge bounds are checked before allocating), read a listed segment past its
//! view or a view of another context. Each test skips without a GPU (fails with
//! OXICUB_REQUIRE_GPU=1); run them under compute-sanitizer memcheck, which must report nothing.

use cudarc::driver::{CudaContext, CudaView};
use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::{Error, KernelError};
use oxicub_env::Env;
use oxicub_kernels::families::batched_topk::{
    batched_topk, BatchedLayout, BatchedTiers, BatchedTopKPlan,
};
use oxicub_kernels::families::{DeviceInts, HostOrDevice, SelectedValues};
use oxicub_kernels::Scratch;
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
    segments: &'b [CudaView<'a, u32>],
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
        reject_k_above_size: false,
        fill: None,
    }
}

/// The kernels' listed layout takes the segments' views, not addresses: a segment is exactly
/// its view, so the larger keys right after a view in its allocation are never selected, and
/// values views shorter than their segments, or fewer segments than the plan's count, are
/// refused (the outputs keep the first call's results).
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
    // `n` segments of `views`, with `values` (none: keys only).
    let mut launch = |n: u64, values: Option<&[CudaView<'_, u32>]>| {
        let mut out_values = out_values.as_view_mut();
        let values = match values {
            Some(values) => SelectedValues::Listed {
                values,
                out: &mut out_values,
            },
            None => SelectedValues::None,
        };
        let plan = listed_plan(&views, n, 4);
        let out_keys = &mut out_keys.as_view_mut();
        let scratch = Scratch::allocate();
        batched_topk::<u32, u32>(
            cuda.runtime(),
            cuda.stream(),
            &scratch,
            plan,
            None,
            out_keys,
            values,
        )
    };
    let status = launch(2, Some(&value_views)).expect("launch");
    let report = status.decode(cuda.stream()).expect("status");
    assert_eq!(report.violation, None);

    // A values view shorter than its segment, and fewer views than segments.
    let short_values = [values.slice(0..3), values.slice(3..4)];
    let result = launch(2, Some(&short_values));
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
    let result = launch(3, None);
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
    let got_values = cuda.download(&out_values.as_view()).expect("download");
    let m = u32::MAX;
    assert_eq!(keys, [3, 2, 1, m, 7, 5, m, m, m, m, m, m]);
    assert_eq!(got_values, [30, 20, 10, m, 70, 50, m, m, m, m, m, m]);
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

/// A plan of `rows` rows of `size` u32 keys in a row and `k` (on the host or per segment on
/// the device), larger keys first, sorted and stable: the tiers its bounds allow.
fn strided_plan<'a, 'b>(
    rows: usize,
    size: usize,
    k: usize,
    ks: Option<&'b CudaView<'a, i64>>,
) -> BatchedTopKPlan<'a, 'b, u32> {
    let (rows, size, k) = (rows as u64, size as u64, k as u64);
    BatchedTopKPlan {
        layout: BatchedLayout::Strided {
            stride: size,
            sizes: HostOrDevice::Host(size),
        },
        k: ks.map_or(HostOrDevice::Host(k), |ks| {
            HostOrDevice::Device(DeviceInts::I64(ks))
        }),
        direction: HostOrDevice::Host(0),
        direction_mask: 1,
        num_segments: HostOrDevice::Host(rows),
        num_segments_bounds: (rows, rows),
        size_bounds: (size, size),
        k_bounds: (k, k),
        total_bounds: (0, u64::MAX),
        out_stride: k,
        per_segment_max: k,
        tiers: BatchedTiers::for_bounds((size as i64, size as i64), (k as i64, k as i64)),
        warp_items: 8,
        prefer_larger_index: false,
        sorted: true,
        stable: true,
        reject_k_above_size: false,
        fill: None,
    }
}

/// The selected keys of every row, one after another, and their indices within their rows.
type TopK = (Vec<u32>, Vec<u32>);

/// Every row's best `k` keys of `keys` (rows of `size`) and their indices: larger keys first,
/// equal keys by the smaller index.
fn expected_top(keys: &[u32], size: usize, k: usize) -> TopK {
    let (mut top, mut indices) = (Vec::new(), Vec::new());
    for row in keys.chunks(size) {
        let mut order: Vec<u32> = (0..size as u32).collect();
        order.sort_by_key(|&i| (std::cmp::Reverse(row[i as usize]), i));
        top.extend(order[..k].iter().map(|&i| row[i as usize]));
        indices.extend_from_slice(&order[..k]);
    }
    (top, indices)
}

/// Runs `plan` over `keys` on `runtime` and `stream` (keys and indices out) and checks the
/// result against [`expected_top`].
fn run_and_check(
    runtime: &oxicub_kernels::KernelRuntime,
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    plan: BatchedTopKPlan<'_, '_, u32>,
    keys: &cudarc::driver::CudaSlice<u32>,
    expected: &TopK,
    what: &str,
) {
    let mut out_keys = stream.alloc_zeros::<u32>(expected.0.len()).expect("alloc");
    let mut out_indices = stream.alloc_zeros::<u32>(expected.0.len()).expect("alloc");
    batched_topk::<u32, u32>(
        runtime,
        stream,
        &Scratch::allocate(),
        plan,
        Some(&keys.as_view()),
        &mut out_keys.as_view_mut(),
        SelectedValues::Index {
            out: &mut out_indices.as_view_mut(),
        },
    )
    .unwrap_or_else(|e| panic!("{what}: {e}"))
    .decode(stream)
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    let got_keys = stream.clone_dtoh(&out_keys).expect("download");
    let got_indices = stream.clone_dtoh(&out_indices).expect("download");
    assert!(got_keys == expected.0, "{what}: keys differ");
    assert!(got_indices == expected.1, "{what}: indices differ");
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
    let (rows, size, k) = (8, 131_072, 2048);
    let keys: Vec<u32> = oxicub_test::sample_keys(rows * size, 23);
    let device_keys = cuda.upload(&keys).expect("upload");
    let plan = strided_plan(rows, size, k, None);
    assert_eq!(plan.tiers, BatchedTiers::STREAM);
    let expected = expected_top(&keys, size, k);
    run_and_check(
        cuda.runtime(),
        cuda.stream(),
        plan,
        &device_keys,
        &expected,
        "the GPU",
    );
    let small = KernelRuntime::new(cuda.context().clone())
        .expect("runtime")
        .with_shared_memory_limit(99 * 1024);
    let clustered = clustered_launches();
    run_and_check(
        &small,
        cuda.stream(),
        plan,
        &device_keys,
        &expected,
        "99 KiB",
    );
    assert_eq!(
        clustered_launches(),
        clustered,
        "a clustered launch on 99 KiB"
    );
}

/// Threads launching one kernel with different dynamic shared memory at once (the stream
/// tier's final selection: about 104 KiB for k = 1, 152 KiB for k = 2048, each raising the
/// function's limit from the default), each on its own stream of one runtime: every launch
/// runs, and so do later ones of either size. When the raises raced, the smaller size could be
/// left on the driver and the larger recorded, and every later launch of the larger size
/// failed for the runtime's life. A fresh runtime per round, so every round raises again.
#[test]
fn threads_raising_a_kernels_shared_memory_limit_at_once() {
    use oxicub_kernels::KernelRuntime;
    let Some(cuda) = gpu_or_skip() else { return };
    let (rows, size) = (4, 131_072);
    let keys: Vec<u32> = oxicub_test::sample_keys(rows * size, 29);
    let cases: Vec<(usize, TopK)> = [1, 2048]
        .into_iter()
        .map(|k| (k, expected_top(&keys, size, k)))
        .collect();
    for round in 0..20 {
        let runtime = KernelRuntime::new(cuda.context().clone()).expect("runtime");
        let start = std::sync::Barrier::new(cases.len());
        std::thread::scope(|scope| {
            for (k, expected) in &cases {
                let (runtime, start, keys, cuda) = (&runtime, &start, &keys, &cuda);
                scope.spawn(move || {
                    let stream = cuda.context().new_stream().expect("stream");
                    let device_keys = stream.clone_htod(keys).expect("upload");
                    // k per segment on the device: not a direct call, so the filter and the
                    // final selection run (the final's shared memory follows k's bound).
                    let ks = stream.clone_htod(&vec![*k as i64; rows]).expect("upload");
                    let ks = ks.as_view();
                    let plan = strided_plan(rows, size, *k, Some(&ks));
                    stream.synchronize().expect("sync");
                    start.wait();
                    let what = format!("round {round}, k = {k}");
                    run_and_check(runtime, &stream, plan, &device_keys, expected, &what);
                    // Again, after the other thread's raise.
                    run_and_check(runtime, &stream, plan, &device_keys, expected, &what);
                });
            }
        });
    }
}
