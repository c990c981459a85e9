//! A kernel fault poisons its CUDA context for the rest of the process: every later driver call
//! on it fails with the fault's error. The next oxicub call reports that as an unusable context
//! naming the kernel oxicub launched last, not as a failure of its own, and so does every call
//! after it. A test binary of its own: the fault leaves the device's primary context unusable
//! for every later test of the process. Skips without a GPU (fails with OXICUB_REQUIRE_GPU=1).

use cudarc::driver::LaunchConfig;
use cudarc::nvrtc::Ptx;
use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::{radix, topk, Error, KernelError};
use oxicub_env::Env;
use oxicub_params::{direction, k, num_segments, segment_size};
use oxicub_test::gpu_or_skip;

/// A kernel that traps: the fault of some other library's kernel on the context.
const TRAP_PTX: &str = "
.version 7.0
.target sm_70
.address_size 64
.visible .entry oxicub_test_trap()
{
    trap;
    ret;
}
";

#[test]
fn every_call_after_a_kernel_fault_reports_the_context_unusable() {
    let Some(cuda) = gpu_or_skip() else { return };
    // Everything the calls after the fault need, made before it.
    let keys = cuda.upload(&[3u32, 1, 2, 9]).expect("upload");
    let mut codes = cuda.alloc_zeros::<u32>(4).expect("alloc");
    let mut top = cuda.alloc_zeros::<u32>(2).expect("alloc");
    let problem = Problem::strided(
        2,
        segment_size::Static::<2>::new(),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(2).expect("n"),
    );
    let trap = cuda
        .context()
        .load_module(Ptx::from_src(TRAP_PTX))
        .and_then(|module| module.load_function("oxicub_test_trap"))
        .expect("the trap kernel loads");
    // An oxicub launch that runs: the last kernel oxicub launches before the fault.
    radix::transform_keys(&cuda, keys.as_view(), codes.as_view_mut()).expect("transform");
    cuda.stream().synchronize().expect("sync");

    // SAFETY: the kernel takes no argument and touches no memory; it traps at once.
    unsafe {
        cuda.stream()
            .launch_builder(&trap)
            .launch(LaunchConfig::for_num_elems(1))
    }
    .expect("the trap is launched");
    assert!(
        cuda.stream().synchronize().is_err(),
        "the trap faults the context"
    );

    let unusable = |what: &str, result: Result<(), Error>| match result {
        Err(Error::Kernel(KernelError::ContextPoisoned {
            last_launch: Some(last),
            ..
        })) => {
            assert!(
                last.contains("transform_keys"),
                "{what}: names {last}, not the last kernel oxicub launched"
            );
        }
        Err(other) => panic!("{what}: expected an unusable context, got {other}"),
        Ok(()) => panic!("{what}: a call on a faulted context succeeded"),
    };
    // A batched top-k call (its kernel loads or launches first), then a top-k call (it
    // allocates first), then the batched call again: each says the context is unusable.
    let batched = |cuda: &oxicub_algorithms::Cuda, top: &mut cudarc::driver::CudaSlice<u32>| {
        batched_topk::select_keys(
            cuda,
            &problem,
            keys.as_view(),
            top.as_view_mut(),
            &Env::new(),
        )
        .and_then(|outcome| outcome.check())
    };
    unusable("batched_topk", batched(&cuda, &mut top));
    let single = topk::max_keys(
        &cuda,
        keys.as_view(),
        top.as_view_mut(),
        &k::Static::<2>::new(),
        &Env::new(),
    )
    .and_then(|outcome| outcome.check());
    unusable("topk", single);
    unusable("batched_topk again", batched(&cuda, &mut top));
}
