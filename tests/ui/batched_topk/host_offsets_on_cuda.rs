// Rule: segment offsets live where the backend runs: offsets in host slices cannot be read by
// the Cuda backend (it reads `CudaView<i64>` offsets).
use cudarc::driver::{CudaView, CudaViewMut};
use oxicub::batched_topk::{self, Problem};
use oxicub::{direction, k, num_segments, segment_size, Cuda, Env};

fn run(cuda: &Cuda, keys: CudaView<'_, f32>, out: CudaViewMut<'_, f32>) {
    let (begin, end) = ([0i64, 3], [3i64, 7]);
    let problem = Problem::offsets(
        &begin[..],
        &end[..],
        segment_size::PerSegment::<(), 0, 8>::new(()),
        k::Static::<2>::new(),
        direction::Max,
        num_segments::uniform(2).unwrap(),
    );
    let _ = batched_topk::select_keys(cuda, &problem, keys, out, &Env::new());
}

fn main() {
    let _ = run;
}
