//! Long rows split for the stream tier (docs/design/batched_topk.md, "Long rows"): a direct call
//! whose rows are longer than the stream tier takes, with `min(k, size) <= STREAM_MAX_K`, runs as
//! two direct calls of that tier instead of the multi-block tier's nine dependent launches:
//!
//! 1. every row cut into `chunks` chunks of `chunk` keys, one segment each: each chunk's
//!    `written` best, stable-sorted, with their indices within the chunk (or the caller's
//!    values), into a candidates buffer, `written` a chunk;
//! 2. (index outputs) each candidate's index raised by its chunk's offset in the row;
//! 3. each row's `chunks * written` candidates as one segment, with the candidates' values,
//!    under the caller's contract, into the caller's outputs.
//!
//! Exact under every contract: the candidates hold each chunk's `written` best with the
//! tie-break's choice among the chunk's ties, so they hold the row's; and they lie in chunk
//! order, equal keys of a chunk in index order (stable sorted), so among equal keys position
//! order is index order, and the second call's tie-break by position is the row's by index.

use super::constants::{
    SORT_CAP, SPLIT_MAX_CHUNKS, SPLIT_MAX_SEGMENTS, SPLIT_MIN_CHUNK, STREAM_MAX_K,
};
use super::plan::{CallShape, LayoutShape, ValuesShape};
use super::tiers::BatchedTiers;

/// The two calls a long-row call splits into ([`split_rows`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowSplit {
    /// Keys of a chunk.
    pub(crate) chunk: u64,
    /// Chunks of a row.
    pub(crate) chunks: u64,
    /// Items each chunk and each row selects: `min(k, size)`.
    pub(crate) written: u64,
    /// Every chunk of every row, a segment each, into the candidates.
    pub(crate) first: CallShape,
    /// Every row's candidates, a segment each, into the caller's outputs.
    pub(crate) second: CallShape,
}

impl RowSplit {
    /// Candidates over every row: `rows * chunks * written`.
    pub(crate) fn candidates(&self) -> u64 {
        self.first.max_segments() * self.written
    }
}

/// The split of a direct call whose rows are contiguous (one row, or a stride equal to the
/// size) and longer than the stream tier takes, when its tier's kernels exist for the call
/// and some chunk fits: a power of two from `SPLIT_MIN_CHUNK` to the tier's cap that divides
/// the rows, at least 4 `written` (so that a chunk's sample cuts), with at most
/// `SPLIT_MAX_CHUNKS` chunks a row (the second call's sorted runs) and `SPLIT_MAX_SEGMENTS`
/// over every row (one clustered launch), and each row's candidates
/// more than the block tier takes and at most the cap (so both calls bin to the stream tier).
/// Among those, the chunk closest to `sqrt(size * written)`, which balances the first call's
/// chunks against the second's candidates (the larger chunk on a tie). `None` otherwise: the
/// call runs as planned.
pub(crate) fn split_rows(shape: &CallShape) -> Option<RowSplit> {
    let LayoutShape::Strided {
        stride,
        size: Some(size),
    } = shape.layout
    else {
        return None;
    };
    let (Some(k), Some(rows)) = (shape.k, shape.num_segments) else {
        return None;
    };
    let cap = BatchedTiers::stream_max_size(shape.key_bytes()) as u64;
    let written = k.min(size);
    let eligible = shape.is_direct()
        && shape.tiers.contains(BatchedTiers::STREAM)
        && matches!(
            shape.values,
            ValuesShape::None | ValuesShape::Copy | ValuesShape::Index
        )
        && (rows == 1 || stride == size)
        && size > cap
        && (1..=STREAM_MAX_K as u64).contains(&written);
    if !eligible {
        return None;
    }
    // How far a chunk is from sqrt(size * written): the bit length of the ratio of its square
    // to size * written, or of the inverse (about twice |log2(chunk / target)|).
    let distance = |chunk: u64| {
        let square = u128::from(chunk) * u128::from(chunk);
        let target = u128::from(size) * u128::from(written);
        let (hi, lo) = if square >= target {
            (square, target)
        } else {
            (target, square)
        };
        128 - (hi / lo.max(1)).leading_zeros()
    };
    let mut best: Option<u64> = None;
    let mut chunk = SPLIT_MIN_CHUNK;
    while chunk <= cap {
        let chunks = size / chunk;
        let candidates = chunks * written;
        let fits = size % chunk == 0
            && chunk >= 4 * written
            && chunks <= SPLIT_MAX_CHUNKS
            && rows
                .checked_mul(chunks)
                .is_some_and(|n| n <= SPLIT_MAX_SEGMENTS)
            && candidates > SORT_CAP as u64
            && candidates <= cap;
        if fits && best.is_none_or(|b| distance(chunk) <= distance(b)) {
            best = Some(chunk);
        }
        chunk *= 2;
    }
    let chunk = best?;
    let chunks = size / chunk;
    let row_candidates = chunks * written;
    let first = CallShape {
        layout: LayoutShape::Strided {
            stride: chunk,
            size: Some(chunk),
        },
        num_segments: Some(rows * chunks),
        num_segments_bounds: (rows * chunks, rows * chunks),
        size_bounds: (chunk, chunk),
        k_bounds: (k, k),
        total_bounds: (0, u64::MAX),
        out_stride: written,
        per_segment_max: written,
        tiers: BatchedTiers::STREAM,
        sorted: true,
        stable: true,
        reject_k_above_size: false,
        num_keys: rows * size,
        ..*shape
    };
    let second = CallShape {
        layout: LayoutShape::Strided {
            stride: row_candidates,
            size: Some(row_candidates),
        },
        num_segments: Some(rows),
        num_segments_bounds: (rows, rows),
        size_bounds: (row_candidates, row_candidates),
        k_bounds: (k, k),
        total_bounds: (0, u64::MAX),
        tiers: BatchedTiers::STREAM,
        reject_k_above_size: false,
        num_keys: rows * row_candidates,
        values: match shape.values {
            ValuesShape::None => ValuesShape::None,
            _ => ValuesShape::Copy,
        },
        ..*shape
    };
    Some(RowSplit {
        chunk,
        chunks,
        written,
        first,
        second,
    })
}

#[cfg(test)]
mod tests;
