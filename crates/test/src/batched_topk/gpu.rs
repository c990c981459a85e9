//! One batched top-k case on the host and on the GPU, compared: the same reported error, per
//! segment the contract, bit for bit where the requirements pin the output, and no slot
//! written that the call must leave alone. Outputs are poisoned before each run.

use oxicub_algorithms::batched_topk::{self, BatchedTopKBackend};
use oxicub_algorithms::radix::RadixKey;
use oxicub_algorithms::ChoicesOn;
use oxicub_algorithms::{Cuda, Host};
use oxicub_env::Environment;
use oxicub_params::{direction, k, num_segments, segment_size, SelectDirection};

use super::{check_segments, Case};
use crate::cases::{poison, POISON_INDEX};
use crate::oracle::{check_top_k, RefKey};

/// What one run of a [`Case`] wrote: `num_segments x stride` keys and indices, and the
/// outcome's check (`Err` with the first violation's message).
#[derive(Clone, Debug)]
pub struct Run<K> {
    /// The output keys.
    pub keys: Vec<K>,
    /// The output indices (source positions within each segment).
    pub indices: Vec<u64>,
    /// `Outcome::check` of the call, the error as its message.
    pub outcome: Result<(), String>,
}

/// Key bits, to compare keys bit for bit (NaN payloads and signed zeros included).
fn bits<K: RadixKey>(keys: &[K]) -> Vec<K::Bits> {
    keys.iter().map(|x| x.to_bits()).collect()
}

/// The case on the host: offsets, per-segment k and direction bytes, with runtime bounds of
/// exactly the largest size and k; outputs poisoned.
///
/// ```
/// use oxicub_env::Env;
/// use oxicub_test::batched_topk::{run_on_host, Case};
///
/// let case = Case::contiguous(vec![5u32, 1, 4, 2], &[2, 2], &[1, 1], &[0, 1]);
/// let run = run_on_host(&case, &Env::new());
/// assert_eq!((run.keys, run.indices, run.outcome), (vec![5, 2], vec![0, 1], Ok(())));
/// ```
pub fn run_on_host<K: RefKey, E: Environment>(case: &Case<K>, env: &E) -> Run<K> {
    let n = case.num_segments();
    let problem = batched_topk::Problem::offsets(
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
    Run {
        keys: out_keys,
        indices: out_indices,
        outcome: outcome.check().map_err(|e| e.to_string()),
    }
}

/// The case on the GPU, as [`run_on_host`] runs it, with every per-segment argument in
/// device memory.
///
/// ```
/// use oxicub_env::Env;
/// use oxicub_test::batched_topk::{run_on_gpu, Case};
///
/// if let Some(cuda) = oxicub_test::gpu_or_skip() {
///     let case = Case::contiguous(vec![5u32, 1, 4, 2], &[2, 2], &[1, 1], &[0, 1]);
///     let run = run_on_gpu(&cuda, &case, &Env::new());
///     assert_eq!(run.indices, [0, 1]);
/// }
/// ```
pub fn run_on_gpu<K: RefKey, E: Environment>(cuda: &Cuda, case: &Case<K>, env: &E) -> Run<K> {
    let n = case.num_segments();
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
    let problem = batched_topk::Problem::offsets(
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
    Run {
        keys: got_keys[..used].to_vec(),
        indices: got_indices[..used].to_vec(),
        outcome: checked,
    }
}

/// GPU against host: the same error; per segment the contract ([`check_segments`]), bit for
/// bit with the host where the requirements pin the output; the slots past each segment's
/// results, and every slot of an invalid segment, untouched.
///
/// ```
/// use oxicub_env::Env;
/// use oxicub_test::batched_topk::{check_on_gpu, Case};
///
/// if let Some(cuda) = oxicub_test::gpu_or_skip() {
///     let case = Case::contiguous(vec![5u32, 1, 4, 2], &[2, 2], &[1, 1], &[0, 1]);
///     oxicub_test::for_every_env!(check_on_gpu(&cuda, &case));
///     check_on_gpu(&cuda, &case, &Env::new());
/// }
/// ```
pub fn check_on_gpu<K: RefKey, E: Environment>(cuda: &Cuda, case: &Case<K>, env: &E) {
    let r = env.resolved();
    let host = run_on_host(case, env);
    let gpu = run_on_gpu(cuda, case, env);
    assert_eq!(gpu.outcome, host.outcome, "{r:?}: the reported error");
    check_segments(case, r, &gpu.keys, &gpu.indices);
    if !r.pins_output() {
        return;
    }
    let stride = case.stride();
    for i in 0..case.num_segments() {
        let (Some(seg), Some(_), true) = (case.segment(i), case.direction(i), case.ks[i] >= 0)
        else {
            continue;
        };
        let at = i * stride..i * stride + (case.ks[i] as usize).min(seg.len());
        let what = format!("{} segment {i} k={} {r:?}", K::KEY_TYPE, case.ks[i]);
        assert_eq!(
            gpu.indices[at.clone()],
            host.indices[at.clone()],
            "{what}: indices differ from the host"
        );
        assert!(
            bits(&gpu.keys[at.clone()]) == bits(&host.keys[at]),
            "{what}: keys differ from the host"
        );
    }
}

/// One strided call with every value uniform (the direct path on the GPU: checked on the
/// host, no control stages).
#[derive(Clone, Copy, Debug)]
pub struct StridedShape {
    /// The number of segments.
    pub n: usize,
    /// The distance between segment starts.
    pub stride: usize,
    /// Every segment's size (at most `stride`).
    pub size: usize,
    /// Every segment's k.
    pub k: usize,
    /// Every segment's direction.
    pub dir: SelectDirection,
    /// Keys short of `n * stride` by this many (past the buffer: reported, not direct).
    pub short: usize,
}

impl StridedShape {
    /// `n` rows of `size` keys, `stride` apart, `k` selected from each in direction `dir`,
    /// with every key present (`short` 0).
    ///
    /// ```
    /// use oxicub_params::SelectDirection;
    /// use oxicub_test::batched_topk::StridedShape;
    ///
    /// let moe = StridedShape::rows(65_536, 256, 256, 8, SelectDirection::Max);
    /// assert_eq!(moe.short, 0);
    /// ```
    pub fn rows(n: usize, stride: usize, size: usize, k: usize, dir: SelectDirection) -> Self {
        StridedShape {
            n,
            stride,
            size,
            k,
            dir,
            short: 0,
        }
    }
}

fn strided_run<B, K, E>(
    backend: &B,
    shape: StridedShape,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, u64>,
    env: &E,
) -> Result<(), String>
where
    B: BatchedTopKBackend,
    K: RadixKey,
    E: Environment,
    direction::Choice<direction::Either>: ChoicesOn<B>,
{
    let problem = batched_topk::Problem::strided(
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

/// The strided `shape` over `keys` (at least `n * stride` of them) on both backends: the same
/// outcome; per segment the contract ([`check_top_k`]), bit for bit with the host where the
/// requirements pin the output.
///
/// ```
/// use oxicub_env::Env;
/// use oxicub_params::SelectDirection;
/// use oxicub_test::batched_topk::{check_strided, StridedShape};
///
/// if let Some(cuda) = oxicub_test::gpu_or_skip() {
///     let keys: Vec<f32> = oxicub_test::sample_keys(4 * 64, 1);
///     let shape = StridedShape::rows(4, 64, 64, 6, SelectDirection::Max);
///     check_strided(&cuda, &keys, shape, &Env::new());
/// }
/// ```
pub fn check_strided<K: RefKey, E: Environment>(
    cuda: &Cuda,
    keys: &[K],
    shape: StridedShape,
    env: &E,
) {
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
        check_top_k(
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
            assert!(
                bits(&gpu_keys[at.clone()]) == bits(&host_keys[at]),
                "{what}: keys differ from the host"
            );
        }
    }
}
