//! Mixture-of-experts routing with batched top-k: router logits `[tokens x experts]` ->
//! softmax -> top-k experts per token (k static, at most 8) -> renormalised weights and
//! expert ids. Runs on the GPU when there is one (`AnyBackend::auto`), else on the host, and
//! checks the result against the host backend and a plain per-token reference.
//!
//! `cargo run --release --example moe_router [tokens]`
//!
//! Fused form: softmax is monotone within a row, so the top-k of the probabilities are the
//! top-k of the logits, and the renormalised weights are the softmax of the k selected logits
//! alone. `route_fused` therefore runs one top-k over the logits and a k-element softmax per
//! token: no full-row softmax is computed, stored or read again (one pass over the logits
//! instead of three). The two paths are checked to agree: the same experts except where two
//! probabilities round to the same float (a tie the probabilities have and the logits do not),
//! and the same weights to 1e-6.
//!
//! The static bounds do the work: `segment_size::Static<256>` and `k::Static<8>` leave only
//! the warp-per-segment kernel (keys in registers, no shared-memory passes); the list of
//! kernels the call instantiates is printed.

use oxicub::batched_topk::{self, Problem};
use oxicub::{direction, k, num_segments, segment_size, AnyBackend, Env, Error, Host};

const EXPERTS: usize = 256;
const TOP_K: usize = 8;

/// Deterministic pseudo-random router logits in about [-4, 4).
fn router_logits(tokens: usize) -> Vec<f32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..tokens * EXPERTS)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
        })
        .collect()
}

/// Row-wise softmax.
fn softmax(logits: &[f32]) -> Vec<f32> {
    let mut probs = vec![0f32; logits.len()];
    for (row, out) in logits.chunks(EXPERTS).zip(probs.chunks_mut(EXPERTS)) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0f32;
        for (p, &l) in out.iter_mut().zip(row) {
            *p = (l - max).exp();
            sum += *p;
        }
        out.iter_mut().for_each(|p| *p /= sum);
    }
    probs
}

/// Routing of every token: `TOP_K` expert ids and weights that sum to one.
struct Routing {
    experts: Vec<u32>,
    weights: Vec<f32>,
}

/// The top `TOP_K` scores of every token and their expert ids, on `backend`.
fn top_experts(backend: &AnyBackend, scores: &[f32], tokens: usize) -> Result<Routing, Error> {
    let problem = Problem::strided(
        EXPERTS,
        segment_size::Static::<256>::new(),
        k::Static::<8>::new(),
        direction::Max,
        num_segments::uniform(tokens as i64)?,
    );
    let mut weights = vec![0f32; tokens * TOP_K];
    let mut experts = vec![0u32; tokens * TOP_K];
    batched_topk::select_indices(
        backend,
        &problem,
        scores,
        &mut weights[..],
        &mut experts[..],
        &Env::new(),
    )?
    .check()?;
    Ok(Routing { experts, weights })
}

/// Top-k of the probabilities on `backend`, then the weights renormalised per token.
fn route(backend: &AnyBackend, probs: &[f32], tokens: usize) -> Result<Routing, Error> {
    let mut routing = top_experts(backend, probs, tokens)?;
    for row in routing.weights.chunks_mut(TOP_K) {
        let sum: f32 = row.iter().sum();
        row.iter_mut().for_each(|w| *w /= sum);
    }
    Ok(routing)
}

/// The fused form: top-k of the logits, then the softmax of the k selected logits per token
/// (sorted, so the first is the largest).
fn route_fused(backend: &AnyBackend, logits: &[f32], tokens: usize) -> Result<Routing, Error> {
    let mut routing = top_experts(backend, logits, tokens)?;
    for row in routing.weights.chunks_mut(TOP_K) {
        let max = row[0];
        row.iter_mut().for_each(|w| *w = (*w - max).exp());
        let sum: f32 = row.iter().sum();
        row.iter_mut().for_each(|w| *w /= sum);
    }
    Ok(routing)
}

/// The plain reference: sort each token's experts by probability (ties: the smaller id).
fn reference(probs: &[f32], tokens: usize) -> Vec<u32> {
    let mut experts = Vec::with_capacity(tokens * TOP_K);
    for row in probs.chunks(EXPERTS) {
        let mut ids: Vec<u32> = (0..EXPERTS as u32).collect();
        ids.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
        experts.extend_from_slice(&ids[..TOP_K]);
    }
    experts
}

fn main() -> Result<(), Error> {
    let tokens: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(16_384);
    let logits = router_logits(tokens);
    let start = std::time::Instant::now();
    let probs = softmax(&logits);
    let softmax_time = start.elapsed();

    let specs = batched_topk::kernel_specs::<f32, segment_size::Static<256>, k::Static<8>, Env>(4);
    println!("kernels this call instantiates on a GPU:");
    for spec in &specs {
        println!("  {spec}");
    }

    let (backend, note) = AnyBackend::auto_explained();
    println!("{note}");
    let start = std::time::Instant::now();
    let routed = route(&backend, &probs, tokens)?;
    println!(
        "routed {tokens} tokens over {EXPERTS} experts (top-{TOP_K}) in {:.2?} (first call \
         includes kernel compilation)",
        start.elapsed()
    );

    // The default contract pins every bit: the GPU agrees with the host exactly.
    let on_host = route(&AnyBackend::Host(Host::new()), &probs, tokens)?;
    assert_eq!(
        routed.experts, on_host.experts,
        "expert ids differ from the host"
    );
    assert!(
        routed
            .weights
            .iter()
            .zip(&on_host.weights)
            .all(|(a, b)| a.to_bits() == b.to_bits()),
        "weights differ from the host"
    );
    assert_eq!(
        routed.experts,
        reference(&probs, tokens),
        "expert ids differ from the reference"
    );
    for row in routed.weights.chunks(TOP_K) {
        let sum: f32 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "weights of a token sum to {sum}");
        assert!(row.windows(2).all(|w| w[0] >= w[1]), "weights are sorted");
    }

    let mut load = vec![0usize; EXPERTS];
    routed.experts.iter().for_each(|&e| load[e as usize] += 1);
    let (min, max) = (
        load.iter().min().unwrap_or(&0),
        load.iter().max().unwrap_or(&0),
    );
    // The fused form: the same routing from the logits, without the full softmax.
    // Both timed after the first call (which compiled the kernel on a GPU).
    let start = std::time::Instant::now();
    route(&backend, &probs, tokens)?;
    let two_step = softmax_time + start.elapsed();
    let start = std::time::Instant::now();
    let fused = route_fused(&backend, &logits, tokens)?;
    let fused_time = start.elapsed();
    for (t, (a, b)) in routed
        .experts
        .chunks(TOP_K)
        .zip(fused.experts.chunks(TOP_K))
        .enumerate()
    {
        for (&x, &y) in a.iter().zip(b) {
            let (px, py) = (
                probs[t * EXPERTS + x as usize],
                probs[t * EXPERTS + y as usize],
            );
            assert!(
                x == y || px.to_bits() == py.to_bits(),
                "token {t}: expert {x} vs {y} with different probabilities"
            );
        }
    }
    assert!(
        routed
            .weights
            .iter()
            .zip(&fused.weights)
            .all(|(a, b)| (a - b).abs() < 1e-6),
        "fused weights differ"
    );
    println!(
        "two-step (host softmax + top-k): {two_step:.2?}; fused (top-k of the logits + k-element \
         softmax): {fused_time:.2?}; same experts and weights"
    );
    println!("token 0: experts {:?}", &routed.experts[..TOP_K]);
    println!("         weights {:.3?}", &routed.weights[..TOP_K]);
    println!("tokens per expert: min {min}, max {max}");
    println!("checked against the host backend and the per-token reference: ok");
    Ok(())
}
