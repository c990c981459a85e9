//! The deterministic `f32` functions of `cuda/core/math.cuh` on the GPU give the bits their Rust
//! twins (`oxicub::kernels::math`) give on the host, for every one of the 2^32 inputs: `exp`,
//! `sigmoid`, `softplus`. The kernel is compiled with NVRTC's default options (fma contraction
//! on), so the test also shows that the intrinsics keep the compiler from contracting. Skips
//! without a GPU (fails with OXICUB_REQUIRE_GPU=1).

use std::sync::Arc;

use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use oxicub_kernels::math;

mod common;

const SOURCE: &str = concat!(
    include_str!("../cuda/core/types.cuh"),
    include_str!("../cuda/core/math.cuh"),
    r#"
extern "C" __global__ void evaluate(unsigned int base, unsigned int n, float* exp_out,
                                    float* sigmoid_out, float* softplus_out) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float x = __uint_as_float(base + i);
        exp_out[i] = oxicub::det_exp(x);
        sigmoid_out[i] = oxicub::det_sigmoid(x);
        softplus_out[i] = oxicub::det_softplus(x);
    }
}
"#
);

/// A host twin, by name.
type Twin = (&'static str, fn(f32) -> f32);

/// Inputs per launch: 2^26 bit patterns, 64 launches in all.
const CHUNK: u32 = 1 << 26;

#[test]
fn every_input_gives_the_hosts_bits() {
    if !common::gpu_or_skip() || !common::nvrtc_or_skip() {
        return;
    }
    let ptx = cudarc::nvrtc::compile_ptx(SOURCE).expect("NVRTC compiles math.cuh");
    let ctx = CudaContext::new(0).expect("context");
    let stream = ctx.default_stream();
    let module = ctx.load_module(ptx).expect("module");
    let evaluate = module.load_function("evaluate").expect("function");
    let mut outputs: Vec<_> = (0..3)
        .map(|_| stream.alloc_zeros::<f32>(CHUNK as usize).expect("alloc"))
        .collect();
    let functions: [Twin; 3] = [
        ("exp", math::exp),
        ("sigmoid", math::sigmoid),
        ("softplus", math::softplus),
    ];
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let mut mismatches: Vec<String> = Vec::new();
    for chunk in 0..(1u64 << 32) / CHUNK as u64 {
        let base = (chunk * CHUNK as u64) as u32;
        let mut launch = stream.launch_builder(&evaluate);
        let (exp_out, rest) = outputs.split_at_mut(1);
        let (sigmoid_out, softplus_out) = rest.split_at_mut(1);
        launch
            .arg(&base)
            .arg(&CHUNK)
            .arg(&mut exp_out[0])
            .arg(&mut sigmoid_out[0])
            .arg(&mut softplus_out[0]);
        // SAFETY: the kernel writes `CHUNK` floats into each of three buffers of that length.
        unsafe { launch.launch(LaunchConfig::for_num_elems(CHUNK)) }.expect("launch");
        for ((name, f), out) in functions.iter().zip(&outputs) {
            let got = stream.clone_dtoh(out).expect("download");
            let got = Arc::new(got);
            let per = (CHUNK as usize).div_ceil(threads);
            let found: Vec<Option<(u32, u32, u32)>> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let got = Arc::clone(&got);
                        scope.spawn(move || {
                            let end = ((t + 1) * per).min(CHUNK as usize);
                            (t * per..end).find_map(|i| {
                                let bits = base + i as u32;
                                let want = f(f32::from_bits(bits)).to_bits();
                                let have = got[i].to_bits();
                                (want != have).then_some((bits, have, want))
                            })
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("no panic"))
                    .collect()
            });
            for (bits, have, want) in found.into_iter().flatten() {
                mismatches.push(format!(
                    "{name}({:e} = {bits:#010x}): device {have:#010x}, host {want:#010x}",
                    f32::from_bits(bits)
                ));
            }
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// The header compiles with NVRTC's default options (no GPU needed: CI runs it).
#[test]
fn the_header_compiles_with_nvrtc() {
    if !common::nvrtc_or_skip() {
        return;
    }
    cudarc::nvrtc::compile_ptx(SOURCE).expect("NVRTC compiles math.cuh");
}
