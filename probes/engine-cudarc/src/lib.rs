//! An engine's router on its own cudarc stream: the types of both crates meet in one build.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use oxicub::batched_topk::{self, Problem};
use oxicub::{direction, k, num_segments, segment_size, Cuda, Env};

/// The top 8 of each of `tokens` rows of 256 expert scores, on the engine's stream.
pub fn route(
    stream: Arc<CudaStream>,
    scores: &CudaSlice<f32>,
    top: &mut CudaSlice<f32>,
    experts: &mut CudaSlice<u32>,
    tokens: i64,
) -> Result<(), oxicub::Error> {
    let cuda = Cuda::from_stream(stream)?;
    let rows = Problem::strided(
        256,
        segment_size::Static::<256>::new(),
        k::Static::<8>::new(),
        direction::Max,
        num_segments::uniform(tokens)?,
    );
    batched_topk::select_indices(
        &cuda,
        &rows,
        scores.as_view(),
        top.as_view_mut(),
        experts.as_view_mut(),
        &Env::new(),
    )?
    .check()
}
