//! Which calls split their rows, into what chunks, and the two calls' shapes.

use super::*;
use crate::device::DeviceLimits;
use crate::families::batched_topk::plan::plan;
use crate::families::batched_topk::plan::tests::strided;
use crate::radix::KeyType;

/// `rows` rows of `size` keys of `key` one after another, `k` and the direction (max) on the
/// host, `u32` indices out, the tiers the static bounds allow.
fn rows(rows: u64, size: u64, k: u64, key: KeyType) -> CallShape {
    CallShape {
        key,
        values: ValuesShape::Index,
        value_bytes: 4,
        ..strided(rows, size, k)
    }
}

/// An H100 or H200.
const SM_90: DeviceLimits = DeviceLimits {
    shared_per_block: 227 * 1024,
    clusters: true,
};

/// One row of 2^20 f32 keys, k = 2048 (a long sparse-attention row): 8 chunks of 131072 (the
/// chunk nearest sqrt(2^20 * 2048) = 2^15.5 among those of at most 8 a row), then one row of
/// 16384 candidates with the indices as values; both calls direct and clustered, while the
/// call itself, planned whole, runs the multi-block tier only.
#[test]
fn a_long_row_splits_into_eight_chunks() {
    let shape = rows(1, 1 << 20, 2048, KeyType::F32);
    let split = split_rows(&shape).expect("a split");
    assert_eq!(
        (split.chunk, split.chunks, split.written),
        (131_072, 8, 2048)
    );
    assert_eq!(split.candidates(), 16_384);
    let first = &split.first;
    assert_eq!(
        first.layout,
        LayoutShape::Strided {
            stride: 131_072,
            size: Some(131_072)
        }
    );
    assert_eq!((first.num_segments, first.out_stride), (Some(8), 2048));
    assert!(first.sorted && first.stable && first.is_direct());
    assert_eq!(first.values, ValuesShape::Index);
    let second = &split.second;
    assert_eq!(
        second.layout,
        LayoutShape::Strided {
            stride: 16_384,
            size: Some(16_384)
        }
    );
    assert_eq!(
        (second.num_segments, second.values),
        (Some(1), ValuesShape::Copy)
    );
    assert!(second.is_direct());
    for stage in [first, second] {
        let planned = plan(stage, &SM_90).expect("plan").expect("launches");
        assert_eq!(planned.tiers, BatchedTiers::STREAM);
        assert!(planned.cluster.is_some());
    }
    // Whole, the row is beyond the stream tier: its kernels exist for the split only.
    assert!(shape.tiers.contains(BatchedTiers::STREAM));
    let whole = plan(&shape, &SM_90).expect("plan").expect("launches");
    assert_eq!(whole.tiers, BatchedTiers::LARGE);
}

/// The chunk for other shapes: more rows take larger chunks (at most 64 over every row, 8 a
/// row); a smaller k keeps 8 chunks (its candidates must be more than the block tier takes);
/// 8-byte keys, within their cap of 131072; keys only and copied values keep their kind in
/// the first call, and the second copies the candidates' values (none for keys only).
#[test]
fn the_chunk_follows_rows_k_and_key_width() {
    let chunk = |rows_: u64, size: u64, k: u64, key: KeyType| {
        split_rows(&rows(rows_, size, k, key)).map(|s| (s.chunk, s.chunks))
    };
    assert_eq!(chunk(4, 1 << 20, 2048, KeyType::F32), Some((131_072, 8)));
    assert_eq!(chunk(8, 1 << 20, 2048, KeyType::F32), Some((131_072, 8)));
    assert_eq!(chunk(16, 1 << 20, 2048, KeyType::F32), Some((262_144, 4)));
    assert_eq!(chunk(1, 1 << 20, 512, KeyType::F32), Some((131_072, 8)));
    assert_eq!(chunk(1, 1 << 20, 2048, KeyType::F64), Some((131_072, 8)));
    assert_eq!(chunk(1, 1 << 22, 2048, KeyType::U8), Some((524_288, 8)));
    let keys_only = CallShape {
        values: ValuesShape::None,
        value_bytes: 0,
        ..rows(1, 1 << 20, 2048, KeyType::F32)
    };
    let split = split_rows(&keys_only).expect("a split");
    assert_eq!(
        (split.first.values, split.second.values),
        (ValuesShape::None, ValuesShape::None)
    );
    let pairs = CallShape {
        values: ValuesShape::Copy,
        value_bytes: 8,
        ..rows(1, 1 << 20, 2048, KeyType::F32)
    };
    let split = split_rows(&pairs).expect("a split");
    assert_eq!(
        (split.first.values, split.second.values),
        (ValuesShape::Copy, ValuesShape::Copy)
    );
}

/// What does not split: rows the stream tier takes whole, k above its sort, too few candidates
/// for the stream tier (k = 8, 64 and 256), too many chunks (64 rows; 2^24 keys, more than 8
/// chunks of the cap), sizes no power-of-two chunk divides,
/// rows apart (a stride above the size), per-segment sizes (not direct), offsets, listed
/// values, and a call whose types compiled no stream tier.
#[test]
fn what_does_not_split() {
    let long = || rows(1, 1 << 20, 2048, KeyType::F32);
    let cases = [
        ("rows the tier takes", rows(1, 1 << 18, 2048, KeyType::F32)),
        ("k = 4096", rows(1, 1 << 20, 4096, KeyType::F32)),
        ("k = 8", rows(1, 1 << 20, 8, KeyType::F32)),
        ("k = 64", rows(1, 1 << 20, 64, KeyType::F32)),
        ("k = 256", rows(1, 1 << 20, 256, KeyType::F32)),
        ("2^24 keys", rows(1, 1 << 24, 1024, KeyType::F32)),
        ("64 rows", rows(64, 1 << 20, 2048, KeyType::F32)),
        ("10^6 keys", rows(1, 1_000_000, 2048, KeyType::F32)),
        (
            "rows apart",
            CallShape {
                layout: LayoutShape::Strided {
                    stride: (1 << 20) + 16,
                    size: Some(1 << 20),
                },
                num_keys: 2 << 21,
                ..rows(2, 1 << 20, 2048, KeyType::F32)
            },
        ),
        (
            "sizes per segment",
            CallShape {
                layout: LayoutShape::Strided {
                    stride: 1 << 20,
                    size: None,
                },
                ..long()
            },
        ),
        (
            "offsets",
            CallShape {
                layout: LayoutShape::Offsets,
                ..long()
            },
        ),
        (
            "listed values",
            CallShape {
                values: ValuesShape::Listed,
                ..long()
            },
        ),
        (
            "no stream tier compiled",
            CallShape {
                tiers: BatchedTiers::LARGE,
                ..long()
            },
        ),
    ];
    for (what, shape) in cases {
        assert!(split_rows(&shape).is_none(), "{what}");
    }
    // One row apart is still contiguous.
    let one = CallShape {
        layout: LayoutShape::Strided {
            stride: (1 << 20) + 16,
            size: Some(1 << 20),
        },
        num_keys: (1 << 20) + 16,
        ..long()
    };
    assert!(split_rows(&one).is_some());
}
