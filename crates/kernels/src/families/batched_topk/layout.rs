//! The stream tier's layouts: its chunks and candidate slots, its scratch and the dynamic shared
//! memory of its final selection and of its clustered kernel (docs/design/batched_topk.md,
//! "Stream tier"). Pure functions of a call's shape.

use super::constants::{
    BT_BUCKETS, BT_STARTS_WORDS, BT_STREAM_CANDIDATES, BT_STREAM_FILTER_WARPS,
    BT_STREAM_RECORD_WORDS, STREAM_CHUNK_BYTES, STREAM_MAX_K,
};
use super::tiers::BatchedTiers;

/// Bytes of a candidate's rank: u32 for keys of up to 32 bits, else u64.
fn rank_bytes(key_bytes: u64) -> u64 {
    if key_bytes <= 4 {
        4
    } else {
        8
    }
}

/// The candidates a segment holds on chip: BT_STREAM_CANDIDATES, half for 8-byte keys.
fn candidate_budget(key_bytes: u64) -> u64 {
    u64::from(if key_bytes <= 4 {
        BT_STREAM_CANDIDATES
    } else {
        BT_STREAM_CANDIDATES / 2
    })
}

/// The stream tier's shapes: chunks, candidate slots, scratch and the final stage's dynamic
/// shared memory (the candidates, aliased by the exact path's sort region; the bucket copy;
/// the bucket starts and fill counters; the exact path's index and rank buffers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StreamLayout {
    /// The largest segment the tier takes for this key width.
    pub(crate) max_size: u64,
    /// Chunks (filter blocks) per segment.
    pub(crate) ctas: u64,
    /// Keys per chunk.
    pub(crate) chunk: u64,
    /// Candidate slots per filter region on average.
    pub(crate) candidates: u64,
    /// Candidates the final selection holds on chip.
    pub(crate) total: u64,
    /// Candidates the bucket copy holds.
    pub(crate) sorted_cap: u64,
    /// Byte offsets of the final's shared-memory regions.
    pub(crate) sorted_offset: u64,
    pub(crate) bins_offset: u64,
    pub(crate) index_offset: u64,
    pub(crate) rank_offset: u64,
    /// The final's dynamic shared memory.
    pub(crate) shared_bytes: u32,
    /// Scratch words: the candidates' ranks, their indices, the regions' records.
    pub(crate) rank_words: u64,
    pub(crate) index_words: u64,
    pub(crate) count_words: u64,
}

/// The stream tier's layout for keys of `key_bytes` bytes when `tiers` has it (else all zero):
/// segments of at most `largest` keys (`uniform_size`: all of that size), at most
/// `per_segment_max` items written a segment, scratch for `slots` segments.
pub(crate) fn stream_layout(
    key_bytes: u64,
    tiers: BatchedTiers,
    uniform_size: Option<u64>,
    largest: u64,
    per_segment_max: u64,
    slots: u64,
) -> StreamLayout {
    if !tiers.contains(BatchedTiers::STREAM) {
        return StreamLayout::default();
    }
    let max_size = BatchedTiers::stream_max_size(key_bytes as u32) as u64;
    // The largest segment the tier may get (`largest`: the bound the layout allows); a
    // uniform size is exact.
    let largest = match uniform_size {
        Some(size) => size.min(largest),
        None => largest,
    }
    .clamp(1, max_size);
    let chunk = STREAM_CHUNK_BYTES / key_bytes;
    let ctas = largest.div_ceil(chunk);
    // A candidate is a rank and a u32 index. A region is a filter warp's part of a chunk.
    let rank_bytes = rank_bytes(key_bytes);
    let budget = candidate_budget(key_bytes);
    let regions = ctas * u64::from(BT_STREAM_FILTER_WARPS);
    // A segment's slots in global memory: four times its candidate budget, `candidates` per
    // region on average. A region that overflows sends its segment to the exact path over
    // every key (~10x slower), and sorted, smooth or clustered inputs crowd the candidates
    // into a few regions, so the filter shares a quarter of a sampled segment's slots out by
    // where the sample's best keys lie (bt_stream_slots; the rest evenly). The scratch is
    // half the keys' bytes for 4-byte keys; the final selection still holds at most `total`
    // in shared memory.
    let candidates = (4 * budget / regions).min(chunk / u64::from(BT_STREAM_FILTER_WARPS));
    let total = budget.min(candidates * regions);
    let selected = per_segment_max.min(STREAM_MAX_K as u64);
    // The bucket copy holds the buckets up to the one of the k-th item.
    let sorted_cap = total.min(2 * selected + 1024);
    let sort_entry = if key_bytes <= 4 { 8 } else { 16 };
    let align = |x: u64| x.div_ceil(16) * 16;
    let candidate_bytes = (total * (rank_bytes + 4)).max(selected.next_power_of_two() * sort_entry);
    let sorted_offset = align(candidate_bytes);
    let bins_offset = align(sorted_offset + sorted_cap * (rank_bytes + 4));
    let index_offset = align(bins_offset + u64::from(BT_STARTS_WORDS + BT_BUCKETS) * 4);
    let rank_offset = align(index_offset + selected * 4);
    let shared = rank_offset + selected * rank_bytes;
    let words = |bytes: u64| bytes.div_ceil(8);
    let slots_per_segment = candidates * regions;
    StreamLayout {
        max_size,
        ctas,
        chunk,
        candidates,
        total,
        sorted_cap,
        sorted_offset,
        bins_offset,
        index_offset,
        rank_offset,
        shared_bytes: u32::try_from(shared).unwrap_or(u32::MAX),
        rank_words: words(
            slots
                .saturating_mul(slots_per_segment)
                .saturating_mul(rank_bytes),
        ),
        index_words: words(slots.saturating_mul(slots_per_segment).saturating_mul(4)),
        // Per region: its counts and its ranks' range (BT_STREAM_RECORD_WORDS u64 words).
        count_words: slots
            .saturating_mul(regions)
            .saturating_mul(u64::from(BT_STREAM_RECORD_WORDS)),
    }
}

/// The dynamic shared memory of the clustered launch's blocks (`stream_cluster.cuh`): a
/// block's candidates, its copy of the selected buckets (where the sample bins, the streaming
/// walk's stage and the exact path's index and rank buffers also lie) and its bucket counts,
/// starts and positions; the exact path's sort region aliases the candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClusterLayout {
    /// Candidates a block holds (and the copy's length).
    pub(crate) candidates: u64,
    /// Byte offsets of its regions.
    pub(crate) copy_offset: u64,
    pub(crate) bins_offset: u64,
    pub(crate) index_offset: u64,
    pub(crate) rank_offset: u64,
    /// A block's dynamic shared memory.
    pub(crate) shared_bytes: u32,
}

/// The layout for keys of `key_bytes` and `selected` (at most STREAM_MAX_K) items a segment;
/// `cluster_regions_fit` pins that the regions that share words fit.
pub(crate) fn cluster_layout(key_bytes: u64, selected: u64) -> ClusterLayout {
    let rank_bytes = rank_bytes(key_bytes);
    let candidates = candidate_budget(key_bytes);
    let align = |x: u64| x.div_ceil(16) * 16;
    let region = align(candidates * (rank_bytes + 4));
    let copy_offset = region;
    let bins_offset = copy_offset + region;
    let shared = bins_offset + u64::from(BT_STARTS_WORDS + 2 * BT_BUCKETS) * 4;
    let index_offset = copy_offset;
    ClusterLayout {
        candidates,
        copy_offset,
        bins_offset,
        index_offset,
        rank_offset: align(index_offset + selected * 4),
        shared_bytes: u32::try_from(shared).unwrap_or(u32::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::batched_topk::constants::{
        BT_STREAM_MAX_CTAS, STREAM_FINAL_THREADS, STREAM_MAX_BYTES,
    };

    /// The clustered launch's shared-memory regions that share words fit one another for every
    /// key width and every selection the tier takes: the exact path's packed sort entries (two
    /// words each for 8-byte keys) in the candidates' region, its index and rank buffers in the
    /// copy's, and the sample's bins (4096 words at most) in the copy's too.
    #[test]
    fn cluster_regions_fit() {
        for key_bytes in [1u64, 2, 4, 8] {
            for selected in [1u64, 1000, STREAM_MAX_K as u64] {
                let layout = cluster_layout(key_bytes, selected);
                let rank_bytes = if key_bytes <= 4 { 4 } else { 8 };
                let sort_entry = if key_bytes <= 4 { 8 } else { 16 };
                let region = layout.copy_offset;
                assert!(selected.next_power_of_two() * sort_entry <= region);
                assert!(layout.rank_offset + selected * rank_bytes <= layout.bins_offset);
                assert!(4 * 4096 <= region);
                if key_bytes <= 4 {
                    // The walk's stage: a batch (UNROLL 16-byte vectors a lane) per warp of
                    // the 1024-thread block (BtStreamBatch).
                    let unroll = if key_bytes >= 2 { 4 } else { 2 };
                    assert!(32 * unroll * 32 * 16 <= region, "{key_bytes} bytes");
                }
                assert_eq!(layout.bins_offset - layout.copy_offset, region);
                assert!(
                    u64::from(layout.shared_bytes) < 200 * 1024,
                    "{key_bytes} bytes"
                );
            }
        }
    }

    /// The final selection's block has a thread per filter region of the largest segment.
    #[test]
    fn the_final_has_a_thread_per_region() {
        let chunks = (STREAM_MAX_BYTES as u64).div_ceil(STREAM_CHUNK_BYTES);
        assert!(chunks <= u64::from(BT_STREAM_MAX_CTAS));
        let regions = chunks * u64::from(BT_STREAM_FILTER_WARPS);
        assert!(regions <= u64::from(STREAM_FINAL_THREADS));
    }

    /// Sparse attention's shape (f32, segments of 131072, k = 2048, 64 of them): four chunks of
    /// 32768 keys, 64 regions of 512 slots, 8192 candidates on chip, and the final's regions
    /// in order within its dynamic shared memory.
    #[test]
    fn the_stream_layout_of_sparse_attention() {
        let layout = stream_layout(4, BatchedTiers::STREAM, Some(131_072), 131_072, 2048, 64);
        assert_eq!((layout.ctas, layout.chunk), (4, 32_768));
        assert_eq!((layout.candidates, layout.total), (512, 8192));
        assert_eq!(layout.sorted_cap, 2 * 2048 + 1024);
        assert_eq!(layout.sorted_offset, 8192 * 8);
        assert!(layout.sorted_offset + layout.sorted_cap * 8 <= layout.bins_offset);
        assert_eq!(
            layout.index_offset - layout.bins_offset,
            u64::from(BT_STARTS_WORDS + BT_BUCKETS) * 4
        );
        assert_eq!(layout.rank_offset, layout.index_offset + 2048 * 4);
        assert_eq!(
            u64::from(layout.shared_bytes),
            layout.rank_offset + 2048 * 4
        );
        // A segment's slots: four times its on-chip budget, a rank and an index each.
        assert_eq!(layout.rank_words, 64 * 4 * 8192 * 4 / 8);
        assert_eq!(layout.index_words, layout.rank_words);
        assert_eq!(
            layout.count_words,
            64 * 64 * u64::from(BT_STREAM_RECORD_WORDS)
        );
    }

    /// The final selection's dynamic shared memory stays within an sm_90 block's 227 KiB for
    /// every key width, segment size and selection the tier takes, and a call without the tier
    /// has no layout.
    #[test]
    fn the_final_fits_shared_memory() {
        for key_bytes in [1u64, 2, 4, 8] {
            let max = BatchedTiers::stream_max_size(key_bytes as u32) as u64;
            for size in [2049, 65_536, max] {
                for selected in [1, 1000, STREAM_MAX_K as u64] {
                    let layout =
                        stream_layout(key_bytes, BatchedTiers::STREAM, None, size, selected, 1);
                    assert!(layout.ctas >= 1 && layout.ctas * layout.chunk >= size.min(max));
                    assert!(layout.total <= u64::from(BT_STREAM_CANDIDATES));
                    assert!(
                        u64::from(layout.shared_bytes) <= 227 * 1024,
                        "{key_bytes} {size}"
                    );
                }
            }
        }
        let none = stream_layout(4, BatchedTiers::LARGE, None, 1 << 20, 2048, 64);
        assert_eq!(none, StreamLayout::default());
    }
}
