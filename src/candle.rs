//! oxicub on [candle](https://docs.rs/candle-core) tensors (feature `candle`): top-k of a
//! tensor and of each row of one, read in place (no copy of the input) and returned as new
//! tensors on the input's device.
//!
//! * [`topk()`]: the `k` best items of a one-dimensional tensor, with their positions.
//! * [`batched_topk()`]: the `min(k, n)` best items of each row of a tensor whose last dimension
//!   is `n` (a MoE router's `[tokens x experts]` logits), with their positions in the row (the
//!   expert ids); the outputs have the input's shape with `min(k, n)` as the last dimension.
//! * [`sort()`]: each row sorted, with each item's position in its row (`torch.sort(x, dim=-1,
//!   stable=True)`).
//! * [`set_operation()`]: intersection, union, difference, symmetric difference or merge of two
//!   sorted one-dimensional tensors (`std::set_*`, repeated keys as multisets).
//!
//! Keys of every candle type but the 8-bit floats (`u8`, `u32`, `i16`, `i32`, `i64`, `f16`,
//! `bf16`, `f32`, `f64`); positions as `u32`, `i32` or `i64` (`I`, a [`Position`]). The results are those of
//! oxicub's default requirements: deterministic, ties to the smaller position, sorted from the
//! best (NaN above every number for `Max`, `-0.0` below `+0.0`).
//!
//! The input must be contiguous (a strided view is refused with [`Error::InvalidArgument`]
//! naming `.contiguous()`, never copied behind the caller's back). CPU tensors run on
//! [`Host`]. CUDA tensors (feature `candle-cuda`, which turns on candle's `cuda`) run on
//! [`Cuda`](oxicub_algorithms::Cuda) on the tensor's own stream: the keys are read where they
//! are, the outputs are new tensors on the same device, and a top-k waits for nothing (with a
//! host `k` and row length it has nothing to report from the device); a set operation waits
//! for the number of keys it wrote (the output's length). One kernel runtime serves each
//! candle CUDA device (`cuda_backend`, with `candle-cuda`: warm it up once). The calls allocate
//! their outputs, the new tensors, and their scratch on the device's stream.
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use oxicub::candle::batched_topk;
//! use oxicub::params::SelectDirection;
//!
//! // Two tokens, four experts: the top 2 of each row.
//! let logits = Tensor::new(&[[0.1f32, 0.9, 0.3, 0.9], [5.0, -1.0, 7.0, 6.0]], &Device::Cpu)?;
//! let (top, expert) = batched_topk::<u32>(&logits, 2, SelectDirection::Max)?;
//! assert_eq!(top.to_vec2::<f32>()?, [[0.9, 0.9], [7.0, 6.0]]);
//! assert_eq!(expert.to_vec2::<u32>()?, [[1, 3], [2, 3]]); // ties: the smaller index first
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use candle_core::{DType, Device, Shape, Storage, Tensor, WithDType};
use half::{bf16, f16};
use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::radix::RadixKey;
use oxicub_algorithms::sets::{self, SetOperation};
use oxicub_algorithms::{segmented_sort, topk as single, Error, Host, Pending, SourceIndex};
use oxicub_env::Env;
use oxicub_params::{
    direction, k as kp, num_segments, order, segment_size, SelectDirection, SortOrder,
};

/// Runs `$run` with the contiguous keys of `$x` (the argument `$arg`) where they are, as its
/// element type.
macro_rules! by_dtype {
    ($x:expr, $arg:expr, |$keys:ident| $run:expr) => {{
        let x: &Tensor = $x;
        let (storage, layout) = x.storage_and_layout();
        let (start, end) = contiguous(layout, $arg)?;
        let storage: &Storage = &storage;
        match x.dtype() {
            DType::U8 => by_dtype!(@run storage, x, start, end, u8, |$keys| $run),
            DType::U32 => by_dtype!(@run storage, x, start, end, u32, |$keys| $run),
            DType::I16 => by_dtype!(@run storage, x, start, end, i16, |$keys| $run),
            DType::I32 => by_dtype!(@run storage, x, start, end, i32, |$keys| $run),
            DType::I64 => by_dtype!(@run storage, x, start, end, i64, |$keys| $run),
            DType::F16 => by_dtype!(@run storage, x, start, end, f16, |$keys| $run),
            DType::BF16 => by_dtype!(@run storage, x, start, end, bf16, |$keys| $run),
            DType::F32 => by_dtype!(@run storage, x, start, end, f32, |$keys| $run),
            DType::F64 => by_dtype!(@run storage, x, start, end, f64, |$keys| $run),
            other => Err(Error::InvalidArgument {
                arg: $arg,
                reason: format!("{other:?} keys have no radix order in oxicub"),
            }),
        }
    }};
    (@run $storage:ident, $x:ident, $start:ident, $end:ident, $t:ty, |$keys:ident| $run:expr) => {{
        let $keys = keys_in::<$t>($storage, $x, $start, $end)?;
        $run
    }};
}

/// The keys `start..end` of tensor `x`'s storage, as `K`, where they are.
fn keys_in<'a, K: Key>(
    storage: &'a Storage,
    x: &'a Tensor,
    start: usize,
    end: usize,
) -> Result<Keys<'a, K>, Error> {
    match storage {
        Storage::Cpu(cpu) => {
            let all = cpu.as_slice::<K>().map_err(candle_error)?;
            Ok(Keys::Cpu(&all[start..end]))
        }
        #[cfg(feature = "candle-cuda")]
        Storage::Cuda(gpu) => {
            let Device::Cuda(device) = x.device() else {
                unreachable!("CUDA storage lives on a CUDA device")
            };
            let all = gpu.as_cuda_slice::<K>().map_err(candle_error)?;
            Ok(Keys::Cuda {
                keys: all.slice(start..end),
                device,
            })
        }
        #[allow(unreachable_patterns)]
        _ => Err(Error::InvalidArgument {
            arg: "tensor",
            reason: format!(
                "on {:?}: oxicub's candle functions take CPU tensors, and CUDA tensors with \
                 the `candle-cuda` feature",
                x.device()
            ),
        }),
    }
}

/// The contiguous range of the storage of the tensor `arg` it covers.
fn contiguous(layout: &candle_core::Layout, arg: &'static str) -> Result<(usize, usize), Error> {
    layout
        .contiguous_offsets()
        .ok_or_else(|| Error::InvalidArgument {
            arg,
            reason: "is not contiguous: call `.contiguous()` first (oxicub reads the tensor in \
                 place and copies nothing behind your back)"
                .to_owned(),
        })
}

/// The keys of a contiguous tensor, where they are.
enum Keys<'a, K> {
    /// In host memory.
    Cpu(&'a [K]),
    /// In device memory, on `device`'s stream.
    #[cfg(feature = "candle-cuda")]
    Cuda {
        keys: cudarc::driver::CudaView<'a, K>,
        device: &'a candle_core::CudaDevice,
    },
}

/// A candle failure, as oxicub's error naming the tensor.
fn candle_error(error: candle_core::Error) -> Error {
    Error::InvalidArgument {
        arg: "tensor",
        reason: format!("candle: {error}"),
    }
}

/// The `k` best items of the one-dimensional tensor `x` (`k` at most its length), in order
/// from the best, and their positions in `x`.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use oxicub::params::SelectDirection;
///
/// let scores = Tensor::new(&[3i64, -7, 12, 0], &Device::Cpu)?;
/// let (low, at) = oxicub::candle::topk::<i64>(&scores, 2, SelectDirection::Min)?;
/// assert_eq!((low.to_vec1::<i64>()?, at.to_vec1::<i64>()?), (vec![-7, 0], vec![1, 3]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn topk<I: Position>(
    x: &Tensor,
    k: usize,
    direction: SelectDirection,
) -> Result<(Tensor, Tensor), Error> {
    if x.rank() != 1 {
        return Err(Error::InvalidArgument {
            arg: "tensor",
            reason: format!(
                "top-k takes a one-dimensional tensor, not one of shape {:?} (batched_topk \
                 takes each row of the last dimension)",
                x.dims()
            ),
        });
    }
    by_dtype!(x, "tensor", |keys| select::<_, I>(keys, k, direction))
}

/// The `min(k, n)` best items of each row of `x` (its last dimension, of length `n`), each row
/// in order from the best, and their positions in the row; both of `x`'s shape with `min(k, n)`
/// as the last dimension.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use oxicub::params::SelectDirection;
///
/// let x = Tensor::new(&[[[1f32, 4.0, 2.0]], [[8.0, 8.0, -1.0]]], &Device::Cpu)?; // [2, 1, 3]
/// let (top, at) = oxicub::candle::batched_topk::<i32>(&x, 5, SelectDirection::Max)?; // k above n
/// assert_eq!(top.dims(), [2, 1, 3]);
/// assert_eq!(at.flatten_all()?.to_vec1::<i32>()?, [1, 2, 0, 0, 1, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn batched_topk<I: Position>(
    x: &Tensor,
    k: usize,
    direction: SelectDirection,
) -> Result<(Tensor, Tensor), Error> {
    let Some((&n, outer)) = x.dims().split_last() else {
        return Err(Error::InvalidArgument {
            arg: "tensor",
            reason: "batched top-k takes rows: a tensor of at least one dimension".to_owned(),
        });
    };
    let mut shape = outer.to_vec();
    shape.push(k.min(n));
    by_dtype!(x, "tensor", |keys| select_rows::<_, I>(
        keys, n, k, direction, &shape
    ))
}

/// Each row of `x` (its last dimension) sorted in `order`, stably (equal keys keep their
/// order), and each item's position in its row; both of `x`'s shape.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use oxicub::params::SortOrder;
///
/// let x = Tensor::new(&[[0.5f32, 0.9, 0.1], [7.0, 7.0, 8.0]], &Device::Cpu)?;
/// let (sorted, at) = oxicub::candle::sort::<i64>(&x, SortOrder::Descending)?;
/// assert_eq!(sorted.to_vec2::<f32>()?, [[0.9, 0.5, 0.1], [8.0, 7.0, 7.0]]);
/// assert_eq!(at.to_vec2::<i64>()?, [[1, 0, 2], [2, 0, 1]]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn sort<I: Position>(x: &Tensor, order: SortOrder) -> Result<(Tensor, Tensor), Error> {
    let Some(&n) = x.dims().last() else {
        return Err(Error::InvalidArgument {
            arg: "tensor",
            reason: "a sort takes rows: a tensor of at least one dimension".to_owned(),
        });
    };
    by_dtype!(x, "tensor", |keys| sort_rows::<_, I>(
        keys,
        n,
        order,
        x.dims()
    ))
}

/// The keys of `operation` over the one-dimensional tensors `a` and `b`, both sorted in `order`
/// (repeated keys count as in a multiset: `std::set_*`), as a new tensor on their device. A
/// key out of order is [`Error::NotSorted`]. On a CUDA tensor the call waits for the number of
/// keys written (the output's length; its storage holds the most the operation can write).
///
/// ```
/// use candle_core::{Device, Tensor};
/// use oxicub::params::SortOrder;
/// use oxicub::sets::op;
///
/// let a = Tensor::new(&[1u32, 3, 3, 7], &Device::Cpu)?;
/// let b = Tensor::new(&[3u32, 4, 7], &Device::Cpu)?;
/// let both = oxicub::candle::set_operation(op::Intersection, SortOrder::Ascending, &a, &b)?;
/// assert_eq!(both.to_vec1::<u32>()?, [3, 7]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn set_operation<Op: SetOperation>(
    operation: Op,
    order: SortOrder,
    a: &Tensor,
    b: &Tensor,
) -> Result<Tensor, Error> {
    for (arg, x) in [("a", a), ("b", b)] {
        if x.rank() != 1 {
            return Err(Error::InvalidArgument {
                arg,
                reason: format!(
                    "a set operation takes one-dimensional tensors, not one of shape {:?}",
                    x.dims()
                ),
            });
        }
    }
    if a.dtype() != b.dtype() || !a.device().same_device(b.device()) {
        return Err(Error::InvalidArgument {
            arg: "b",
            reason: format!(
                "holds {:?} on {:?}, a holds {:?} on {:?}: both must be of one type on one device",
                b.dtype(),
                b.device(),
                a.dtype(),
                a.device()
            ),
        });
    }
    let (b_storage, b_layout) = b.storage_and_layout();
    let (b_start, b_end) = contiguous(b_layout, "b")?;
    let b_storage: &Storage = &b_storage;
    by_dtype!(a, "a", |keys| {
        let b_keys = keys_in(b_storage, b, b_start, b_end)?;
        set_keys(operation, order, keys, b_keys)
    })
}

/// Rows of `n` sorted where the keys are, into new tensors of `shape` there.
fn sort_rows<K: Key, I: Position>(
    keys: Keys<'_, K>,
    n: usize,
    sort_order: SortOrder,
    shape: &[usize],
) -> Result<(Tensor, Tensor), Error> {
    let len = keys.len();
    let problem = segmented_sort::Problem::strided(
        n,
        segment_size::uniform(n as i64)?,
        order::Choice::<order::Either>::new(sort_order)?,
        num_segments::rows(len, n.max(1))?,
    );
    match keys {
        Keys::Cpu(keys) => {
            let (mut sorted, mut at) = (vec![K::from_f64(0.0); len], vec![I::from_f64(0.0); len]);
            segmented_sort::sort_indices(
                &Host::new(),
                &problem,
                keys,
                &mut sorted[..],
                &mut at[..],
                &Env::new(),
            )
            .and_then(Pending::check)?;
            Ok((cpu_tensor(sorted, shape)?, cpu_tensor(at, shape)?))
        }
        #[cfg(feature = "candle-cuda")]
        Keys::Cuda { keys, device } => {
            let cuda = on_device(device)?;
            let (mut sorted, mut at) = (alloc::<K>(&cuda, len)?, alloc::<I>(&cuda, len)?);
            segmented_sort::sort_indices(
                &cuda,
                &problem,
                keys,
                sorted.slice_mut(..len),
                at.slice_mut(..len),
                &Env::new(),
            )
            .and_then(Pending::check)?;
            Ok((
                cuda_tensor(sorted, shape, device),
                cuda_tensor(at, shape, device),
            ))
        }
    }
}

/// A set operation where the keys are, into a new one-dimensional tensor there.
fn set_keys<K: Key, Op: SetOperation>(
    operation: Op,
    sort_order: SortOrder,
    a: Keys<'_, K>,
    b: Keys<'_, K>,
) -> Result<Tensor, Error> {
    let order = order::Choice::<order::Either>::new(sort_order)?;
    let bound = operation.bound(a.len() as u64, b.len() as u64) as usize;
    match (a, b) {
        (Keys::Cpu(a), Keys::Cpu(b)) => {
            let mut out = vec![K::from_f64(0.0); bound];
            let n = sets::keys(
                &Host::new(),
                operation,
                order,
                a,
                b,
                &mut out[..],
                &Env::new(),
            )
            .and_then(Pending::check)?;
            out.truncate(n);
            cpu_tensor(out, n)
        }
        #[cfg(feature = "candle-cuda")]
        (Keys::Cuda { keys: a, device }, Keys::Cuda { keys: b, .. }) => {
            let cuda = on_device(device)?;
            let mut out = alloc::<K>(&cuda, bound)?;
            let n = sets::keys(
                &cuda,
                operation,
                order,
                a,
                b,
                out.slice_mut(..bound),
                &Env::new(),
            )
            .and_then(Pending::check)?;
            Ok(cuda_tensor(out, n, device))
        }
        #[allow(unreachable_patterns)]
        _ => unreachable!("both tensors are on one device (checked)"),
    }
}

impl<K> Keys<'_, K> {
    /// The number of keys.
    fn len(&self) -> usize {
        match self {
            Keys::Cpu(keys) => keys.len(),
            #[cfg(feature = "candle-cuda")]
            Keys::Cuda { keys, .. } => keys.len(),
        }
    }
}

/// Single-problem top-k where the keys are, into new tensors there.
fn select<K: Key, I: Position>(
    keys: Keys<'_, K>,
    k: usize,
    direction: SelectDirection,
) -> Result<(Tensor, Tensor), Error> {
    let choice = direction::Choice::<direction::Either>::new(direction)?;
    let k_param = kp::uniform(k as i64)?;
    match keys {
        Keys::Cpu(keys) => {
            let mut top = vec![K::from_f64(0.0); k];
            let mut at = vec![I::from_f64(0.0); k];
            single::select_indices(
                &Host::new(),
                &choice,
                keys,
                &mut top[..],
                &mut at[..],
                &k_param,
                &Env::new(),
            )
            .and_then(Pending::check)?;
            Ok((cpu_tensor(top, k)?, cpu_tensor(at, k)?))
        }
        #[cfg(feature = "candle-cuda")]
        Keys::Cuda { keys, device } => {
            let cuda = on_device(device)?;
            let (mut top, mut at) = (alloc::<K>(&cuda, k)?, alloc::<I>(&cuda, k)?);
            single::select_indices(
                &cuda,
                &choice,
                keys,
                top.as_view_mut(),
                at.as_view_mut(),
                &k_param,
                &Env::new(),
            )
            .and_then(Pending::check)?;
            Ok((cuda_tensor(top, k, device), cuda_tensor(at, k, device)))
        }
    }
}

/// Batched top-k over rows of `n` where the keys are, into new tensors of `shape` there.
fn select_rows<K: Key, I: Position>(
    keys: Keys<'_, K>,
    n: usize,
    k: usize,
    direction: SelectDirection,
    shape: &[usize],
) -> Result<(Tensor, Tensor), Error> {
    let written = k.min(n);
    let rows = num_segments::rows(keys.len(), n.max(1))?;
    let out_len = rows.get() as usize * written;
    let problem = Problem::strided(
        n,
        segment_size::uniform(n as i64)?,
        kp::uniform(k as i64)?,
        direction::Choice::<direction::Either>::new(direction)?,
        rows,
    )
    .out_stride(written);
    match keys {
        Keys::Cpu(keys) => {
            let (mut top, mut at) = (
                vec![K::from_f64(0.0); out_len],
                vec![I::from_f64(0.0); out_len],
            );
            if out_len > 0 {
                batched_topk::select_indices(
                    &Host::new(),
                    &problem,
                    keys,
                    &mut top[..],
                    &mut at[..],
                    &Env::new(),
                )
                .and_then(Pending::check)?;
            }
            Ok((cpu_tensor(top, shape)?, cpu_tensor(at, shape)?))
        }
        #[cfg(feature = "candle-cuda")]
        Keys::Cuda { keys, device } => {
            let cuda = on_device(device)?;
            let (mut top, mut at) = (alloc::<K>(&cuda, out_len)?, alloc::<I>(&cuda, out_len)?);
            if out_len > 0 {
                batched_topk::select_indices(
                    &cuda,
                    &problem,
                    keys,
                    top.as_view_mut(),
                    at.as_view_mut(),
                    &Env::new(),
                )
                .and_then(Pending::check)?;
            }
            Ok((
                cuda_tensor(top, shape, device),
                cuda_tensor(at, shape, device),
            ))
        }
    }
}

/// A new CPU tensor of `shape` holding `values`.
fn cpu_tensor<T: WithDType>(values: Vec<T>, shape: impl Into<Shape>) -> Result<Tensor, Error> {
    Tensor::from_vec(values, shape, &Device::Cpu).map_err(candle_error)
}

/// A key type oxicub's candle functions take: a candle type with a radix order (on CUDA
/// tensors also one candle keeps on the device).
#[cfg(not(feature = "candle-cuda"))]
trait Key: RadixKey + WithDType {}
#[cfg(not(feature = "candle-cuda"))]
impl<K: RadixKey + WithDType> Key for K {}
#[cfg(feature = "candle-cuda")]
trait Key: RadixKey + WithDType + cuda_tensors::OnDevice {}
#[cfg(feature = "candle-cuda")]
impl<K: RadixKey + WithDType + cuda_tensors::OnDevice> Key for K {}

/// A position type the candle functions write: `u32`, `i32` or `i64` (a candle type oxicub
/// writes indices in; with `candle-cuda`, also one candle keeps in CUDA storage).
#[cfg(not(feature = "candle-cuda"))]
pub trait Position: SourceIndex + WithDType {}
#[cfg(not(feature = "candle-cuda"))]
impl<I: SourceIndex + WithDType> Position for I {}
/// A position type the candle functions write: `u32`, `i32` or `i64` (a candle type oxicub
/// writes indices in; with `candle-cuda`, also one candle keeps in CUDA storage).
#[cfg(feature = "candle-cuda")]
pub trait Position:
    SourceIndex
    + WithDType
    + candle_core::cuda::CudaDType
    + cudarc::driver::DeviceRepr
    + cudarc::driver::ValidAsZeroBits
{
}
#[cfg(feature = "candle-cuda")]
impl<I> Position for I where
    I: SourceIndex
        + WithDType
        + candle_core::cuda::CudaDType
        + cudarc::driver::DeviceRepr
        + cudarc::driver::ValidAsZeroBits
{
}

#[cfg(feature = "candle-cuda")]
pub use cuda_tensors::cuda_backend;
#[cfg(feature = "candle-cuda")]
use cuda_tensors::{alloc, cuda_tensor, on_device};

/// CUDA tensors (feature `candle-cuda`): the backend of a candle device and the outputs as
/// candle tensors.
#[cfg(feature = "candle-cuda")]
mod cuda_tensors {
    use std::sync::{Arc, Mutex, PoisonError};

    use candle_core::cuda::CudaDType;
    use candle_core::op::BackpropOp;
    use candle_core::{CudaDevice, CudaStorage, Shape, Storage, Tensor};
    use cudarc::driver::{CudaSlice, DeviceRepr, ValidAsZeroBits};
    use oxicub_algorithms::{Cuda, Error};

    /// A type candle keeps in CUDA storage that oxicub can allocate there.
    pub(super) trait OnDevice: CudaDType + DeviceRepr + ValidAsZeroBits {}
    impl<T: CudaDType + DeviceRepr + ValidAsZeroBits> OnDevice for T {}

    /// The oxicub backend of a candle CUDA device, on the device's stream. Every call on one
    /// device shares one kernel runtime (its loaded modules, its cache and its health), made on
    /// first use and kept for the process: warm it up ([`Cuda::warm_up`]) and the candle
    /// functions' calls on that device load nothing. The runtime is kept per cudarc context:
    /// each `Device::new_cuda` makes a new one, so create the device once (as candle's own
    /// kernels expect).
    ///
    /// ```no_run
    /// use candle_core::Device;
    ///
    /// let Device::Cuda(gpu) = Device::new_cuda(0)? else { unreachable!() };
    /// let cuda = oxicub::candle::cuda_backend(&gpu)?;
    /// println!("oxicub on {cuda}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cuda_backend(device: &CudaDevice) -> Result<Cuda, Error> {
        static BACKENDS: Mutex<Vec<Cuda>> = Mutex::new(Vec::new());
        let stream = device.cuda_stream();
        let mut backends = BACKENDS.lock().unwrap_or_else(PoisonError::into_inner);
        let same_context = |cuda: &&Cuda| Arc::ptr_eq(cuda.stream().context(), stream.context());
        if let Some(cuda) = backends.iter().find(same_context) {
            return cuda.on_stream(stream);
        }
        let cuda = Cuda::from_stream(stream)?;
        backends.push(cuda.clone());
        Ok(cuda)
    }

    /// The backend of the device the keys are on.
    pub(super) fn on_device(device: &CudaDevice) -> Result<Cuda, Error> {
        cuda_backend(device)
    }

    /// `len` zeroed elements on the backend's stream (at least one: candle's storage of an
    /// empty tensor is still a buffer).
    pub(super) fn alloc<T: OnDevice>(cuda: &Cuda, len: usize) -> Result<CudaSlice<T>, Error> {
        cuda.alloc_zeros(len.max(1))
    }

    /// A device buffer as a candle tensor of `shape` on `device` (no copy).
    pub(super) fn cuda_tensor<T: OnDevice>(
        slice: CudaSlice<T>,
        shape: impl Into<Shape>,
        device: &CudaDevice,
    ) -> Tensor {
        let storage = CudaStorage::wrap_cuda_slice(slice, device.clone());
        Tensor::from_storage(Storage::Cuda(storage), shape, BackpropOp::none(), false)
    }
}
