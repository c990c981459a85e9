//! The `routing` kernel family against the routing oracle (`oxicub_test::routing`): expert ids
//! bit for bit, weights within 1 ulp (NaN weights as NaN), for DeepSeek-V3's grouped router,
//! ungrouped biased sigmoid, softmax and `sqrt(softplus)` routers; f32, bf16 and f16 logits;
//! tie-heavy (quantised) and all-equal logits, NaN logits, a bias that makes every score
//! negative, groups of one expert, experts not a multiple of 32; tokens 0, 1, 7 and 65536;
//! groups that do not fill whole lanes; infinite and signed-zero logits, infinite and huge biases;
//! outputs poisoned. Skips without a GPU (fails with OXICUB_REQUIRE_GPU=1).

use half::{bf16, f16};
use oxicub_algorithms::Cuda;
use oxicub_kernels::families::routing::{route, RouterConfig, Scoring};
use oxicub_kernels::RadixKey;
use oxicub_test::gpu_or_skip;
use oxicub_test::routing::{
    self as oracle, assert_same_routing, bias, logits, typed_logits, LogitValue, Router,
};

/// The oracle's router for a kernel configuration.
fn oracle_router(config: &RouterConfig) -> Router {
    Router {
        experts: config.experts as usize,
        groups: config.groups as usize,
        top_groups: config.top_groups as usize,
        k: config.k as usize,
        scoring: match config.scoring {
            Scoring::Sigmoid => oracle::Scoring::Sigmoid,
            Scoring::Softmax => oracle::Scoring::Softmax,
            Scoring::SqrtSoftplus => oracle::Scoring::SqrtSoftplus,
        },
        renormalize: config.renormalize,
        scale: config.scale,
    }
}

/// Routes `logits` on the GPU and with the oracle; asserts the ids are equal and the weights
/// within 1 ulp.
fn same_as_oracle<L: LogitValue + RadixKey>(
    cuda: &Cuda,
    config: &RouterConfig,
    logits: &[f32],
    bias: Option<&[f32]>,
    what: &str,
) {
    let (typed, exact) = typed_logits::<L>(logits);
    let (want_ids, want_weights) = oracle::route(&oracle_router(config), &exact, bias);
    let out = want_ids.len();
    let keys = cuda.upload_keys(&typed).expect("upload logits");
    let device_bias = bias.map(|b| cuda.upload(b).expect("upload bias"));
    let mut ids = cuda.upload(&vec![u32::MAX; out.max(1)]).expect("poison");
    let mut weights = cuda
        .upload(&vec![f32::from_bits(0x7fa0_0000); out.max(1)])
        .expect("poison");
    let bias_view = device_bias.as_ref().map(|b| b.as_view());
    route(
        cuda.runtime(),
        cuda.stream(),
        config,
        &keys.as_view(),
        bias_view.as_ref(),
        &mut ids.slice_mut(..out),
        &mut weights.slice_mut(..out),
    )
    .expect("launch");
    let got_ids = cuda.download(&ids.as_view()).expect("ids");
    let got_weights = cuda.download(&weights.as_view()).expect("weights");
    let k = config.k as usize;
    let got = (&got_ids[..out], &got_weights[..out]);
    assert_same_routing(what, k, got, (&want_ids, &want_weights));
    if out == 0 {
        assert_eq!(
            got_ids[0],
            u32::MAX,
            "{what}: nothing routed, nothing written"
        );
    }
}

const V3: RouterConfig = RouterConfig {
    experts: 256,
    groups: 8,
    top_groups: 4,
    k: 8,
    scoring: Scoring::Sigmoid,
    renormalize: true,
    scale: 2.5,
};

#[test]
fn deepseek_v3_equals_the_oracle() {
    let Some(cuda) = gpu_or_skip() else { return };
    let b = bias(256, 1, 0.0);
    for tokens in [0usize, 1, 7, 65536] {
        let l = logits(tokens, 256, 2, 0.0);
        same_as_oracle::<f32>(&cuda, &V3, &l, Some(&b), &format!("v3 f32 {tokens}"));
    }
    let l = logits(4096, 256, 3, 0.0);
    same_as_oracle::<bf16>(&cuda, &V3, &l, Some(&b), "v3 bf16");
    same_as_oracle::<f16>(&cuda, &V3, &l, Some(&b), "v3 f16");
    // Tie-heavy: logits on a grid of 0.25 (many equal scores, equal group scores).
    let q = logits(4096, 256, 4, 0.25);
    same_as_oracle::<f32>(&cuda, &V3, &q, None, "v3 quantised");
    same_as_oracle::<bf16>(&cuda, &V3, &q, Some(&b), "v3 quantised bf16");
    // All equal: the smallest groups and ids.
    same_as_oracle::<f32>(&cuda, &V3, &vec![0.5; 33 * 256], None, "v3 all equal");
    // A bias that makes every score negative: the masked experts must stay out.
    same_as_oracle::<f32>(&cuda, &V3, &l, Some(&bias(256, 5, -3.0)), "v3 negative");
    // NaN logits rank above every number (their weights are NaN).
    let mut n = logits(64, 256, 6, 0.0);
    for t in 0..64 {
        n[t * 256 + (t * 37) % 256] = f32::NAN;
    }
    same_as_oracle::<f32>(&cuda, &V3, &n, Some(&b), "v3 NaN");
}

#[test]
fn other_routers_equal_the_oracle() {
    let Some(cuda) = gpu_or_skip() else { return };
    let softmax = |experts, k| RouterConfig {
        experts,
        groups: 1,
        top_groups: 1,
        k,
        scoring: Scoring::Softmax,
        renormalize: true,
        scale: 1.0,
    };
    for (experts, k) in [(256, 8), (8, 2), (128, 8), (60, 4), (1024, 32), (1, 1)] {
        let config = softmax(experts, k);
        let l = logits(3000, experts as usize, u64::from(experts), 0.0);
        same_as_oracle::<f32>(&cuda, &config, &l, None, &format!("softmax {experts}/{k}"));
        same_as_oracle::<bf16>(&cuda, &config, &l, None, &format!("softmax bf16 {experts}"));
        let q = logits(3000, experts as usize, 7, 0.5);
        let what = format!("softmax quantised {experts}");
        same_as_oracle::<f16>(&cuda, &config, &q, None, &what);
    }
    // Not renormalised, k = 1 (the weight is the probability itself).
    let plain = RouterConfig {
        renormalize: false,
        ..softmax(64, 1)
    };
    same_as_oracle::<f32>(
        &cuda,
        &plain,
        &logits(500, 64, 8, 0.0),
        None,
        "softmax top-1",
    );
    // Ungrouped biased sigmoid (Kimi, GLM).
    let kimi = RouterConfig {
        experts: 384,
        groups: 1,
        top_groups: 1,
        k: 8,
        scoring: Scoring::Sigmoid,
        renormalize: true,
        scale: 2.827,
    };
    let l = logits(5000, 384, 9, 0.0);
    same_as_oracle::<bf16>(&cuda, &kimi, &l, Some(&bias(384, 10, 0.0)), "sigmoid 384");
    // sqrt(softplus) scores, top 6 of 384 with bias.
    let v4 = RouterConfig {
        k: 6,
        scoring: Scoring::SqrtSoftplus,
        scale: 1.5,
        ..kimi
    };
    same_as_oracle::<f32>(&cuda, &v4, &l, Some(&bias(384, 11, 0.0)), "sqrt softplus");
    same_as_oracle::<f32>(
        &cuda,
        &v4,
        &logits(5000, 384, 12, 1.0),
        None,
        "v4 quantised",
    );
    // Groups of one expert, and 32 groups.
    let singles = RouterConfig {
        experts: 32,
        groups: 32,
        top_groups: 4,
        k: 4,
        ..V3
    };
    same_as_oracle::<f32>(
        &cuda,
        &singles,
        &logits(2000, 32, 13, 0.5),
        None,
        "groups of one",
    );
    let wide = RouterConfig {
        experts: 512,
        groups: 32,
        top_groups: 8,
        k: 16,
        ..V3
    };
    let l = logits(2000, 512, 14, 0.0);
    same_as_oracle::<f32>(
        &cuda,
        &wide,
        &l,
        Some(&bias(512, 15, -1.0)),
        "32 groups of 16",
    );
    // Groups that do not fill whole lanes or lane blocks (a group at a time): 32 groups of 3
    // (a lane spans groups), 8 of 48 (3 lanes a group), 3 of 20, 8 of 125; every group kept;
    // k = 32 with groups.
    for (experts, groups, top_groups, k) in [
        (96, 32, 5, 8),
        (384, 8, 4, 8),
        (60, 3, 2, 6),
        (1000, 8, 3, 32),
        (256, 8, 8, 32),
    ] {
        let config = RouterConfig {
            experts,
            groups,
            top_groups,
            k,
            ..V3
        };
        let e = experts as usize;
        let l = logits(700, e, 16 + u64::from(experts), 0.0);
        let what = format!("{groups} groups of {}", experts / groups);
        same_as_oracle::<f32>(&cuda, &config, &l, Some(&bias(e, 17, -0.5)), &what);
        same_as_oracle::<f32>(&cuda, &config, &l, None, &format!("{what}, no bias"));
    }
}

/// Infinite and signed-zero logits, and biases of -inf, +inf and +-3e38, through the grouped and
/// the softmax routers.
#[test]
fn infinities_zeros_and_huge_biases() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut l = logits(64, 256, 18, 0.0);
    for t in 0..64 {
        l[t * 256 + (t * 5) % 256] = f32::INFINITY;
        l[t * 256 + (t * 7 + 1) % 256] = f32::NEG_INFINITY;
        l[t * 256 + (t * 11 + 2) % 256] = -0.0;
        l[t * 256 + (t * 13 + 3) % 256] = 0.0;
    }
    let mut b = bias(256, 19, 0.0);
    b[3] = f32::NEG_INFINITY;
    b[40] = f32::INFINITY;
    b[77] = 3e38;
    b[78] = -3e38;
    b[200] = f32::NEG_INFINITY;
    same_as_oracle::<f32>(&cuda, &V3, &l, Some(&b), "v3 infinities and huge biases");
    same_as_oracle::<f32>(&cuda, &V3, &l, None, "v3 infinities");
    let softmax = RouterConfig {
        groups: 1,
        top_groups: 1,
        scoring: Scoring::Softmax,
        ..V3
    };
    same_as_oracle::<f32>(&cuda, &softmax, &l, None, "softmax infinities");
    // Every bias -inf: every biased score ties at -inf, the smallest ids win.
    same_as_oracle::<f32>(
        &cuda,
        &V3,
        &l,
        Some(&vec![f32::NEG_INFINITY; 256]),
        "v3 all biases -inf",
    );
}

/// `oxicub::routing::route` on `Cuda` (i32 ids, bf16 logits, a bias on the device) equals the
/// same call on `Host`; repeated calls allocate nothing.
#[test]
fn the_public_call_on_cuda_equals_the_host() {
    use oxicub_algorithms::routing::{self, scoring, Router};
    use oxicub_algorithms::{Host, Pending};
    use oxicub_env::Env;
    use oxicub_params::{experts, groups, k, top_groups};
    let Some(cuda) = gpu_or_skip() else { return };
    let router = Router::grouped(
        experts::Static::<256>::new(),
        groups::Static::<8>::new(),
        top_groups::uniform(4).expect("4"),
        k::Static::<8>::new(),
        scoring::Sigmoid,
    )
    .renormalize()
    .scale(2.5);
    let l: Vec<bf16> = logits(16384, 256, 21, 0.0)
        .iter()
        .map(|&v| bf16::from_f32(v))
        .collect();
    let b = bias(256, 22, 0.0);
    let out = 16384 * 8;
    let (mut host_ids, mut host_weights) = (vec![0i32; out], vec![0f32; out]);
    routing::route(
        &Host::new(),
        &router,
        &l[..],
        Some(&b[..]),
        &mut host_ids[..],
        &mut host_weights[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host");
    let keys = cuda.upload_keys(&l).expect("logits");
    let device_bias = cuda.upload(&b).expect("bias");
    let mut ids = cuda.upload(&vec![-1i32; out]).expect("poison");
    let mut weights = cuda.upload(&vec![f32::NAN; out]).expect("poison");
    let call = |ids: &mut cudarc::driver::CudaSlice<i32>,
                weights: &mut cudarc::driver::CudaSlice<f32>| {
        routing::route(
            &cuda,
            &router,
            keys.as_view(),
            Some(device_bias.as_view()),
            ids.as_view_mut(),
            weights.as_view_mut(),
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("cuda")
    };
    call(&mut ids, &mut weights);
    let before = cuda.device_allocations();
    call(&mut ids, &mut weights);
    assert_eq!(
        cuda.device_allocations(),
        before,
        "a route allocates nothing"
    );
    assert_eq!(cuda.download(&ids.as_view()).expect("ids"), host_ids);
    let got = cuda.download(&weights.as_view()).expect("weights");
    for (i, (g, w)) in got.iter().zip(&host_weights).enumerate() {
        assert!(
            g.to_bits().abs_diff(w.to_bits()) <= 1,
            "weight {i}: {g} vs {w}"
        );
    }
}
