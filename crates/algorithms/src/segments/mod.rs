//! The segmented problem shared by every segmented algorithm: where the segments are
//! ([`Strided`], [`Offsets`], [`Listed`]), their sizes and their number, the checks every such
//! call makes, and what it reports ([`Outcome`], [`Pending`]).
//!
//! An algorithm adds its own parameters on top of [`Segments`] (batched top-k adds `k` and the
//! select direction: [`crate::batched_topk::Problem`]).
//!
//! * **Layout.** [`Segments::strided`]: segment `i` is `keys[i * stride ..][..size_i]`.
//!   [`Segments::offsets`]: segment `i` is `keys[begin[i] .. end[i]]`; the `sizes` parameter
//!   only bounds `end[i] - begin[i]` (pass `segment_size::PerSegment::<(), MIN, MAX>::new(())`,
//!   or a `Static`/`Uniform` size every segment must have). [`Segments::listed`]: segment `i`
//!   is the `i`-th of a list of slices passed with the call; sizes are bounded as with offsets.
//! * **Sizes**: static, uniform or per segment (over the backend's memory: see
//!   [`ValuesOn`](crate::ValuesOn)).
//! * **Number of segments**: static, uniform, or deferred (an `i64` the host does not read:
//!   `&i64` on the host, a one-element `CudaView<i64>` on [`Cuda`](crate::Cuda)).
//! * **Heads.** Segments given by their heads (head flags, or sorted head indices) become
//!   offsets with [`offsets_from_head_flags`] and [`offsets_from_head_indices`] on the host,
//!   and with [`offsets_from_head_flags_on_device`] and [`offsets_from_head_indices_on_device`]
//!   on [`Cuda`](crate::Cuda), whose number of segments stays on the device for a deferred
//!   `num_segments`.
//!
//! Per-segment values are checked against their declared bounds (static, runtime and the
//! environment's guarantees) and offsets against order and the buffer: a segment that fails
//! is skipped, the others are processed, and the failure of the smallest such segment index is
//! reported by [`Pending::check`]. The environment's `TotalItems` guarantee (the sum of the
//! sizes) sizes temporary storage and is checked the same way.
//!
//! ```
//! use oxicub::segments::Segments;
//! use oxicub::params::{num_segments, segment_size};
//!
//! // 16384 tokens x 256 experts.
//! let rows = Segments::strided(256, segment_size::Static::<256>::new(), num_segments::uniform(16_384)?);
//! # let _ = rows;
//! # Ok::<(), oxicub::params::ParamError>(())
//! ```

mod check;
pub(crate) mod cuda;
mod heads;
mod heads_cuda;
pub(crate) mod host;
mod layout;
pub(crate) mod listed;
mod outcome;

pub(crate) use check::{
    check, check_buffers, check_deferred, check_parts, check_per_segment, SegmentArgs,
    SegmentsRequest,
};
pub use heads::{offsets_from_head_flags, offsets_from_head_indices};
pub use heads_cuda::{offsets_from_head_flags_on_device, offsets_from_head_indices_on_device};
pub use layout::{Layout, LayoutArg, LayoutArgOn, Listed, Offsets, Strided};
pub(crate) use outcome::{segmented_error, total_items_error, DeviceReport, Violation};
pub use outcome::{Outcome, Pending};

/// Where the segments of a call are and what is known about their sizes and number: the part
/// of a segmented problem every segmented algorithm shares.
#[derive(Clone, Copy, Debug)]
pub struct Segments<L, S, N> {
    pub(crate) layout: L,
    pub(crate) sizes: S,
    pub(crate) num_segments: N,
}

impl<S, N> Segments<Strided, S, N> {
    /// Segment `i` is `keys[i * stride ..][..size_i]`; every `size_i <= stride`.
    pub fn strided(stride: usize, sizes: S, num_segments: N) -> Segments<Strided, S, N> {
        Segments {
            layout: Strided::new(stride),
            sizes,
            num_segments,
        }
    }
}

impl<O, S, N> Segments<Offsets<O>, S, N> {
    /// Segment `i` is `keys[begin[i] .. end[i]]`. `sizes` bounds `end[i] - begin[i]`:
    /// `segment_size::PerSegment::<(), MIN, MAX>::new(())` (optionally `.with_bounds(..)`), or
    /// a `Static`/`Uniform` size every segment must have.
    pub fn offsets(begin: O, end: O, sizes: S, num_segments: N) -> Segments<Offsets<O>, S, N> {
        Segments {
            layout: Offsets::new(begin, end),
            sizes,
            num_segments,
        }
    }
}

impl<S, N> Segments<Listed, S, N> {
    /// Segment `i` is the `i`-th slice of the list passed with the call (at least
    /// `num_segments` slices). `sizes` bounds the slices' lengths, as with
    /// [`Segments::offsets`].
    pub fn listed(sizes: S, num_segments: N) -> Segments<Listed, S, N> {
        Segments {
            layout: Listed::default(),
            sizes,
            num_segments,
        }
    }
}

impl<L, S, N> Segments<L, S, N> {
    /// The layout.
    pub fn layout(&self) -> &L {
        &self.layout
    }

    /// The segment sizes.
    pub fn sizes(&self) -> &S {
        &self.sizes
    }

    /// The number of segments.
    pub fn num_segments(&self) -> &N {
        &self.num_segments
    }
}
