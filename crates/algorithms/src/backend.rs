//! Where algorithms run: the [`Host`] (rayon) and [`Cuda`] backends, and [`AnyBackend`], which
//! picks one at run time.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut, DeviceRepr};
use oxicub_kernels::{open_context, DeviceFacts, KernelRuntime, RadixKey};

use crate::error::driver_error;
use crate::Error;

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Host {}
    impl Sealed for super::Cuda {}
    impl Sealed for super::AnyBackend {}
}

/// A buffer argument of an algorithm: a host slice or a device view.
///
/// ```
/// use oxicub_algorithms::Buffer;
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
/// use oxicub_algorithms::{Backend, Host};
///
/// fn describe<B: Backend>(backend: &B) -> String {
///     format!("{} ({backend})", backend.name())
/// }
/// assert!(describe(&Host::new()).starts_with("host"));
/// ```
pub trait Backend: fmt::Display + Send + Sync + sealed::Sealed {
    /// A read-only input buffer.
    type Slice<'a, T: 'a>: Buffer;
    /// A writable output buffer.
    type SliceMut<'a, T: 'a>: Buffer;

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
/// use oxicub_algorithms::{radix, Host};
///
/// let mut codes = [0u8; 2];
/// radix::transform_keys(&Host::new(), &[-1i8, 1][..], &mut codes[..])?;
/// assert_eq!(codes, [0x7F, 0x81]);
/// # Ok::<(), oxicub_algorithms::Error>(())
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
/// use oxicub_algorithms::{radix, Cuda};
///
/// let cuda = Cuda::new(0)?;
/// let keys = cuda.upload(&[3.0f32, -1.0])?;
/// let mut codes = cuda.alloc_zeros::<u32>(2)?;
/// radix::transform_keys(&cuda, keys.as_view(), codes.as_view_mut())?;
/// assert_eq!(cuda.download(&codes.as_view())?, [0xC040_0000, 0x407F_FFFF]);
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Cuda {
    stream: Arc<CudaStream>,
    runtime: Arc<KernelRuntime>,
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
    /// cudarc.
    pub fn from_stream(stream: Arc<CudaStream>) -> Result<Cuda, Error> {
        let runtime = KernelRuntime::new(stream.context().clone())?;
        Ok(Cuda {
            stream,
            runtime: Arc::new(runtime),
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

    /// The device's facts (SM count, shared memory, L2, architecture, name).
    pub fn facts(&self) -> &DeviceFacts {
        self.runtime.facts()
    }

    /// Copies host data to a new device buffer (on this backend's stream).
    pub fn upload<T: DeviceRepr>(&self, data: &[T]) -> Result<CudaSlice<T>, Error> {
        self.stream
            .clone_htod(data)
            .map_err(driver_error("cuMemcpyHtoDAsync"))
    }

    /// A new zeroed device buffer of `len` elements.
    pub fn alloc_zeros<T: DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> Result<CudaSlice<T>, Error> {
        self.stream
            .alloc_zeros(len)
            .map_err(driver_error("cuMemAllocAsync"))
    }

    /// Copies a device buffer to the host. Waits for the stream: an explicit, visible sync.
    pub fn download<T: DeviceRepr + Default + Clone>(
        &self,
        data: &CudaView<'_, T>,
    ) -> Result<Vec<T>, Error> {
        self.stream
            .clone_dtoh(data)
            .map_err(driver_error("cuMemcpyDtoHAsync"))
    }

    /// Copies keys of any [`RadixKey`] type to the device. Unlike [`Cuda::upload`] this needs
    /// no `DeviceRepr` for the key type, so `f16`/`bf16` keys work without cudarc's `f16`
    /// feature.
    pub fn upload_keys<K: RadixKey>(&self, keys: &[K]) -> Result<DeviceKeys<K>, Error> {
        let bits: Vec<K::Bits> = keys.iter().map(|k| k.to_bits()).collect();
        Ok(DeviceKeys {
            bits: self.upload(&bits)?,
            key: PhantomData,
        })
    }

    /// `len` zeroed keys on the device (all-zero bits: `0`, or `+0.0` for floats).
    pub fn alloc_keys<K: RadixKey>(&self, len: usize) -> Result<DeviceKeys<K>, Error> {
        Ok(DeviceKeys {
            bits: self.alloc_zeros(len)?,
            key: PhantomData,
        })
    }

    /// Copies device keys to the host (waits for the stream).
    pub fn download_keys<K: RadixKey>(&self, keys: &DeviceKeys<K>) -> Result<Vec<K>, Error> {
        let bits = self.download(&keys.bits.as_view())?;
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

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn synchronize(&self) -> Result<(), Error> {
        self.stream
            .synchronize()
            .map_err(driver_error("cuStreamSynchronize"))
    }
}

/// Keys of type `K` on the device, stored as their raw bits (`CudaSlice<K::Bits>`), so key
/// types without cudarc's `DeviceRepr` (`f16`, `bf16` without cudarc's `f16` feature) can be
/// used. Views of it are `CudaView<K>`, as the algorithms take.
///
/// ```no_run
/// use half::f16;
/// use oxicub_algorithms::Cuda;
///
/// let cuda = Cuda::new(0)?;
/// let keys = cuda.upload_keys(&[f16::ONE, f16::NEG_INFINITY])?;
/// assert_eq!(keys.len(), 2);
/// let _view = keys.as_view();
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
#[derive(Debug)]
pub struct DeviceKeys<K: RadixKey> {
    bits: CudaSlice<K::Bits>,
    key: PhantomData<K>,
}

impl<K: RadixKey> DeviceKeys<K> {
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.bits.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }

    /// The keys as a device view of `K`.
    pub fn as_view(&self) -> CudaView<'_, K> {
        // SAFETY: `RadixKey` is sealed and implemented only for types with the size and
        // alignment of their `Bits`, for which every bit pattern is a valid value, so the same
        // memory read as `K` is valid; the length in `K`s equals the length in `Bits`.
        match unsafe { self.bits.transmute::<K>(self.bits.len()) } {
            Some(view) => view,
            None => unreachable!("K and K::Bits have the same size"),
        }
    }

    /// The keys as a writable device view of `K`.
    pub fn as_view_mut(&mut self) -> CudaViewMut<'_, K> {
        let len = self.bits.len();
        // SAFETY: as in `as_view`; any `K` written through the view is a valid `Bits`.
        match unsafe { self.bits.transmute_mut::<K>(len) } {
            Some(view) => view,
            None => unreachable!("K and K::Bits have the same size"),
        }
    }

    /// The raw bits.
    pub fn bits(&self) -> &CudaSlice<K::Bits> {
        &self.bits
    }

    /// Gives up the typing and returns the raw bits.
    pub fn into_bits(self) -> CudaSlice<K::Bits> {
        self.bits
    }
}

/// The backend picked at run time: [`Cuda`] on device 0 when a driver and a GPU are present,
/// else [`Host`]. Its algorithms take host slices; on CUDA they copy to the device, run there
/// and copy back, so code written against it runs anywhere.
///
/// ```
/// use oxicub_algorithms::{radix, AnyBackend};
///
/// let (backend, note) = AnyBackend::auto_explained();
/// println!("{note}");
/// let mut codes = [0u32; 3];
/// radix::transform_keys(&backend, &[1.0f32, -1.0, f32::NAN][..], &mut codes[..])?;
/// assert_eq!(codes[2], u32::MAX);
/// # Ok::<(), oxicub_algorithms::Error>(())
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
