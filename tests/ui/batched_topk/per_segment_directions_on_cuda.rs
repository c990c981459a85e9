// Rule: per-segment directions live where the backend runs: a host slice of directions cannot
// be read by the Cuda backend (it reads a `CudaView<u8>`).
use cudarc::driver::{CudaView, CudaViewMut};
use oxicub::batched_topk::{self, Problem};
use oxicub::{direction, k, num_segments, segment_size, Cuda, Env, SelectDirection};

fn run(cuda: &Cuda, keys: CudaView<'_, f32>, out: CudaViewMut<'_, f32>) {
    let directions = [SelectDirection::Max, SelectDirection::Min];
    let problem = Problem::strided(
        4,
        segment_size::Static::<4>::new(),
        k::Static::<2>::new(),
        direction::PerSegment::<_>::new(&directions[..]),
        num_segments::uniform(2).unwrap(),
    );
    let _ = batched_topk::select_keys(cuda, &problem, keys, out, &Env::new());
}

fn main() {
    let _ = run;
}
