//! Where a parameter's values are, as each backend reads them: the one trait for numeric
//! parameters ([`ValuesOn`]) and its twin for discrete ones ([`ChoicesOn`]), used by every
//! algorithm.
//!
//! A `Static` or `Uniform` value is one host value on every backend. A `PerSegment` or
//! `Deferred` value is read where the backend runs: from host slices (`&[i64]`, `&i64`) on
//! [`Host`] and [`AnyBackend`], from device views (`CudaView<i64>`) on [`Cuda`]. Per-segment
//! values may also be `i32` (`&[i32]`, `CudaView<i32>`), the width most engines hold them in:
//! the kernels widen them as they read, with no copy.

use cudarc::driver::CudaView;
use oxicub_params::{
    direction, order, Choice, Deferred, DiscreteParam, OptionSet, Param, PerSegment,
    PerSegmentChoice, SelectDirection, SortOrder, Static, Uniform,
};

use oxicub_params::role::{self, Role};

use super::{AnyBackend, Backend, Buffer, ByteOption, Cuda, Host};
use crate::sealed::Sealed;

impl<R: Role, const V: i64> Sealed for Static<R, V> {}
impl<R: Role, const MIN: i64, const MAX: i64> Sealed for Uniform<R, MIN, MAX> {}
impl<R: Role, S, const MIN: i64, const MAX: i64> Sealed for PerSegment<R, S, MIN, MAX> {}
impl<R: Role, S, const MIN: i64, const MAX: i64> Sealed for Deferred<R, S, MIN, MAX> {}
impl<Set: OptionSet> Sealed for Choice<Set> {}
impl<Set: OptionSet, S> Sealed for PerSegmentChoice<Set, S> {}
impl Sealed for direction::Max {}
impl Sealed for direction::Min {}
impl Sealed for order::Ascending {}
impl Sealed for order::Descending {}

/// Where the values of a numeric parameter are: `I` and `N` are the backend's buffers of
/// `i64`s and of `i32`s (`&[i64]` in host memory, `&CudaView<i64>` on [`Cuda`]).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum ParamValues<I, N> {
    /// One value, known on the host (`Static`, `Uniform`).
    Host(i64),
    /// One value per segment.
    PerSegment(I),
    /// One `i32` value per segment.
    PerSegment32(N),
    /// One value the host does not read: a one-element buffer, read in stream order.
    Deferred(I),
    /// No values, only bounds (segment sizes that a layout's offsets give).
    BoundsOnly,
}

/// [`ParamValues`] as backend `B` reads them.
pub type ParamValuesOn<'r, B> =
    ParamValues<<B as Backend>::Values<'r, i64>, <B as Backend>::Values<'r, i32>>;

impl<I, N> ParamValues<I, N> {
    /// The values, borrowed.
    pub(crate) fn as_ref(&self) -> ParamValues<&I, &N> {
        match self {
            ParamValues::Host(value) => ParamValues::Host(*value),
            ParamValues::PerSegment(values) => ParamValues::PerSegment(values),
            ParamValues::PerSegment32(values) => ParamValues::PerSegment32(values),
            ParamValues::Deferred(value) => ParamValues::Deferred(value),
            ParamValues::BoundsOnly => ParamValues::BoundsOnly,
        }
    }
}

impl<I: Buffer, N: Buffer> ParamValues<I, N> {
    /// The length of a per-segment buffer (either width); `None` for other values.
    pub(crate) fn per_segment_len(&self) -> Option<usize> {
        match self {
            ParamValues::PerSegment(values) => Some(values.len()),
            ParamValues::PerSegment32(values) => Some(values.len()),
            ParamValues::Host(_) | ParamValues::Deferred(_) | ParamValues::BoundsOnly => None,
        }
    }
}

impl ParamValues<&[i64], &[i32]> {
    /// Segment `at`'s value of a per-segment parameter in host memory (a host value is every
    /// segment's).
    pub(crate) fn at(&self, at: usize) -> i64 {
        match self {
            ParamValues::Host(value) => *value,
            ParamValues::PerSegment(values) => values[at],
            ParamValues::PerSegment32(values) => i64::from(values[at]),
            ParamValues::Deferred(_) | ParamValues::BoundsOnly => {
                unreachable!("a per-segment parameter has a value per segment (`PerSegmentOn`)")
            }
        }
    }
}

/// A numeric parameter whose values backend `B` can read: `Static` and `Uniform` on every
/// backend; `PerSegment` and `Deferred` over host memory on [`Host`] and [`AnyBackend`], over
/// device memory on [`Cuda`]; segment sizes as `PerSegment<()>` (bounds only: the sizes a
/// layout's offsets give) everywhere.
///
/// ```
/// use oxicub::{Host, ValuesOn};
/// use oxicub::params::k;
///
/// fn readable_on_host<P: ValuesOn<Host>>(_: &P) {}
/// let per_row = [8i64, 2, 4];
/// readable_on_host(&k::PerSegment::<_, 0, 8>::new(&per_row[..]));
/// let per_row_i32 = [8i32, 2, 4];
/// readable_on_host(&k::PerSegment::<_, 0, 8>::new(&per_row_i32[..]));
/// readable_on_host(&k::Static::<8>::new());
/// ```
///
/// Device memory cannot be read on the host backend, nor host memory on [`Cuda`]:
///
/// ```compile_fail
/// use oxicub::{Cuda, ValuesOn};
/// use oxicub::params::k;
///
/// fn readable_on_cuda<P: ValuesOn<Cuda>>(_: &P) {}
/// let per_row = [8i64, 2, 4];
/// readable_on_cuda(&k::PerSegment::<_, 0, 8>::new(&per_row[..]));
/// ```
#[diagnostic::on_unimplemented(
    message = "the `{B}` backend cannot read the values of `{Self}`",
    label = "its values are not where `{B}` runs",
    note = "per-segment and deferred values live where the backend runs: host slices (`&[i64]` \
            or `&[i32]`, `&i64`) on `Host` and `AnyBackend`, `CudaView<i64>` or \
            `CudaView<i32>` on `Cuda`; `Static` and `Uniform` values work on every backend"
)]
pub trait ValuesOn<B: Backend + ?Sized>: Param + Sealed {
    /// Where the values are.
    #[doc(hidden)]
    fn values(&self) -> ParamValuesOn<'_, B>;
}

impl<B: Backend + ?Sized, R: Role, const V: i64> ValuesOn<B> for Static<R, V> {
    fn values(&self) -> ParamValuesOn<'_, B> {
        ParamValues::Host(V)
    }
}

impl<B: Backend + ?Sized, R: Role, const MIN: i64, const MAX: i64> ValuesOn<B>
    for Uniform<R, MIN, MAX>
{
    fn values(&self) -> ParamValuesOn<'_, B> {
        ParamValues::Host(self.get())
    }
}

impl<B: Backend + ?Sized, const MIN: i64, const MAX: i64> ValuesOn<B>
    for PerSegment<role::SegmentSize, (), MIN, MAX>
{
    fn values(&self) -> ParamValuesOn<'_, B> {
        ParamValues::BoundsOnly
    }
}

macro_rules! host_memory_values {
    ($($backend:ty),*) => {$(
        impl<R: Role, const MIN: i64, const MAX: i64> ValuesOn<$backend>
            for PerSegment<R, &[i64], MIN, MAX>
        {
            fn values(&self) -> ParamValuesOn<'_, $backend> {
                ParamValues::PerSegment(self.source())
            }
        }
        impl<R: Role, const MIN: i64, const MAX: i64> ValuesOn<$backend>
            for PerSegment<R, &[i32], MIN, MAX>
        {
            fn values(&self) -> ParamValuesOn<'_, $backend> {
                ParamValues::PerSegment32(self.source())
            }
        }
        impl<R: Role, const MIN: i64, const MAX: i64> ValuesOn<$backend>
            for Deferred<R, &i64, MIN, MAX>
        {
            fn values(&self) -> ParamValuesOn<'_, $backend> {
                ParamValues::Deferred(std::slice::from_ref(*self.source()))
            }
        }
    )*};
}
host_memory_values!(Host, AnyBackend);

impl<R: Role, const MIN: i64, const MAX: i64> ValuesOn<Cuda>
    for PerSegment<R, CudaView<'_, i64>, MIN, MAX>
{
    fn values(&self) -> ParamValuesOn<'_, Cuda> {
        ParamValues::PerSegment(self.source())
    }
}

impl<R: Role, const MIN: i64, const MAX: i64> ValuesOn<Cuda>
    for PerSegment<R, CudaView<'_, i32>, MIN, MAX>
{
    fn values(&self) -> ParamValuesOn<'_, Cuda> {
        ParamValues::PerSegment32(self.source())
    }
}

impl<R: Role, const MIN: i64, const MAX: i64> ValuesOn<Cuda>
    for Deferred<R, CudaView<'_, i64>, MIN, MAX>
{
    fn values(&self) -> ParamValuesOn<'_, Cuda> {
        ParamValues::Deferred(self.source())
    }
}

/// A parameter with a value for every segment: one host value for all of them (`Static`,
/// `Uniform`), one value each (`PerSegment`), or only bounds (`PerSegment<()>`), readable on
/// backend `B`. Segment sizes and batched top-k's `k` are such parameters; a `Deferred` value is
/// not (it is one value the host does not read).
///
/// ```
/// use oxicub::{Host, PerSegmentOn};
/// use oxicub::params::segment_size;
///
/// fn sizes_on_host<P: PerSegmentOn<Host>>(_: &P) {}
/// sizes_on_host(&segment_size::Uniform::<1, 256>::new(64)?);
/// sizes_on_host(&segment_size::PerSegment::<_, 0, 256>::new(&[3i64, 64][..]));
/// # Ok::<(), oxicub::params::ParamError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not give a value for each segment that `{B}` can read",
    label = "a per-segment parameter",
    note = "per-segment parameters are `Static`, `Uniform` or `PerSegment` over the backend's \
            memory (`&[i64]` or `&[i32]` on `Host` and `AnyBackend`, `CudaView<i64>` or \
            `CudaView<i32>` on `Cuda`); a `Deferred` value is not one of them"
)]
pub trait PerSegmentOn<B: Backend + ?Sized>: ValuesOn<B> {}

impl<B: Backend + ?Sized, R: Role, const V: i64> PerSegmentOn<B> for Static<R, V> {}
impl<B: Backend + ?Sized, R: Role, const MIN: i64, const MAX: i64> PerSegmentOn<B>
    for Uniform<R, MIN, MAX>
{
}
impl<B, R, S, const MIN: i64, const MAX: i64> PerSegmentOn<B> for PerSegment<R, S, MIN, MAX>
where
    B: Backend + ?Sized,
    R: Role,
    Self: ValuesOn<B>,
{
}

/// Where the values of a discrete parameter (a select direction, a sort order) are: one option
/// known on the host, or one byte per segment (`option as u8`) in the backend's buffer type `I`.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum ChoiceValues<I, E> {
    /// The same option for every segment.
    Host(E),
    /// One byte per segment.
    PerSegment(I),
}

/// [`ChoiceValues`] as backend `B` reads them.
pub type ChoiceValuesOn<'r, B, E> = ChoiceValues<<B as Backend>::Values<'r, u8>, E>;

/// A discrete parameter whose values backend `B` can read: the static options
/// (`direction::Max`, `order::Ascending`, ...) and `Choice` on every backend; `PerSegment`
/// over host bytes or options (`&[u8]`, `&[SelectDirection]`) on [`Host`] and [`AnyBackend`],
/// over a `CudaView<u8>` on [`Cuda`].
///
/// ```
/// use oxicub::{ChoicesOn, Host};
/// use oxicub::params::{direction, SelectDirection};
///
/// fn readable_on_host<P: ChoicesOn<Host>>(_: &P) {}
/// let per_row = [SelectDirection::Max, SelectDirection::Min];
/// readable_on_host(&direction::PerSegment::<_>::new(&per_row[..]));
/// readable_on_host(&direction::Max);
/// ```
#[diagnostic::on_unimplemented(
    message = "the `{B}` backend cannot read the options of `{Self}`",
    label = "its options are not where `{B}` runs",
    note = "per-segment options live where the backend runs: `&[u8]` or a slice of the option \
            enum on `Host` and `AnyBackend`, `CudaView<u8>` on `Cuda`; static options and \
            `Choice` work on every backend"
)]
pub trait ChoicesOn<B: Backend + ?Sized>: DiscreteParam + Sealed {
    /// Where the options are.
    #[doc(hidden)]
    fn choices(&self) -> ChoiceValuesOn<'_, B, Self::Option>;
}

macro_rules! static_choice {
    ($($marker:ty),*) => {$(
        impl<B: Backend + ?Sized> ChoicesOn<B> for $marker {
            fn choices(&self) -> ChoiceValuesOn<'_, B, Self::Option> {
                match self.host_value() {
                    Some(option) => ChoiceValues::Host(option),
                    None => unreachable!("a static option is known on the host"),
                }
            }
        }
    )*};
}
static_choice!(
    direction::Max,
    direction::Min,
    order::Ascending,
    order::Descending
);

impl<B: Backend + ?Sized, Set: OptionSet> ChoicesOn<B> for Choice<Set> {
    fn choices(&self) -> ChoiceValuesOn<'_, B, Set::Option> {
        ChoiceValues::Host(self.get())
    }
}

macro_rules! host_memory_choices {
    ($($backend:ty),*) => {$(
        impl<Set: OptionSet> ChoicesOn<$backend> for PerSegmentChoice<Set, &[u8]> {
            fn choices(&self) -> ChoiceValuesOn<'_, $backend, Set::Option> {
                ChoiceValues::PerSegment(self.source())
            }
        }
        host_memory_choices!(@options $backend, SelectDirection, SortOrder);
    )*};
    (@options $backend:ty, $($option:ty),*) => {$(
        impl<Set: OptionSet<Option = $option>> ChoicesOn<$backend>
            for PerSegmentChoice<Set, &[$option]>
        {
            fn choices(&self) -> ChoiceValuesOn<'_, $backend, $option> {
                ChoiceValues::PerSegment(ByteOption::as_option_bytes(*self.source()))
            }
        }
    )*};
}
host_memory_choices!(Host, AnyBackend);

impl<Set: OptionSet> ChoicesOn<Cuda> for PerSegmentChoice<Set, CudaView<'_, u8>> {
    fn choices(&self) -> ChoiceValuesOn<'_, Cuda, Set::Option> {
        ChoiceValues::PerSegment(self.source())
    }
}
