//! Batched top-k from several threads at once (issue 23): threads sharing one [`Cuda`] backend
//! (its stream and kernel runtime), threads on streams of their own sharing one runtime
//! (`Cuda::on_stream`), and threads on backends of their own, each running calls
//! whose kernel variants (tiers, key types, k, strided and offsets layouts) are compiled,
//! loaded and launched concurrently. Every result is compared with the host backend's, bit for
//! bit, with the outputs poisoned before each run. Each test skips without a GPU (fails with
//! OXICUB_REQUIRE_GPU=1); run them under compute-sanitizer memcheck, which must report nothing.

use std::sync::{Arc, Barrier};

use oxicub_algorithms::batched_topk::{self, BatchedTopKBackend};
use oxicub_algorithms::radix::RadixKey;
use oxicub_algorithms::{ChoicesOn, Cuda, Host};
use oxicub_env::Env;
use oxicub_params::{direction, k, num_segments, segment_size, SelectDirection};
use oxicub_test::batched_topk::{run_on_gpu, run_on_host, Case, Run};
use oxicub_test::cases::{poison, POISON_INDEX};
use oxicub_test::oracle::RefKey;
use oxicub_test::{gpu_or_skip, sample_keys};

/// The number of threads of each test.
const THREADS: usize = 8;

/// One call of batched top-k on the GPU, checked against the host's result for the same
/// inputs (computed once, before the threads start); panics naming `what` on a difference.
type Job = Box<dyn Fn(&Cuda, &str) + Send + Sync>;

/// Key bits, to compare keys bit for bit (NaN payloads and signed zeros included).
fn bits<K: RadixKey>(keys: &[K]) -> Vec<K::Bits> {
    keys.iter().map(|x| x.to_bits()).collect()
}

/// Panics unless `gpu` is exactly `host`: the outcome, every index and every key's bits
/// (a slot the GPU left unwritten still holds the poison, which the host overwrote).
fn assert_same<K: RadixKey>(what: &str, host: &Run<K>, gpu: &Run<K>) {
    assert_eq!(gpu.outcome, host.outcome, "{what}: the outcome");
    assert!(gpu.indices == host.indices, "{what}: indices differ");
    assert!(bits(&gpu.keys) == bits(&host.keys), "{what}: keys differ");
}

/// `n` rows of `size` keys, `k` of each in direction `dir`, every value uniform: the direct
/// path (no control stages), with a tier chosen from the values.
#[derive(Clone, Copy, Debug)]
struct Rows {
    n: usize,
    size: usize,
    k: usize,
    dir: SelectDirection,
}

/// `rows` over `keys` on `backend`, into the (poisoned) outputs.
fn select_rows<B, K>(
    backend: &B,
    rows: Rows,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, u64>,
) -> Result<(), String>
where
    B: BatchedTopKBackend,
    K: RadixKey,
    direction::Choice<direction::Either>: ChoicesOn<B>,
{
    let problem = batched_topk::Problem::strided(
        rows.size,
        segment_size::Uniform::<0, { 1 << 40 }>::new(rows.size as i64).expect("size"),
        k::Uniform::<0, { 1 << 40 }>::new(rows.k as i64).expect("k"),
        direction::Choice::<direction::Either>::new(rows.dir).expect("direction"),
        num_segments::uniform(rows.n as i64).expect("n"),
    );
    batched_topk::select_indices(backend, &problem, keys, out_keys, out_indices, &Env::new())
        .and_then(|outcome| outcome.check())
        .map_err(|e| e.to_string())
}

/// A job of `rows` over sample keys of type `K` (seed `seed`).
fn rows_job<K: RefKey>(rows: Rows, seed: u64) -> Job {
    let keys: Vec<K> = sample_keys(rows.n * rows.size, seed);
    let len = rows.n * rows.k.min(rows.size);
    let (mut out_keys, mut out_indices) = (vec![poison::<K>(); len], vec![POISON_INDEX; len]);
    let outcome = select_rows(
        &Host::new(),
        rows,
        &keys[..],
        &mut out_keys[..],
        &mut out_indices[..],
    );
    let host = Run {
        keys: out_keys,
        indices: out_indices,
        outcome,
    };
    Box::new(move |cuda: &Cuda, what: &str| {
        let device_keys = cuda.upload_keys(&keys).expect("upload");
        let mut out_keys = cuda.upload_keys(&vec![poison::<K>(); len]).expect("poison");
        let mut out_indices = cuda.upload(&vec![POISON_INDEX; len]).expect("poison");
        let outcome = select_rows(
            cuda,
            rows,
            device_keys.as_view(),
            out_keys.as_view_mut(),
            out_indices.as_view_mut(),
        );
        let gpu = Run {
            keys: cuda.download_keys(&out_keys).expect("download"),
            indices: cuda.download(&out_indices.as_view()).expect("download"),
            outcome,
        };
        let what = format!("{what}: {} {rows:?}", K::KEY_TYPE);
        assert_same(&what, &host, &gpu);
    })
}

/// A job of `case` (offsets, k and direction per segment in device memory: the control
/// stages bin the segments into tiers on the device).
fn case_job<K: RefKey>(case: Case<K>, name: &'static str) -> Job {
    let host = run_on_host(&case, &Env::new());
    Box::new(move |cuda: &Cuda, what: &str| {
        let gpu = run_on_gpu(cuda, &case, &Env::new());
        let what = format!("{what}: {} {name} case", K::KEY_TYPE);
        assert_same(&what, &host, &gpu);
    })
}

/// Calls of every tier, f32 and u32 keys, each direction, both layouts; modest sizes.
fn jobs() -> Vec<Job> {
    use SelectDirection::{Max, Min};
    let rows = |n, size, k, dir| Rows { n, size, k, dir };
    vec![
        // Warp tier.
        rows_job::<f32>(rows(1024, 100, 8, Max), 1),
        rows_job::<u32>(rows(512, 200, 32, Min), 2),
        // Block tier.
        rows_job::<f32>(rows(64, 1500, 100, Min), 3),
        // Stream tier: rows of 12,000 and 32,768 keys, and the sparse-attention row.
        rows_job::<u32>(rows(16, 12_000, 64, Max), 4),
        rows_job::<f32>(rows(8, 32_768, 2048, Min), 5),
        rows_job::<f32>(rows(4, 131_072, 2048, Max), 6),
        // k above the stream tier's cap: the multi-block tier.
        rows_job::<u32>(rows(4, 131_072, 4096, Max), 7),
        // Every tier in one call, through the control stages.
        case_job(Case::mixed(sample_keys::<f32>, 8), "mixed"),
        case_job(Case::stream(sample_keys::<u32>, 9), "stream"),
    ]
}

/// Runs every job on `cuda` once, starting at job `first` (so that threads starting together
/// begin with different kernel variants).
fn run_jobs(jobs: &[Job], cuda: &Cuda, first: usize, thread: &str) {
    for i in 0..jobs.len() {
        let at = (first + i) % jobs.len();
        jobs[at](cuda, &format!("{thread}, job {at}"));
    }
}

/// Threads sharing one backend (clones of one [`Cuda`]: one stream, one kernel runtime) may
/// call batched top-k at once: the runtime's loaded-kernel table, the shared-memory limits it
/// raises and the scratch each call allocates on the shared stream are safe to share, and no
/// call reads or writes another's buffers. Eight threads start together (a barrier, no
/// sleeps), each beginning with a different job, so different variants are compiled (where
/// this process has not yet), loaded and launched concurrently; each result must equal the
/// host backend's exactly.
#[test]
fn threads_sharing_one_backend_get_the_hosts_results() {
    let Some(cuda) = gpu_or_skip() else { return };
    let jobs = jobs();
    let start = Barrier::new(THREADS);
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (cuda, jobs, start) = (cuda.clone(), &jobs, &start);
            scope.spawn(move || {
                start.wait();
                run_jobs(jobs, &cuda, t, &format!("thread {t}"));
            });
        }
    });
    // One last call after the threads, by reference: the backend is still usable.
    jobs[0](&cuda, "after the threads");
}

/// Threads on backends of their own (each `Cuda::from_stream` on a new stream of the same
/// context, so each has its own kernel runtime) may run batched top-k at once, interleaved on
/// the device: modules of the same kernels loaded into one context by several runtimes, and
/// launches, scratch and copies on several streams, stay each in their own stream's order and
/// buffers. Eight threads start together, each beginning with a different job; each result
/// must equal the host backend's exactly.
#[test]
fn threads_on_their_own_streams_get_the_hosts_results() {
    let Some(cuda) = gpu_or_skip() else { return };
    let jobs = jobs();
    let start = Barrier::new(THREADS);
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (context, jobs, start) = (cuda.context(), &jobs, &start);
            scope.spawn(move || {
                let stream = context.new_stream().expect("stream");
                let own = Cuda::from_stream(Arc::clone(&stream)).expect("backend");
                assert!(Arc::ptr_eq(own.stream(), &stream));
                start.wait();
                run_jobs(jobs, &own, t, &format!("thread {t} (own stream)"));
            });
        }
    });
}

/// Threads on streams of their own that share one kernel runtime (`Cuda::on_stream`: a stream
/// per request without a module load per stream) may run batched top-k at once: each launch in
/// its own stream's order, each result the host backend's exactly.
#[test]
fn threads_on_streams_sharing_one_runtime_get_the_hosts_results() {
    let Some(cuda) = gpu_or_skip() else { return };
    let jobs = jobs();
    let start = Barrier::new(THREADS);
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let (cuda, jobs, start) = (&cuda, &jobs, &start);
            scope.spawn(move || {
                let stream = cuda.context().new_stream().expect("stream");
                let side = cuda.on_stream(Arc::clone(&stream)).expect("backend");
                assert!(Arc::ptr_eq(side.stream(), &stream));
                assert!(std::ptr::eq(side.runtime(), cuda.runtime()));
                start.wait();
                run_jobs(jobs, &side, t, &format!("thread {t} (shared runtime)"));
            });
        }
    });
}
