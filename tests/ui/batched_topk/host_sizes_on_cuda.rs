// Rule: per-segment values live where the backend runs: sizes in a host slice cannot be read
// by the Cuda backend (it reads a `CudaView<i64>`).
use cudarc::driver::{CudaView, CudaViewMut};
use oxicub::batched_topk::{self, Problem};
use oxicub::{direction, k, num_segments, segment_size, Cuda, Env};

fn run(cuda: &Cuda, keys: CudaView<'_, f32>, out: CudaViewMut<'_, f32>) {
    let sizes = [3i64, 4];
    let problem = Problem::strided(
        4,
        segment_size::PerSegment::<_, 0, 4>::new(&sizes[..]),
        k::Static::<2>::new(),
        direction::Max,
        num_segments::uniform(2).unwrap(),
    );
    let _ = batched_topk::select_keys(cuda, &problem, keys, out, &Env::new());
}

fn main() {
    let _ = run;
}
