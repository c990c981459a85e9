//! The segmented problem on [`Cuda`]: the arguments of an [`AnyBackend`](crate::AnyBackend)
//! call copied to the device. (A listed layout's views go to the kernel launcher as they are.)

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DeviceRepr};
use oxicub_kernels::families::{DeviceInts, HostOrDevice, SelectedValues};
use oxicub_params::Bounds;

use super::{LayoutArg, Pending, SegmentArgs};
use crate::backend::{ChoiceValues, Cuda, DeviceValue, DeviceValues, ParamValues};
use crate::radix::RadixKey;
use crate::values::ValuesIn;
use crate::Error;

/// A per-segment parameter (sizes, `k`) as a kernel launcher takes it: one host value (0 for
/// bounds only), or its values in device memory, in the width the caller holds them.
pub(crate) fn host_or_device<'a, 'b>(
    values: ParamValues<&'b CudaView<'a, i64>, &'b CudaView<'a, i32>>,
) -> HostOrDevice<DeviceInts<'a, 'b>, u64> {
    match values {
        ParamValues::Host(v) => HostOrDevice::Host(v as u64),
        ParamValues::PerSegment(view) => HostOrDevice::Device(DeviceInts::I64(view)),
        ParamValues::PerSegment32(view) => HostOrDevice::Device(DeviceInts::I32(view)),
        ParamValues::BoundsOnly => HostOrDevice::Host(0),
        ParamValues::Deferred(_) => unreachable!("a per-segment parameter is not deferred"),
    }
}

/// A single value (the number of segments, top-k's `k`) as a kernel launcher takes it: on the
/// host, or deferred (one `i64` in device memory).
pub(crate) fn single_host_or_device<'a, 'b>(
    values: ParamValues<&'b CudaView<'a, i64>, &'b CudaView<'a, i32>>,
) -> HostOrDevice<&'b CudaView<'a, i64>, u64> {
    match values {
        ParamValues::Host(v) => HostOrDevice::Host(v as u64),
        ParamValues::Deferred(view) => HostOrDevice::Device(view),
        ParamValues::PerSegment(_) | ParamValues::PerSegment32(_) | ParamValues::BoundsOnly => {
            unreachable!("a single value is one value (`SingleValue`)")
        }
    }
}

/// Bounds as a kernel launcher takes them (counts: negative bounds are 0).
pub(crate) fn launch_bounds(bounds: Bounds) -> (u64, u64) {
    (bounds.min.max(0) as u64, bounds.max.max(0) as u64)
}

/// Runs `run` with the launcher's form of a call's values: copied with the keys, each item's
/// index, or none (the keys-only call).
pub(crate) fn with_selected<V, R>(
    values: ValuesIn<CudaView<'_, V>, V>,
    out_values: Option<CudaViewMut<'_, V>>,
    run: impl FnOnce(SelectedValues<'_, '_, V>) -> R,
) -> R {
    match (values, out_values) {
        (ValuesIn::Copy(values), Some(mut out)) => run(SelectedValues::Copy {
            values: &values,
            out: &mut out,
        }),
        (ValuesIn::Index(_), Some(mut out)) => run(SelectedValues::Index { out: &mut out }),
        _ => run(SelectedValues::None),
    }
}

/// A host buffer copied to the device (one element when empty: the device allocates no empty
/// buffers, and an empty per-segment buffer is never read).
fn copy<T: DeviceRepr + Default>(cuda: &Cuda, values: &[T]) -> Result<CudaSlice<T>, Error> {
    if values.is_empty() {
        return cuda.upload(&[T::default()]);
    }
    cuda.upload(values)
}

/// A numeric parameter of an `AnyBackend` call with its values copied to the device.
pub(crate) enum ParamCopy {
    Host(i64),
    PerSegment(CudaSlice<i64>),
    PerSegment32(CudaSlice<i32>),
    Deferred(CudaSlice<i64>),
    BoundsOnly,
}

/// The device views of a [`ParamCopy`], which the values [`Cuda`] reads borrow.
pub(crate) type ParamViews<'a> = ParamValues<CudaView<'a, i64>, CudaView<'a, i32>>;

impl ParamCopy {
    pub(crate) fn upload(cuda: &Cuda, values: ParamValues<&[i64], &[i32]>) -> Result<Self, Error> {
        Ok(match values {
            ParamValues::Host(v) => ParamCopy::Host(v),
            ParamValues::PerSegment(v) => ParamCopy::PerSegment(copy(cuda, v)?),
            ParamValues::PerSegment32(v) => ParamCopy::PerSegment32(copy(cuda, v)?),
            ParamValues::Deferred(v) => ParamCopy::Deferred(copy(cuda, v)?),
            ParamValues::BoundsOnly => ParamCopy::BoundsOnly,
        })
    }

    /// The device buffers' views.
    pub(crate) fn view(&self) -> ParamViews<'_> {
        match self {
            ParamCopy::Host(v) => ParamValues::Host(*v),
            ParamCopy::PerSegment(slice) => ParamValues::PerSegment(slice.as_view()),
            ParamCopy::PerSegment32(slice) => ParamValues::PerSegment32(slice.as_view()),
            ParamCopy::Deferred(slice) => ParamValues::Deferred(slice.as_view()),
            ParamCopy::BoundsOnly => ParamValues::BoundsOnly,
        }
    }
}

/// A discrete parameter of an `AnyBackend` call with its per-segment bytes copied to the
/// device.
pub(crate) enum ChoiceCopy<E> {
    Host(E),
    PerSegment(CudaSlice<u8>),
}

impl<E: Copy> ChoiceCopy<E> {
    pub(crate) fn upload(cuda: &Cuda, values: ChoiceValues<&[u8], E>) -> Result<Self, Error> {
        Ok(match values {
            ChoiceValues::Host(option) => ChoiceCopy::Host(option),
            ChoiceValues::PerSegment(bytes) => ChoiceCopy::PerSegment(copy(cuda, bytes)?),
        })
    }

    pub(crate) fn view(&self) -> Option<CudaView<'_, u8>> {
        match self {
            ChoiceCopy::PerSegment(slice) => Some(slice.as_view()),
            ChoiceCopy::Host(_) => None,
        }
    }

    pub(crate) fn values<'r>(
        &self,
        view: &'r Option<CudaView<'r, u8>>,
    ) -> ChoiceValues<&'r CudaView<'r, u8>, E> {
        match (self, view) {
            (ChoiceCopy::Host(option), _) => ChoiceValues::Host(*option),
            (ChoiceCopy::PerSegment(_), Some(view)) => ChoiceValues::PerSegment(view),
            (ChoiceCopy::PerSegment(_), None) => unreachable!("a device copy has a view"),
        }
    }
}

/// A layout of an `AnyBackend` call with its offsets copied to the device.
enum LayoutCopy {
    Strided(u64),
    Offsets(CudaSlice<i64>, CudaSlice<i64>),
}

/// The segmented arguments of an `AnyBackend` call copied to the device.
pub(crate) struct SegmentArgsCopy {
    layout: LayoutCopy,
    sizes: ParamCopy,
    num_segments: ParamCopy,
}

/// The device views of a [`SegmentArgsCopy`], which its [`SegmentArgs`] borrow.
pub(crate) struct SegmentViews<'a> {
    offsets: Option<(CudaView<'a, i64>, CudaView<'a, i64>)>,
    sizes: ParamViews<'a>,
    num_segments: ParamViews<'a>,
}

impl SegmentArgsCopy {
    /// Copies the arguments (the host backends join listed segments into offsets first).
    pub(crate) fn upload(cuda: &Cuda, args: &SegmentArgs<&[i64], &[i32]>) -> Result<Self, Error> {
        let layout = match args.layout {
            LayoutArg::Strided(stride) => LayoutCopy::Strided(stride),
            LayoutArg::Offsets { begin, end } => {
                LayoutCopy::Offsets(copy(cuda, begin)?, copy(cuda, end)?)
            }
            LayoutArg::Listed => unreachable!("listed segments are joined before the copy"),
        };
        Ok(SegmentArgsCopy {
            layout,
            sizes: ParamCopy::upload(cuda, args.sizes)?,
            num_segments: ParamCopy::upload(cuda, args.num_segments)?,
        })
    }

    pub(crate) fn views(&self) -> SegmentViews<'_> {
        SegmentViews {
            offsets: match &self.layout {
                LayoutCopy::Offsets(begin, end) => Some((begin.as_view(), end.as_view())),
                LayoutCopy::Strided(_) => None,
            },
            sizes: self.sizes.view(),
            num_segments: self.num_segments.view(),
        }
    }

    /// The arguments as [`Cuda`] reads them; `views` are this copy's [`views`](Self::views).
    pub(crate) fn args<'r>(
        &self,
        views: &'r SegmentViews<'r>,
    ) -> SegmentArgs<&'r CudaView<'r, i64>, &'r CudaView<'r, i32>> {
        let layout = match (&self.layout, &views.offsets) {
            (LayoutCopy::Strided(stride), _) => LayoutArg::Strided(*stride),
            (LayoutCopy::Offsets(..), Some((begin, end))) => LayoutArg::Offsets { begin, end },
            (LayoutCopy::Offsets(..), None) => unreachable!("a device copy has a view"),
        };
        SegmentArgs {
            layout,
            sizes: views.sizes.as_ref(),
            num_segments: views.num_segments.as_ref(),
        }
    }
}

/// An [`AnyBackend`](crate::AnyBackend) call on the GPU: `run` gets device copies of the keys,
/// the values and the outputs (whose slots the call does not write must stay as they are); the
/// outputs are copied back and the outcome checked (the host had the data, so it waits
/// anyway; a failed check keeps `T::default()` beside its error). `keys` is not empty (the
/// device allocates no empty buffers).
pub(crate) fn on_device_copies<K, V, T, R>(
    cuda: &Cuda,
    keys: &[K],
    values: ValuesIn<&[V], V>,
    out_keys: &mut [K],
    out_values: Option<&mut [V]>,
    run: R,
) -> Result<Pending<T>, Error>
where
    K: RadixKey,
    V: DeviceValue,
    T: Default,
    R: FnOnce(
        CudaView<'_, K>,
        ValuesIn<CudaView<'_, V>, V>,
        CudaViewMut<'_, K>,
        Option<CudaViewMut<'_, V>>,
    ) -> Result<Pending<T>, Error>,
{
    let device_keys = cuda.upload_keys(keys)?;
    let mut device_out_keys = cuda.upload_keys(out_keys)?;
    let device_values = match &values {
        ValuesIn::Copy(values) => Some(cuda.upload_values(values)?),
        _ => None,
    };
    let mut device_out_values = match &out_values {
        Some(out) => Some(cuda.upload_values(out)?),
        None => None,
    };
    let device_in = match (&values, &device_values) {
        (ValuesIn::Copy(_), Some(v)) => ValuesIn::Copy(v.as_view()),
        (ValuesIn::Index(index), _) => ValuesIn::Index(*index),
        _ => ValuesIn::None,
    };
    let outcome = run(
        device_keys.as_view(),
        device_in,
        device_out_keys.as_view_mut(),
        device_out_values.as_mut().map(DeviceValues::as_view_mut),
    )?;
    let result = outcome.check();
    let written = cuda.download_keys(&device_out_keys)?;
    out_keys.copy_from_slice(&written);
    if let (Some(out), Some(device)) = (out_values, &device_out_values) {
        device.download_into(cuda, out)?;
    }
    Ok(match result {
        Ok(value) => Pending::ready(value, None),
        Err(error) => Pending::ready(T::default(), Some(error)),
    })
}
