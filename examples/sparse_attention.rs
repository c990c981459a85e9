//! Sparse-attention indexer with batched top-k: for each query, the 2048 highest of 131072
//! key scores (the positions attention will read). Runs on the GPU when there is one
//! (`AnyBackend::auto`), else on the host, and checks the positions against the host backend
//! and a plain per-query reference.
//!
//! `cargo run --release --example sparse_attention [queries]`
//!
//! Segments of 131072 keys are beyond one block's shared memory, and beyond
//! `cub::DeviceBatchedTopK`'s 16384: the static bounds select the stream tier, which reads the
//! scores once with 8 blocks per query, keeps those at or above a sampled threshold, and
//! selects and orders them with one block per query; two launches, no host round trip.

use oxicub::batched_topk::{self, Problem};
use oxicub::{direction, k, num_segments, segment_size, AnyBackend, Env, Error, Host};

const CONTEXT: usize = 131_072;
const TOP_K: usize = 2048;

/// Deterministic pseudo-random scores with many repeats (ties at the boundary are common in
/// quantised indexers).
fn scores(queries: usize) -> Vec<f32> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    (0..queries * CONTEXT)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 52) as f32) / 64.0 // 4096 distinct values
        })
        .collect()
}

fn select(backend: &AnyBackend, scores: &[f32], queries: usize) -> Result<Vec<i64>, Error> {
    let problem = Problem::strided(
        CONTEXT,
        segment_size::Static::<131_072>::new(),
        k::Static::<2048>::new(),
        direction::Max,
        num_segments::uniform(queries as i64)?,
    );
    let mut top = vec![0f32; queries * TOP_K];
    let mut positions = vec![0i64; queries * TOP_K];
    batched_topk::select_indices(
        backend,
        &problem,
        scores,
        &mut top[..],
        &mut positions[..],
        &Env::new(),
    )?
    .check()?;
    Ok(positions)
}

/// The plain reference: positions sorted by score, best first, ties by position.
fn reference(scores: &[f32]) -> Vec<i64> {
    let mut positions = Vec::new();
    for row in scores.chunks(CONTEXT) {
        let mut at: Vec<i64> = (0..CONTEXT as i64).collect();
        at.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
        positions.extend_from_slice(&at[..TOP_K]);
    }
    positions
}

fn main() -> Result<(), Error> {
    let queries: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(16);
    let scores = scores(queries);

    let specs =
        batched_topk::kernel_specs::<f32, segment_size::Static<131_072>, k::Static<2048>, Env>(8);
    println!("kernels this call instantiates on a GPU:");
    for spec in &specs {
        println!("  {spec}");
    }

    let (backend, note) = AnyBackend::auto_explained();
    println!("{note}");
    let start = std::time::Instant::now();
    let positions = select(&backend, &scores, queries)?;
    println!(
        "top-{TOP_K} of {CONTEXT} scores for {queries} queries in {:.2?} (first call includes \
         kernel compilation)",
        start.elapsed()
    );
    let on_host = select(&AnyBackend::Host(Host::new()), &scores, queries)?;
    assert_eq!(positions, on_host, "positions differ from the host");
    assert_eq!(
        positions,
        reference(&scores),
        "positions differ from the reference"
    );
    println!(
        "query 0 reads positions {:?} ...",
        &positions[..8.min(positions.len())]
    );
    println!("checked against the host backend and the per-query reference: ok");
    Ok(())
}
