//! What a segmented sort call gives the launcher besides its keys and values.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView};

use crate::families::scratch::StatusWords;

use crate::families::{DeviceInts, HostOrDevice};
use crate::segments::SegmentedStatus;
use crate::KernelError;

/// Where the segments are.
#[derive(Clone, Copy, Debug)]
pub enum SortLayout<'a, 'b> {
    /// Segment `i` is `keys[i * stride ..][..size_i]`.
    Strided {
        /// The distance between segment starts.
        stride: u64,
        /// One size, or one per segment on the device.
        sizes: HostOrDevice<DeviceInts<'a, 'b>, u64>,
    },
    /// Segment `i` is `keys[begin[i] .. end[i]]`.
    Offsets {
        /// Begin offsets, one per segment.
        begin: &'b CudaView<'a, i64>,
        /// End offsets, one per segment.
        end: &'b CudaView<'a, i64>,
    },
}

/// What a segmented sort call asks for (the contract checked it; the device checks every
/// per-segment value again and reports the smallest invalid segment).
#[derive(Clone, Copy, Debug)]
pub struct SegmentedSortPlan<'a, 'b> {
    /// The layout.
    pub layout: SortLayout<'a, 'b>,
    /// The order: one (0 ascending, 1 descending), or a byte per segment on the device.
    pub order: HostOrDevice<&'b CudaView<'a, u8>, u32>,
    /// The orders compiled (bit 0 ascending, bit 1 descending): a per-segment byte outside is
    /// a violation.
    pub order_mask: u32,
    /// The number of segments: on the host, or one deferred `i64` on the device.
    pub num_segments: HostOrDevice<&'b CudaView<'a, i64>, u64>,
    /// The bounds a deferred number of segments is checked against and clamped into.
    pub num_segments_bounds: (u64, u64),
    /// The bounds every segment size must satisfy.
    pub size_bounds: (u64, u64),
    /// The bounds of the sum of the valid segments' sizes (the TotalItems guarantee).
    pub total_bounds: (u64, u64),
}

/// What a call leaves on the device: the segmented status words and the merge passes'
/// statistics.
#[derive(Debug)]
pub struct SortStatus {
    /// The per-segment checks' words.
    pub status: SegmentedStatus,
    /// Two words per merge pass: its merge tiles and its copy tiles.
    pub(super) statistics: Option<StatusWords>,
    /// The number of merge passes launched.
    pub(super) passes: usize,
    /// The number of tiles.
    pub(super) tiles: SortTiles,
}

/// Where a call's tile count is known.
#[derive(Clone, Copy, Debug)]
pub(super) enum SortTiles {
    /// On the host: every pass ran.
    Host(u64),
    /// On the device, after the passes' words (the register path's chunks), with the passes
    /// the longest segment needed (those after it returned at once).
    Device,
}

impl SortStatus {
    /// The merge passes' statistics, one `(merge tiles, copy tiles)` per pass, and the number
    /// of tiles (waits for the stream; read after [`SegmentedStatus::decode`], which reports a
    /// kernel fault).
    pub fn statistics(
        &self,
        stream: &Arc<CudaStream>,
    ) -> Result<(Vec<(u64, u64)>, u64), KernelError> {
        let Some(statistics) = self.statistics.as_ref() else {
            return Ok((Vec::new(), 0)); // measured only: nothing ran
        };
        let words = statistics.read(self.status.health(), stream)?;
        let (tiles, ran) = match self.tiles {
            SortTiles::Host(tiles) => (tiles, self.passes),
            SortTiles::Device => {
                let counts = &words[2 * self.passes..];
                (counts[0], (counts[1] as usize).min(self.passes))
            }
        };
        let passes = words
            .chunks_exact(2)
            .take(ran)
            .map(|pass| (pass[0], pass[1]))
            .collect();
        Ok((passes, tiles))
    }
}
