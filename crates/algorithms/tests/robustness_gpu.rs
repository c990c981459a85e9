//! What safe calls cannot make the GPU do (issue 23): allocate less scratch than the kernels
//! write (sizes from huge bounds are checked before allocating). Each test skips without a GPU (fails with
//! OXICUB_REQUIRE_GPU=1); run them under compute-sanitizer memcheck, which must report nothing.

use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::{Error, KernelError};
use oxicub_env::Env;
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
