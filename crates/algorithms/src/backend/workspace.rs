//! A caller's device memory for every call's scratch ([`Workspace`], [`Cuda::with_workspace`]),
//! and the measure that sizes it ([`Cuda::workspace_bytes`]): the steady state of an engine
//! loop allocates nothing, and a captured CUDA graph holds no allocation nodes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use oxicub_kernels::{DeviceWorkspace, Scratch};

use super::Cuda;
use crate::Error;

/// Where a [`Cuda`] backend's calls take their device buffers from.
#[derive(Clone, Debug)]
pub(super) enum ScratchSource {
    /// Stream-ordered allocations, freed in stream order after each call's launches.
    Allocate,
    /// Carved from a workspace.
    Workspace(Workspace),
    /// Nowhere: the calls are checked and planned, nothing runs, and the most bytes any of
    /// them would carve is kept.
    Measure(Arc<AtomicU64>),
}

/// Device memory lent to every call of a [`Cuda`] backend ([`Cuda::with_workspace`]), CUB's
/// `d_temp_storage`: the calls carve their scratch from it and take their status words from a
/// small pool it keeps, so a loop of calls allocates nothing once the workspace exists
/// ([`Cuda::device_allocations`] counts), and a call captured into a CUDA graph adds no
/// allocation nodes.
///
/// A workspace belongs to the stream of the backend it was made with and serves one call at a
/// time, in stream order (calls from several host threads wait for each other's launches, not
/// for each other's kernels). Its size comes from measuring the calls it will serve
/// ([`Cuda::workspace_bytes`]); a call that needs more fails with
/// [`KernelError::WorkspaceTooSmall`](oxicub_kernels::KernelError::WorkspaceTooSmall) before
/// it launches anything.
///
/// A call's outcome keeps its status buffer (lent from the pool) until it is checked or
/// dropped: keep the outcome of a captured call as long as the graph, and its check reports
/// the latest replay.
///
/// ```no_run
/// use oxicub::batched_topk::{self, Problem};
/// use oxicub::params::{direction, k, num_segments, segment_size};
/// use oxicub::{Cuda, Env, Workspace};
///
/// let cuda = Cuda::new(0)?;
/// // A MoE router: 64 tokens x 256 experts, the top 8 of each row.
/// let logits = cuda.upload(&vec![0.5f32; 64 * 256])?;
/// let (mut top, mut expert) = (cuda.alloc_zeros::<f32>(64 * 8)?, cuda.alloc_zeros::<u32>(64 * 8)?);
/// let problem = Problem::strided(
///     256,
///     segment_size::Static::<256>::new(),
///     k::Static::<8>::new(),
///     direction::Max,
///     num_segments::uniform(64)?,
/// );
/// let bytes = cuda.workspace_bytes(|cuda| {
///     batched_topk::select_indices(cuda, &problem, logits.as_view(), top.as_view_mut(), expert.as_view_mut(), &Env::new())
/// })?;
/// let router = cuda.with_workspace(&Workspace::new(&cuda, bytes)?)?;
/// let before = router.device_allocations();
/// for _step in 0..3 {
///     batched_topk::select_indices(&router, &problem, logits.as_view(), top.as_view_mut(), expert.as_view_mut(), &Env::new())?
///         .check()?;
/// }
/// assert_eq!(router.device_allocations(), before);
/// # Ok::<(), oxicub::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Workspace {
    inner: Arc<DeviceWorkspace>,
}

impl Workspace {
    /// `bytes` of device memory on `cuda`'s stream (and the first buffers of its status pool),
    /// for the calls of [`cuda.with_workspace(&workspace)`](Cuda::with_workspace).
    pub fn new(cuda: &Cuda, bytes: usize) -> Result<Workspace, Error> {
        let inner = DeviceWorkspace::new(cuda.runtime(), cuda.stream(), bytes as u64)?;
        Ok(Workspace {
            inner: Arc::new(inner),
        })
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.inner.bytes() as usize
    }
}

impl Cuda {
    /// This backend with every call's scratch carved from `workspace` (made on this
    /// backend's stream: another stream's is [`Error::InvalidArgument`]). Its clones share the
    /// workspace; [`Cuda::on_stream`] gives a backend that allocates again.
    pub fn with_workspace(&self, workspace: &Workspace) -> Result<Cuda, Error> {
        if !Arc::ptr_eq(workspace.inner.stream(), self.stream()) {
            return Err(Error::InvalidArgument {
                arg: "workspace",
                reason: "was made on another stream: a workspace serves the stream of the \
                         backend it was made with"
                    .to_owned(),
            });
        }
        Ok(Cuda {
            scratch: ScratchSource::Workspace(workspace.clone()),
            ..self.clone()
        })
    }

    /// The workspace this backend's calls carve their scratch from, if any.
    pub fn workspace(&self) -> Option<&Workspace> {
        match &self.scratch {
            ScratchSource::Workspace(workspace) => Some(workspace),
            _ => None,
        }
    }

    /// The bytes of workspace the oxicub calls made by `calls` need: `calls` runs with a
    /// measuring copy of this backend, on which each call is checked and planned as it would
    /// run (the same arguments, the same errors) but allocates and launches nothing, its outputs
    /// untouched and its outcome empty. A call's scratch depends on its problem's bounds and
    /// its buffers' lengths, not on the data, so the answer holds for every later call of the
    /// same shapes; several calls need the most of them (they run one after another).
    ///
    /// Anything else `calls` does with the backend (an upload, say) really happens.
    ///
    /// ```no_run
    /// use oxicub::{topk, Cuda, Env, Workspace};
    /// use oxicub::params::{direction, k};
    ///
    /// let cuda = Cuda::new(0)?;
    /// let scores = cuda.upload(&vec![1.0f32; 1 << 20])?;
    /// let (mut best, mut at) = (cuda.alloc_zeros::<f32>(2048)?, cuda.alloc_zeros::<u32>(2048)?);
    /// let k = k::Static::<2048>::new();
    /// let bytes = cuda.workspace_bytes(|cuda| {
    ///     topk::select_indices(cuda, &direction::Max, scores.as_view(), best.as_view_mut(), at.as_view_mut(), &k, &Env::new())
    /// })?;
    /// let indexer = cuda.with_workspace(&Workspace::new(&cuda, bytes)?)?;
    /// topk::select_indices(&indexer, &direction::Max, scores.as_view(), best.as_view_mut(), at.as_view_mut(), &k, &Env::new())?
    ///     .check()?;
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn workspace_bytes<R>(
        &self,
        calls: impl FnOnce(&Cuda) -> Result<R, Error>,
    ) -> Result<usize, Error> {
        let most = Arc::new(AtomicU64::new(0));
        let measuring = Cuda {
            scratch: ScratchSource::Measure(Arc::clone(&most)),
            ..self.clone()
        };
        calls(&measuring)?;
        Ok(most.load(Ordering::Relaxed) as usize)
    }

    /// How many device buffers oxicub's calls have allocated on this backend's kernel runtime
    /// (shared by [`Cuda::on_stream`]'s backends): scratch, status words, tables, workspaces.
    /// A steady state whose calls run in a [`Workspace`] leaves it unchanged.
    pub fn device_allocations(&self) -> u64 {
        self.runtime().device_allocations()
    }

    /// Where this call's buffers come from (a workspace's lock is held until it is dropped).
    /// Every call on the device asks for it before it launches, so a capture that cannot work
    /// is refused here (`refuse_tracked_capture`; the radix calls, which take no scratch, ask
    /// that directly).
    pub(crate) fn scratch(&self) -> Result<Scratch<'_>, Error> {
        if !matches!(self.scratch, ScratchSource::Measure(_)) {
            self.refuse_tracked_capture()?;
        }
        Ok(match &self.scratch {
            ScratchSource::Allocate => Scratch::allocate(),
            ScratchSource::Workspace(workspace) => {
                Scratch::workspace(&workspace.inner, self.stream())?
            }
            ScratchSource::Measure(most) => Scratch::measure(most),
        })
    }

    /// A call captured into a CUDA graph on a context whose cudarc event tracking is on cannot
    /// be captured: cudarc makes the stream wait on each buffer's last write, an event recorded
    /// before the capture began, and a capture may not wait on outside events (the capture is
    /// invalidated and the error surfaces later, elsewhere). The call is refused at once, with
    /// the fix ("Workspace and graph capture" in docs/design/engine.md).
    pub(crate) fn refuse_tracked_capture(&self) -> Result<(), Error> {
        let stream = self.stream();
        if !stream.context().is_managing_stream_synchronization() {
            return Ok(());
        }
        let status = stream
            .capture_status()
            .map_err(self.driver_error("cuStreamIsCapturing"))?;
        if status == cudarc::driver::sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE {
            return Err(Error::InvalidArgument {
                arg: "stream",
                reason: "is capturing a CUDA graph, and its context has cudarc's event tracking \
                         on: the capture would wait on events recorded before it began. Capture \
                         on a context with `CudaContext::disable_event_tracking()` (and order \
                         its streams yourself)"
                    .to_owned(),
            });
        }
        Ok(())
    }
}
