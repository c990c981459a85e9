// Rule: a deferred k lives where the backend runs: a `&i64` in host memory cannot be read by
// the Cuda backend (it reads a one-element `CudaView<i64>`).
use oxicub::{k, topk, Cuda, Env};

fn run(cuda: &Cuda, keys: cudarc::driver::CudaView<'_, f32>, out: cudarc::driver::CudaViewMut<'_, f32>) {
    let produced_earlier = 8i64;
    let _ = topk::max_keys(
        cuda,
        keys,
        out,
        &k::Deferred::<_, 0, 8>::new(&produced_earlier),
        &Env::new(),
    );
}

fn main() {
    let _ = run;
}
