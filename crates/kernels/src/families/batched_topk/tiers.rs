//! Which tiers a call may need, from the static bounds of its segment sizes and `k`.

use super::constants::{
    BT_TIER_BLOCK, BT_TIER_LARGE, BT_TIER_STREAM, BT_TIER_WARP, SORT_CAP, STREAM_MAX_BYTES,
    STREAM_MAX_K, STREAM_TIER_ENABLED, WARP_MAX_K, WARP_MAX_SIZE,
};

/// The tiers of a batched top-k call, as a set of bits.
///
/// ```
/// use oxicub::kernels::families::batched_topk::BatchedTiers;
///
/// // MoE routing: 256 experts, k = 8: only the warp tier exists.
/// let tiers = BatchedTiers::for_bounds((256, 256), (8, 8));
/// assert_eq!(tiers, BatchedTiers::WARP);
/// // Sparse attention: 131072 keys, k = 2048: only the stream tier (for keys of any width).
/// assert_eq!(BatchedTiers::for_bounds((131_072, 131_072), (2048, 2048)), BatchedTiers::STREAM);
/// // Larger segments than the stream tier takes: the multi-block tier too (for wide keys).
/// let tiers = BatchedTiers::for_bounds((131_072, 1 << 20), (2048, 2048));
/// assert_eq!(tiers, BatchedTiers::STREAM.or(BatchedTiers::LARGE));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchedTiers(pub u32);

impl BatchedTiers {
    /// No tier.
    pub const NONE: BatchedTiers = BatchedTiers(0);
    /// A warp per segment.
    pub const WARP: BatchedTiers = BatchedTiers(BT_TIER_WARP);
    /// A block per segment.
    pub const BLOCK: BatchedTiers = BatchedTiers(BT_TIER_BLOCK);
    /// Several blocks per segment.
    pub const LARGE: BatchedTiers = BatchedTiers(BT_TIER_LARGE);
    /// Several blocks per segment in two launches: a filter streams each chunk once against a
    /// sampled threshold, then a block per segment selects among the candidates.
    pub const STREAM: BatchedTiers = BatchedTiers(BT_TIER_STREAM);

    /// The largest segment the stream tier takes for keys of `key_bytes` bytes.
    ///
    /// ```
    /// use oxicub::kernels::families::batched_topk::BatchedTiers;
    ///
    /// assert_eq!(BatchedTiers::stream_max_size(4), 262_144);
    /// assert_eq!(BatchedTiers::stream_max_size(8), 131_072);
    /// ```
    pub const fn stream_max_size(key_bytes: u32) -> i64 {
        let bytes = if key_bytes == 0 { 1 } else { key_bytes as i64 };
        STREAM_MAX_BYTES / bytes
    }

    /// The tiers some segment may need, for keys of any width, when segment sizes lie in
    /// `sizes` and `k` in `k` (closed intervals): the union of [`BatchedTiers::for_key_bounds`]
    /// over the key widths. Usable in `const` context, so dispatch decides at compile time.
    pub const fn for_bounds(sizes: (i64, i64), k: (i64, i64)) -> BatchedTiers {
        // The stream bin grows and the multi-block bin shrinks with the cap, and the cap
        // shrinks with the key width: 1-byte keys need the stream tier whenever some width
        // does, 8-byte keys the multi-block tier.
        let narrow = BatchedTiers::for_key_bounds(1, sizes, k);
        let wide = BatchedTiers::for_key_bounds(8, sizes, k);
        BatchedTiers(narrow.0 | wide.0)
    }

    /// The tiers some segment of keys of `key_bytes` bytes may need when segment sizes lie in
    /// `sizes` and `k` in `k` (closed intervals).
    ///
    /// ```
    /// use oxicub::kernels::families::batched_topk::BatchedTiers;
    ///
    /// // Sparse attention, f32 scores: the stream tier.
    /// let tiers = BatchedTiers::for_key_bounds(4, (131_072, 131_072), (2048, 2048));
    /// assert_eq!(tiers, BatchedTiers::STREAM);
    /// // k above the stream tier's sort: the multi-block tier.
    /// let tiers = BatchedTiers::for_key_bounds(4, (131_072, 131_072), (4096, 4096));
    /// assert_eq!(tiers, BatchedTiers::LARGE);
    /// // Rows above the stream tier's cap: the multi-block tier, and the stream tier's
    /// // kernels for a direct call that splits its rows into chunks the tier takes.
    /// let tiers = BatchedTiers::for_key_bounds(4, (1 << 20, 1 << 20), (2048, 2048));
    /// assert_eq!(tiers, BatchedTiers::STREAM.or(BatchedTiers::LARGE));
    /// ```
    pub const fn for_key_bounds(key_bytes: u32, sizes: (i64, i64), k: (i64, i64)) -> BatchedTiers {
        let (size_min, size_max) = sizes;
        let (k_min, k_max) = k;
        let mut bits = 0;
        // Warp: some size <= 256 with min(k, size) <= 32.
        if size_min <= WARP_MAX_SIZE && (k_min <= WARP_MAX_K || size_min <= WARP_MAX_K) {
            bits |= BT_TIER_WARP;
        }
        // Block: some size <= 2048 outside the warp bin.
        let outside_warp =
            size_max > WARP_MAX_SIZE || (k_max > WARP_MAX_K && size_max > WARP_MAX_K);
        if size_min <= SORT_CAP && outside_warp {
            bits |= BT_TIER_BLOCK;
        }
        // Stream: some size above SORT_CAP with min(k, size) <= STREAM_MAX_K (no such size
        // is at most STREAM_MAX_K, so k itself must be). Sizes up to the cap bin there; a
        // direct call's longer rows may be split into chunks that do (the plan's `RowSplit`),
        // so the tier's kernels exist for them too, and the plan drops the tier from a call
        // none of whose segments can use it.
        let cap = BatchedTiers::stream_max_size(key_bytes);
        let stream = STREAM_TIER_ENABLED && size_max > SORT_CAP && k_min <= STREAM_MAX_K;
        if stream {
            bits |= BT_TIER_STREAM;
        }
        // Multi-block: some size above SORT_CAP outside the stream bin.
        let beyond_stream = !STREAM_TIER_ENABLED || size_max > cap || k_max > STREAM_MAX_K;
        if size_max > SORT_CAP && beyond_stream {
            bits |= BT_TIER_LARGE;
        }
        BatchedTiers(bits)
    }

    /// The set less `tier`.
    pub const fn without(self, tier: BatchedTiers) -> BatchedTiers {
        BatchedTiers(self.0 & !tier.0)
    }

    /// The tiers in either set.
    pub const fn or(self, other: BatchedTiers) -> BatchedTiers {
        BatchedTiers(self.0 | other.0)
    }

    /// The tiers in both sets.
    pub const fn and(self, other: BatchedTiers) -> BatchedTiers {
        BatchedTiers(self.0 & other.0)
    }

    /// Whether `tier` is in the set.
    pub const fn contains(self, tier: BatchedTiers) -> bool {
        self.0 & tier.0 == tier.0 && tier.0 != 0
    }

    /// Keys per lane of the warp tier for segments of at most `size_max` items: the smallest
    /// power of two that holds them (1 to 8).
    pub const fn warp_items(size_max: i64) -> u32 {
        let mut items = 1u32;
        while (items as i64) * 32 < size_max && items < 8 {
            items *= 2;
        }
        items
    }
}
