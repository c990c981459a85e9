//! oxicub's MoE routing rows: `routing::route` on the Cuda backend with the router as a model
//! writes it (`Static` experts, groups, kept groups and k: the kernel for 256 experts is the only
//! one compiled), f32 logits on the device, i32 ids and f32 weights allocated once outside the
//! timed runs. The ids are digested sorted per token (canonical); the weights are checked by the
//! library's tests (within 1 ulp of the oracle), not here.
//!
//! The note carries the bare launch's time (`Gpu::bare_launch`, an empty kernel timed the same
//! way) and oxicub's time over it: the decode target is "within 1.2x of a bare launch".

use crate::device::Gpu;
use crate::err::{Context, Result};
use crate::gen::Digest;
use crate::oxicub::{Measured, Runner};
use crate::workloads::{self, Kind, Router as RouterKind, Workload, ROUTE_EXPERTS, ROUTE_K};

use oxicub::params::{experts, groups, k, role, top_groups, HostValue, ParamFor};
use oxicub::routing::{self, scoring, DeepSeekV3, Router};
use oxicub::{Cuda, Env, Host};

// The routers below are types; the workload table's shape must be theirs.
const _: () = assert!(ROUTE_EXPERTS == 256 && ROUTE_K == 8);
const _: () = assert!(workloads::V3_GROUPS == 8 && workloads::V3_TOP_GROUPS == 4);

/// The runner of a routing workload.
pub fn runner(w: &Workload) -> Option<Runner> {
    match w.kind {
        Kind::Route {
            router: RouterKind::DeepSeekV3,
            ..
        } => Some(deepseek_v3),
        Kind::Route {
            router: RouterKind::Softmax,
            ..
        } => Some(softmax),
        _ => None,
    }
}

type SoftmaxRouter = Router<
    experts::Static<256>,
    groups::Static<1>,
    top_groups::Static<1>,
    k::Static<8>,
    scoring::Softmax,
>;

/// The softmax top-8 router, renormalised.
fn softmax_router() -> SoftmaxRouter {
    Router::new(
        experts::Static::<256>::new(),
        k::Static::<8>::new(),
        scoring::Softmax,
    )
    .renormalize()
}

fn deepseek_v3(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    route_with(
        gpu,
        w,
        rotations,
        &DeepSeekV3::deepseek_v3(),
        "routing::route, DeepSeek-V3 router (Static 256 experts, 8 groups, top 4, k 8; \
         sigmoid, f32 bias, renormalised, scale 2.5)",
    )
}

fn softmax(gpu: &Gpu, w: &Workload, rotations: usize) -> Result<Measured> {
    route_with(
        gpu,
        w,
        rotations,
        &softmax_router(),
        "routing::route, softmax router (Static 256 experts, k 8; renormalised)",
    )
}

/// The same routers on oxicub's Host backend (no GPU): each token's ids, ascending, token after
/// token. The selftest compares the CPU reference with it.
pub fn host_ids(kind: RouterKind, logits: &[f32]) -> Result<Vec<u32>> {
    let host = Host::new();
    let bias = vec![0f32; ROUTE_EXPERTS as usize];
    let out = logits.len() / ROUTE_EXPERTS as usize * ROUTE_K as usize;
    let (mut ids, mut weights) = (vec![0u32; out], vec![0f32; out]);
    match kind {
        RouterKind::DeepSeekV3 => routing::route(
            &host,
            &DeepSeekV3::deepseek_v3(),
            logits,
            Some(&bias[..]),
            &mut ids[..],
            &mut weights[..],
            &Env::new(),
        ),
        RouterKind::Softmax => routing::route(
            &host,
            &softmax_router(),
            logits,
            None,
            &mut ids[..],
            &mut weights[..],
            &Env::new(),
        ),
    }
    .and_then(oxicub::Outcome::check)
    .ctx("oxicub::routing::route on Host")?;
    for token in ids.chunks_mut(ROUTE_K as usize) {
        token.sort_unstable();
    }
    Ok(ids)
}

/// One routing row: `router` on the workload's logits (and, where the router reads one, the
/// all-zero f32 bias).
fn route_with<E, G, T, K, S>(
    gpu: &Gpu,
    w: &Workload,
    rotations: usize,
    router: &Router<E, G, T, K, S>,
    what: &str,
) -> Result<Measured>
where
    E: ParamFor<role::Experts> + HostValue,
    G: ParamFor<role::Groups> + HostValue,
    T: ParamFor<role::TopGroups> + HostValue,
    K: ParamFor<role::K> + HostValue,
    S: scoring::ScoringFn,
{
    let Kind::Route {
        router: kind,
        tokens,
    } = w.kind
    else {
        unreachable!("a routing runner got {:?}", w.kind)
    };
    let cuda = Cuda::from_stream(gpu.stream.clone()).ctx("oxicub::Cuda on the bench stream")?;
    let inputs = (0..rotations)
        .map(|_| gpu.gen_route_logits(tokens, w.seed, ROUTE_EXPERTS as u32))
        .collect::<Result<Vec<_>>>()?;
    let bias = cuda
        .alloc_zeros::<f32>(ROUTE_EXPERTS as usize)
        .ctx("allocating the bias")?;
    let out = (tokens * ROUTE_K) as usize;
    let mut ids = cuda.alloc_zeros::<i32>(out).ctx("allocating the ids")?;
    let mut weights = cuda.alloc_zeros::<f32>(out).ctx("allocating the weights")?;
    let timing = gpu.time_runs(w.warmup, w.reps, rotations, |r| {
        routing::route(
            &cuda,
            router,
            inputs[r].as_view(),
            kind.has_bias().then(|| bias.as_view()),
            ids.as_view_mut(),
            weights.as_view_mut(),
            &Env::new(),
        )
        .and_then(oxicub::Outcome::check)
        .ctx("oxicub::routing::route")
    })?;
    let mut words: Vec<u32> = gpu.to_host(&ids)?.into_iter().map(|id| id as u32).collect();
    for token in words.chunks_mut(ROUTE_K as usize) {
        token.sort_unstable();
    }
    let launch = gpu.bare_launch(w.warmup, w.reps)?;
    Ok(Measured {
        timing,
        digest: Digest::of_words(&words),
        note: format!(
            "{what}; bare launch {} ms (empty kernel, 1 block of 128 threads, median of {}), \
             oxicub/launch {:.2}",
            crate::report::fmt_ms(launch.median_ms),
            launch.reps,
            timing.median_ms / launch.median_ms
        ),
    })
}
