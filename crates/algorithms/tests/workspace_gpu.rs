//! Calls in a caller's workspace on the GPU (docs/design/engine.md, "Workspace and graph
//! capture"): the steady state of a MoE router, a sparse-attention indexer (per-row lengths and
//! k), a single top-k with a deferred k, a segmented sort and a batched set operation allocates
//! nothing (counted by the runtime), every result equal to the host's, outputs poisoned before
//! each call; a call captured into a CUDA graph with its k and lengths on the device (on a
//! context without cudarc's event tracking), replayed 100 times on changing data, equals the
//! host's after every replay; a workspace too small, or of another stream, is an error.

use std::sync::Arc;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr};
use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::sets::{self, op};
use oxicub_algorithms::{segmented_sort, topk, Cuda, Error, Host, KernelError, Pending, Workspace};
use oxicub_env::Env;
use oxicub_params::{direction, k, num_segments, order, segment_size};
use oxicub_test::cases::poison;
use oxicub_test::{gpu_or_skip, sample_keys, SplitMix64};

/// Overwrites a device buffer with host data on the backend's stream (no oxicub allocation).
fn refill<T: DeviceRepr>(stream: &Arc<CudaStream>, data: &[T], to: &mut CudaSlice<T>) {
    stream.memcpy_htod(data, to).expect("copy to the device");
}

fn download<T: DeviceRepr + Clone + Default>(cuda: &Cuda, from: &CudaSlice<T>) -> Vec<T> {
    cuda.stream().clone_dtoh(from).expect("copy to the host")
}

/// Keys compared bit for bit (NaN equals NaN of the same bits; -0.0 differs from +0.0), the
/// first difference reported rather than both buffers.
trait Bits: Copy + std::fmt::Debug {
    fn bits(self) -> u64;
}

impl Bits for f32 {
    fn bits(self) -> u64 {
        self.to_bits().into()
    }
}

impl Bits for u32 {
    fn bits(self) -> u64 {
        self.into()
    }
}

fn assert_same<T: Bits>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) = (0..got.len()).find(|&i| got[i].bits() != want[i].bits()) {
        panic!(
            "{what}: first difference at {i} of {}: {:?} (device) vs {:?} (host)",
            got.len(),
            got[i],
            want[i]
        );
    }
}

const EXPERTS: usize = 256;
const TOKENS: usize = 512;
const TOP: usize = 8;

/// The router's problem: `[TOKENS x EXPERTS]` logits, the top 8 of each row.
fn router() -> impl batched_topk::ProblemOn<Host> + batched_topk::ProblemOn<Cuda> {
    Problem::strided(
        EXPERTS,
        segment_size::Static::<{ EXPERTS as i64 }>::new(),
        k::Static::<{ TOP as i64 }>::new(),
        direction::Max,
        num_segments::uniform(TOKENS as i64).expect("rows"),
    )
}

/// The host's routing of `logits` (the oracle).
fn routed_on_host(logits: &[f32]) -> (Vec<f32>, Vec<u32>) {
    let (mut top, mut expert) = (vec![0f32; TOKENS * TOP], vec![0u32; TOKENS * TOP]);
    batched_topk::select_indices(
        &Host::new(),
        &router(),
        logits,
        &mut top[..],
        &mut expert[..],
        &Env::new(),
    )
    .and_then(Pending::check)
    .expect("host");
    (top, expert)
}

/// Logits of a step: coarse values, so ties at the 8th place are common.
fn logits(step: u64) -> Vec<f32> {
    oxicub_test::cases::unit_scores(TOKENS * EXPERTS, 1000 + step, 6)
}

#[test]
fn a_moe_router_in_a_workspace_allocates_nothing() {
    let Some(cuda) = gpu_or_skip() else { return };
    let stream = cuda.stream().clone();
    let mut device_logits = cuda.upload(&logits(0)).expect("upload");
    let mut top = cuda.alloc_zeros::<f32>(TOKENS * TOP).expect("alloc");
    let mut expert = cuda.alloc_zeros::<u32>(TOKENS * TOP).expect("alloc");
    let route = |cuda: &Cuda,
                 logits: &CudaSlice<f32>,
                 top: &mut CudaSlice<f32>,
                 expert: &mut CudaSlice<u32>| {
        batched_topk::select_indices(
            cuda,
            &router(),
            logits.as_view(),
            top.as_view_mut(),
            expert.as_view_mut(),
            &Env::new(),
        )
    };
    let before = cuda.device_allocations();
    let bytes = cuda
        .workspace_bytes(|cuda| route(cuda, &device_logits, &mut top, &mut expert))
        .expect("measure");
    assert_eq!(cuda.device_allocations(), before, "measuring allocates");
    let workspace = Workspace::new(&cuda, bytes).expect("workspace");
    let in_workspace = cuda.with_workspace(&workspace).expect("same stream");
    let steady = in_workspace.device_allocations();
    for step in 0..20 {
        let host_logits = logits(step);
        refill(&stream, &host_logits, &mut device_logits);
        refill(&stream, &vec![poison::<f32>(); TOKENS * TOP], &mut top);
        refill(&stream, &vec![u32::MAX; TOKENS * TOP], &mut expert);
        route(&in_workspace, &device_logits, &mut top, &mut expert)
            .and_then(Pending::check)
            .expect("routed");
        let (host_top, host_expert) = routed_on_host(&host_logits);
        assert_same(
            &download(&cuda, &top),
            &host_top,
            &format!("step {step}: top"),
        );
        assert_same(
            &download(&cuda, &expert),
            &host_expert,
            &format!("step {step}: expert"),
        );
    }
    assert_eq!(
        in_workspace.device_allocations(),
        steady,
        "the steady state allocated (workspace of {bytes} bytes)"
    );
}

/// A sparse-attention indexer's shape: each query row has its own causal length and its own
/// k (up to 2048), the rows `STRIDE` apart; a length of 0, a k of 0 and a k above the length
/// among them.
struct Indexer {
    keys: Vec<f32>,
    sizes: Vec<i64>,
    ks: Vec<i64>,
}

const ROWS: usize = 48;
const STRIDE: usize = 40_000;
const MAX_K: usize = 2048;

impl Indexer {
    fn new(step: u64) -> Indexer {
        let mut rng = SplitMix64::new(77 + step);
        let mut sizes: Vec<i64> = (0..ROWS)
            .map(|_| (rng.next_u64() % (STRIDE as u64 + 1)) as i64)
            .collect();
        let mut ks: Vec<i64> = (0..ROWS)
            .map(|_| (rng.next_u64() % (MAX_K as u64 + 1)) as i64)
            .collect();
        sizes[0] = 0;
        ks[1] = 0;
        sizes[2] = STRIDE as i64;
        (sizes[3], ks[3]) = (100, 700); // k above the row's length: the whole row
        ks[4] = MAX_K as i64;
        Indexer {
            keys: oxicub_test::cases::unit_scores(ROWS * STRIDE, 500 + step, 10),
            sizes,
            ks,
        }
    }

    /// The host's selection (the oracle), outputs poisoned first like the device's.
    fn on_host(&self) -> (Vec<f32>, Vec<u32>) {
        let problem = Problem::strided(
            STRIDE,
            segment_size::PerSegment::<_, 0, { STRIDE as i64 }>::new(&self.sizes[..]),
            k::PerSegment::<_, 0, { MAX_K as i64 }>::new(&self.ks[..]),
            direction::Max,
            num_segments::uniform(ROWS as i64).expect("rows"),
        );
        let mut top = vec![poison::<f32>(); ROWS * MAX_K];
        let mut at = vec![u32::MAX; ROWS * MAX_K];
        batched_topk::select_indices(
            &Host::new(),
            &problem,
            &self.keys[..],
            &mut top[..],
            &mut at[..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("host");
        (top, at)
    }
}

/// The indexer's buffers on the device, refilled each step.
struct DeviceIndexer {
    keys: CudaSlice<f32>,
    sizes: CudaSlice<i64>,
    ks: CudaSlice<i64>,
    top: CudaSlice<f32>,
    at: CudaSlice<u32>,
}

impl DeviceIndexer {
    /// The bytes its call carves (measured), and a backend on `cuda`'s stream whose calls
    /// carve them from a workspace of exactly that size.
    fn in_workspace(&mut self, cuda: &Cuda) -> (usize, Cuda) {
        let bytes = cuda
            .workspace_bytes(|cuda| self.select(cuda))
            .expect("measure");
        let in_workspace = cuda
            .with_workspace(&Workspace::new(cuda, bytes).expect("workspace"))
            .expect("same stream");
        (bytes, in_workspace)
    }

    fn new(cuda: &Cuda, first: &Indexer) -> DeviceIndexer {
        DeviceIndexer {
            keys: cuda.upload(&first.keys).expect("upload"),
            sizes: cuda.upload(&first.sizes).expect("upload"),
            ks: cuda.upload(&first.ks).expect("upload"),
            top: cuda.alloc_zeros(ROWS * MAX_K).expect("alloc"),
            at: cuda.alloc_zeros(ROWS * MAX_K).expect("alloc"),
        }
    }

    /// The step's inputs, and poisoned outputs.
    fn refill(&mut self, stream: &Arc<CudaStream>, step: &Indexer) {
        refill(stream, &step.keys, &mut self.keys);
        refill(stream, &step.sizes, &mut self.sizes);
        refill(stream, &step.ks, &mut self.ks);
        refill(stream, &vec![poison::<f32>(); ROWS * MAX_K], &mut self.top);
        refill(stream, &vec![u32::MAX; ROWS * MAX_K], &mut self.at);
    }

    fn select(&mut self, cuda: &Cuda) -> Result<oxicub_algorithms::Outcome, Error> {
        let problem = Problem::strided(
            STRIDE,
            segment_size::PerSegment::<_, 0, { STRIDE as i64 }>::new(self.sizes.as_view()),
            k::PerSegment::<_, 0, { MAX_K as i64 }>::new(self.ks.as_view()),
            direction::Max,
            num_segments::uniform(ROWS as i64).expect("rows"),
        );
        batched_topk::select_indices(
            cuda,
            &problem,
            self.keys.as_view(),
            self.top.as_view_mut(),
            self.at.as_view_mut(),
            &Env::new(),
        )
    }

    fn check(&self, cuda: &Cuda, step: &Indexer, what: &str) {
        let (host_top, host_at) = step.on_host();
        assert_same(
            &download(cuda, &self.top),
            &host_top,
            &format!("{what}: keys"),
        );
        assert_same(
            &download(cuda, &self.at),
            &host_at,
            &format!("{what}: indices"),
        );
    }
}

#[test]
fn a_per_row_indexer_in_a_workspace_allocates_nothing() {
    let Some(cuda) = gpu_or_skip() else { return };
    let stream = cuda.stream().clone();
    let first = Indexer::new(0);
    let mut device = DeviceIndexer::new(&cuda, &first);
    let (bytes, in_workspace) = device.in_workspace(&cuda);
    assert!(bytes > 0, "per-row k and lengths need scratch");
    let steady = in_workspace.device_allocations();
    for step in 0..8 {
        let inputs = Indexer::new(step);
        device.refill(&stream, &inputs);
        device
            .select(&in_workspace)
            .and_then(Pending::check)
            .expect("selected");
        device.check(&cuda, &inputs, &format!("step {step}"));
    }
    assert_eq!(in_workspace.device_allocations(), steady);
    // Without the workspace, each call allocates its scratch.
    device
        .select(&cuda)
        .and_then(Pending::check)
        .expect("allocating");
    assert!(cuda.device_allocations() > steady);
}

#[test]
fn a_single_topk_sort_and_set_operation_in_a_workspace_allocate_nothing() {
    let Some(cuda) = gpu_or_skip() else { return };
    let stream = cuda.stream().clone();
    let n = 1 << 21;
    // Top-k of a long array, k deferred on the device.
    let mut keys = cuda.upload(&sample_keys::<f32>(n, 1)).expect("upload");
    let mut device_k = cuda.upload(&[1000i64]).expect("upload");
    let mut best = cuda.alloc_zeros::<f32>(4096).expect("alloc");
    let mut at = cuda.alloc_zeros::<u32>(4096).expect("alloc");
    let select = |cuda: &Cuda,
                  keys: &CudaSlice<f32>,
                  device_k: &CudaSlice<i64>,
                  best: &mut CudaSlice<f32>,
                  at: &mut CudaSlice<u32>| {
        let kp = k::Deferred::<_, 0, 4096>::new(device_k.as_view());
        topk::select_indices(
            cuda,
            &direction::Max,
            keys.as_view(),
            best.as_view_mut(),
            at.as_view_mut(),
            &kp,
            &Env::new(),
        )
    };
    // A segmented sort of rows of varied lengths (offsets), and a union of two sorted arrays.
    let rows = 300usize;
    let mut begin: Vec<i64> = (0..rows).map(|r| (r * (n / rows)) as i64).collect();
    let end: Vec<i64> = begin.iter().map(|&b| b + (n / rows / 2) as i64).collect();
    begin[7] = end[7]; // an empty row
    let device_begin = cuda.upload(&begin).expect("upload");
    let device_end = cuda.upload(&end).expect("upload");
    let mut sorted = cuda.alloc_zeros::<f32>(n).expect("alloc");
    let sort = |cuda: &Cuda, keys: &CudaSlice<f32>, sorted: &mut CudaSlice<f32>| {
        let problem = segmented_sort::Problem::offsets(
            device_begin.as_view(),
            device_end.as_view(),
            segment_size::PerSegment::<(), 0, { 1 << 30 }>::new(()),
            order::Ascending,
            num_segments::uniform(rows as i64).expect("rows"),
        );
        segmented_sort::sort_keys(
            cuda,
            &problem,
            keys.as_view(),
            sorted.as_view_mut(),
            &Env::new(),
        )
    };
    let mut a_host: Vec<u32> = sample_keys::<u32>(n, 2)
        .iter()
        .map(|k| k % 5_000_000)
        .collect();
    let mut b_host: Vec<u32> = sample_keys::<u32>(n / 2, 3)
        .iter()
        .map(|k| k % 5_000_000)
        .collect();
    a_host.sort_unstable();
    b_host.sort_unstable();
    let mut a = cuda.upload(&a_host).expect("upload");
    let b = cuda.upload(&b_host).expect("upload");
    let mut union = cuda
        .alloc_zeros::<u32>(a_host.len() + b_host.len())
        .expect("alloc");
    let unite = |cuda: &Cuda, a: &CudaSlice<u32>, union: &mut CudaSlice<u32>| {
        sets::keys(
            cuda,
            op::Union,
            order::Ascending,
            a.as_view(),
            b.as_view(),
            union.as_view_mut(),
            &Env::new(),
        )
    };

    let bytes = cuda
        .workspace_bytes(|cuda| {
            select(cuda, &keys, &device_k, &mut best, &mut at)?.check()?;
            sort(cuda, &keys, &mut sorted)?.check()?;
            unite(cuda, &a, &mut union)
        })
        .expect("measure");
    let in_workspace = cuda
        .with_workspace(&Workspace::new(&cuda, bytes).expect("workspace"))
        .expect("same stream");
    let steady = in_workspace.device_allocations();
    for step in 0..4u64 {
        let host_keys = sample_keys::<f32>(n, 10 + step);
        let k_value = [0i64, 1, 2048, 4096][step as usize];
        refill(&stream, &host_keys, &mut keys);
        refill(&stream, &[k_value], &mut device_k);
        refill(&stream, &vec![poison::<f32>(); 4096], &mut best);
        refill(&stream, &vec![u32::MAX; 4096], &mut at);
        select(&in_workspace, &keys, &device_k, &mut best, &mut at)
            .and_then(Pending::check)
            .expect("top-k");
        let (mut host_best, mut host_at) = (vec![poison::<f32>(); 4096], vec![u32::MAX; 4096]);
        let host_kp = k::Deferred::<_, 0, 4096>::new(&k_value);
        topk::select_indices(
            &Host::new(),
            &direction::Max,
            &host_keys[..],
            &mut host_best[..],
            &mut host_at[..],
            &host_kp,
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("host top-k");
        assert_same(
            &download(&cuda, &best),
            &host_best,
            &format!("step {step}: top-k keys"),
        );
        assert_same(
            &download(&cuda, &at),
            &host_at,
            &format!("step {step}: top-k indices"),
        );

        refill(&stream, &vec![poison::<f32>(); n], &mut sorted);
        sort(&in_workspace, &keys, &mut sorted)
            .and_then(Pending::check)
            .expect("sort");
        let mut host_sorted = vec![poison::<f32>(); n];
        let host_problem = segmented_sort::Problem::offsets(
            &begin[..],
            &end[..],
            segment_size::PerSegment::<(), 0, { 1 << 30 }>::new(()),
            order::Ascending,
            num_segments::uniform(rows as i64).expect("rows"),
        );
        segmented_sort::sort_keys(
            &Host::new(),
            &host_problem,
            &host_keys[..],
            &mut host_sorted[..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("host sort");
        assert_same(
            &download(&cuda, &sorted),
            &host_sorted,
            &format!("step {step}: sort"),
        );

        a_host[step as usize] = a_host[step as usize].min(1); // still sorted: a changes a little
        refill(&stream, &a_host, &mut a);
        refill(
            &stream,
            &vec![u32::MAX; a_host.len() + b_host.len()],
            &mut union,
        );
        let count = unite(&in_workspace, &a, &mut union)
            .and_then(Pending::check)
            .expect("union");
        let mut host_union = vec![u32::MAX; a_host.len() + b_host.len()];
        let host_count = sets::keys(
            &Host::new(),
            op::Union,
            order::Ascending,
            &a_host[..],
            &b_host[..],
            &mut host_union[..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("host union");
        assert_eq!(count, host_count, "step {step}: union count");
        assert_same(
            &download(&cuda, &union),
            &host_union,
            &format!("step {step}: union"),
        );
    }
    assert_eq!(in_workspace.device_allocations(), steady);
}

/// Captures the indexer's call (its lengths and k on the device) into a CUDA graph, then
/// replays it 100 times on changing inputs, each replay's outputs and report checked.
fn replay_a_captured_indexer(cuda: &Cuda) {
    let stream = cuda.stream().clone();
    let first = Indexer::new(0);
    let mut device = DeviceIndexer::new(cuda, &first);
    let (_, in_workspace) = device.in_workspace(cuda);
    // Loads the kernels (a capture cannot compile or load modules).
    device
        .select(&in_workspace)
        .and_then(Pending::check)
        .expect("warm");
    stream.synchronize().expect("sync");
    let steady = in_workspace.device_allocations();
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .expect("begin capture");
    let captured = device.select(&in_workspace);
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .expect("end capture")
        .expect("a graph");
    let outcome = captured.expect("captured call");
    for replay in 0..100u64 {
        let inputs = Indexer::new(replay + 1);
        device.refill(&stream, &inputs);
        graph.launch().expect("replay");
        outcome.check_replay().expect("the replay's report");
        device.check(cuda, &inputs, &format!("replay {replay}"));
    }
    assert_eq!(in_workspace.device_allocations(), steady);
    // A replay with a k outside its bounds is reported by the outcome, as a call's would be.
    let mut bad = Indexer::new(999);
    bad.ks[5] = MAX_K as i64 + 1;
    device.refill(&stream, &bad);
    graph.launch().expect("replay");
    match outcome.check_replay() {
        Err(Error::InvalidSegment { segment: 5, .. }) => {}
        other => panic!("a bad k in a replay: {other:?}"),
    }
}

/// Capture needs the context's cudarc event tracking off (docs/design/engine.md, "Workspace
/// and graph capture"): the call runs on a stream of such a context.
#[test]
fn a_captured_call_replays_with_device_side_k_and_lengths() {
    let Some(cuda) = gpu_or_skip() else { return };
    let ctx = cudarc::driver::CudaContext::new(cuda.context().ordinal()).expect("context");
    // SAFETY: every buffer of this test is used on the one stream below, in stream order.
    unsafe { ctx.disable_event_tracking() };
    let untracked = Cuda::from_stream(ctx.new_stream().expect("stream")).expect("backend");
    replay_a_captured_indexer(&untracked);
}

/// On a context whose cudarc event tracking is on (the default), a call under capture is
/// refused at once, naming the fix, before it touches a buffer: the capture ends cleanly and
/// the same call then runs, equal to the host's.
#[test]
fn a_capture_with_event_tracking_on_is_refused_with_the_fix() {
    let Some(cuda) = gpu_or_skip() else { return };
    assert!(cuda.context().is_managing_stream_synchronization());
    let stream = cuda.stream().clone();
    let first = Indexer::new(0);
    let mut device = DeviceIndexer::new(&cuda, &first);
    device.select(&cuda).and_then(Pending::check).expect("warm");
    stream.synchronize().expect("sync");
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .expect("begin capture");
    let refused = device.select(&cuda);
    let graph = stream.end_capture(CUgraphInstantiate_flags(0));
    match refused {
        Err(Error::InvalidArgument {
            arg: "stream",
            reason,
        }) => {
            assert!(reason.contains("disable_event_tracking"), "{reason}");
        }
        other => panic!("a call captured with event tracking on: {other:?}"),
    }
    let _empty = graph.expect("the capture ends cleanly (nothing in it)");
    let inputs = Indexer::new(1);
    device.refill(&stream, &inputs);
    device
        .select(&cuda)
        .and_then(Pending::check)
        .expect("after");
    device.check(&cuda, &inputs, "after the refused capture");
}

#[test]
fn a_workspace_too_small_or_of_another_stream_is_an_error() {
    let Some(cuda) = gpu_or_skip() else { return };
    let first = Indexer::new(0);
    let mut device = DeviceIndexer::new(&cuda, &first);
    let bytes = cuda
        .workspace_bytes(|cuda| device.select(cuda))
        .expect("measure");
    let small = cuda
        .with_workspace(&Workspace::new(&cuda, bytes / 2).expect("workspace"))
        .expect("same stream");
    match device.select(&small) {
        Err(Error::Kernel(KernelError::WorkspaceTooSmall {
            needed, available, ..
        })) => assert!(needed > available && available == (bytes / 2) as u64),
        other => panic!("a small workspace: {other:?}"),
    }
    // The outputs are untouched: nothing was launched.
    assert!(download(&cuda, &device.at).iter().all(|&i| i == 0));
    let other = cuda
        .on_stream(cuda.context().new_stream().expect("stream"))
        .expect("same context");
    let workspace = Workspace::new(&other, bytes).expect("workspace");
    match cuda.with_workspace(&workspace) {
        Err(Error::InvalidArgument {
            arg: "workspace", ..
        }) => {}
        other => panic!("another stream's workspace: {other:?}"),
    }
}

/// A single top-k with a deferred k and no keys still checks its k on the device: its measure
/// counts the state words it carves, so the workspace it sizes serves it, and a k outside its
/// bounds is reported from the workspace call.
#[test]
fn an_empty_topk_with_a_deferred_k_measures_what_it_carves() {
    let Some(cuda) = gpu_or_skip() else { return };
    let empty = cuda.alloc_zeros::<f32>(1).expect("alloc");
    let device_k = cuda.upload(&[3i64]).expect("upload");
    let mut out = cuda.alloc_zeros::<f32>(1).expect("alloc");
    let select = |cuda: &Cuda, out: &mut CudaSlice<f32>| {
        let kp = k::Deferred::<_, 0, 2>::new(device_k.as_view());
        topk::select_keys(
            cuda,
            &direction::Max,
            empty.slice(..0),
            out.as_view_mut(),
            &kp,
            &Env::new(),
        )
    };
    let bytes = cuda
        .workspace_bytes(|cuda| select(cuda, &mut out))
        .expect("measure");
    assert!(bytes > 0, "the state words of the k check");
    let in_workspace = cuda
        .with_workspace(&Workspace::new(&cuda, bytes).expect("workspace"))
        .expect("same stream");
    match select(&in_workspace, &mut out).and_then(Pending::check) {
        Err(Error::Param(e)) => assert_eq!(e.param(), "k"),
        other => panic!("k = 3 above its bound 2: {other:?}"),
    }
}

/// Deferred checks: an indexer loop that defers each step's outcome and checks them together
/// after its own synchronisation reports the bad step's segment (the others valid), every
/// step's outputs equal to the host's; a second round allocates nothing (the status pool grew
/// to the outcomes deferred between two checks in the first).
#[test]
fn deferred_outcomes_are_checked_together() {
    let Some(cuda) = gpu_or_skip() else { return };
    let stream = cuda.stream().clone();
    let first = Indexer::new(0);
    let mut device = DeviceIndexer::new(&cuda, &first);
    let (_, in_workspace) = device.in_workspace(&cuda);
    let mut allocations = Vec::new();
    for round in 0..2 {
        for step in 0..6u64 {
            let mut inputs = Indexer::new(100 + step);
            if step == 3 {
                inputs.ks[7] = MAX_K as i64 + 5;
            }
            device.refill(&stream, &inputs);
            device
                .select(&in_workspace)
                .expect("launched")
                .defer(&in_workspace);
            if step != 3 {
                device.check(&cuda, &inputs, &format!("round {round}, step {step}"));
            }
        }
        assert_eq!(in_workspace.deferred(), 6);
        stream
            .synchronize()
            .expect("the loop's own synchronisation");
        match in_workspace.check_deferred() {
            Err(Error::InvalidSegment {
                segment: 7,
                arg: "k",
                ..
            }) => {}
            other => panic!("round {round}: step 3's k: {other:?}"),
        }
        assert_eq!(in_workspace.deferred(), 0);
        allocations.push(in_workspace.device_allocations());
    }
    assert_eq!(allocations[0], allocations[1], "the second round allocated");
}
