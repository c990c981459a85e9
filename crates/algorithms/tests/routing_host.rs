//! `routing::route` on the host backend against the routing oracle (`oxicub_test::routing`, the
//! routers step by step from their model code, ranking by sorting): expert ids bit for bit,
//! weights within 1 ulp (NaN as NaN), for DeepSeek-V3, softmax, biased sigmoid,
//! `sqrt(softplus)` and wide-group routers; f32, bf16 and f16 logits; quantised, all-equal and
//! NaN logits; a bias that makes every score negative; i32 ids; no token. Then the run-time
//! errors, each naming its argument.

use half::{bf16, f16};
use oxicub_algorithms::routing::{self, scoring, DeepSeekV3, Router};
use oxicub_algorithms::{Error, Host, Pending};
use oxicub_env::{require, tie_break, Env};
use oxicub_params::{experts, groups, k, top_groups, ParamError};
use oxicub_test::routing::{
    self as oracle, assert_same_routing, bias, logits, typed_logits, Router as OracleRouter,
    Scoring,
};

/// Routes `values` (as logits of type `L`) on the host with `router` and compares with the
/// oracle's `oracle_router`. Outputs are poisoned and must be fully written.
macro_rules! same_as_oracle {
    ($what:expr, $l:ty, $router:expr, $oracle:expr, $values:expr, $bias:expr) => {{
        let (typed, exact) = typed_logits::<$l>(&$values);
        let oracle_router: OracleRouter = $oracle;
        let out = exact.len() / oracle_router.experts * oracle_router.k;
        let (mut ids, mut weights) = (vec![u32::MAX; out], vec![f32::NAN; out]);
        routing::route(
            &Host::new(),
            &$router,
            &typed[..],
            $bias,
            &mut ids[..],
            &mut weights[..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect($what);
        let want = oracle::route(&oracle_router, &exact, $bias);
        let k = oracle_router.k;
        assert_same_routing($what, k, (&ids, &weights), (&want.0, &want.1));
    }};
}

#[test]
fn deepseek_v3_equals_the_oracle() {
    let router = DeepSeekV3::deepseek_v3();
    let b = bias(256, 1, 0.0);
    let o = OracleRouter::deepseek_v3();
    for tokens in [0usize, 1, 7, 300] {
        let l = logits(tokens, 256, 2, 0.0);
        same_as_oracle!("v3 f32", f32, router, o, l, Some(&b[..]));
    }
    let l = logits(200, 256, 3, 0.0);
    same_as_oracle!("v3 bf16", bf16, router, o, l, Some(&b[..]));
    same_as_oracle!("v3 f16", f16, router, o, l, Some(&b[..]));
    let q = logits(200, 256, 4, 0.25);
    same_as_oracle!("v3 quantised", f32, router, o, q, None);
    same_as_oracle!("v3 all equal", f32, router, o, vec![0.5f32; 5 * 256], None);
    let negative = bias(256, 5, -3.0);
    same_as_oracle!("v3 negative bias", f32, router, o, l, Some(&negative[..]));
    let mut n = logits(16, 256, 6, 0.0);
    for t in 0..16 {
        n[t * 256 + (t * 37) % 256] = f32::NAN;
    }
    same_as_oracle!("v3 NaN", f32, router, o, n, Some(&b[..]));
}

#[test]
fn other_routers_equal_the_oracle() {
    let softmax = |experts, k| OracleRouter::softmax(experts, k);
    let r = Router::new(
        experts::Static::<256>::new(),
        k::Static::<8>::new(),
        scoring::Softmax,
    )
    .renormalize();
    same_as_oracle!(
        "softmax 256/8",
        f32,
        r,
        softmax(256, 8),
        logits(300, 256, 7, 0.0),
        None
    );
    same_as_oracle!(
        "softmax q",
        bf16,
        r,
        softmax(256, 8),
        logits(300, 256, 8, 0.5),
        None
    );
    // Uniform (run-time) values, experts not a multiple of 32.
    let r = Router::new(
        experts::uniform(60).expect("60"),
        k::uniform(4).expect("4"),
        scoring::Softmax,
    )
    .renormalize();
    same_as_oracle!(
        "softmax 60/4",
        f16,
        r,
        softmax(60, 4),
        logits(300, 60, 9, 0.0),
        None
    );
    let r = Router::new(
        experts::Static::<64>::new(),
        k::Static::<1>::new(),
        scoring::Softmax,
    );
    let o = OracleRouter {
        renormalize: false,
        ..softmax(64, 1)
    };
    same_as_oracle!("softmax top-1", f32, r, o, logits(300, 64, 10, 0.0), None);
    let kimi = Router::new(
        experts::Static::<384>::new(),
        k::Static::<8>::new(),
        scoring::Sigmoid,
    )
    .renormalize()
    .scale(2.827);
    let o = OracleRouter {
        experts: 384,
        groups: 1,
        top_groups: 1,
        k: 8,
        scoring: Scoring::Sigmoid,
        renormalize: true,
        scale: 2.827,
    };
    let l = logits(300, 384, 11, 0.0);
    let b = bias(384, 12, 0.0);
    same_as_oracle!("sigmoid 384/8", bf16, kimi, o, l, Some(&b[..]));
    let v4 = Router::new(
        experts::Static::<384>::new(),
        k::Static::<6>::new(),
        scoring::SqrtSoftplus,
    )
    .renormalize()
    .scale(1.5);
    let o = OracleRouter {
        k: 6,
        scoring: Scoring::SqrtSoftplus,
        scale: 1.5,
        ..o
    };
    same_as_oracle!("sqrt softplus", f32, v4, o, l, Some(&b[..]));
    let wide = Router::grouped(
        experts::Static::<512>::new(),
        groups::Static::<32>::new(),
        top_groups::uniform(8).expect("8"),
        k::Static::<16>::new(),
        scoring::Sigmoid,
    )
    .renormalize()
    .scale(2.5);
    let o = OracleRouter {
        experts: 512,
        groups: 32,
        top_groups: 8,
        k: 16,
        ..OracleRouter::deepseek_v3()
    };
    let negative = bias(512, 13, -1.0);
    same_as_oracle!(
        "32 groups",
        f32,
        wide,
        o,
        logits(100, 512, 14, 0.0),
        Some(&negative[..])
    );
}

#[test]
fn i32_ids_equal_u32_ids() {
    let router = Router::new(
        experts::Static::<128>::new(),
        k::Static::<8>::new(),
        scoring::Softmax,
    );
    let l = logits(50, 128, 15, 0.0);
    let (mut a, mut b) = (vec![0u32; 400], vec![0i32; 400]);
    let mut w = vec![0f32; 400];
    routing::route(
        &Host::new(),
        &router,
        &l[..],
        None,
        &mut a[..],
        &mut w[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("u32");
    routing::route(
        &Host::new(),
        &router,
        &l[..],
        None,
        &mut b[..],
        &mut w[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("i32");
    assert!(a.iter().zip(&b).all(|(&a, &b)| a as i32 == b));
    // The explicit default tie-break is accepted.
    let env = require!(tie_break::PreferSmallerIndex);
    routing::route(
        &Host::new(),
        &router,
        &l[..],
        None,
        &mut b[..],
        &mut w[..],
        &env,
    )
    .and_then(Pending::check)
    .expect("tie-break");
}

#[test]
fn bad_values_and_buffers_are_named_errors() {
    let l = logits(4, 64, 16, 0.0);
    let (mut ids, mut w) = (vec![0u32; 64], vec![0f32; 64]);
    let arg_of = |r: Result<oxicub_algorithms::Outcome, Error>| match r {
        Err(Error::InvalidArgument { arg, .. }) => arg,
        Err(Error::BufferTooSmall { arg, .. }) => arg,
        Err(Error::Param(ParamError::NotWholeRows { .. })) => "logits",
        other => panic!("expected an error: {other:?}"),
    };
    let grouped = |g: i64, t: i64, kk: i64| {
        Router::grouped(
            experts::uniform(64).expect("64"),
            groups::uniform(g).expect("g"),
            top_groups::uniform(t).expect("t"),
            k::uniform(kk).expect("k"),
            scoring::Sigmoid,
        )
    };
    let host = Host::new();
    let env = Env::new();
    let mut run = |r: &Router<_, _, _, _, _>, l: &[f32]| {
        routing::route(&host, r, l, None, &mut ids[..], &mut w[..], &env)
    };
    assert_eq!(arg_of(run(&grouped(3, 1, 2), &l)), "groups"); // 3 does not divide 64
    assert_eq!(arg_of(run(&grouped(64, 1, 1), &l)), "groups"); // above 32
    assert_eq!(arg_of(run(&grouped(4, 5, 2), &l)), "top_groups");
    assert_eq!(arg_of(run(&grouped(4, 1, 17), &l)), "k"); // the kept group holds 16
    assert_eq!(arg_of(run(&grouped(4, 2, 0), &l)), "k");
    assert_eq!(arg_of(run(&grouped(1, 1, 8), &l[..100])), "logits"); // not whole rows
    assert_eq!(arg_of(run(&grouped(1, 1, 17), &l)), "out_ids"); // 4 x 17 > 64
    let too_many = Router::grouped(
        experts::uniform(2000).expect("e"),
        groups::uniform(1).expect("g"),
        top_groups::uniform(1).expect("t"),
        k::uniform(2).expect("k"),
        scoring::Sigmoid,
    );
    assert_eq!(arg_of(run(&too_many, &l)), "experts");
    let short_bias = [0f32; 10];
    let r = grouped(1, 1, 2);
    let result = routing::route(
        &host,
        &r,
        &l[..],
        Some(&short_bias[..]),
        &mut ids[..],
        &mut w[..],
        &env,
    );
    assert_eq!(arg_of(result), "bias");
}

/// `routing::dispatch` of ids that `route` wrote, in `I`, against the oracle's stable grouping;
/// outputs poisoned.
fn dispatch_same_as_oracle<I: oxicub_kernels::families::routing::ExpertId + std::fmt::Debug>(
    what: &str,
    experts: usize,
    k: usize,
    ids: &[u32],
) {
    let router = Router::new(
        experts::uniform(experts as i64).expect("experts"),
        k::uniform(k as i64).expect("k"),
        scoring::Softmax,
    );
    let typed: Vec<I> = ids.iter().map(|&id| I::from_index(id)).collect();
    let poison = I::from_index(u32::MAX);
    let (mut counts, mut order) = (vec![poison; experts], vec![poison; ids.len()]);
    routing::dispatch(
        &Host::new(),
        &router,
        &typed[..],
        &mut counts[..],
        &mut order[..],
    )
    .and_then(Pending::check)
    .expect(what);
    let (want_counts, want_order) = oracle::dispatch(experts, ids);
    let bits = |v: &[I]| v.iter().map(|&x| x.to_bits()).collect::<Vec<u32>>();
    assert_eq!(bits(&counts), want_counts, "{what}: counts");
    assert_eq!(bits(&order), want_order, "{what}: order");
}

#[test]
fn dispatch_equals_the_oracle() {
    use oxicub_kernels::families::routing::ExpertId;
    let v3 = OracleRouter::deepseek_v3();
    let b = bias(256, 31, 0.0);
    for tokens in [0usize, 1, 7, 300, 5000] {
        let (ids, _) = oracle::route(&v3, &logits(tokens, 256, 32, 0.0), Some(&b));
        dispatch_same_as_oracle::<u32>("v3", 256, 8, &ids);
        dispatch_same_as_oracle::<i32>("v3 i32", 256, 8, &ids);
    }
    // Every token to the same experts; one expert; 1024 experts, 32 each.
    let same: Vec<u32> = (0..4000).flat_map(|_| [5u32, 1, 9]).collect();
    dispatch_same_as_oracle::<u32>("same experts", 16, 3, &same);
    dispatch_same_as_oracle::<u32>("one expert", 1, 1, &[0; 100]);
    let (wide, _) = oracle::route(
        &OracleRouter::softmax(1024, 32),
        &logits(200, 1024, 33, 0.0),
        None,
    );
    dispatch_same_as_oracle::<i32>("1024 experts", 1024, 32, &wide);
    assert_eq!(i32::from_index(7).to_bits(), 7);
}

#[test]
fn dispatch_errors_name_the_argument_and_the_entry() {
    let router = Router::new(
        experts::Static::<8>::new(),
        k::Static::<2>::new(),
        scoring::Softmax,
    );
    let host = Host::new();
    let (mut counts, mut order) = ([0i32; 8], [0i32; 6]);
    let run = |ids: &[i32], counts: &mut [i32], order: &mut [i32]| {
        routing::dispatch(&host, &router, ids, counts, order).and_then(Pending::check)
    };
    match run(&[0, 1, 2, 9, 4, 5], &mut counts, &mut order) {
        Err(Error::InvalidArgument { arg: "ids", reason }) => {
            assert!(
                reason.contains("entry 3 (token 1, choice 1) is 9"),
                "{reason}"
            );
        }
        other => panic!("expected the bad id: {other:?}"),
    }
    match run(&[0, 1, -2, 3, 4, 5], &mut counts, &mut order) {
        Err(Error::InvalidArgument { arg: "ids", reason }) => {
            assert!(
                reason.contains("entry 2 (token 1, choice 0) is -2"),
                "{reason}"
            );
        }
        other => panic!("expected the negative id: {other:?}"),
    }
    assert!(matches!(
        run(&[0, 1, 2], &mut counts, &mut order),
        Err(Error::Param(ParamError::NotWholeRows { len: 3, row: 2 }))
    ));
    assert!(matches!(
        run(&[0, 1, 2, 3], &mut counts[..7], &mut order),
        Err(Error::BufferTooSmall {
            arg: "out_counts",
            ..
        })
    ));
    assert!(matches!(
        run(&[0, 1, 2, 3, 4, 5], &mut counts, &mut order[..5]),
        Err(Error::BufferTooSmall {
            arg: "out_order",
            ..
        })
    ));
    let zero = Router::new(
        experts::uniform(0).expect("0"),
        k::uniform(2).expect("2"),
        scoring::Softmax,
    );
    assert!(matches!(
        routing::dispatch(
            &host,
            &zero,
            &[0i32, 1][..],
            &mut counts[..],
            &mut order[..]
        ),
        Err(Error::InvalidArgument { arg: "experts", .. })
    ));
}

#[test]
fn groups_of_any_shape_and_infinities_equal_the_oracle() {
    for (e, g, t, kk) in [
        (96usize, 32usize, 5usize, 8usize),
        (384, 8, 4, 8),
        (60, 3, 2, 6),
        (1000, 8, 3, 32),
        (256, 8, 8, 32),
    ] {
        let router = Router::grouped(
            experts::uniform(e as i64).expect("e"),
            groups::uniform(g as i64).expect("g"),
            top_groups::uniform(t as i64).expect("t"),
            k::uniform(kk as i64).expect("k"),
            scoring::Sigmoid,
        )
        .renormalize()
        .scale(2.5);
        let o = OracleRouter {
            experts: e,
            groups: g,
            top_groups: t,
            k: kk,
            ..OracleRouter::deepseek_v3()
        };
        let l = logits(50, e, 40 + e as u64, 0.0);
        let b = bias(e, 41, -0.5);
        same_as_oracle!("any groups", f32, router, o, l, Some(&b[..]));
        same_as_oracle!("any groups, no bias", f32, router, o, l, None);
    }
    let router = DeepSeekV3::deepseek_v3();
    let mut l = logits(16, 256, 42, 0.0);
    for t in 0..16 {
        l[t * 256 + (t * 5) % 256] = f32::INFINITY;
        l[t * 256 + (t * 7 + 1) % 256] = f32::NEG_INFINITY;
        l[t * 256 + (t * 11 + 2) % 256] = -0.0;
    }
    let mut b = bias(256, 43, 0.0);
    b[3] = f32::NEG_INFINITY;
    b[40] = f32::INFINITY;
    b[77] = 3e38;
    b[78] = -3e38;
    let o = OracleRouter::deepseek_v3();
    same_as_oracle!("infinities", f32, router, o, l, Some(&b[..]));
    let all_minus_infinity = vec![f32::NEG_INFINITY; 256];
    same_as_oracle!(
        "all biases -inf",
        f32,
        router,
        o,
        l,
        Some(&all_minus_infinity[..])
    );
}
