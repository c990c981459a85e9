//! oxicub inside code that already lives on cudarc: the engine's own context and stream, its
//! `CudaSlice` of scores in, `CudaView`s of the results out, no copy through the host and no
//! synchronisation until the engine asks for one.
//!
//! `cargo run --release --example cudarc_views`
//!
//! An inference engine holds its tensors as cudarc buffers on its own stream. Here a block of
//! attention scores `[queries x keys]` is ranked per query (top-64 positions, `i64` indices as
//! torch holds them); the positions stay on the device, where the next kernel reads them as
//! views. The result is checked against the host backend at the end. Without a GPU the
//! example says so and exits.

use cudarc::driver::{CudaContext, CudaView};
use oxicub::batched_topk::{self, Problem};
use oxicub::{direction, k, num_segments, segment_size, Cuda, Env, Error, Host};

const QUERIES: usize = 32;
const KEYS: usize = 4096;
const TOP_K: usize = 64;

/// Deterministic pseudo-random scores in [0, 1).
fn scores() -> Vec<f32> {
    let mut state = 0x0005_DEEC_E66D_u64;
    (0..QUERIES * KEYS)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // cudarc's loader panics when the driver library is missing: ask first.
    if let Err(why) = oxicub::driver_available() {
        println!("{why}: nothing to run on (the host backend needs no driver)");
        return Ok(());
    }
    let ctx = match CudaContext::new(0) {
        Ok(ctx) => ctx,
        Err(why) => {
            println!("no usable GPU ({why}): nothing to run on");
            return Ok(());
        }
    };
    // The engine's stream; oxicub runs on it, ordered with the engine's other work.
    let stream = ctx.new_stream()?;
    let cuda = Cuda::from_stream(stream.clone())?;

    // The engine's tensors: scores produced on the device, outputs allocated by the engine.
    let host_scores = scores();
    let scores = stream.clone_htod(&host_scores)?;
    let mut top_scores = stream.alloc_zeros::<f32>(QUERIES * TOP_K)?;
    let mut positions = stream.alloc_zeros::<i64>(QUERIES * TOP_K)?;

    let problem = Problem::strided(
        KEYS,
        segment_size::Static::<{ KEYS as i64 }>::new(),
        k::Static::<{ TOP_K as i64 }>::new(),
        direction::Max,
        num_segments::uniform(QUERIES as i64)?,
    );
    // Asynchronous: the call returns once the kernels are queued on the engine's stream.
    let outcome = batched_topk::select_indices(
        &cuda,
        &problem,
        scores.as_view(),
        top_scores.as_view_mut(),
        positions.as_view_mut(),
        &Env::new(),
    )?;

    // The results are cudarc views: the next kernel of the engine reads query 3's positions
    // in place, ordered after the top-k on the same stream.
    let query_3: CudaView<'_, i64> = positions.slice(3 * TOP_K..4 * TOP_K);
    println!("query 3's {} positions stay on the device", query_3.len());

    // The engine's explicit synchronisation point: every segment was valid.
    outcome.check()?;

    // Checked against the host backend, bit for bit (the default contract pins every output).
    let (mut want_scores, mut want_positions) =
        (vec![0f32; QUERIES * TOP_K], vec![0i64; QUERIES * TOP_K]);
    batched_topk::select_indices(
        &Host::new(),
        &problem,
        &host_scores[..],
        &mut want_scores[..],
        &mut want_positions[..],
        &Env::new(),
    )?
    .check()?;
    let got_positions = stream.clone_dtoh(&positions)?;
    let got_scores = stream.clone_dtoh(&top_scores)?;
    if got_positions != want_positions || got_scores != want_scores {
        return Err(Box::new(Error::InvalidArgument {
            arg: "positions",
            reason: "the GPU's top-k differs from the host backend's".to_owned(),
        }));
    }
    println!(
        "{QUERIES} queries x {KEYS} keys, top-{TOP_K} on {cuda}: matches the host backend; \
         query 0's best position is {} (score {})",
        got_positions[0], got_scores[0]
    );
    Ok(())
}
