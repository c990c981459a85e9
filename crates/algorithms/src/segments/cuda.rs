//! The segmented problem on [`Cuda`]: the arguments of an [`AnyBackend`](crate::AnyBackend)
//! call copied to the device. (A listed layout's views go to the kernel launcher as they are.)

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DeviceRepr};
use oxicub_kernels::families::{HostOrDevice, SelectedValues};
use oxicub_params::Bounds;

use super::{LayoutArg, Pending, SegmentArgs};
use crate::backend::{ChoiceValues, Cuda, DeviceValue, DeviceValues, ParamValues};
use crate::radix::RadixKey;
use crate::values::ValuesIn;
use crate::Error;

/// A numeric parameter as a kernel launcher takes it: one host value (0 for bounds only), or
/// its values in device memory (per segment, or one deferred value).
pub(crate) fn host_or_device<'a, 'b>(
    values: ParamValues<&'b CudaView<'a, i64>>,
) -> HostOrDevice<'a, 'b, i64, u64> {
    match values {
        ParamValues::Host(v) => HostOrDevice::Host(v as u64),
        ParamValues::PerSegment(view) | ParamValues::Deferred(view) => HostOrDevice::Device(view),
        ParamValues::BoundsOnly => HostOrDevice::Host(0),
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
    Deferred(CudaSlice<i64>),
    BoundsOnly,
}

impl ParamCopy {
    pub(crate) fn upload(cuda: &Cuda, values: ParamValues<&[i64]>) -> Result<Self, Error> {
        Ok(match values {
            ParamValues::Host(v) => ParamCopy::Host(v),
            ParamValues::PerSegment(v) => ParamCopy::PerSegment(copy(cuda, v)?),
            ParamValues::Deferred(v) => ParamCopy::Deferred(copy(cuda, v)?),
            ParamValues::BoundsOnly => ParamCopy::BoundsOnly,
        })
    }

    /// The device buffer's view, if there is one.
    pub(crate) fn view(&self) -> Option<CudaView<'_, i64>> {
        match self {
            ParamCopy::PerSegment(slice) | ParamCopy::Deferred(slice) => Some(slice.as_view()),
            ParamCopy::Host(_) | ParamCopy::BoundsOnly => None,
        }
    }

    /// The values as [`Cuda`] reads them; `view` is this copy's [`view`](Self::view).
    pub(crate) fn values<'r>(
        &self,
        view: &'r Option<CudaView<'r, i64>>,
    ) -> ParamValues<&'r CudaView<'r, i64>> {
        match (self, view) {
            (ParamCopy::Host(v), _) => ParamValues::Host(*v),
            (ParamCopy::PerSegment(_), Some(view)) => ParamValues::PerSegment(view),
            (ParamCopy::Deferred(_), Some(view)) => ParamValues::Deferred(view),
            (ParamCopy::BoundsOnly, _) => ParamValues::BoundsOnly,
            (ParamCopy::PerSegment(_) | ParamCopy::Deferred(_), None) => {
                unreachable!("a device copy has a view")
            }
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
    sizes: Option<CudaView<'a, i64>>,
    num_segments: Option<CudaView<'a, i64>>,
}

impl SegmentArgsCopy {
    /// Copies the arguments (the host backends join listed segments into offsets first).
    pub(crate) fn upload(cuda: &Cuda, args: &SegmentArgs<&[i64]>) -> Result<Self, Error> {
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
    ) -> SegmentArgs<&'r CudaView<'r, i64>> {
        let layout = match (&self.layout, &views.offsets) {
            (LayoutCopy::Strided(stride), _) => LayoutArg::Strided(*stride),
            (LayoutCopy::Offsets(..), Some((begin, end))) => LayoutArg::Offsets { begin, end },
            (LayoutCopy::Offsets(..), None) => unreachable!("a device copy has a view"),
        };
        SegmentArgs {
            layout,
            sizes: self.sizes.values(&views.sizes),
            num_segments: self.num_segments.values(&views.num_segments),
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
