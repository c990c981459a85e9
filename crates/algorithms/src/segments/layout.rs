//! Segment layouts: where segment `i` lies in the keys.

use crate::backend::{AnyBackend, Backend, Cuda, Host};
use cudarc::driver::CudaView;

/// The strided layout: segment `i` starts at `keys[i * stride]` (the rows of a
/// `[rows x stride]` matrix, each possibly only partly used).
///
/// ```
/// use oxicub::segments::Strided;
///
/// assert_eq!(Strided::new(256).stride(), 256);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strided {
    stride: u64,
}

impl Strided {
    /// Segment `i` starts at `i * stride`.
    pub fn new(stride: usize) -> Strided {
        Strided {
            stride: stride as u64,
        }
    }

    /// The distance between the starts of consecutive segments.
    pub fn stride(&self) -> u64 {
        self.stride
    }
}

/// The offsets layout: segment `i` is `keys[begin[i] .. end[i]]` (offsets as `i64`, in host
/// slices on [`Host`] and [`AnyBackend`], in `CudaView`s on [`Cuda`]).
#[derive(Clone, Copy, Debug)]
pub struct Offsets<O> {
    pub(crate) begin: O,
    pub(crate) end: O,
}

impl<O> Offsets<O> {
    /// Segment `i` is `keys[begin[i] .. end[i]]`.
    pub fn new(begin: O, end: O) -> Offsets<O> {
        Offsets { begin, end }
    }
}

/// The listed layout: segment `i` is the `i`-th slice of a list passed with the call (on
/// [`Cuda`], `CudaView`s of any allocations: the seeds' iterator of iterators).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Listed {
    _private: (),
}

/// Where segment `i` starts; `I` is the buffer type of the backend that reads the offsets.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum LayoutArg<I> {
    /// At `i * stride`.
    Strided(u64),
    /// At `begin[i]`, ending at `end[i]`.
    Offsets {
        /// Begin offsets.
        begin: I,
        /// End offsets.
        end: I,
    },
    /// Each segment is its own slice, passed beside the problem.
    Listed,
}

/// [`LayoutArg`] as backend `B` reads it.
pub type LayoutArgOn<'r, B> = LayoutArg<<B as Backend>::Values<'r, i64>>;

/// A segment layout backend `B` can read: [`Strided`] and [`Listed`] everywhere, [`Offsets`]
/// over the backend's memory (host slices on [`Host`] and [`AnyBackend`], `CudaView<i64>` on
/// [`Cuda`]).
///
/// ```
/// use oxicub::segments::{Layout, Offsets};
/// use oxicub::Host;
///
/// fn on_host<L: Layout<Host>>(_: &L) {}
/// let (begin, end) = ([0i64, 3], [3i64, 5]);
/// on_host(&Offsets::new(&begin[..], &end[..]));
/// ```
#[diagnostic::on_unimplemented(
    message = "the `{B}` backend cannot read the segment layout `{Self}`",
    label = "its offsets are not where `{B}` runs",
    note = "offsets live where the backend runs: `&[i64]` on `Host` and `AnyBackend`, \
            `CudaView<i64>` on `Cuda`; the strided and listed layouts work on every backend"
)]
pub trait Layout<B: Backend + ?Sized>: crate::sealed::Sealed {
    /// Where the segments are.
    #[doc(hidden)]
    fn arg(&self) -> LayoutArgOn<'_, B>;
}

impl crate::sealed::Sealed for Strided {}
impl<O> crate::sealed::Sealed for Offsets<O> {}
impl crate::sealed::Sealed for Listed {}

impl<B: Backend + ?Sized> Layout<B> for Strided {
    fn arg(&self) -> LayoutArgOn<'_, B> {
        LayoutArg::Strided(self.stride)
    }
}

impl<B: Backend + ?Sized> Layout<B> for Listed {
    fn arg(&self) -> LayoutArgOn<'_, B> {
        LayoutArg::Listed
    }
}

macro_rules! host_offsets {
    ($($backend:ty),*) => {$(
        impl Layout<$backend> for Offsets<&[i64]> {
            fn arg(&self) -> LayoutArgOn<'_, $backend> {
                LayoutArg::Offsets {
                    begin: self.begin,
                    end: self.end,
                }
            }
        }
    )*};
}
host_offsets!(Host, AnyBackend);

impl Layout<Cuda> for Offsets<CudaView<'_, i64>> {
    fn arg(&self) -> LayoutArgOn<'_, Cuda> {
        LayoutArg::Offsets {
            begin: &self.begin,
            end: &self.end,
        }
    }
}
