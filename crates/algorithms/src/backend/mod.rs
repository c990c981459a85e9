//! Where algorithms run: the [`Host`] (rayon) and [`Cuda`] backends, and [`AnyBackend`], which
//! picks one at run time.

mod device_values;
mod params;
mod workspace;

pub(crate) use device_values::{zeroed, ByteOption};
pub use device_values::{DeviceKeys, DeviceValue, DeviceValues};
pub use params::{
    ChoiceValues, ChoiceValuesOn, ChoicesOn, ParamValues, ParamValuesOn, PerSegmentOn, ValuesOn,
};
pub use workspace::Workspace;

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut, DeviceRepr};
use oxicub_kernels::{open_context, CubinOrigin, DeviceFacts, KernelRuntime, KernelSpec, RadixKey};

use crate::error::driver_error;
use crate::Error;

impl crate::sealed::Sealed for Host {}
impl crate::sealed::Sealed for Cuda {}
impl crate::sealed::Sealed for AnyBackend {}

/// A buffer argument of an algorithm: a host slice or a device view.
///
/// ```
/// use oxicub::Buffer;
///
/// let data = [1u8, 2, 3];
/// assert_eq!(Buffer::len(&&data[..]), 3);
/// ```
pub trait Buffer {
    /// Number of elements.
    fn len(&self) -> usize;
    /// Whether it has no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Buffer for &[T] {
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
}

impl<T> Buffer for &mut [T] {
    fn len(&self) -> usize {
        <[T]>::len(self)
    }
}

impl<T> Buffer for CudaView<'_, T> {
    fn len(&self) -> usize {
        CudaView::len(self)
    }
}

impl<T> Buffer for &CudaView<'_, T> {
    fn len(&self) -> usize {
        CudaView::len(self)
    }
}

impl<T> Buffer for CudaViewMut<'_, T> {
    fn len(&self) -> usize {
        CudaViewMut::len(self)
    }
}

/// A place where algorithms run, with the buffer types its algorithms take. Sealed:
/// implemented by [`Host`] (host slices), [`Cuda`] (cudarc device views) and [`AnyBackend`]
/// (host slices, run on whichever it picked).
///
/// ```
/// use oxicub::{Backend, Host};
///
/// fn describe<B: Backend>(backend: &B) -> String {
///     format!("{} ({backend})", backend.name())
/// }
/// assert!(describe(&Host::new()).starts_with("host"));
/// ```
pub trait Backend: fmt::Display + Send + Sync + crate::sealed::Sealed {
    /// A read-only input buffer.
    type Slice<'a, T: 'a>: Buffer;
    /// A writable output buffer.
    type SliceMut<'a, T: 'a>: Buffer;
    /// Where this backend reads per-segment values and deferred single values (see
    /// [`ValuesOn`]): a host slice on [`Host`] and [`AnyBackend`], a borrowed device view on
    /// [`Cuda`].
    type Values<'r, T: 'r>: Buffer + Copy;

    /// Short name: `"host"` or `"cuda"`.
    fn name(&self) -> &'static str;

    /// Waits until every operation issued on this backend has finished (a no-op on the host,
    /// where every call is synchronous).
    fn synchronize(&self) -> Result<(), Error>;
}

/// The CPU backend: parallel over rayon's global pool, synchronous. The oracle of every GPU
/// test, and the fallback on a machine without a GPU.
///
/// ```
/// use oxicub::{radix, Host};
///
/// let mut codes = [0u8; 2];
/// radix::transform_keys(&Host::new(), &[-1i8, 1][..], &mut codes[..])?;
/// assert_eq!(codes, [0x7F, 0x81]);
/// # Ok::<(), oxicub::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Host {
    _private: (),
}

impl Host {
    /// The host backend.
    pub fn new() -> Host {
        Host { _private: () }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host (rayon, {} threads)", rayon::current_num_threads())
    }
}

impl Backend for Host {
    type Slice<'a, T: 'a> = &'a [T];
    type SliceMut<'a, T: 'a> = &'a mut [T];
    type Values<'r, T: 'r> = &'r [T];

    fn name(&self) -> &'static str {
        "host"
    }

    fn synchronize(&self) -> Result<(), Error> {
        Ok(())
    }
}

/// The CUDA backend: a cudarc context and stream, and the kernel runtime of that context.
/// Algorithms take cudarc views ([`CudaView`], [`CudaViewMut`]; `slice.as_view()`,
/// `slice.slice(a..b)`) and run asynchronously on [`Cuda::stream`] (cudarc orders the
/// buffers' other uses around them).
///
/// ```no_run
/// use oxicub::{radix, Cuda};
///
/// let cuda = Cuda::new(0)?;
/// let keys = cuda.upload(&[3.0f32, -1.0])?;
/// let mut codes = cuda.alloc_zeros::<u32>(2)?;
/// radix::transform_keys(&cuda, keys.as_view(), codes.as_view_mut())?;
/// assert_eq!(cuda.download(&codes.as_view())?, [0xC040_0000, 0x407F_FFFF]);
/// # Ok::<(), oxicub::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Cuda {
    stream: Arc<CudaStream>,
    runtime: Arc<KernelRuntime>,
    /// Where the calls' device buffers come from ([`Cuda::with_workspace`]).
    scratch: workspace::ScratchSource,
    /// Outcomes set aside to be checked together ([`Pending::defer`](crate::Pending::defer)),
    /// shared by the backend's clones and its other streams' backends.
    deferred: Arc<Mutex<Vec<crate::Outcome>>>,
}

/// What [`Cuda::warm_up`] did: where each kernel's module came from.
///
/// ```
/// let warm = oxicub::WarmUp::default();
/// assert_eq!(warm.compiled + warm.from_disk + warm.from_memory, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WarmUp {
    /// Kernels already loaded in this backend's runtime, or compiled or read by this process
    /// before (for another runtime).
    pub from_memory: usize,
    /// Kernels read from the disk cache.
    pub from_disk: usize,
    /// Kernels compiled by NVRTC now (and written to the disk cache).
    pub compiled: usize,
}

impl Cuda {
    /// A backend on a new stream of device `ordinal`'s primary context. Fails (never panics)
    /// when the driver is missing or there is no such device.
    pub fn new(ordinal: usize) -> Result<Cuda, Error> {
        let ctx = open_context(ordinal)?;
        let stream = ctx.new_stream().map_err(driver_error("cuStreamCreate"))?;
        Cuda::from_stream(stream)
    }

    /// A backend on an existing cudarc stream (and its context), for code that already uses
    /// cudarc. It has a kernel runtime of its own (modules loaded on first use); for more
    /// streams of the same context, [`Cuda::on_stream`] shares this one's.
    pub fn from_stream(stream: Arc<CudaStream>) -> Result<Cuda, Error> {
        let runtime = KernelRuntime::new(stream.context().clone())?;
        Ok(Cuda {
            stream,
            runtime: Arc::new(runtime),
            scratch: workspace::ScratchSource::Allocate,
            deferred: Arc::default(),
        })
    }

    /// The same backend on another stream of its context: calls through it run on `stream`,
    /// with this backend's kernel runtime (the modules it loaded, its cache and its health),
    /// so a stream per request or per layer costs no module loads. A stream of another
    /// context is [`Error::InvalidArgument`]. The new backend allocates its calls' scratch (a
    /// workspace serves one stream: give it one of its own with [`Cuda::with_workspace`]).
    ///
    /// ```no_run
    /// use oxicub::Cuda;
    ///
    /// let cuda = Cuda::new(0)?;
    /// let side = cuda.on_stream(cuda.context().new_stream().expect("a stream"))?;
    /// assert!(std::ptr::eq(side.runtime(), cuda.runtime()));
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn on_stream(&self, stream: Arc<CudaStream>) -> Result<Cuda, Error> {
        if !Arc::ptr_eq(stream.context(), self.stream.context()) {
            return Err(Error::InvalidArgument {
                arg: "stream",
                reason: format!(
                    "belongs to another context (device {}) than this backend's (device {}): \
                     use Cuda::from_stream for it",
                    stream.context().ordinal(),
                    self.stream.context().ordinal()
                ),
            });
        }
        Ok(Cuda {
            stream,
            runtime: Arc::clone(&self.runtime),
            scratch: workspace::ScratchSource::Allocate,
            deferred: Arc::clone(&self.deferred),
        })
    }

    /// The stream every algorithm runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        self.stream.context()
    }

    /// The kernel runtime (compile, cache, launch).
    pub fn runtime(&self) -> &KernelRuntime {
        &self.runtime
    }

    /// Loads every kernel of `specs` into this backend's runtime before any call needs it: a
    /// kernel not loaded yet is read from the disk cache, or compiled by NVRTC (about a second
    /// a kernel), and its module loaded, so the first call that needs it launches at once. An
    /// algorithm's specs for a call shape come from it (`batched_topk::kernel_specs`); every
    /// spec of every family is `oxicub::kernels::all_specs()`. The disk cache can be filled at
    /// image-build time, without a GPU (`examples/fill_cache.rs`).
    ///
    /// ```no_run
    /// use oxicub::{batched_topk, k, segment_size, Cuda, Env};
    ///
    /// let cuda = Cuda::new(0)?;
    /// // What a MoE router of 256 experts, top 8, with u32 expert indices, will launch.
    /// let specs = batched_topk::kernel_specs::<f32, segment_size::Static<256>, k::Static<8>, Env>(4);
    /// let warm = cuda.warm_up(specs)?;
    /// println!("{} compiled, {} from disk, {} already loaded", warm.compiled, warm.from_disk, warm.from_memory);
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn warm_up<I: IntoIterator<Item = KernelSpec>>(&self, specs: I) -> Result<WarmUp, Error> {
        let mut warm = WarmUp::default();
        for spec in specs {
            if self.runtime.is_loaded(&spec) {
                warm.from_memory += 1;
                continue;
            }
            match self.runtime.kernel(&spec)?.origin() {
                CubinOrigin::Memory => warm.from_memory += 1,
                CubinOrigin::Disk => warm.from_disk += 1,
                CubinOrigin::Compiled => warm.compiled += 1,
            }
        }
        Ok(warm)
    }

    /// Checks every outcome set aside with [`Pending::defer`](crate::Pending::defer) on this
    /// backend (or its clones and other streams' backends), oldest first, and forgets them:
    /// the first error, if any (every one is read). Each read waits for its stream, so after
    /// the caller's own synchronisation (an engine step's end) this waits for nothing: the
    /// status words were written by the kernels, and are only copied now.
    ///
    /// ```no_run
    /// use oxicub::batched_topk::{self, Problem};
    /// use oxicub::params::{direction, k, num_segments, segment_size};
    /// use oxicub::{Cuda, Env};
    ///
    /// let cuda = Cuda::new(0)?;
    /// let lengths = cuda.upload(&[3i64, 4])?; // per-row lengths on the device
    /// let scores = cuda.upload(&[0.5f32; 8])?;
    /// let mut top = cuda.alloc_zeros::<f32>(4)?;
    /// let problem = Problem::strided(4, segment_size::PerSegment::<_, 0, 4>::new(lengths.as_view()), k::Static::<2>::new(), direction::Max, num_segments::uniform(2)?);
    /// for _step in 0..3 {
    ///     batched_topk::select_keys(&cuda, &problem, scores.as_view(), top.as_view_mut(), &Env::new())?
    ///         .defer(&cuda); // no wait here
    /// }
    /// cuda.stream().synchronize().expect("the caller's own synchronisation");
    /// cuda.check_deferred()?; // reads the three reports, waits for nothing
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn check_deferred(&self) -> Result<(), Error> {
        let deferred = std::mem::take(&mut *self.lock_deferred());
        let mut first = None;
        for outcome in deferred {
            if let Err(error) = outcome.check() {
                first.get_or_insert(error);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// How many outcomes are set aside, unchecked ([`Cuda::check_deferred`]).
    pub fn deferred(&self) -> usize {
        self.lock_deferred().len()
    }

    /// Sets an outcome aside ([`Pending::defer`](crate::Pending::defer)).
    pub(crate) fn defer(&self, outcome: crate::Outcome) {
        self.lock_deferred().push(outcome);
    }

    fn lock_deferred(&self) -> std::sync::MutexGuard<'_, Vec<crate::Outcome>> {
        self.deferred.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The error of this backend's driver call `call` that failed with `source`, through its
    /// context's health: a kernel fault (a sticky error, whoever's kernel it was) reports the
    /// context unusable, naming the kernel oxicub launched last, here and in every later call.
    pub(crate) fn driver_error(
        &self,
        call: &'static str,
    ) -> impl FnOnce(cudarc::driver::DriverError) -> Error + '_ {
        move |source| Error::Kernel(self.runtime.driver_error(call, source))
    }

    /// The device's facts (SM count, shared memory, L2, architecture, name).
    pub fn facts(&self) -> &DeviceFacts {
        self.runtime.facts()
    }

    /// Copies host data to a new device buffer (on this backend's stream).
    pub fn upload<T: DeviceRepr>(&self, data: &[T]) -> Result<CudaSlice<T>, Error> {
        self.stream
            .clone_htod(data)
            .map_err(self.driver_error("cuMemcpyHtoDAsync"))
    }

    /// A new zeroed device buffer of `len` elements.
    pub fn alloc_zeros<T: DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> Result<CudaSlice<T>, Error> {
        self.stream
            .alloc_zeros(len)
            .map_err(self.driver_error("cuMemAllocAsync"))
    }

    /// Copies a device buffer to the host. Waits for the stream: an explicit, visible sync.
    pub fn download<T: DeviceRepr + Default + Clone>(
        &self,
        data: &CudaView<'_, T>,
    ) -> Result<Vec<T>, Error> {
        self.stream
            .clone_dtoh(data)
            .map_err(self.driver_error("cuMemcpyDtoHAsync"))
    }

    /// Copies keys of any [`RadixKey`] type to the device. Unlike [`Cuda::upload`] this needs
    /// no `DeviceRepr` for the key type, so `f16`/`bf16` keys work without cudarc's `f16`
    /// feature.
    pub fn upload_keys<K: RadixKey>(&self, keys: &[K]) -> Result<DeviceKeys<K>, Error> {
        let bits: Vec<K::Bits> = keys.iter().map(|k| k.to_bits()).collect();
        Ok(DeviceKeys::from_bits(self.upload(&bits)?))
    }

    /// `len` zeroed keys on the device (all-zero bits: `0`, or `+0.0` for floats).
    pub fn alloc_keys<K: RadixKey>(&self, len: usize) -> Result<DeviceKeys<K>, Error> {
        Ok(DeviceKeys::from_bits(self.alloc_zeros(len)?))
    }

    /// Copies values of any [`DeviceValue`] type to the device (no cudarc `DeviceRepr` needed:
    /// `f16`, arrays, your own padding-free structs).
    ///
    /// ```no_run
    /// use oxicub::Cuda;
    ///
    /// let cuda = Cuda::new(0)?;
    /// let tokens = cuda.upload_values(&[[1u32, 2], [3, 4]])?;
    /// assert_eq!(tokens.download(&cuda)?, [[1, 2], [3, 4]]);
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn upload_values<V: DeviceValue>(&self, values: &[V]) -> Result<DeviceValues<V>, Error> {
        DeviceValues::upload(self, values)
    }

    /// `len` zeroed values of any [`DeviceValue`] type on the device.
    pub fn alloc_values<V: DeviceValue>(&self, len: usize) -> Result<DeviceValues<V>, Error> {
        DeviceValues::zeroed(self, len)
    }

    /// Copies device keys to the host (waits for the stream).
    pub fn download_keys<K: RadixKey>(&self, keys: &DeviceKeys<K>) -> Result<Vec<K>, Error> {
        let bits = self.download(&keys.bits().as_view())?;
        Ok(bits.into_iter().map(K::from_bits).collect())
    }
}

impl fmt::Display for Cuda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let facts = self.facts();
        write!(
            f,
            "cuda (device {}: {}, {}, {} SMs)",
            facts.ordinal, facts.name, facts.arch, facts.sm_count
        )
    }
}

impl Backend for Cuda {
    type Slice<'a, T: 'a> = CudaView<'a, T>;
    type SliceMut<'a, T: 'a> = CudaViewMut<'a, T>;
    type Values<'r, T: 'r> = &'r CudaView<'r, T>;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn synchronize(&self) -> Result<(), Error> {
        self.stream
            .synchronize()
            .map_err(self.driver_error("cuStreamSynchronize"))
    }
}

/// The backend picked at run time: [`Cuda`] on device 0 when a driver and a GPU are present,
/// else [`Host`]. Its algorithms take host slices; on CUDA they copy to the device, run there
/// and copy back, so code written against it runs anywhere.
///
/// ```
/// use oxicub::{radix, AnyBackend};
///
/// let (backend, note) = AnyBackend::auto_explained();
/// println!("{note}");
/// let mut codes = [0u32; 3];
/// radix::transform_keys(&backend, &[1.0f32, -1.0, f32::NAN][..], &mut codes[..])?;
/// assert_eq!(codes[2], u32::MAX);
/// # Ok::<(), oxicub::Error>(())
/// ```
#[derive(Clone, Debug)]
pub enum AnyBackend {
    /// The host.
    Host(Host),
    /// A GPU.
    Cuda(Cuda),
}

impl AnyBackend {
    /// Picks [`Cuda`] on device 0 if it can be opened, else [`Host`]. Its `Display` says which.
    pub fn auto() -> AnyBackend {
        AnyBackend::auto_explained().0
    }

    /// Like [`AnyBackend::auto`], also returning a one-line note for a log that says which
    /// backend was picked and, for the host, why no GPU was used.
    pub fn auto_explained() -> (AnyBackend, String) {
        match Cuda::new(0) {
            Ok(cuda) => {
                let note = format!("oxicub: using {cuda}");
                (AnyBackend::Cuda(cuda), note)
            }
            Err(why) => {
                let host = Host::new();
                let note = format!("oxicub: using {host}; no GPU: {why}");
                (AnyBackend::Host(host), note)
            }
        }
    }
}

impl fmt::Display for AnyBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnyBackend::Host(host) => host.fmt(f),
            AnyBackend::Cuda(cuda) => cuda.fmt(f),
        }
    }
}

impl Backend for AnyBackend {
    type Slice<'a, T: 'a> = &'a [T];
    type SliceMut<'a, T: 'a> = &'a mut [T];
    type Values<'r, T: 'r> = &'r [T];

    fn name(&self) -> &'static str {
        match self {
            AnyBackend::Host(host) => host.name(),
            AnyBackend::Cuda(cuda) => cuda.name(),
        }
    }

    fn synchronize(&self) -> Result<(), Error> {
        match self {
            AnyBackend::Host(host) => host.synchronize(),
            AnyBackend::Cuda(cuda) => cuda.synchronize(),
        }
    }
}
