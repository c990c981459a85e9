//! Mixture-of-experts routing with the library's router (`oxicub::routing`): router logits
//! `[tokens x experts]` -> each token's experts and weights, in one call. Two routers:
//!
//! * softmax, top 8 of 256, renormalised (Mixtral / Qwen style);
//! * DeepSeek-V3's `noaux_tc`: sigmoid scores, a correction bias that chooses but does not
//!   weight, the best 4 of 8 groups of 32 experts, top 8, renormalised, times 2.5.
//!
//! Runs on the GPU when there is one (`AnyBackend::auto`), else on the host, and checks the
//! result against the host backend (bit for bit) and a plain per-token reference. Then
//! `routing::dispatch` groups the DeepSeek-V3 tokens by expert (counts and token order).
//!
//! `cargo run --release --example moe_router [tokens]`
//!
//! The configuration is types: `experts::Static<256>`, `k::Static<8>` compile only the router
//! kernel for 256 experts (8 per lane); a configuration that can never work (groups not dividing
//! the experts, `k` above what the kept groups hold) does not compile.

use oxicub::params::{experts, groups, k, top_groups};
use oxicub::routing::{self, scoring, Router};
use oxicub::{AnyBackend, Env, Error, Host, Pending};

const EXPERTS: usize = 256;
const TOP_K: usize = 8;

/// Deterministic pseudo-random values in about [-4, 4).
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ seed;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
        })
        .collect()
}

/// Each token's experts and weights.
struct Routing {
    experts: Vec<u32>,
    weights: Vec<f32>,
}

/// Routes every token with `router` on `backend`.
fn route_on<E, G, T, K, S>(
    backend: &AnyBackend,
    router: &Router<E, G, T, K, S>,
    logits: &[f32],
    bias: Option<&[f32]>,
) -> Result<Routing, Error>
where
    E: oxicub::params::ParamFor<oxicub::params::role::Experts> + oxicub::params::HostValue,
    G: oxicub::params::ParamFor<oxicub::params::role::Groups> + oxicub::params::HostValue,
    T: oxicub::params::ParamFor<oxicub::params::role::TopGroups> + oxicub::params::HostValue,
    K: oxicub::params::ParamFor<oxicub::params::role::K> + oxicub::params::HostValue,
    S: scoring::ScoringFn,
{
    let tokens = logits.len() / EXPERTS;
    let mut experts = vec![0u32; tokens * TOP_K];
    let mut weights = vec![0f32; tokens * TOP_K];
    routing::route(
        backend,
        router,
        logits,
        bias,
        &mut experts[..],
        &mut weights[..],
        &Env::new(),
    )
    .and_then(Pending::check)?;
    Ok(Routing { experts, weights })
}

/// The plain reference of softmax routing: sort each token's experts by logit (softmax is
/// monotone; ties: the smaller id).
fn softmax_reference(logits: &[f32]) -> Vec<u32> {
    let mut experts = Vec::new();
    for row in logits.chunks(EXPERTS) {
        let mut ids: Vec<u32> = (0..EXPERTS as u32).collect();
        ids.sort_by(|&a, &b| row[b as usize].total_cmp(&row[a as usize]).then(a.cmp(&b)));
        experts.extend_from_slice(&ids[..TOP_K]);
    }
    experts
}

/// Checks a routing against the host's, bit for bit, and that each token's weights sum to
/// `total`.
fn check(name: &str, routed: &Routing, on_host: &Routing, total: f32) {
    assert_eq!(
        routed.experts, on_host.experts,
        "{name}: ids differ from the host"
    );
    assert!(
        routed
            .weights
            .iter()
            .zip(&on_host.weights)
            .all(|(a, b)| a.to_bits().abs_diff(b.to_bits()) <= 1),
        "{name}: weights differ from the host"
    );
    for row in routed.weights.chunks(TOP_K) {
        let sum: f32 = row.iter().sum();
        assert!((sum - total).abs() < 1e-4, "{name}: weights sum to {sum}");
    }
}

fn main() -> Result<(), Error> {
    let tokens: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(16_384);
    let logits = values(tokens * EXPERTS, 1);
    let bias: Vec<f32> = values(EXPERTS, 2).iter().map(|b| b * 0.01).collect();
    let (backend, note) = AnyBackend::auto_explained();
    println!("{note}");
    let host = AnyBackend::Host(Host::new());

    let softmax = Router::new(
        experts::Static::<256>::new(),
        k::Static::<8>::new(),
        scoring::Softmax,
    )
    .renormalize();
    let start = std::time::Instant::now();
    let routed = route_on(&backend, &softmax, &logits, None)?;
    println!(
        "softmax top-{TOP_K} of {EXPERTS}: {tokens} tokens in {:.2?} (a first call compiles the \
         kernel)",
        start.elapsed()
    );
    check(
        "softmax",
        &routed,
        &route_on(&host, &softmax, &logits, None)?,
        1.0,
    );
    assert_eq!(
        routed.experts,
        softmax_reference(&logits),
        "softmax: ids differ from the reference"
    );

    let deepseek_v3 = Router::grouped(
        experts::Static::<256>::new(),
        groups::Static::<8>::new(),
        top_groups::Static::<4>::new(),
        k::Static::<8>::new(),
        scoring::Sigmoid,
    )
    .renormalize()
    .scale(2.5);
    let start = std::time::Instant::now();
    let v3 = route_on(&backend, &deepseek_v3, &logits, Some(&bias))?;
    println!(
        "DeepSeek-V3 (8 groups, top 4, top-{TOP_K}): {tokens} tokens in {:.2?}",
        start.elapsed()
    );
    check(
        "deepseek-v3",
        &v3,
        &route_on(&host, &deepseek_v3, &logits, Some(&bias))?,
        2.5,
    );
    for (t, ids) in v3.experts.chunks(TOP_K).enumerate() {
        let mut groups: Vec<u32> = ids.iter().map(|&e| e / 32).collect();
        groups.sort_unstable();
        groups.dedup();
        assert!(
            groups.len() <= 4,
            "token {t}: experts from {} groups",
            groups.len()
        );
    }

    // The dispatch: each expert's tokens, grouped (what a grouped GEMM reads next).
    let (mut counts, mut order) = (vec![0u32; EXPERTS], vec![0u32; v3.experts.len()]);
    routing::dispatch(
        &backend,
        &deepseek_v3,
        &v3.experts[..],
        &mut counts[..],
        &mut order[..],
    )?
    .check()?;
    let mut start = 0;
    for (e, &count) in counts.iter().enumerate() {
        let entries = &order[start..start + count as usize];
        assert!(
            entries.iter().all(|&i| v3.experts[i as usize] == e as u32),
            "expert {e}: an entry of another expert"
        );
        assert!(
            entries.windows(2).all(|w| w[0] < w[1]),
            "expert {e}: out of order"
        );
        start += count as usize;
    }
    assert_eq!(start, v3.experts.len(), "every entry dispatched once");
    let (min, max) = (
        counts.iter().min().unwrap_or(&0),
        counts.iter().max().unwrap_or(&0),
    );
    println!("token 0 (V3): experts {:?}", &v3.experts[..TOP_K]);
    println!("              weights {:.3?}", &v3.weights[..TOP_K]);
    println!("tokens per expert (V3, routing::dispatch): min {min}, max {max}");
    println!("checked against the host backend and the per-token reference: ok");
    Ok(())
}
