//! What a batched top-k call gives the launcher besides its keys and values, and the status it
//! leaves on the device.

use cudarc::driver::CudaView;

use super::tiers::BatchedTiers;
use super::{DeviceInts, HostOrDevice};

/// Where the segments are, for keys of type `K`.
#[derive(Clone, Copy, Debug)]
pub enum BatchedLayout<'a, 'b, K> {
    /// Segment `i` starts at `i * stride`; its size is `sizes`.
    Strided {
        /// The stride.
        stride: u64,
        /// The sizes.
        sizes: HostOrDevice<DeviceInts<'a, 'b>, u64>,
    },
    /// Segment `i` is `begin[i]..end[i]`.
    Offsets {
        /// Begin offsets.
        begin: &'b CudaView<'a, i64>,
        /// End offsets.
        end: &'b CudaView<'a, i64>,
    },
    /// Segment `i` is the view `segments[i]`, each in its own allocation (the seeds' iterator
    /// of iterators); the keys buffer of [`batched_topk`](super::batched_topk) is `None`.
    /// Copied values come as [`SelectedValues::Listed`](crate::families::SelectedValues::Listed),
    /// a view per segment. The launcher takes each segment's address and length from its view
    /// and checks the view's context and alignment: a segment is exactly its view.
    Listed {
        /// The segments: at least as many as the call's most segments.
        segments: &'b [CudaView<'a, K>],
    },
}

/// Everything a batched top-k launch needs besides the buffers of keys and values, for keys of
/// type `K`.
#[derive(Clone, Copy, Debug)]
pub struct BatchedTopKPlan<'a, 'b, K> {
    /// The layout.
    pub layout: BatchedLayout<'a, 'b, K>,
    /// `k`.
    pub k: HostOrDevice<DeviceInts<'a, 'b>, u64>,
    /// The direction: 0 = max, 1 = min (per segment: `u8`s).
    pub direction: HostOrDevice<&'b CudaView<'a, u8>, u32>,
    /// The options of the direction that were compiled (bit 0: max, bit 1: min).
    pub direction_mask: u32,
    /// The number of segments: on the host, or deferred (an `i64` clamped into
    /// `num_segments_bounds`).
    pub num_segments: HostOrDevice<&'b CudaView<'a, i64>, u64>,
    /// Bounds of a deferred number of segments; its upper bound is the most segments launched.
    pub num_segments_bounds: (u64, u64),
    /// Bounds every segment size must satisfy.
    pub size_bounds: (u64, u64),
    /// Bounds every `k` must satisfy.
    pub k_bounds: (u64, u64),
    /// Bounds of the sum of the valid segments' sizes (the TotalItems guarantee; `(0,
    /// u64::MAX)` when there is none): the several-blocks tier's scratch is sized from the
    /// upper bound, and a sum outside them is reported.
    pub total_bounds: (u64, u64),
    /// Distance between consecutive segments' outputs.
    pub out_stride: u64,
    /// The most items one segment writes.
    pub per_segment_max: u64,
    /// The tiers to run.
    pub tiers: BatchedTiers,
    /// Keys per lane of the warp tier.
    pub warp_items: u32,
    /// Ties at the boundary keep the larger indices.
    pub prefer_larger_index: bool,
    /// The output is sorted by key.
    pub sorted: bool,
    /// ... with equal keys by index.
    pub stable: bool,
    /// A segment whose `k` is above its size is invalid (reported), not clamped.
    pub reject_k_above_size: bool,
    /// What each valid segment's slots past its results receive, up to `per_segment_max`
    /// (`None`: they are left untouched).
    pub fill: Option<BatchedFill>,
}

/// The fill of a batched call's slots past each segment's results: a key's bits, and the
/// bits of a value (the index written with [`SelectedValues::Index`](crate::families::SelectedValues::Index);
/// `None`: the value slots are left untouched).
///
/// ```
/// use oxicub::kernels::families::batched_topk::BatchedFill;
///
/// let fill = BatchedFill { key_bits: f32::NEG_INFINITY.to_bits().into(), value_bits: Some(u64::from(u32::MAX)) };
/// assert_eq!(fill.key_bits, 0xFF80_0000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchedFill {
    /// The key's bits (its width's low bits).
    pub key_bits: u64,
    /// The value's bits (its width's low bits), or none.
    pub value_bits: Option<u64>,
}
