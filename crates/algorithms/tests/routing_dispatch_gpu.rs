//! `routing::dispatch` on the GPU against the oracle's stable grouping
//! (`oxicub_test::routing::dispatch`): counts and order equal, outputs poisoned, for a router's
//! ids (DeepSeek-V3 at 0, 1, 7, 512 and 513 tokens: no entry, one tile exactly full, two
//! tiles; 65536 tokens), every token on the same experts, 1024 experts of 32 each, one expert,
//! and 2^21 random ids; u32 and i32. The first bad id (above the experts, or a negative i32) is
//! reported in one tile and across tiles. A route and a dispatch in a workspace allocate nothing
//! and equal the host's. Skips without a GPU (fails with OXICUB_REQUIRE_GPU=1).

use oxicub_algorithms::routing::{self, scoring, DeepSeekV3, Router};
use oxicub_algorithms::{Cuda, Error, Host, Pending, Workspace};
use oxicub_env::Env;
use oxicub_kernels::families::routing::ExpertId;
use oxicub_params::{experts, groups, k, top_groups};
use oxicub_test::routing::{self as oracle, bias, logits, Router as OracleRouter};
use oxicub_test::{gpu_or_skip, SplitMix64};

/// A router of `experts` and `k` for the dispatch (its scoring plays no part).
fn router(
    experts: usize,
    k: usize,
) -> Router<experts::Uniform, groups::Static<1>, top_groups::Static<1>, k::Uniform, scoring::Softmax>
{
    Router::new(
        experts::uniform(experts as i64).expect("experts"),
        k::uniform(k as i64).expect("k"),
        scoring::Softmax,
    )
}

/// Dispatches `ids` on the GPU as `I`, outputs poisoned, and compares with the oracle.
fn same_as_oracle<I: ExpertId + std::fmt::Debug + PartialEq>(
    cuda: &Cuda,
    what: &str,
    experts: usize,
    k: usize,
    ids: &[u32],
) {
    let typed: Vec<I> = ids.iter().map(|&id| I::from_index(id)).collect();
    let poison = I::from_index(u32::MAX);
    let device_ids = cuda.upload(&typed).expect("ids");
    let mut counts = cuda.upload(&vec![poison; experts]).expect("counts");
    let mut order = cuda.upload(&vec![poison; ids.len().max(1)]).expect("order");
    routing::dispatch(
        cuda,
        &router(experts, k),
        device_ids.slice(..ids.len()),
        counts.as_view_mut(),
        order.slice_mut(..ids.len()),
    )
    .and_then(Pending::check)
    .expect(what);
    let (want_counts, want_order) = oracle::dispatch(experts, ids);
    let bits = |v: Vec<I>| v.into_iter().map(I::to_bits).collect::<Vec<u32>>();
    let got_counts = bits(cuda.download(&counts.as_view()).expect("counts"));
    assert_eq!(got_counts, want_counts, "{what}: counts");
    let got_order = bits(cuda.download(&order.slice(..ids.len())).expect("order"));
    if let Some(at) = (0..ids.len()).find(|&j| got_order[j] != want_order[j]) {
        panic!(
            "{what}: order[{at}] = {} (expected {}), of {} entries",
            got_order[at],
            want_order[at],
            ids.len()
        );
    }
}

/// `n` random ids below `experts`.
fn random_ids(n: usize, experts: u32, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| (rng.next_u64() % u64::from(experts)) as u32)
        .collect()
}

#[test]
fn dispatch_equals_the_oracle() {
    let Some(cuda) = gpu_or_skip() else { return };
    let v3 = OracleRouter::deepseek_v3();
    let b = bias(256, 41, 0.0);
    for tokens in [0usize, 1, 7, 512, 513, 65536] {
        let (ids, _) = oracle::route(&v3, &logits(tokens, 256, 42, 0.0), Some(&b));
        same_as_oracle::<u32>(&cuda, &format!("v3, {tokens} tokens"), 256, 8, &ids);
        same_as_oracle::<i32>(&cuda, &format!("v3 i32, {tokens} tokens"), 256, 8, &ids);
    }
    let same: Vec<u32> = (0..65536).flat_map(|_| [7u32, 3, 250, 0]).collect();
    same_as_oracle::<u32>(&cuda, "every token on the same experts", 256, 4, &same);
    let (wide, _) = oracle::route(
        &OracleRouter::softmax(1024, 32),
        &logits(3000, 1024, 43, 0.0),
        None,
    );
    same_as_oracle::<i32>(&cuda, "1024 experts, 32 each", 1024, 32, &wide);
    same_as_oracle::<u32>(&cuda, "one expert", 1, 1, &vec![0; 100_000]);
    let random = random_ids(1 << 21, 384, 44);
    same_as_oracle::<u32>(&cuda, "2^21 random ids of 384 experts", 384, 8, &random);
}

#[test]
fn the_first_bad_id_is_reported() {
    let Some(cuda) = gpu_or_skip() else { return };
    let check = |what: &str, ids: &[i32], entry: u64, id: i64| {
        let device_ids = cuda.upload(ids).expect("ids");
        let mut counts = cuda.alloc_zeros::<i32>(64).expect("counts");
        let mut order = cuda.alloc_zeros::<i32>(ids.len()).expect("order");
        let result = routing::dispatch(
            &cuda,
            &router(64, 4),
            device_ids.as_view(),
            counts.as_view_mut(),
            order.as_view_mut(),
        )
        .and_then(Pending::check);
        let want = format!(
            "entry {entry} (token {}, choice {}) is {id},",
            entry / 4,
            entry % 4
        );
        match result {
            Err(Error::InvalidArgument { arg: "ids", reason }) if reason.contains(&want) => {}
            other => panic!("{what}: expected `{want}`, got {other:?}"),
        }
    };
    let mut one_tile: Vec<i32> = random_ids(4000, 64, 45).iter().map(|&i| i as i32).collect();
    one_tile[3001] = 64;
    one_tile[107] = 1000;
    check("one tile", &one_tile, 107, 1000);
    let mut tiles: Vec<i32> = random_ids(100_000, 64, 46)
        .iter()
        .map(|&i| i as i32)
        .collect();
    tiles[90_000] = 77;
    tiles[9001] = -5;
    tiles[9002] = -1;
    check("across tiles", &tiles, 9001, -5);
    // The context is sound: a valid call after them is right.
    let ids = random_ids(10_000, 64, 47);
    same_as_oracle::<u32>(&cuda, "after the bad ids", 64, 4, &ids);
}

/// DeepSeek-V3's route and then its dispatch, in a workspace: nothing allocated in the steady
/// state, results equal to the host's.
#[test]
fn route_and_dispatch_in_a_workspace_allocate_nothing() {
    let Some(cuda) = gpu_or_skip() else { return };
    let router = DeepSeekV3::deepseek_v3();
    const TOKENS: usize = 4096;
    let out = TOKENS * 8;
    let b = bias(256, 48, 0.0);
    let device_bias = cuda.upload(&b).expect("bias");
    let mut ids = cuda.alloc_zeros::<i32>(out).expect("ids");
    let mut weights = cuda.alloc_zeros::<f32>(out).expect("weights");
    let mut counts = cuda.alloc_zeros::<i32>(256).expect("counts");
    let mut order = cuda.alloc_zeros::<i32>(out).expect("order");
    let step = |cuda: &Cuda,
                l: &cudarc::driver::CudaSlice<f32>,
                ids: &mut cudarc::driver::CudaSlice<i32>,
                weights: &mut cudarc::driver::CudaSlice<f32>,
                counts: &mut cudarc::driver::CudaSlice<i32>,
                order: &mut cudarc::driver::CudaSlice<i32>| {
        routing::route(
            cuda,
            &router,
            l.as_view(),
            Some(device_bias.as_view()),
            ids.as_view_mut(),
            weights.as_view_mut(),
            &Env::new(),
        )?
        .check()?;
        routing::dispatch(
            cuda,
            &router,
            ids.as_view(),
            counts.as_view_mut(),
            order.as_view_mut(),
        )
    };
    let first = cuda.upload(&logits(TOKENS, 256, 49, 0.0)).expect("logits");
    let bytes = cuda
        .workspace_bytes(|cuda| {
            step(
                cuda,
                &first,
                &mut ids,
                &mut weights,
                &mut counts,
                &mut order,
            )
        })
        .expect("measure");
    let workspace = Workspace::new(&cuda, bytes).expect("workspace");
    let in_workspace = cuda.with_workspace(&workspace).expect("same stream");
    for seed in 0..5 {
        let host_logits = logits(TOKENS, 256, 50 + seed, 0.0);
        let device_logits = cuda.upload(&host_logits).expect("logits");
        let before = in_workspace.device_allocations();
        step(
            &in_workspace,
            &device_logits,
            &mut ids,
            &mut weights,
            &mut counts,
            &mut order,
        )
        .and_then(Pending::check)
        .expect("route and dispatch");
        assert_eq!(
            in_workspace.device_allocations(),
            before,
            "step {seed} allocated (workspace of {bytes} bytes)"
        );
        let host = Host::new();
        let (mut host_ids, mut host_weights) = (vec![0i32; out], vec![0f32; out]);
        routing::route(
            &host,
            &router,
            &host_logits[..],
            Some(&b[..]),
            &mut host_ids[..],
            &mut host_weights[..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("host route");
        let (mut host_counts, mut host_order) = (vec![0i32; 256], vec![0i32; out]);
        routing::dispatch(
            &host,
            &router,
            &host_ids[..],
            &mut host_counts[..],
            &mut host_order[..],
        )
        .and_then(Pending::check)
        .expect("host dispatch");
        assert_eq!(cuda.download(&ids.as_view()).expect("ids"), host_ids);
        assert_eq!(
            cuda.download(&counts.as_view()).expect("counts"),
            host_counts
        );
        assert_eq!(cuda.download(&order.as_view()).expect("order"), host_order);
    }
}
