//! Batched top-k on the GPU against the host backend: bit for bit where the contract pins the
//! output, exactly the contract elsewhere; every tier (warp, block, several blocks per
//! segment, the stream tier) and mixed sizes in one call; every requirement combination;
//! adversarial inputs
//! (ties at the k-th key, all equal, NaN, signed zeros, empty segments, k = 0, k = size,
//! k > size, one huge segment among tiny ones); bad per-segment values reported like the
//! host; outputs poisoned before each run. Each test skips without a GPU (fails with
//! OXICUB_REQUIRE_GPU=1).

mod topk_support;

use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::radix::{RadixBits, RadixKey};
use oxicub_algorithms::{AnyBackend, Cuda, Error, Host};
use oxicub_env::{determinism, output_ordering, require, tie_break, Env, Environment};
use oxicub_params::{direction, k, num_segments, segment_size, SelectDirection};
use oxicub_test::{gpu_or_skip, sample_keys, SplitMix64};
use topk_support::{check_contract, RefKey};

fn poison<K: RadixKey>() -> K {
    K::from_bits(<K::Bits as RadixBits>::from_u64_truncating(
        0xA5A5_A5A5_A5A5_A5A5,
    ))
}
const POISON_INDEX: u64 = 0xDEAD_BEEF_DEAD_BEEF;

/// NaN of both signs, both zeros, both infinities and a number, cycled through by the tests of
/// special keys.
const F32_SPECIALS: [f32; 8] = [
    f32::NAN,
    -0.0,
    0.0,
    f32::INFINITY,
    -f32::NAN,
    1.0,
    -0.0,
    f32::NEG_INFINITY,
];

/// Segments by offsets, with a k and a direction per segment.
#[derive(Clone, Debug)]
struct Case<K> {
    keys: Vec<K>,
    begin: Vec<i64>,
    end: Vec<i64>,
    ks: Vec<i64>,
    dirs: Vec<u8>,
}

impl<K: RefKey> Case<K> {
    fn contiguous(keys: Vec<K>, sizes: &[usize], ks: &[i64], dirs: &[u8]) -> Case<K> {
        let (mut begin, mut end, mut at) = (Vec::new(), Vec::new(), 0i64);
        for &s in sizes {
            begin.push(at);
            at += s as i64;
            end.push(at);
        }
        assert_eq!(at as usize, keys.len());
        Case {
            keys,
            begin,
            end,
            ks: ks.to_vec(),
            dirs: dirs.to_vec(),
        }
    }

    fn max_size(&self) -> i64 {
        let sizes = self.begin.iter().zip(&self.end).map(|(b, e)| e - b);
        sizes.max().unwrap_or(0).max(0)
    }

    fn max_k(&self) -> i64 {
        self.ks.iter().copied().max().unwrap_or(0).max(0)
    }

    fn stride(&self) -> usize {
        self.max_size().min(self.max_k()) as usize
    }
}

type Run<K> = (Vec<K>, Vec<u64>, Result<(), String>);

/// The case on the host.
fn on_host<K: RefKey, E: Environment>(case: &Case<K>, env: &E) -> Run<K> {
    let n = case.ks.len();
    let problem = Problem::offsets(
        &case.begin[..],
        &case.end[..],
        segment_size::PerSegment::<(), 0, { 1 << 40 }>::new(())
            .with_bounds(0, case.max_size())
            .expect("bounds"),
        k::PerSegment::<_, 0, { 1 << 40 }>::new(&case.ks[..])
            .with_bounds(0, case.max_k())
            .expect("bounds"),
        direction::PerSegment::<_>::new(&case.dirs[..]),
        num_segments::uniform(n as i64).expect("n"),
    );
    let len = n * case.stride();
    let mut out_keys = vec![poison::<K>(); len];
    let mut out_indices = vec![POISON_INDEX; len];
    let outcome = batched_topk::select_indices(
        &Host::new(),
        &problem,
        &case.keys[..],
        &mut out_keys[..],
        &mut out_indices[..],
        env,
    )
    .expect("host call");
    (
        out_keys,
        out_indices,
        outcome.check().map_err(|e| e.to_string()),
    )
}

/// The case on the GPU, with every per-segment argument in device memory.
fn on_gpu<K: RefKey, E: Environment>(cuda: &Cuda, case: &Case<K>, env: &E) -> Run<K> {
    let n = case.ks.len();
    let pad = |v: &[i64]| if v.is_empty() { vec![0] } else { v.to_vec() };
    let begin = cuda.upload(&pad(&case.begin)).expect("upload");
    let end = cuda.upload(&pad(&case.end)).expect("upload");
    let ks = cuda.upload(&pad(&case.ks)).expect("upload");
    let dirs = cuda
        .upload(&if case.dirs.is_empty() {
            vec![0]
        } else {
            case.dirs.clone()
        })
        .expect("upload");
    let keys = cuda
        .upload_keys(&if case.keys.is_empty() {
            vec![poison::<K>()]
        } else {
            case.keys.clone()
        })
        .expect("upload");
    let problem = Problem::offsets(
        begin.slice(..n),
        end.slice(..n),
        segment_size::PerSegment::<(), 0, { 1 << 40 }>::new(())
            .with_bounds(0, case.max_size())
            .expect("bounds"),
        k::PerSegment::<_, 0, { 1 << 40 }>::new(ks.slice(..n))
            .with_bounds(0, case.max_k())
            .expect("bounds"),
        direction::PerSegment::<_>::new(dirs.slice(..n)),
        num_segments::uniform(n as i64).expect("n"),
    );
    let len = (n * case.stride()).max(1);
    let mut out_keys = cuda.upload_keys(&vec![poison::<K>(); len]).expect("poison");
    let mut out_indices = cuda.upload(&vec![POISON_INDEX; len]).expect("poison");
    let keys_view = keys.as_view();
    let outcome = batched_topk::select_indices(
        cuda,
        &problem,
        keys_view.slice(..case.keys.len()),
        out_keys.as_view_mut(),
        out_indices.as_view_mut(),
        env,
    )
    .expect("gpu call");
    let checked = outcome.check().map_err(|e| e.to_string());
    let got_keys = cuda.download_keys(&out_keys).expect("download");
    let got_indices = cuda.download(&out_indices.as_view()).expect("download");
    let used = n * case.stride();
    (
        got_keys[..used].to_vec(),
        got_indices[..used].to_vec(),
        checked,
    )
}

/// GPU against host: the same error; per segment the contract, bit for bit where pinned; the
/// slots past each segment's results untouched.
fn check_case<K: RefKey, E: Environment>(cuda: &Cuda, case: &Case<K>, env: &E) {
    let r = env.resolved();
    let host = on_host(case, env);
    let gpu = on_gpu(cuda, case, env);
    assert_eq!(gpu.2, host.2, "{r:?}: the reported error");
    let stride = case.stride();
    for i in 0..case.ks.len() {
        let (b, e) = (case.begin[i], case.end[i]);
        let valid = b >= 0 && b <= e && e as usize <= case.keys.len();
        let base = i * stride;
        let what = format!(
            "{} segment {i} [{b}, {e}) k={} dir={} {r:?}",
            K::KEY_TYPE,
            case.ks[i],
            case.dirs[i]
        );
        if !valid || case.dirs[i] > 1 || case.ks[i] < 0 {
            assert!(
                gpu.1[base..base + stride]
                    .iter()
                    .all(|&x| x == POISON_INDEX),
                "{what}: an invalid segment wrote"
            );
            continue;
        }
        let seg = &case.keys[b as usize..e as usize];
        let written = (case.ks[i] as usize).min(seg.len());
        let dir = if case.dirs[i] == 0 {
            SelectDirection::Max
        } else {
            SelectDirection::Min
        };
        check_contract(
            &what,
            seg,
            written,
            dir,
            r,
            &gpu.0[base..base + written],
            &gpu.1[base..base + written],
        );
        assert!(
            gpu.1[base + written..base + stride]
                .iter()
                .all(|&x| x == POISON_INDEX),
            "{what}: a slot past the results was written"
        );
        if r.pins_output() {
            assert_eq!(
                gpu.1[base..base + written],
                host.1[base..base + written],
                "{what}: indices differ from the host"
            );
            let bits = |v: &[K]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&gpu.0[base..base + written]) == bits(&host.0[base..base + written]),
                "{what}: keys differ from the host"
            );
        }
    }
}

/// Runs `$each::<K>(cuda, seed)` for every key type, seeds `$seed`, `$seed + 1`, ...
macro_rules! every_key_type {
    ($each:ident, $cuda:expr, $seed:expr) => {{
        let seed: u64 = $seed;
        $each::<u8>($cuda, seed);
        $each::<u16>($cuda, seed + 1);
        $each::<u32>($cuda, seed + 2);
        $each::<u64>($cuda, seed + 3);
        $each::<i8>($cuda, seed + 4);
        $each::<i16>($cuda, seed + 5);
        $each::<i32>($cuda, seed + 6);
        $each::<i64>($cuda, seed + 7);
        $each::<half::f16>($cuda, seed + 8);
        $each::<half::bf16>($cuda, seed + 9);
        $each::<f32>($cuda, seed + 10);
        $each::<f64>($cuda, seed + 11);
    }};
}

fn dirs(rng: &mut SplitMix64, n: usize) -> Vec<u8> {
    (0..n).map(|_| (rng.next_u64() % 2) as u8).collect()
}

/// A mixed case: tiny, shared-memory and huge segments, adversarial k.
fn mixed<K: RefKey>(keys_for: impl Fn(usize, u64) -> Vec<K>, seed: u64) -> Case<K> {
    let mut rng = SplitMix64::new(seed);
    let mut sizes = vec![0usize, 1, 7, 64, 256, 300, 2048, 2049, 5000, 40_000];
    for _ in 0..40 {
        sizes.push((rng.next_u64() % 300) as usize);
    }
    let ks: Vec<i64> = sizes
        .iter()
        .map(|&s| match rng.next_u64() % 6 {
            0 => 0,
            1 => s as i64,
            2 => s as i64 + 5,
            3 => 1,
            _ => (rng.next_u64() % 40) as i64,
        })
        .collect();
    let total = sizes.iter().sum();
    let d = dirs(&mut rng, sizes.len());
    Case::contiguous(keys_for(total, seed), &sizes, &ks, &d)
}

#[test]
fn mixed_tiers_every_requirement_combination() {
    let Some(cuda) = gpu_or_skip() else { return };
    let case = mixed(sample_keys::<f32>, 1);
    for_every_env!(check_case(&cuda, &case));
    let ties = mixed(
        |n, s| {
            let mut rng = SplitMix64::new(s);
            (0..n).map(|_| (rng.next_u64() % 4) as i32).collect()
        },
        2,
    );
    for_every_env!(check_case(&cuda, &ties));
}

#[test]
fn every_key_type_in_every_tier() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey>(cuda: &Cuda, seed: u64) {
        let case = mixed(sample_keys::<K>, seed);
        check_case(cuda, &case, &Env::new());
        check_case(cuda, &case, &require!(tie_break::PreferLargerIndex));
        check_case(
            cuda,
            &case,
            &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        );
    }
    every_key_type!(each, &cuda, 3);
}

#[test]
fn all_equal_nan_and_signed_zeros() {
    let Some(cuda) = gpu_or_skip() else { return };
    let equal = mixed(|n, _| vec![7u32; n], 15);
    check_case(&cuda, &equal, &Env::new());
    check_case(&cuda, &equal, &require!(tie_break::PreferLargerIndex));
    let specials = F32_SPECIALS;
    let special = mixed(
        |n, _| {
            specials
                .iter()
                .copied()
                .cycle()
                .take(n)
                .collect::<Vec<f32>>()
        },
        16,
    );
    for_every_env!(check_case(&cuda, &special));
}

#[test]
fn one_huge_segment_among_tiny_ones_with_a_tie_at_the_boundary() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut keys: Vec<u32> = sample_keys(131_072 + 40, 17);
    for key in keys.iter_mut().step_by(3) {
        *key = 1 << 31;
    }
    let sizes = [5, 131_072, 10, 0, 25];
    let case = Case::contiguous(keys, &sizes, &[3, 2048, 10, 4, 30], &[0, 0, 1, 0, 1]);
    for_every_env!(check_case(&cuda, &case));
    // Unsorted output may exceed the shared-memory sort: k = 5000 of the huge segment.
    let case = Case {
        ks: vec![3, 5000, 10, 4, 30],
        ..case
    };
    check_case(
        &cuda,
        &case,
        &require!(
            determinism::GpuToGpu,
            tie_break::PreferLargerIndex,
            output_ordering::Unsorted
        ),
    );
    check_case(
        &cuda,
        &case,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
    );
}

#[test]
fn bad_per_segment_values_are_reported_like_the_host() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys: Vec<i64> = sample_keys(100, 18);
    let base = Case::contiguous(keys, &[10, 20, 30, 40], &[3, 4, 5, 6], &[0, 1, 0, 1]);
    // A direction byte outside the option set.
    let case = Case {
        dirs: vec![0, 1, 2, 1],
        ..base.clone()
    };
    check_case(&cuda, &case, &Env::new());
    // Offsets out of order, past the buffer.
    let case = Case {
        begin: vec![0, 10, 31, 60],
        end: vec![10, 30, 30, 100],
        ..base.clone()
    };
    check_case(&cuda, &case, &Env::new());
    let case = Case {
        end: vec![10, 30, 60, 101],
        ..base.clone()
    };
    check_case(&cuda, &case, &Env::new());
}

#[test]
fn k_outside_its_bounds_and_a_deferred_count_on_the_device() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys: Vec<f32> = sample_keys(4 * 64, 19);
    let device_keys = cuda.upload(&keys).expect("upload");
    let ks = cuda.upload(&[6i64, 9, 6, 6]).expect("upload");
    let count = cuda.upload(&[5i64]).expect("upload");
    let problem = Problem::strided(
        64,
        segment_size::Static::<64>::new(),
        k::PerSegment::<_, 0, 8>::new(ks.as_view())
            .with_bounds(0, 6)
            .expect("bounds"),
        direction::Max,
        num_segments::Deferred::<_, 0, 4>::new(count.as_view()),
    );
    let mut out = cuda.upload(&[-1.0f32; 4 * 6]).expect("poison");
    let err = batched_topk::select_keys(
        &cuda,
        &problem,
        device_keys.as_view(),
        out.as_view_mut(),
        &Env::new(),
    )
    .expect("call")
    .check()
    .unwrap_err();
    // The count (5 > 4) is reported first; 4 segments were processed, segment 1 skipped.
    assert!(
        matches!(&err, Error::Param(e) if e.param() == "num_segments"),
        "{err}"
    );
    let got = cuda.download(&out.as_view()).expect("download");
    assert!(got[6..12].iter().all(|&v| v == -1.0), "segment 1 wrote");
    let count = cuda.upload(&[4i64]).expect("upload");
    let problem = Problem::strided(
        64,
        segment_size::Static::<64>::new(),
        k::PerSegment::<_, 0, 8>::new(ks.as_view())
            .with_bounds(0, 6)
            .expect("bounds"),
        direction::Max,
        num_segments::Deferred::<_, 0, 4>::new(count.as_view()),
    );
    let err = batched_topk::select_keys(
        &cuda,
        &problem,
        device_keys.as_view(),
        out.as_view_mut(),
        &Env::new(),
    )
    .expect("call")
    .check()
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "segment 1: k = 9 is outside its bounds [0, 6]"
    );
}

/// `select_pairs` of f32 keys through AnyBackend on the GPU and on Host (outputs poisoned first,
/// `len` of each): both results as (key bits, values).
macro_rules! f32_pairs_on_both {
    ($cuda:expr, $problem:expr, $keys:expr, $values:expr, $len:expr, $value_poison:expr) => {{
        let run = |backend: &AnyBackend| {
            let (mut top, mut v) = (vec![poison::<f32>(); $len], vec![$value_poison; $len]);
            batched_topk::select_pairs(
                backend,
                $problem,
                $keys,
                $values,
                &mut top[..],
                &mut v[..],
                &Env::new(),
            )
            .expect("call")
            .check()
            .expect("valid");
            (top.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), v)
        };
        (
            run(&AnyBackend::Cuda($cuda)),
            run(&AnyBackend::Host(Host::new())),
        )
    }};
}

/// The MoE shape through AnyBackend (static size and k: the warp tier only), against Host.
#[test]
fn moe_shape_static_parameters_and_pairs_on_any_backend() {
    let Some(cuda) = gpu_or_skip() else { return };
    let tokens = 3000usize;
    let logits: Vec<f32> = sample_keys(tokens * 256, 20);
    let weights: Vec<u64> = (0..logits.len() as u64).collect();
    let problem = Problem::strided(
        256,
        segment_size::Static::<256>::new(),
        k::Static::<8>::new(),
        direction::Max,
        num_segments::uniform(tokens as i64).expect("n"),
    );
    let (gpu, host) = f32_pairs_on_both!(
        cuda.clone(),
        &problem,
        &logits[..],
        &weights[..],
        tokens * 8,
        u64::MAX
    );
    assert_eq!(gpu, host);
    // [4096 x 64], k = 6: ITEMS = 2 per lane.
    let logits: Vec<f32> = sample_keys(4096 * 64, 21);
    let problem = Problem::strided(
        64,
        segment_size::Static::<64>::new(),
        k::Static::<6>::new(),
        direction::Max,
        num_segments::Static::<4096>::new(),
    );
    let run = |backend: &AnyBackend| {
        let (mut top, mut at) = (vec![0f32; 4096 * 6], vec![0u32; 4096 * 6]);
        batched_topk::select_indices(
            backend,
            &problem,
            &logits[..],
            &mut top[..],
            &mut at[..],
            &require!(tie_break::PreferLargerIndex),
        )
        .expect("call")
        .check()
        .expect("valid");
        at
    };
    assert_eq!(
        run(&AnyBackend::Cuda(cuda)),
        run(&AnyBackend::Host(Host::new()))
    );
}

/// Sparse attention: top-2048 of 131072 scores per query (several blocks per segment).
#[test]
fn sparse_attention_shape() {
    let Some(cuda) = gpu_or_skip() else { return };
    let queries = 8usize;
    let scores: Vec<half::bf16> = sample_keys(queries * 131_072, 22);
    let problem = Problem::strided(
        131_072,
        segment_size::Static::<131_072>::new(),
        k::Static::<2048>::new(),
        direction::Max,
        num_segments::uniform(queries as i64).expect("n"),
    );
    let run = |backend: &AnyBackend| {
        let (mut top, mut at) = (
            vec![half::bf16::ZERO; queries * 2048],
            vec![0i64; queries * 2048],
        );
        batched_topk::select_indices(
            backend,
            &problem,
            &scores[..],
            &mut top[..],
            &mut at[..],
            &Env::new(),
        )
        .expect("call")
        .check()
        .expect("valid");
        at
    };
    assert_eq!(
        run(&AnyBackend::Cuda(cuda)),
        run(&AnyBackend::Host(Host::new()))
    );
}

/// One strided call with every value uniform (the direct path on the GPU: checked on the host,
/// no control stages) on both backends: the same outcome; per segment the contract, bit for
/// bit where pinned.
#[derive(Clone, Copy, Debug)]
struct Shape {
    n: usize,
    stride: usize,
    size: usize,
    k: usize,
    dir: SelectDirection,
    /// Keys short of `n * stride` by this many (past the buffer: reported, not direct).
    short: usize,
}

fn strided_run<B, K, E>(
    backend: &B,
    shape: Shape,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, u64>,
    env: &E,
) -> Result<(), String>
where
    B: batched_topk::BatchedTopKBackend,
    K: RadixKey,
    E: Environment,
    direction::Choice<direction::Either>: oxicub_algorithms::ChoicesOn<B>,
{
    let problem = Problem::strided(
        shape.stride,
        segment_size::Uniform::<0, { 1 << 40 }>::new(shape.size as i64).expect("size"),
        k::Uniform::<0, { 1 << 40 }>::new(shape.k as i64).expect("k"),
        direction::Choice::<direction::Either>::new(shape.dir).expect("direction"),
        num_segments::uniform(shape.n as i64).expect("n"),
    );
    batched_topk::select_indices(backend, &problem, keys, out_keys, out_indices, env)
        .and_then(|outcome| outcome.check())
        .map_err(|e| e.to_string())
}

fn check_strided<K: RefKey, E: Environment>(cuda: &Cuda, keys: &[K], shape: Shape, env: &E) {
    let r = env.resolved();
    let written = shape.k.min(shape.size);
    let len = shape.n * written;
    let keys = &keys[..shape.n * shape.stride - shape.short];
    let (mut host_keys, mut host_indices) = (vec![poison::<K>(); len], vec![POISON_INDEX; len]);
    let host = strided_run(
        &Host::new(),
        shape,
        keys,
        &mut host_keys[..],
        &mut host_indices[..],
        env,
    );
    let device_keys = cuda.upload_keys(keys).expect("upload");
    let mut out_keys = cuda.upload_keys(&vec![poison::<K>(); len]).expect("upload");
    let mut out_indices = cuda.upload(&vec![POISON_INDEX; len]).expect("upload");
    let gpu = strided_run(
        cuda,
        shape,
        device_keys.as_view(),
        out_keys.as_view_mut(),
        out_indices.as_view_mut(),
        env,
    );
    let what = format!("{} {shape:?} {r:?}", K::KEY_TYPE);
    assert_eq!(gpu, host, "{what}: the outcome");
    let gpu_keys = cuda.download_keys(&out_keys).expect("download");
    let gpu_indices = cuda.download(&out_indices.as_view()).expect("download");
    if host.is_err() {
        return;
    }
    for i in 0..shape.n {
        let seg = &keys[i * shape.stride..i * shape.stride + shape.size];
        let at = i * written..(i + 1) * written;
        let what = format!("{what} segment {i}");
        check_contract(
            &what,
            seg,
            written,
            shape.dir,
            r,
            &gpu_keys[at.clone()],
            &gpu_indices[at.clone()],
        );
        if r.pins_output() {
            assert_eq!(
                gpu_indices[at.clone()],
                host_indices[at.clone()],
                "{what}: indices differ from the host"
            );
            let bits = |v: &[K]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&gpu_keys[at.clone()]) == bits(&host_keys[at]),
                "{what}: keys differ from the host"
            );
        }
    }
}

fn shapes() -> Vec<Shape> {
    let s = |n, stride, size, k, dir| Shape {
        n,
        stride,
        size,
        k,
        dir,
        short: 0,
    };
    use SelectDirection::{Max, Min};
    vec![
        s(300, 256, 256, 8, Max),          // warp tier, 16-byte loads
        s(301, 256, 256, 16, Min),         // the same, odd count: a half warp idle
        s(77, 128, 128, 3, Max),           // the same, 128 keys, k = 3
        s(200, 64, 64, 6, Min),            // warp tier, 8-byte loads
        s(100, 67, 64, 6, Max),            // warp tier, unaligned rows: scalar loads
        s(50, 256, 200, 32, Max),          // warp tier, partial rows
        s(40, 1000, 1000, 100, Min),       // block tier
        s(3, 40_000, 40_000, 2048, Max),   // several blocks, packed shared-memory sort
        s(4, 9000, 9000, 700, Min),        // several blocks, packed sort with padding
        s(2, 5000, 4999, 3000, Min),       // several blocks, global sort
        s(3, 40_001, 40_000, 100, Max),    // stream tier, unaligned rows: scalar loads
        s(5, 131_072, 131_072, 2048, Min), // stream tier, the sparse-attention row
        s(4, 2049, 2049, 2048, Max),       // stream tier, all but one item
        Shape {
            short: 1,
            ..s(10, 256, 256, 8, Max)
        }, // last row past the buffer: reported
    ]
}

#[test]
fn uniform_strided_shapes_take_the_direct_path_in_every_tier() {
    let Some(cuda) = gpu_or_skip() else { return };
    let f32_keys: Vec<f32> = sample_keys(300 * 256, 30);
    let ties: Vec<u32> = {
        // Many zeros (rank 0 for max) and u32::MAX (rank 0 for min): the warp tier's fallback.
        let mut rng = SplitMix64::new(31);
        (0..300 * 256)
            .map(|_| match rng.next_u64() % 4 {
                0 => 0,
                1 => u32::MAX,
                x => x as u32,
            })
            .collect()
    };
    let half_ties: Vec<u32> = ties
        .iter()
        .map(|&x| if x == u32::MAX { 5 } else { x })
        .collect();
    for shape in shapes() {
        let need = shape.n * shape.stride;
        let f: Vec<f32> = f32_keys.iter().copied().cycle().take(need).collect();
        for_every_env!(check_strided(&cuda, &f, shape));
        let t: Vec<u32> = ties.iter().copied().cycle().take(need).collect();
        for_every_env!(check_strided(&cuda, &t, shape));
        let h: Vec<u32> = half_ties.iter().copied().cycle().take(need).collect();
        check_strided(&cuda, &h, shape, &Env::new());
        check_strided(&cuda, &h, shape, &require!(tie_break::PreferLargerIndex));
        fn each<K: RefKey>(cuda: &Cuda, shape: Shape, seed: u64) {
            let keys: Vec<K> = sample_keys(shape.n * shape.stride, seed);
            check_strided(cuda, &keys, shape, &Env::new());
            check_strided(cuda, &keys, shape, &require!(tie_break::PreferLargerIndex));
        }
        each::<i8>(&cuda, shape, 32);
        each::<u16>(&cuda, shape, 33);
        each::<i32>(&cuda, shape, 34);
        each::<half::bf16>(&cuda, shape, 35);
        each::<u64>(&cuda, shape, 36);
        each::<f64>(&cuda, shape, 37);
    }
}

// ---- The stream tier: segments of 2049 ..= its cap keys with min(k, size) <= 2048
// (BatchedTiers::stream_max_size), filtered by chunks against a sampled threshold, then
// selected by a block per segment (buckets, or the exact radix select over the candidates or
// over every key); larger k or larger segments go to the multi-block tier in the same call. ----

/// Segments for the stream tier and its neighbours: sizes just above the block tier, sizes
/// that end inside a chunk, the sparse-attention row; k from 1 to the tier's cap,
/// and just above it (the multi-block tier); a few small segments (warp and block tiers).
fn stream_case<K: RefKey>(keys_for: impl Fn(usize, u64) -> Vec<K>, seed: u64) -> Case<K> {
    let mut rng = SplitMix64::new(seed);
    let sizes = [
        2049usize, 2051, 3000, 4099, 9000, 16_387, 40_000, 131_072, 5000, 60_000, 100, 2048, 7,
    ];
    let ks: Vec<i64> = sizes
        .iter()
        .enumerate()
        .map(|(i, _)| match i {
            0 => 2048, // all but one item
            1 => 2049, // above the cap: multi-block tier
            7 => 2048, // sparse attention
            8 => 2500, // above the cap, sorted globally
            9 => 1,    // a single winner
            12 => 9,   // k > size
            _ => 1 + (rng.next_u64() % 700) as i64,
        })
        .collect();
    let total = sizes.iter().sum();
    let d = dirs(&mut rng, sizes.len());
    Case::contiguous(keys_for(total, seed), &sizes, &ks, &d)
}

/// Keys with heavy ties: 4 distinct values, so the k-th key is tied in every segment and the
/// tie-break decides among thousands of equal keys.
fn four_values<K: RefKey>(n: usize, seed: u64) -> Vec<K> {
    let values: Vec<K> = sample_keys(4, seed);
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| values[(rng.next_u64() % 4) as usize])
        .collect()
}

#[test]
fn stream_tier_every_requirement_combination() {
    let Some(cuda) = gpu_or_skip() else { return };
    let case = stream_case(sample_keys::<f32>, 40);
    for_every_env!(check_case(&cuda, &case));
    let ties = stream_case(four_values::<i32>, 41);
    for_every_env!(check_case(&cuda, &ties));
}

#[test]
fn stream_tier_every_key_type() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey>(cuda: &Cuda, seed: u64) {
        let case = stream_case(sample_keys::<K>, seed);
        check_case(cuda, &case, &Env::new());
        check_case(cuda, &case, &require!(tie_break::PreferLargerIndex));
        check_case(
            cuda,
            &case,
            &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        );
        check_case(cuda, &case, &require!(output_ordering::Sorted));
        let ties = stream_case(four_values::<K>, seed + 100);
        check_case(cuda, &ties, &Env::new());
        check_case(
            cuda,
            &ties,
            &require!(tie_break::PreferLargerIndex, output_ordering::Unsorted),
        );
    }
    every_key_type!(each, &cuda, 42);
}

#[test]
fn stream_tier_all_equal_nan_signed_zeros_and_a_tie_at_the_kth_key() {
    let Some(cuda) = gpu_or_skip() else { return };
    let equal = stream_case(|n, _| vec![7u32; n], 54);
    for_every_env!(check_case(&cuda, &equal));
    let specials = F32_SPECIALS;
    let special = stream_case(
        |n, _| specials.iter().copied().cycle().take(n).collect(),
        55,
    );
    for_every_env!(check_case(&cuda, &special));
    // Distinct keys except one value repeated around the k-th position: the boundary digit
    // resolves to a single key with more copies than slots left.
    let tie = stream_case(
        |n, s| {
            let mut keys: Vec<f64> = sample_keys(n, s);
            for (i, key) in keys.iter_mut().enumerate() {
                if i % 5 == 0 {
                    *key = 0.5;
                }
            }
            keys
        },
        56,
    );
    for_every_env!(check_case(&cuda, &tie));
    // Scores in [0, 1) and one NaN per 1000: the candidates' ranks span the whole range, so
    // the buckets degenerate and the exact select over the candidates decides.
    let outlier = stream_case(
        |n, s| {
            let mut keys = unit_scores(n, s, 24);
            for key in keys.iter_mut().step_by(1000) {
                *key = f32::NAN;
            }
            keys
        },
        61,
    );
    for_every_env!(check_case(&cuda, &outlier));
}

/// A sample that misses while NaNs fill the candidates past k. The keys that every sample of
/// a 131072-key segment reads (sample_miss_row) are its 8192 best numbers, so only a few m
/// keys reach the threshold, and one other key in 32 is a NaN (of either sign: every NaN
/// ranks above +inf). For min (segment 1) the NaNs rank last, below the threshold, yet the
/// f32 / f64 filter's float compare passes them: the candidates hold more than k keys without
/// holding the k best, and must not be taken for them. For max (segment 0) the NaNs are the k
/// best and reach any threshold: the candidates hold them.
#[test]
fn stream_tier_sample_miss_with_nans_below_the_threshold() {
    let Some(cuda) = gpu_or_skip() else { return };
    const SIZE: usize = 131_072;
    let dirs = [0u8, 1];
    let keys: Vec<f64> = dirs
        .iter()
        .zip(70u64..)
        .flat_map(|(&dir, seed)| sample_miss_row(dir, seed))
        .collect();
    let narrow: Vec<f32> = keys
        .iter()
        .map(|&k| match (k.is_nan(), k.is_sign_negative()) {
            (true, true) => -f32::NAN,
            (true, false) => f32::NAN,
            _ => k as f32,
        })
        .collect();
    let case = Case::contiguous(keys, &[SIZE, SIZE], &[2048, 2048], &dirs);
    for_every_env!(check_case(&cuda, &case));
    let case = Case::contiguous(narrow, &[SIZE, SIZE], &[2048, 2048], &dirs);
    for_every_env!(check_case(&cuda, &case));
}

/// A row of 131072 keys for direction `dir` (0 max) whose sampled positions hold its best
/// numbers: the positions p with p % 128 < 8, which hold every run that the filter's and the
/// clustered kernel's samples read, for f32 and f64 keys (runs of 8 or 4 keys at strides of
/// 128, 256 or 512 keys: BtStreamSample). Of the other keys, one in 32 is a NaN (negative for
/// max), so the sample misses while NaNs rank below the threshold for min.
fn sample_miss_row(dir: u8, seed: u64) -> Vec<f64> {
    let mut rng = SplitMix64::new(seed);
    (0..131_072)
        .map(|i| match (i % 128 < 8, i % 32, dir) {
            (true, _, 0) => 1000.0 + i as f64,
            (true, _, _) => -1000.0 - i as f64,
            (false, 16, 0) => -f64::NAN,
            (false, 16, _) => f64::NAN,
            _ => unit_f64(&mut rng),
        })
        .collect()
}

/// Smooth scores (an AR(1) series with coefficient 0.99: neighbouring keys correlated), where
/// the candidates crowd into a few of a segment's regions: the fullest region holds several
/// times its even share, which the regions' slots (four times the share) must take.
#[test]
fn stream_tier_smooth_scores() {
    let Some(cuda) = gpu_or_skip() else { return };
    const SIZE: usize = 131_072;
    let keys = ar1_scores(&mut SplitMix64::new(73), 3 * SIZE, 0.99);
    let case = Case::contiguous(keys, &[SIZE, SIZE, SIZE], &[2048, 2048, 1000], &[0, 1, 0]);
    for_every_env!(check_case(&cuda, &case));
}

/// Inputs whose best keys crowd into a few filter regions: ascending and descending rows (the
/// k best in the last or first few thousand keys), an AR(1) series with coefficient 0.999,
/// one hot window of 3000 keys and five of 600, and an ascending row whose size is not a
/// multiple of the chunk. The filter spreads a quarter of each segment's slots by where the
/// sample's best keys lie; every region's slots must stay apart from its neighbours', in both
/// directions (the min direction takes the other end of the sorted rows).
#[test]
fn stream_tier_sorted_and_clustered_scores() {
    let Some(cuda) = gpu_or_skip() else { return };
    let [ascending, descending, smooth, one_window, five_windows] = crowded_rows(74);
    let short: Vec<f32> = (0..100_000).map(|j| j as f32).collect();
    let rows = [
        &ascending,
        &descending,
        &ascending,
        &smooth,
        &smooth,
        &one_window,
        &five_windows,
        &short,
    ];
    let sizes: Vec<usize> = rows.iter().map(|r| r.len()).collect();
    let keys: Vec<f32> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    let ks = [2048, 2048, 2048, 2048, 1500, 2048, 2048, 2048];
    let case = Case::contiguous(keys, &sizes, &ks, &[1, 1, 0, 1, 0, 1, 1, 1]);
    for_every_env!(check_case(&cuda, &case));
}

/// Rows of 131072 scores whose best keys crowd together: ascending, descending, an AR(1)
/// series with coefficient 0.999, one hot window of 3000 keys, five of 600.
fn crowded_rows(seed: u64) -> [Vec<f32>; 5] {
    const SIZE: usize = 131_072;
    let mut rng = SplitMix64::new(seed);
    let ascending: Vec<f32> = (0..SIZE).map(|j| j as f32 / SIZE as f32).collect();
    let descending: Vec<f32> = ascending.iter().rev().copied().collect();
    let smooth = ar1_scores(&mut rng, SIZE, 0.999);
    let mut window = |width: usize, count: usize| -> Vec<f32> {
        let mut keys: Vec<f32> = (0..SIZE).map(|_| unit_f64(&mut rng) as f32).collect();
        for _ in 0..count {
            let start = (rng.next_u64() % (SIZE - width) as u64) as usize;
            keys[start..start + width]
                .iter_mut()
                .for_each(|k| *k += 1.0);
        }
        keys
    };
    let one_window = window(3000, 1);
    let five_windows = window(600, 5);
    [ascending, descending, smooth, one_window, five_windows]
}

/// `n` keys of an AR(1) series x_i = rho x_(i-1) + u_i - 0.5 from x = 0, u uniform in [0, 1)
/// (`unit_f64`): neighbouring keys correlated, more so as rho nears 1.
fn ar1_scores(rng: &mut SplitMix64, n: usize, rho: f64) -> Vec<f32> {
    let mut x = 0.0f64;
    (0..n)
        .map(|_| {
            x = rho * x + (unit_f64(rng) - 0.5);
            x as f32
        })
        .collect()
}

/// A number uniform in [0, 1) with 53 bits of resolution.
fn unit_f64(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// `n` scores uniform in [0, 1) with `bits` bits of resolution (fewer bits: more ties).
fn unit_scores(n: usize, seed: u64, bits: u32) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| (rng.next_u64() >> (64 - bits)) as f32 / (1u64 << bits) as f32)
        .collect()
}

/// Scores as a sparse-attention indexer produces them, where the buckets decide: distinct
/// (24 bits) and with a few dozen copies of each value (12 bits: ties at the k-th key).
#[test]
fn stream_tier_buckets_with_and_without_ties() {
    let Some(cuda) = gpu_or_skip() else { return };
    let distinct = stream_case(|n, s| unit_scores(n, s, 24), 62);
    for_every_env!(check_case(&cuda, &distinct));
    let tied = stream_case(|n, s| unit_scores(n, s, 12), 63);
    for_every_env!(check_case(&cuda, &tied));
}

/// More chunks than the filter has resident blocks (2 per SM: 264 on 132 SMs), so its blocks
/// stride over several chunks each (a path no call with fewer chunks than one wave reaches):
/// segments of one chunk whose k draws a sample or does not (k close to the size: about every
/// key is a candidate), in random order, so a block meets both kinds in both orders. 1-, 2-, 4-
/// and 8-byte keys, and keys with heavy ties (the exact paths). A wrong threshold or slot split
/// costs speed, not correctness (the final checks the candidates), so this pins the results of
/// the grid-stride path, not the clearing between its work items.
#[test]
fn stream_tier_grid_stride_over_sampled_and_unsampled_segments() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn case<K: RefKey>(keys_for: impl Fn(usize, u64) -> Vec<K>, seed: u64) -> Case<K> {
        let mut rng = SplitMix64::new(seed);
        let count = 700;
        // (size, k): a small k (sampled), k = 2048 of a segment barely larger (no sample:
        // about every key is a candidate), k = 2048 of a larger one (sampled). Sizes are
        // multiples of 16 keys, so every segment starts 16-byte aligned and streams as
        // vectors through the batch stage.
        let (sizes, ks): (Vec<usize>, Vec<i64>) = (0..count)
            .map(|_| {
                let size = 2064 + 16 * (rng.next_u64() % 875) as usize;
                match rng.next_u64() % 3 {
                    0 => (size, 1 + (rng.next_u64() % 300) as i64),
                    1 => (2064 + 16 * (rng.next_u64() % 3) as usize, 2048),
                    _ => (size, 2048),
                }
            })
            .unzip();
        let total = sizes.iter().sum();
        let d = dirs(&mut rng, count);
        Case::contiguous(keys_for(total, seed), &sizes, &ks, &d)
    }
    let f32s = case(sample_keys::<f32>, 70);
    for_every_env!(check_case(&cuda, &f32s));
    let f64s = case(sample_keys::<f64>, 71);
    check_case(&cuda, &f64s, &Env::new());
    check_case(
        &cuda,
        &f64s,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
    );
    let ties = case(four_values::<i32>, 72);
    check_case(&cuda, &ties, &Env::new());
    check_case(&cuda, &ties, &require!(tie_break::PreferLargerIndex));
    // 1- and 2-byte keys: 16 and 8 keys a vector, 2 and 4 vectors a lane's batch.
    check_case(&cuda, &case(sample_keys::<u8>, 73), &Env::new());
    check_case(&cuda, &case(sample_keys::<half::f16>, 74), &Env::new());
}

/// Segments above the stream tier's cap for their key width go to the multi-block tier in
/// the same call: 8-byte keys above 131072 items, 4-byte keys above 262144.
#[test]
fn stream_tier_routes_by_size_and_k_in_one_call() {
    let Some(cuda) = gpu_or_skip() else { return };
    let sizes = [131_072usize, 131_073, 3000, 200, 2049];
    let ks = [2048i64, 2048, 2048, 20, 100];
    let keys: Vec<u64> = sample_keys(sizes.iter().sum(), 57);
    let case = Case::contiguous(keys, &sizes, &ks, &[0, 1, 0, 1, 1]);
    for_every_env!(check_case(&cuda, &case));
    let sizes = [262_144usize, 262_145, 4000];
    let keys: Vec<f32> = sample_keys(sizes.iter().sum(), 58);
    let case = Case::contiguous(keys, &sizes, &[2048, 2048, 2048], &[1, 0, 0]);
    check_case(&cuda, &case, &Env::new());
    check_case(&cuda, &case, &require!(tie_break::PreferLargerIndex));
    check_case(
        &cuda,
        &case,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
    );
}

/// Keys only and pairs with 4- and 8-byte values through the stream tier, against the host:
/// the values carried are the items' global positions, so each output's source is checked.
#[test]
fn stream_tier_keys_and_pairs() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey, V>(cuda: &Cuda, case: &Case<K>, env: &impl Environment, value: fn(u64) -> V)
    where
        V: oxicub_algorithms::DeviceValue + PartialEq + std::fmt::Debug + Default,
        V: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Into<u64>,
    {
        let n = case.ks.len();
        let stride = case.stride();
        let sizes = || {
            segment_size::PerSegment::<(), 0, { 1 << 40 }>::new(())
                .with_bounds(0, case.max_size())
                .expect("bounds")
        };
        let values: Vec<V> = (0..case.keys.len() as u64).map(value).collect();
        // Host.
        let problem = Problem::offsets(
            &case.begin[..],
            &case.end[..],
            sizes(),
            k::PerSegment::<_, 0, { 1 << 40 }>::new(&case.ks[..])
                .with_bounds(0, case.max_k())
                .expect("bounds"),
            direction::PerSegment::<_>::new(&case.dirs[..]),
            num_segments::uniform(n as i64).expect("n"),
        );
        let poison_value = value(u64::from(u32::MAX));
        let (mut host_keys, mut host_values) = (
            vec![poison::<K>(); n * stride],
            vec![poison_value; n * stride],
        );
        batched_topk::select_pairs(
            &Host::new(),
            &problem,
            &case.keys[..],
            &values[..],
            &mut host_keys[..],
            &mut host_values[..],
            env,
        )
        .expect("host call")
        .check()
        .expect("valid");
        let mut host_only = vec![poison::<K>(); n * stride];
        batched_topk::select_keys(
            &Host::new(),
            &problem,
            &case.keys[..],
            &mut host_only[..],
            env,
        )
        .expect("host call")
        .check()
        .expect("valid");
        // GPU.
        let begin = cuda.upload(&case.begin).expect("upload");
        let end = cuda.upload(&case.end).expect("upload");
        let ks = cuda.upload(&case.ks).expect("upload");
        let dirs = cuda.upload(&case.dirs).expect("upload");
        let device_keys = cuda.upload_keys(&case.keys).expect("upload");
        let device_values = cuda.upload(&values).expect("upload");
        let problem = Problem::offsets(
            begin.as_view(),
            end.as_view(),
            sizes(),
            k::PerSegment::<_, 0, { 1 << 40 }>::new(ks.as_view())
                .with_bounds(0, case.max_k())
                .expect("bounds"),
            direction::PerSegment::<_>::new(dirs.as_view()),
            num_segments::uniform(n as i64).expect("n"),
        );
        let mut out_keys = cuda
            .upload_keys(&vec![poison::<K>(); n * stride])
            .expect("poison");
        let mut out_values = cuda
            .upload(&vec![poison_value; n * stride])
            .expect("poison");
        batched_topk::select_pairs(
            cuda,
            &problem,
            device_keys.as_view(),
            device_values.as_view(),
            out_keys.as_view_mut(),
            out_values.as_view_mut(),
            env,
        )
        .expect("gpu call")
        .check()
        .expect("valid");
        let gpu_keys = cuda.download_keys(&out_keys).expect("download");
        let gpu_values = cuda.download(&out_values.as_view()).expect("download");
        let mut only = cuda
            .upload_keys(&vec![poison::<K>(); n * stride])
            .expect("poison");
        batched_topk::select_keys(
            cuda,
            &problem,
            device_keys.as_view(),
            only.as_view_mut(),
            env,
        )
        .expect("gpu call")
        .check()
        .expect("valid");
        let gpu_only = cuda.download_keys(&only).expect("download");
        let r = env.resolved();
        let bits = |v: &[K]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for i in 0..n {
            let (b, e) = (case.begin[i] as usize, case.end[i] as usize);
            let written = (case.ks[i] as usize).min(e - b);
            let at = i * stride..i * stride + written;
            let what = format!(
                "{} pairs of {} bytes, segment {i} k={} {r:?}",
                K::KEY_TYPE,
                std::mem::size_of::<V>(),
                case.ks[i]
            );
            let indices: Vec<u64> = gpu_values[at.clone()]
                .iter()
                .map(|&v| v.into().wrapping_sub(b as u64))
                .collect();
            let dir = if case.dirs[i] == 0 {
                SelectDirection::Max
            } else {
                SelectDirection::Min
            };
            check_contract(
                &what,
                &case.keys[b..e],
                written,
                dir,
                r,
                &gpu_keys[at.clone()],
                &indices,
            );
            assert!(
                gpu_values[at.end..(i + 1) * stride]
                    .iter()
                    .all(|&v| v == poison_value),
                "{what}: a slot past the results was written"
            );
            if r.pins_output() {
                assert_eq!(
                    gpu_values[at.clone()],
                    host_values[at.clone()],
                    "{what}: values"
                );
                assert_eq!(
                    bits(&gpu_only[at.clone()]),
                    bits(&host_only[at.clone()]),
                    "{what}: keys only"
                );
            }
        }
    }
    let case = stream_case(sample_keys::<f32>, 59);
    let ties = stream_case(four_values::<u64>, 60);
    let to_u32 = |x: u64| x as u32;
    let to_u64 = |x: u64| x;
    each(&cuda, &case, &Env::new(), to_u32);
    each(&cuda, &case, &Env::new(), to_u64);
    each(
        &cuda,
        &case,
        &require!(tie_break::PreferLargerIndex),
        to_u64,
    );
    each(&cuda, &ties, &Env::new(), to_u32);
    each(
        &cuda,
        &ties,
        &require!(tie_break::PreferLargerIndex, output_ordering::Unsorted),
        to_u64,
    );
    each(
        &cuda,
        &ties,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        to_u32,
    );
}

/// The value carried with item `j` of segment `i` in the listed tests: both recoverable.
fn listed_value(i: usize, j: usize) -> u64 {
    ((i as u64) << 32 | j as u64) ^ 0x5A5A_0000_0000_0000
}

/// The listed layout: every segment (keys and values) in its own device allocation, one
/// element past its start, so most segments are not 16-byte aligned; pairs with 8-byte values
/// from per-segment value buffers. Against the host (which joins the slices), per segment.
fn check_listed<K: RefKey, E: Environment>(cuda: &Cuda, case: &Case<K>, env: &E) {
    let r = env.resolved();
    let n = case.ks.len();
    let segment = |i: usize| &case.keys[case.begin[i] as usize..case.end[i] as usize];
    let values: Vec<Vec<u64>> = (0..n)
        .map(|i| (0..segment(i).len()).map(|j| listed_value(i, j)).collect())
        .collect();
    let sizes = || {
        segment_size::PerSegment::<(), 0, { 1 << 40 }>::new(())
            .with_bounds(0, case.max_size())
            .expect("bounds")
    };
    let stride = case.stride();
    let len = (n * stride).max(1);

    let host_segments: Vec<&[K]> = (0..n).map(segment).collect();
    let host_values: Vec<&[u64]> = values.iter().map(|v| &v[..]).collect();
    let problem = Problem::listed(
        sizes(),
        k::PerSegment::<_, 0, { 1 << 40 }>::new(&case.ks[..])
            .with_bounds(0, case.max_k())
            .expect("bounds"),
        direction::PerSegment::<_>::new(&case.dirs[..]),
        num_segments::uniform(n as i64).expect("n"),
    );
    let (mut host_keys, mut host_vals) = (vec![poison::<K>(); len], vec![POISON_INDEX; len]);
    let host = batched_topk::select_pairs_listed(
        &Host::new(),
        &problem,
        &host_segments,
        &host_values,
        &mut host_keys[..],
        &mut host_vals[..],
        env,
    )
    .expect("host call")
    .check()
    .map_err(|e| e.to_string());

    // One allocation per segment, the segment one element in.
    let device_keys: Vec<_> = (0..n)
        .map(|i| {
            let mut padded = vec![poison::<K>()];
            padded.extend_from_slice(segment(i));
            cuda.upload_keys(&padded).expect("upload")
        })
        .collect();
    let device_values: Vec<_> = values
        .iter()
        .map(|v| {
            let mut padded = vec![POISON_INDEX];
            padded.extend_from_slice(v);
            cuda.upload(&padded).expect("upload")
        })
        .collect();
    let key_views: Vec<_> = (0..n)
        .map(|i| device_keys[i].as_view().slice(1..1 + segment(i).len()))
        .collect();
    let value_views: Vec<_> = (0..n)
        .map(|i| device_values[i].as_view().slice(1..1 + segment(i).len()))
        .collect();
    let ks = cuda.upload(&case.ks).expect("upload");
    let dirs = cuda.upload(&case.dirs).expect("upload");
    let problem = Problem::listed(
        sizes(),
        k::PerSegment::<_, 0, { 1 << 40 }>::new(ks.as_view())
            .with_bounds(0, case.max_k())
            .expect("bounds"),
        direction::PerSegment::<_>::new(dirs.as_view()),
        num_segments::uniform(n as i64).expect("n"),
    );
    let mut out_keys = cuda.upload_keys(&vec![poison::<K>(); len]).expect("poison");
    let mut out_vals = cuda.upload(&vec![POISON_INDEX; len]).expect("poison");
    let gpu = batched_topk::select_pairs_listed(
        cuda,
        &problem,
        &key_views,
        &value_views,
        out_keys.as_view_mut(),
        out_vals.as_view_mut(),
        env,
    )
    .expect("gpu call")
    .check()
    .map_err(|e| e.to_string());
    assert_eq!(gpu, host, "{r:?}: the reported error");
    let gpu_keys = cuda.download_keys(&out_keys).expect("download");
    let gpu_vals = cuda.download(&out_vals.as_view()).expect("download");
    for i in 0..n {
        let seg = segment(i);
        let written = (case.ks[i] as usize).min(seg.len());
        let base = i * stride;
        let what = format!(
            "{} listed segment {i} ({} keys) k={} {r:?}",
            K::KEY_TYPE,
            seg.len(),
            case.ks[i]
        );
        // Each value names its own segment and item: decode the index within the segment.
        let indices: Vec<u64> = gpu_vals[base..base + written]
            .iter()
            .map(|&v| {
                let v = v ^ 0x5A5A_0000_0000_0000;
                assert_eq!(v >> 32, i as u64, "{what}: a value from another segment");
                v & 0xFFFF_FFFF
            })
            .collect();
        let dir = if case.dirs[i] == 0 {
            SelectDirection::Max
        } else {
            SelectDirection::Min
        };
        check_contract(
            &what,
            seg,
            written,
            dir,
            r,
            &gpu_keys[base..base + written],
            &indices,
        );
        assert!(
            gpu_vals[base + written..base + stride]
                .iter()
                .all(|&x| x == POISON_INDEX),
            "{what}: a slot past the results was written"
        );
        if r.pins_output() {
            assert_eq!(
                gpu_vals[base..base + written],
                host_vals[base..base + written],
                "{what}: values differ from the host"
            );
        }
    }
}

#[test]
fn listed_segments_each_in_its_own_allocation() {
    let Some(cuda) = gpu_or_skip() else { return };
    // Every tier (tiny, shared-memory and huge segments), every requirement combination.
    let case = mixed(sample_keys::<f32>, 31);
    for_every_env!(check_listed(&cuda, &case));
    // Narrow and wide keys: element addresses of 1- and 8-byte types.
    check_listed(&cuda, &mixed(sample_keys::<u8>, 32), &Env::new());
    check_listed(&cuda, &mixed(sample_keys::<i16>, 33), &Env::new());
    check_listed(&cuda, &mixed(sample_keys::<f64>, 34), &Env::new());
    check_listed(
        &cuda,
        &mixed(sample_keys::<half::bf16>, 35),
        &require!(tie_break::PreferLargerIndex),
    );
}

#[test]
fn listed_segments_with_bad_sizes_and_too_short_lists() {
    let Some(cuda) = gpu_or_skip() else { return };
    let a = cuda.upload(&[1.0f32, 2.0, 3.0]).expect("upload");
    let b = cuda.upload(&[4.0f32; 9]).expect("upload");
    let views = [a.as_view(), b.as_view()];
    let mut out = cuda.upload(&[-1.0f32; 8]).expect("upload");
    // A segment longer than the declared bound: reported for that segment, the other written.
    let problem = Problem::listed(
        segment_size::PerSegment::<(), 0, 4>::new(()),
        k::Static::<2>::new(),
        direction::Max,
        num_segments::uniform(2).expect("n"),
    );
    let err =
        batched_topk::select_keys_listed(&cuda, &problem, &views, out.as_view_mut(), &Env::new())
            .expect("call")
            .check()
            .expect_err("a segment of 9 keys against a bound of 4");
    assert!(
        matches!(
            err,
            Error::InvalidSegment {
                segment: 1,
                arg: "segment_sizes",
                value: 9,
                ..
            }
        ),
        "{err}"
    );
    let got = cuda.download(&out.as_view()).expect("download");
    assert_eq!(got[..4], [3.0, 2.0, -1.0, -1.0]);
    // Fewer slices than segments: an error before anything runs.
    let problem = Problem::listed(
        segment_size::PerSegment::<(), 0, 16>::new(()),
        k::Static::<2>::new(),
        direction::Max,
        num_segments::uniform(3).expect("n"),
    );
    let err =
        batched_topk::select_keys_listed(&cuda, &problem, &views, out.as_view_mut(), &Env::new())
            .expect_err("two slices for three segments");
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                arg: "segments",
                ..
            }
        ),
        "{err}"
    );
}

/// Many small segments around one huge one, with the `TotalItems` guarantee: the segments are
/// binned by compaction and the several-blocks tier's scratch holds total / 2049 segments,
/// not one per segment. A guarantee the sizes break is reported like the host reports it.
#[test]
fn total_items_guarantee_sizes_the_scratch_and_is_checked() {
    use oxicub_params::guarantee::TotalItems;
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rng = SplitMix64::new(41);
    let mut sizes: Vec<usize> = (0..3000).map(|_| (rng.next_u64() % 300) as usize).collect();
    sizes[1234] = 200_000;
    sizes[77] = 3000;
    let ks: Vec<i64> = sizes.iter().map(|_| (rng.next_u64() % 40) as i64).collect();
    let d = dirs(&mut rng, sizes.len());
    let total: usize = sizes.iter().sum();
    let case = Case::contiguous(sample_keys::<f32>(total, 41), &sizes, &ks, &d);
    let exact = TotalItems::<0, { 1 << 40 }>::new()
        .between(0, total as i64)
        .expect("bounds");
    check_case(&cuda, &case, &Env::new().guarantee(exact));
    check_case(
        &cuda,
        &case,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted).guarantee(exact),
    );
    let broken = TotalItems::<0, { 1 << 40 }>::new()
        .between(0, total as i64 - 1)
        .expect("bounds");
    let env = Env::new().guarantee(broken);
    let (host, gpu) = (on_host(&case, &env), on_gpu(&cuda, &case, &env));
    assert_eq!(gpu.2, host.2);
    let expected = format!("total_items = {total} is outside");
    assert!(
        matches!(&gpu.2, Err(e) if e.contains(&expected)),
        "{:?}",
        gpu.2
    );
}

/// Enough rows that every warp of the warp tier gets several pairs of segments (the MoE
/// shape): the two-segments-per-warp path, against the host, including ties and NaN.
#[test]
fn many_full_rows_take_the_two_segments_per_warp_path() {
    let Some(cuda) = gpu_or_skip() else { return };
    let shape = |k, dir| Shape {
        n: 65_536,
        stride: 256,
        size: 256,
        k,
        dir,
        short: 0,
    };
    let mut keys: Vec<f32> = sample_keys(65_536 * 256, 51);
    // Ties at the boundary in some rows, NaN in others: the slow path within the same call.
    for row in (0..65_536).step_by(97) {
        keys[row * 256..row * 256 + 40].fill(0.999);
    }
    for row in (0..65_536).step_by(1013) {
        keys[row * 256 + 5] = f32::NAN;
    }
    for (k, dir) in [(8, SelectDirection::Max), (16, SelectDirection::Min)] {
        check_strided(&cuda, &keys, shape(k, dir), &Env::new());
        check_strided(
            &cuda,
            &keys,
            shape(k, dir),
            &require!(tie_break::PreferLargerIndex),
        );
        check_strided(
            &cuda,
            &keys,
            shape(k, dir),
            &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        );
    }
    // Keys in [0, 1) (no NaN: every selected key is written from its rank), and the other
    // 4-byte key types: random bits, and integers in a narrow range (ties at the k-th key in
    // most rows: the slow path).
    let mut rng = SplitMix64::new(52);
    let unit: Vec<f32> = (0..65_536 * 256)
        .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
        .collect();
    check_strided(&cuda, &unit, shape(8, SelectDirection::Max), &Env::new());
    let ints: Vec<i32> = sample_keys(65_536 * 256, 53);
    check_strided(
        &cuda,
        &ints,
        shape(5, SelectDirection::Min),
        &require!(tie_break::PreferLargerIndex),
    );
    let narrow: Vec<u32> = (0..65_536 * 256)
        .map(|_| (rng.next_u64() % 300) as u32)
        .collect();
    check_strided(&cuda, &narrow, shape(8, SelectDirection::Max), &Env::new());
}

/// The two-segments-per-warp path's other shapes: 128-key rows (two runs of 4 keys per lane)
/// and odd row counts (the last pair's second half has no segment, and must write nothing),
/// a row stride above the size, more pairs per warp than one run of the declined mask holds,
/// keys and pairs with 4-byte values. The path is taken when
/// the rows are at least 8 x the warps of the grid (runtime.grid_blocks: SMs x 4 resident
/// blocks of 8 warps): 33 792 rows on an H200 or H100 (132 SMs), 37 888 on 148 SMs, so
/// 45 001 rows. Rows cycle through adversarial patterns: untouched keys in [0, 1); k + 1 keys
/// equal above the rest, or below it (a tie at the k-th key for max, or for min, that the fast
/// path ranks by index); 40 equal keys at the top (more than 16 candidates: the slow path); a
/// NaN; every key +0.0 or -0.0; k + 1 NaNs (ties among NaNs at the k-th key).
#[test]
fn two_segments_per_warp_with_128_key_rows_odd_counts_and_pairs() {
    let Some(cuda) = gpu_or_skip() else { return };
    let n = 45_001;
    let keys_for = |stride: usize, size: usize, k: usize, seed: u64| -> Vec<f32> {
        let mut keys = unit_scores(n * stride, seed, 24);
        for row in 0..n {
            let seg = &mut keys[row * stride..row * stride + size];
            let at = (row * 37) % (size - 40);
            match row % 7 {
                1 => seg[at..at + k + 1].fill(2.0),
                2 => seg[at..at + 40].fill(0.999),
                3 => seg[at] = f32::NAN,
                4 => seg
                    .iter_mut()
                    .enumerate()
                    .for_each(|(j, x)| *x = if j % 3 == 0 { -0.0 } else { 0.0 }),
                5 => seg[at..at + k + 1].fill(f32::NAN),
                6 => seg[at..at + k + 1].fill(-1.0),
                _ => {}
            }
        }
        keys
    };
    let shape = |stride, size, k, dir| Shape {
        n,
        stride,
        size,
        k,
        dir,
        short: 0,
    };
    use SelectDirection::{Max, Min};
    for (s, seed) in [
        (shape(128, 128, 8, Max), 61),  // 128-key rows, odd count
        (shape(132, 128, 5, Min), 62),  // stride above the size (16-byte aligned rows)
        (shape(256, 256, 16, Min), 63), // 256-key rows, odd count, k = 16
        (shape(256, 256, 1, Max), 64),  // k = 1
    ] {
        let keys = keys_for(s.stride, s.size, s.k, seed);
        check_strided(&cuda, &keys, s, &Env::new());
        check_strided(&cuda, &keys, s, &require!(tie_break::PreferLargerIndex));
        check_strided(
            &cuda,
            &keys,
            s,
            &require!(
                determinism::RunToRun,
                tie_break::PreferLargerIndex,
                output_ordering::Sorted
            ),
        );
        check_strided(
            &cuda,
            &keys,
            s,
            &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        );
    }
    // More than 15 pairs per warp: the runs after the first, whose declined halves (the 40
    // equal keys of every seventh row) are found from their own mask. Each block takes a
    // contiguous range of pairs, its 8 warps in turn; 180 001 rows give every warp at least
    // 19 pairs on 148 SMs (21 on 132), so later runs hold several pairs and their declined
    // halves sit at several distances from the run's last pair.
    let many = Shape {
        n: 180_001,
        ..shape(128, 128, 8, Max)
    };
    let keys = {
        let mut keys = unit_scores(many.n * 128, 69, 24);
        for row in (2..many.n).step_by(7) {
            keys[row * 128 + 50..row * 128 + 90].fill(0.999);
        }
        keys
    };
    check_strided(&cuda, &keys, many, &Env::new());
    // Every requirement combination on the 128-key rows, and the other 4-byte key types.
    let s = shape(128, 128, 8, Min);
    let keys = keys_for(s.stride, s.size, s.k, 65);
    for_every_env!(check_strided(&cuda, &keys, s));
    let ints: Vec<i32> = sample_keys(n * 128, 66);
    check_strided(&cuda, &ints, shape(128, 128, 7, Max), &Env::new());
    let narrow: Vec<u32> = {
        let mut rng = SplitMix64::new(67);
        (0..n * 256)
            .map(|_| (rng.next_u64() % 300) as u32)
            .collect()
    };
    check_strided(
        &cuda,
        &narrow,
        shape(256, 256, 8, Min),
        &require!(tie_break::PreferLargerIndex),
    );
    // Pairs with 4-byte values (read from the values array, not the index), 128-key rows.
    let keys = keys_for(128, 128, 8, 68);
    let values: Vec<u32> = (0..keys.len() as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let problem = Problem::strided(
        128,
        segment_size::Static::<128>::new(),
        k::Static::<8>::new(),
        direction::Max,
        num_segments::uniform(n as i64).expect("n"),
    );
    let (gpu, host) = f32_pairs_on_both!(
        cuda,
        &problem,
        &keys[..],
        &values[..],
        n * 8,
        0xA5A5_A5A5u32
    );
    assert!(gpu == host, "pairs with 4-byte values differ from the host");
}

// ---- The stream tier in one clustered launch: a direct call (strided, every value uniform)
// whose segments all fit on the device at once as clusters of two blocks (sm_90), which hold
// the candidates in their shared memory and select there. ----

/// Runs `f` and asserts that it made at least one clustered launch (the path these tests are
/// for; a device without clusters fails here rather than passing through the other path).
fn clustered<R>(what: &str, f: impl FnOnce() -> R) -> R {
    let before = oxicub_kernels::families::batched_topk::clustered_launches();
    let out = f();
    let after = oxicub_kernels::families::batched_topk::clustered_launches();
    assert!(after > before, "{what}: no clustered launch");
    out
}

/// `rows` of equal length, one after another, as one strided call of `k` per row.
fn check_rows<K: RefKey, E: Environment>(
    cuda: &Cuda,
    rows: &[Vec<K>],
    k: usize,
    dir: SelectDirection,
    env: &E,
) {
    let size = rows[0].len();
    assert!(rows.iter().all(|r| r.len() == size));
    let keys: Vec<K> = rows.iter().flat_map(|r| r.iter().copied()).collect();
    let shape = Shape {
        n: rows.len(),
        stride: size,
        size,
        k,
        dir,
        short: 0,
    };
    clustered(&format!("{} {shape:?}", K::KEY_TYPE), || {
        check_strided(cuda, &keys, shape, env)
    });
}

/// Inputs whose candidates crowd into one of the two blocks or into a few buckets (sorted,
/// smooth and clustered rows), in both directions and every requirement combination.
#[test]
fn stream_cluster_sorted_smooth_and_clustered_rows() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rows = crowded_rows(80).to_vec();
    rows.push(unit_scores(131_072, 81, 24));
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        for_every_env!(check_rows(&cuda, &rows, 2048, dir));
    }
    check_rows(&cuda, &rows, 100, SelectDirection::Max, &Env::new());
}

/// Candidates that overflow a block through the walk (the append form for a few hits a warp
/// batch): rows of 262144 f32 keys, 1 at the positions p % 512 < 60 and 0 elsewhere (negated for
/// min). The sample (runs of 8 keys every 512) reads only ones, so the threshold is 1: every warp
/// batch (512 keys, aligned) holds exactly 60 hits, below the walk's limit of 64, and each block's
/// 15360 pass its 8192 places: the batch that crosses them takes the walk's checked placement,
/// and the cluster's first block then the exact path (ties broken by index).
#[test]
fn stream_cluster_overflow_in_the_walk() {
    let Some(cuda) = gpu_or_skip() else { return };
    for (dir, one) in [(SelectDirection::Max, 1.0f32), (SelectDirection::Min, -1.0)] {
        let row: Vec<f32> = (0..262_144usize)
            .map(|p| if p % 512 < 60 { one } else { 0.0 })
            .collect();
        let rows = vec![row.clone(), row];
        for_every_env!(check_rows(&cuda, &rows, 2048, dir));
    }
}

/// All-equal keys: every key is a candidate, so the candidates overflow a block and the
/// cluster's first block takes the exact path over every key (small enough for
/// compute-sanitizer's racecheck).
#[test]
fn stream_cluster_exact_path_all_equal_keys() {
    let Some(cuda) = gpu_or_skip() else { return };
    let equal = vec![vec![7u32; 20_000]; 3];
    for_every_env!(check_rows(&cuda, &equal, 2048, SelectDirection::Max));
}

/// The paths out of the buckets (all-equal keys: the test above): a sample that misses while
/// NaNs rank below the threshold, NaN, infinities and signed zeros, ties at the k-th key
/// (12-bit scores), an outlier NaN above every sampled key (bucket 0, open-ended), k = 2048 of
/// 2049 keys (no sample: nothing is cut) and of 4000, and k = 1.
#[test]
fn stream_cluster_ties_nan_sample_misses_and_every_k() {
    let Some(cuda) = gpu_or_skip() else { return };
    const SIZE: usize = 131_072;
    let specials = F32_SPECIALS;
    let special: Vec<Vec<f32>> = (0..3)
        .map(|r| {
            specials
                .iter()
                .copied()
                .cycle()
                .skip(r)
                .take(SIZE)
                .collect()
        })
        .collect();
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        for_every_env!(check_rows(&cuda, &special, 2048, dir));
    }
    // The sampled keys are the rows' best numbers and one other key in 32 a NaN
    // (sample_miss_row): for min the NaNs rank last.
    for (dir, code) in [(SelectDirection::Max, 0), (SelectDirection::Min, 1)] {
        let rows = vec![sample_miss_row(code, 82), sample_miss_row(code, 83)];
        for_every_env!(check_rows(&cuda, &rows, 2048, dir));
        let narrow: Vec<Vec<f32>> = rows
            .iter()
            .map(|r| r.iter().map(|&x| x as f32).collect())
            .collect();
        check_rows(&cuda, &narrow, 2048, dir, &Env::new());
    }
    let tied: Vec<Vec<f32>> = (0..4).map(|r| unit_scores(SIZE, 84 + r, 12)).collect();
    for_every_env!(check_rows(&cuda, &tied, 2048, SelectDirection::Max));
    let outlier: Vec<Vec<f32>> = (0..2)
        .map(|r| {
            let mut keys = unit_scores(SIZE, 88 + r, 24);
            keys[1000] = f32::NAN;
            keys
        })
        .collect();
    for_every_env!(check_rows(&cuda, &outlier, 2048, SelectDirection::Max));
    // k = 2048 of 2049 keys (no sample: every key a candidate), of 4000 (a sample that
    // keeps about every key), and k = 1. (k = size and k > size leave the stream tier: it
    // takes at most 2048 of more than 2048 keys.)
    let barely: Vec<Vec<f32>> = (0..5).map(|r| sample_keys(2049, 90 + r)).collect();
    let small: Vec<Vec<f32>> = (0..5).map(|r| sample_keys(4000, 95 + r)).collect();
    for rows in [&barely, &small] {
        for_every_env!(check_rows(&cuda, rows, 2048, SelectDirection::Min));
        check_rows(&cuda, rows, 1, SelectDirection::Max, &Env::new());
    }
}

/// Keys the f32 compare of the streaming pass takes but whose rank is below the threshold
/// (dead entries: they keep their place among the candidates, in no bucket): NaNs of both
/// signs among uniform scores, for min (where every NaN passes the compare and ranks last; one
/// key in 37 a NaN, more of them than k: about half the candidates are dead) and for max (NaNs
/// rank first: one key in 500), with -0.0 and +0.0 among them (one key in 400: among the k
/// best for min).
#[test]
fn stream_cluster_dead_entries_nan_and_signed_zeros() {
    let Some(cuda) = gpu_or_skip() else { return };
    const SIZE: usize = 131_072;
    let negative_nan = f32::from_bits(0xFFC0_0001);
    let rows = |every: usize, seed: u64| -> Vec<Vec<f32>> {
        (0..3)
            .map(|r| {
                let mut keys = unit_scores(SIZE, seed + r, 24);
                for (i, key) in keys.iter_mut().enumerate() {
                    if i % every == 5 {
                        *key = if i % 2 == 0 { f32::NAN } else { negative_nan };
                    } else if i % 400 == 7 {
                        *key = if i % 2 == 0 { 0.0 } else { -0.0 };
                    }
                }
                keys
            })
            .collect()
    };
    for_every_env!(check_rows(
        &cuda,
        &rows(37, 130),
        2048,
        SelectDirection::Min
    ));
    for_every_env!(check_rows(
        &cuda,
        &rows(500, 140),
        2048,
        SelectDirection::Max
    ));
    check_rows(
        &cuda,
        &rows(37, 150),
        100,
        SelectDirection::Min,
        &Env::new(),
    );
}

/// Segments at the stream tier's largest size (262 144 f32 keys, 131 072 f64 keys), and 8-byte
/// keys whose candidates crowd into one block or a few buckets (the crowded rows as f64: a
/// block holds half the candidates of a 4-byte key's).
#[test]
fn stream_cluster_largest_segments_and_crowded_8_byte_rows() {
    let Some(cuda) = gpu_or_skip() else { return };
    const LARGEST_F32: usize = 262_144;
    let largest: Vec<Vec<f32>> = vec![
        unit_scores(LARGEST_F32, 160, 24),
        (0..LARGEST_F32)
            .map(|j| j as f32 / LARGEST_F32 as f32)
            .collect(),
    ];
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        check_rows(&cuda, &largest, 2048, dir, &Env::new());
    }
    let crowded: Vec<Vec<f64>> = crowded_rows(161)
        .iter()
        .map(|row| row.iter().map(|&x| f64::from(x)).collect())
        .collect();
    for dir in [SelectDirection::Max, SelectDirection::Min] {
        for_every_env!(check_rows(&cuda, &crowded, 2048, dir));
    }
}

/// The clustered launch's edge: the most segments whose clusters are all resident at once
/// (the device's count, found here by bisection: every probe is checked against the host)
/// take it, one more does not.
#[test]
fn stream_cluster_segment_count_at_the_resident_clusters() {
    let Some(cuda) = gpu_or_skip() else { return };
    const SIZE: usize = 4096;
    let clustered_with = |n: usize| -> bool {
        let keys: Vec<f32> = sample_keys(n * SIZE, 97 + n as u64);
        let shape = Shape {
            n,
            stride: SIZE,
            size: SIZE,
            k: 100,
            dir: SelectDirection::Max,
            short: 0,
        };
        let before = oxicub_kernels::families::batched_topk::clustered_launches();
        check_strided(&cuda, &keys, shape, &Env::new());
        oxicub_kernels::families::batched_topk::clustered_launches() > before
    };
    assert!(
        clustered_with(1),
        "one segment did not take the clustered launch"
    );
    // At most one cluster per two SMs: 400 segments never fit.
    let (mut fits, mut too_many) = (1usize, 400usize);
    while too_many - fits > 1 {
        let mid = (fits + too_many) / 2;
        if clustered_with(mid) {
            fits = mid;
        } else {
            too_many = mid;
        }
    }
    assert!(clustered_with(fits), "{fits} segments");
    assert!(!clustered_with(fits + 1), "{} segments", fits + 1);
    println!("clusters resident at once: {fits}");
}

/// Every key type, rows whose length is not a multiple of a vector or a block's share (a tail
/// of scalar keys), rows that do not start 16-byte aligned (all scalar loads), and more
/// segments than clusters fit at once (the filter and final selection take those).
#[test]
fn stream_cluster_every_key_type_odd_rows_and_many_segments() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey>(cuda: &Cuda, seed: u64) {
        let rows: Vec<Vec<K>> = (0..3).map(|r| sample_keys(65_539, seed * 10 + r)).collect();
        check_rows(cuda, &rows, 1000, SelectDirection::Max, &Env::new());
        check_rows(
            cuda,
            &rows,
            2048,
            SelectDirection::Min,
            &require!(tie_break::PreferLargerIndex, output_ordering::Unsorted),
        );
        let ties: Vec<Vec<K>> = (0..2)
            .map(|r| four_values(20_000, seed * 10 + 5 + r))
            .collect();
        check_rows(cuda, &ties, 700, SelectDirection::Max, &Env::new());
        // Unaligned rows: a stride of 40 001 keys.
        let keys: Vec<K> = sample_keys(3 * 40_001, seed * 10 + 9);
        let shape = Shape {
            n: 3,
            stride: 40_001,
            size: 40_000,
            k: 300,
            dir: SelectDirection::Min,
            short: 0,
        };
        clustered("unaligned rows", || {
            check_strided(cuda, &keys, shape, &Env::new())
        });
    }
    every_key_type!(each, &cuda, 95);
    // More segments than clusters fit at once (at most one per two SMs): no clustered launch.
    let keys: Vec<f32> = sample_keys(400 * 4096, 96);
    let shape = Shape {
        n: 400,
        stride: 4096,
        size: 4096,
        k: 100,
        dir: SelectDirection::Max,
        short: 0,
    };
    let before = oxicub_kernels::families::batched_topk::clustered_launches();
    check_strided(&cuda, &keys, shape, &Env::new());
    assert_eq!(
        oxicub_kernels::families::batched_topk::clustered_launches(),
        before,
        "400 segments took the clustered launch"
    );
}

/// Pairs with 4- and 8-byte values through the clustered launch: the values are the items'
/// global positions, so each output's source is checked, against the host bit for bit.
#[test]
fn stream_cluster_keys_and_pairs() {
    let Some(cuda) = gpu_or_skip() else { return };
    fn each<K: RefKey, V>(
        cuda: &Cuda,
        rows: usize,
        size: usize,
        env: &impl Environment,
        value: fn(u64) -> V,
    ) where
        V: oxicub_algorithms::DeviceValue + PartialEq + std::fmt::Debug + Default,
        V: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits,
    {
        let k = 2048usize;
        let keys: Vec<K> = sample_keys(rows * size, 97);
        let values: Vec<V> = (0..keys.len() as u64).map(value).collect();
        let problem = || {
            Problem::strided(
                size,
                segment_size::Static::<131_072>::new(),
                k::Static::<2048>::new(),
                direction::Max,
                num_segments::uniform(rows as i64).expect("n"),
            )
        };
        let poison_value = value(u64::from(u32::MAX));
        let (mut host_keys, mut host_values) =
            (vec![poison::<K>(); rows * k], vec![poison_value; rows * k]);
        batched_topk::select_pairs(
            &Host::new(),
            &problem(),
            &keys[..],
            &values[..],
            &mut host_keys[..],
            &mut host_values[..],
            env,
        )
        .expect("host call")
        .check()
        .expect("valid");
        let device_keys = cuda.upload_keys(&keys).expect("upload");
        let device_values = cuda.upload(&values).expect("upload");
        let mut out_keys = cuda
            .upload_keys(&vec![poison::<K>(); rows * k])
            .expect("poison");
        let mut out_values = cuda.upload(&vec![poison_value; rows * k]).expect("poison");
        clustered("pairs", || {
            batched_topk::select_pairs(
                cuda,
                &problem(),
                device_keys.as_view(),
                device_values.as_view(),
                out_keys.as_view_mut(),
                out_values.as_view_mut(),
                env,
            )
            .expect("gpu call")
            .check()
            .expect("valid")
        });
        let gpu_keys = cuda.download_keys(&out_keys).expect("download");
        let gpu_values = cuda.download(&out_values.as_view()).expect("download");
        let bits = |v: &[K]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let what = format!(
            "{} pairs of {} bytes {:?}",
            K::KEY_TYPE,
            std::mem::size_of::<V>(),
            env.resolved()
        );
        if env.resolved().pins_output() {
            assert_eq!(gpu_values, host_values, "{what}: values");
            assert!(bits(&gpu_keys) == bits(&host_keys), "{what}: keys");
        } else {
            // Unpinned: the same set of (key, value) pairs per row.
            for r in 0..rows {
                let set = |ks: &[K], vs: &[V]| {
                    let mut pairs: Vec<(u64, String)> = ks
                        .iter()
                        .zip(vs)
                        .map(|(k, v)| (k.to_bits().to_u64(), format!("{v:?}")))
                        .collect();
                    pairs.sort();
                    pairs
                };
                let at = r * k..(r + 1) * k;
                assert_eq!(
                    set(&gpu_keys[at.clone()], &gpu_values[at.clone()]),
                    set(&host_keys[at.clone()], &host_values[at]),
                    "{what}: row {r}"
                );
            }
        }
    }
    let to_u32 = |x: u64| x as u32;
    let to_u64 = |x: u64| x;
    each::<f32, u32>(&cuda, 6, 131_072, &Env::new(), to_u32);
    each::<f32, u64>(
        &cuda,
        6,
        131_072,
        &require!(tie_break::PreferLargerIndex),
        to_u64,
    );
    each::<u64, u64>(&cuda, 4, 131_072, &Env::new(), to_u64);
    each::<half::bf16, u32>(
        &cuda,
        4,
        131_072,
        &require!(determinism::NotGuaranteed, output_ordering::Unsorted),
        to_u32,
    );
}
