//! Top-k on the GPU through the `topk_radix_select` kernel family, and on [`AnyBackend`]
//! (host, or copies to and from the GPU).

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use oxicub_env::{Determinism, OutputOrdering, TieBreak};
use oxicub_kernels::families::topk_radix_select::{topk_radix_select, TopKCount, TopKPlan};
use oxicub_kernels::families::SelectedValues;
use oxicub_kernels::Direction;
use oxicub_params::SelectDirection;

use super::host::resolve_k;
use super::{KArg, Request, TopKBackend, ValuesIn};
use crate::backend::{AnyBackend, Cuda, DeviceKeys};
use crate::error::driver_error;
use crate::radix::RadixKey;
use crate::Error;

/// Values of type `V` (4 or 8 bytes) on the device, as returned by the `*_owned` top-k
/// functions on [`Cuda`]. Stored as 32-bit words, so any such `V` works without cudarc's
/// `DeviceRepr`. With a deferred `k`, the slots past the number written hold zero bits.
///
/// ```no_run
/// use oxicub_algorithms::{topk, Cuda};
/// use oxicub_params::{direction, k};
///
/// let cuda = Cuda::new(0)?;
/// let keys = cuda.upload(&[3u32, 9, 1])?;
/// let (top, at) = topk::select_indices_owned::<_, _, _, u64, _, _>(&cuda, &direction::Max, keys.as_view(), &k::Static::<2>::new(), &oxicub_env::Env::new())?;
/// assert_eq!(cuda.download(&at.as_view())?, [1, 0]);
/// # let _ = top;
/// # Ok::<(), oxicub_algorithms::Error>(())
/// ```
#[derive(Debug)]
pub struct DeviceValues<V> {
    words: CudaSlice<u32>,
    len: usize,
    value: PhantomData<V>,
}

impl<V> DeviceValues<V> {
    fn alloc(cuda: &Cuda, len: usize) -> Result<DeviceValues<V>, Error> {
        let words = (len * std::mem::size_of::<V>()).div_ceil(4).max(1);
        Ok(DeviceValues {
            words: cuda.alloc_zeros::<u32>(words)?,
            len,
            value: PhantomData,
        })
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The values as a device view of `V`.
    pub fn as_view(&self) -> CudaView<'_, V> {
        // SAFETY: the words hold `len` values of `V` written by the top-k kernel as bit copies
        // of valid `V`s (or zero bits past the count written, as documented); the allocation
        // has at least `len * size_of::<V>()` bytes and is 256-byte aligned.
        match unsafe { self.words.transmute::<V>(self.len) } {
            Some(view) => view,
            None => unreachable!("the allocation holds len values"),
        }
    }

    /// The values as a writable device view of `V`.
    pub fn as_view_mut(&mut self) -> CudaViewMut<'_, V> {
        // SAFETY: as in `as_view`.
        match unsafe { self.words.transmute_mut::<V>(self.len) } {
            Some(view) => view,
            None => unreachable!("the allocation holds len values"),
        }
    }
}

fn plan<'a>(request: &Request, k: KArg<'a>) -> Result<TopKPlan<'a>, Error> {
    let k = match k {
        KArg::Host(value) => TopKCount::Host(value),
        KArg::Device(value) => TopKCount::Deferred {
            value,
            min: request.k_bounds.0,
            max: request.k_bounds.1,
        },
        KArg::HostRef(value) => TopKCount::Host(resolve_k(request, KArg::HostRef(value)) as u64),
    };
    Ok(TopKPlan {
        direction: match request.direction {
            SelectDirection::Max => Direction::Descending,
            SelectDirection::Min => Direction::Ascending,
        },
        prefer_larger_index: request.requirements.tie_break == TieBreak::PreferLargerIndex,
        deterministic: request.requirements.determinism != Determinism::NotGuaranteed,
        // One item (or none) is already sorted.
        sorted: request.requirements.ordering != OutputOrdering::Unsorted
            && !matches!(k, TopKCount::Host(0 | 1)),
        k,
        max_written: request.max_written,
    })
}

impl TopKBackend for Cuda {
    type OwnedKeys<K: RadixKey> = DeviceKeys<K>;
    type OwnedValues<V: Copy + Send + Sync + 'static> = DeviceValues<V>;

    fn topk_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: Request,
        k: KArg<'_>,
        keys: CudaView<'_, K>,
        values: ValuesIn<CudaView<'_, V>, V>,
        mut out_keys: CudaViewMut<'_, K>,
        out_values: Option<CudaViewMut<'_, V>>,
    ) -> Result<(), Error> {
        let plan = plan(&request, k)?;
        let (runtime, stream) = (self.runtime(), self.stream());
        match (values, out_values) {
            (ValuesIn::Copy(values), Some(mut out)) => {
                let values = SelectedValues::Copy {
                    values: &values,
                    out: &mut out,
                };
                topk_radix_select(runtime, stream, plan, &keys, &mut out_keys, values)?
            }
            (ValuesIn::Index(_), Some(mut out)) => {
                let values = SelectedValues::Index { out: &mut out };
                topk_radix_select(runtime, stream, plan, &keys, &mut out_keys, values)?
            }
            _ => {
                let values = SelectedValues::<V>::None;
                topk_radix_select(runtime, stream, plan, &keys, &mut out_keys, values)?
            }
        }
        Ok(())
    }

    fn topk_owned_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: Request,
        k: KArg<'_>,
        keys: CudaView<'_, K>,
        values: ValuesIn<CudaView<'_, V>, V>,
    ) -> Result<(DeviceKeys<K>, Option<DeviceValues<V>>), Error> {
        let len = match k {
            KArg::Host(_) | KArg::HostRef(_) => resolve_k(&request, k),
            KArg::Device(_) => request.max_written as usize,
        };
        let mut out_keys = self.alloc_keys::<K>(len)?;
        let mut out_values = match values {
            ValuesIn::None => None,
            ValuesIn::Copy(_) | ValuesIn::Index(_) => Some(DeviceValues::<V>::alloc(self, len)?),
        };
        let out_view = out_values.as_mut().map(DeviceValues::as_view_mut);
        self.topk_checked(request, k, keys, values, out_keys.as_view_mut(), out_view)?;
        Ok((out_keys, out_values))
    }
}

/// On CUDA, [`AnyBackend`] copies the inputs to the device, runs there and copies the results
/// back (waiting for them).
impl TopKBackend for AnyBackend {
    type OwnedKeys<K: RadixKey> = Vec<K>;
    type OwnedValues<V: Copy + Send + Sync + 'static> = Vec<V>;

    fn topk_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: Request,
        k: KArg<'_>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
        out_keys: &mut [K],
        out_values: Option<&mut [V]>,
    ) -> Result<(), Error> {
        match self {
            AnyBackend::Host(host) => {
                host.topk_checked(request, k, keys, values, out_keys, out_values)
            }
            AnyBackend::Cuda(_) => {
                let (top_keys, top_values) = self.topk_owned_checked(request, k, keys, values)?;
                out_keys[..top_keys.len()].copy_from_slice(&top_keys);
                if let (Some(out), Some(top)) = (out_values, top_values) {
                    out[..top.len()].copy_from_slice(&top);
                }
                Ok(())
            }
        }
    }

    fn topk_owned_checked<K: RadixKey, V: Copy + Send + Sync + 'static>(
        &self,
        request: Request,
        k: KArg<'_>,
        keys: &[K],
        values: ValuesIn<&[V], V>,
    ) -> Result<(Vec<K>, Option<Vec<V>>), Error> {
        let cuda = match self {
            AnyBackend::Host(host) => return host.topk_owned_checked(request, k, keys, values),
            AnyBackend::Cuda(cuda) => cuda,
        };
        // A deferred k in host memory is read here: the host knows it.
        let count = resolve_k(&request, k);
        let device_keys = cuda.upload_keys(keys)?;
        let device_values = match &values {
            ValuesIn::Copy(values) => Some(upload_values(cuda, values)?),
            _ => None,
        };
        let device_in = match (&values, &device_values) {
            (ValuesIn::Copy(_), Some(v)) => ValuesIn::Copy(v.as_view()),
            (ValuesIn::Index(index), _) => ValuesIn::Index(*index),
            _ => ValuesIn::None,
        };
        let (top_keys, top_values) = cuda.topk_owned_checked(
            request,
            KArg::Host(count as u64),
            device_keys.as_view(),
            device_in,
        )?;
        let top_keys = cuda.download_keys(&top_keys)?;
        let top_values = match top_values {
            Some(top) => Some(download_values(cuda, &top)?),
            None => None,
        };
        Ok((top_keys, top_values))
    }
}

fn upload_values<V: Copy>(cuda: &Cuda, values: &[V]) -> Result<DeviceValues<V>, Error> {
    let mut device = DeviceValues::<V>::alloc(cuda, values.len())?;
    let words = bytes_as_words(values);
    cuda.stream()
        .memcpy_htod(&words, &mut device.words)
        .map_err(driver_error("cuMemcpyHtoDAsync"))?;
    Ok(device)
}

fn download_values<V: Copy>(cuda: &Cuda, values: &DeviceValues<V>) -> Result<Vec<V>, Error> {
    let words = cuda.download(&values.words.as_view())?;
    Ok(words_as_values(&words, values.len))
}

/// The bytes of `values` as 32-bit words (zero padded).
fn bytes_as_words<V: Copy>(values: &[V]) -> Vec<u32> {
    let bytes = std::mem::size_of_val(values);
    let mut words = vec![0u32; bytes.div_ceil(4).max(1)];
    // SAFETY: `words` has at least `bytes` bytes; the regions do not overlap;
    // `V` is `Copy`, so copying its bytes is a valid bitwise copy.
    unsafe {
        std::ptr::copy_nonoverlapping(
            values.as_ptr().cast::<u8>(),
            words.as_mut_ptr().cast::<u8>(),
            bytes,
        );
    }
    words
}

/// The first `len` values of type `V` stored in `words` (bit copies written by the kernel).
fn words_as_values<V: Copy>(words: &[u32], len: usize) -> Vec<V> {
    let size = std::mem::size_of::<V>();
    assert!(words.len() * 4 >= len * size, "the words hold len values");
    let mut values = Vec::<V>::with_capacity(len);
    // SAFETY: the source has at least `len * size` bytes (checked above), the destination has
    // capacity for `len` values; the bytes are bit copies of valid `V`s made by the kernel from
    // the caller's values, so after the copy the first `len` elements are initialised.
    unsafe {
        std::ptr::copy_nonoverlapping(
            words.as_ptr().cast::<u8>(),
            values.as_mut_ptr().cast::<u8>(),
            len * size,
        );
        values.set_len(len);
    }
    values
}
