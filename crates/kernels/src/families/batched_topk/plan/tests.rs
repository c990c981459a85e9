//! The launch plan's unit tests: representative calls, their launches and scratch.

use super::*;

/// A call of `n` segments of `size` f32 keys in a row, `k` and the direction (max) on the
/// host, keys only, the tiers its static bounds allow.
pub(crate) fn strided(n: u64, size: u64, k: u64) -> CallShape {
    CallShape {
        layout: LayoutShape::Strided {
            stride: size,
            size: Some(size),
        },
        k: Some(k),
        direction: Some(0),
        num_segments: Some(n),
        num_segments_bounds: (n, n),
        size_bounds: (size, size),
        k_bounds: (k, k),
        total_bounds: (0, u64::MAX),
        direction_mask: 1,
        out_stride: k.min(size),
        per_segment_max: k.min(size),
        tiers: BatchedTiers::for_bounds((size as i64, size as i64), (k as i64, k as i64)),
        warp_items: BatchedTiers::warp_items(size.min(256) as i64),
        prefer_larger: false,
        sorted: true,
        stable: true,
        reject_k_above_size: false,
        num_keys: n * size,
        key: KeyType::F32,
        values: ValuesShape::None,
        value_bytes: 0,
    }
}

/// A call of 1000 segments by offsets, of any size up to 2^22 and `k` per segment up to 4096:
/// every tier.
fn mixed() -> CallShape {
    CallShape {
        layout: LayoutShape::Offsets,
        k: None,
        size_bounds: (0, 1 << 22),
        k_bounds: (0, 4096),
        tiers: BatchedTiers::for_bounds((0, 1 << 22), (0, 4096)),
        ..strided(1000, 1 << 22, 4096)
    }
}

/// The limits of the architectures CI plans for, with a CUDA 12 driver: the opt-in shared
/// memory per block of the CUDA programming guide's table of compute capabilities, and
/// clusters from sm_90 on.
const ARCHS: [(&str, DeviceLimits); 5] = [
    ("sm_75", limits(64 * 1024, false)),
    ("sm_80", limits(163 * 1024, false)),
    ("sm_86", limits(99 * 1024, false)),
    ("sm_89", limits(99 * 1024, false)),
    ("sm_90", limits(227 * 1024, true)),
];

const fn limits(shared_per_block: u64, clusters: bool) -> DeviceLimits {
    DeviceLimits {
        shared_per_block,
        clusters,
    }
}

/// An H100 or H200: the device the plans below were measured on.
const SM_90: DeviceLimits = ARCHS[4].1;

fn launch(shape: &CallShape) -> LaunchPlan {
    launch_on(shape, &SM_90)
}

fn launch_on(shape: &CallShape, device: &DeviceLimits) -> LaunchPlan {
    match plan(shape, device) {
        Ok(Some(plan)) => plan,
        other => panic!("expected launches, got {other:?}"),
    }
}

/// A launch of the control kernel at `stage` over `items` threads.
fn control(items: u64, stage: u32) -> Step<()> {
    Step::Items {
        kernel: BatchedKernel::Control,
        items,
        stage,
        shift: 0,
        half: 0,
    }
}

fn select(kernel: BatchedKernel, items: u64) -> Step<()> {
    Step::Items {
        kernel,
        items,
        stage: BT_STAGE_SELECT,
        shift: 0,
        half: 0,
    }
}

/// MoE routing ([65536 x 256], k = 8, all on the host) is direct: one launch of the warp
/// tier, no control stage, no scratch, no status.
#[test]
fn moe_routing_is_one_warp_tier_launch() {
    let plan = launch(&strided(65_536, 256, 8));
    assert!(plan.direct);
    assert_eq!(plan.tiers, BatchedTiers::WARP);
    assert_eq!(plan.flags & SEGMENT_DIRECT, SEGMENT_DIRECT);
    assert_eq!(plan.scratch(false), Scratch::default());
    assert_eq!(plan.descriptor_words(), 0);
    assert_eq!(
        plan.steps(32, None::<()>),
        [select(BatchedKernel::Warp { items: 8 }, 65_536 * 32)]
    );
}

/// A per-segment `k` is checked on the device: the control stages run first, and the
/// descriptors and the bin lists are sized for every segment.
#[test]
fn per_segment_k_runs_the_control_stages() {
    let shape = CallShape {
        k: None,
        ..strided(1000, 256, 8)
    };
    let plan = launch(&shape);
    assert!(!plan.direct);
    assert_eq!(plan.flags & BT_K_PER_SEGMENT, BT_K_PER_SEGMENT);
    assert_eq!(plan.flags & SEGMENT_DIRECT, 0);
    assert_eq!(
        plan.steps(32, None::<()>),
        [
            control(1, BT_STAGE_INIT),
            control(1000, BT_STAGE_RESOLVE),
            control(1, BT_STAGE_FINALIZE),
            select(BatchedKernel::Warp { items: 8 }, 1000 * 32),
        ]
    );
    let scratch = plan.scratch(false);
    assert_eq!(
        plan.descriptor_words(),
        1000 * u64::from(SEGMENT_DESC_WORDS)
    );
    // The warp and block lists, a place per segment each, and the multi-block list's (whose
    // bound also sizes the stream list, when the call has that tier).
    assert_eq!(scratch.bins, 2 * 1000 + plan.large_capacity);
    assert_eq!(plan.large_capacity, 1000);
    assert_eq!(scratch.large_state + scratch.stream_ranks, 0);
}

/// Ragged decode rows ([64 x 131072] f32, k = 2048, sizes per segment on the device): up to
/// `BT_FUSED_CONTROL_SEGMENTS` segments, INIT, RESOLVE and FINALIZE are one launch of one
/// block; from one more, three launches, RESOLVE over the segments.
#[test]
fn few_segments_fuse_the_control_stages() {
    let ragged = |n: u64| CallShape {
        layout: LayoutShape::Strided {
            stride: 131_072,
            size: None,
        },
        size_bounds: (0, 131_072),
        tiers: BatchedTiers::for_bounds((0, 131_072), (2048, 2048)),
        ..strided(n, 131_072, 2048)
    };
    let threads = u64::from(BLOCK_THREADS);
    for n in [1, 64, BT_FUSED_CONTROL_SEGMENTS] {
        let plan = launch(&ragged(n));
        assert!(!plan.direct);
        let steps = plan.steps(32, None::<()>);
        assert_eq!(steps[0], control(threads, BT_STAGE_CONTROL), "{n} segments");
        assert!(
            steps[1..].iter().all(|step| !matches!(
                step,
                Step::Items {
                    kernel: BatchedKernel::Control,
                    ..
                }
            )),
            "{n} segments: {steps:?}"
        );
    }
    let n = BT_FUSED_CONTROL_SEGMENTS + 1;
    let steps = launch(&ragged(n)).steps(32, None::<()>);
    assert_eq!(
        steps[..3],
        [
            control(1, BT_STAGE_INIT),
            control(n, BT_STAGE_RESOLVE),
            control(1, BT_STAGE_FINALIZE),
        ]
    );
}

/// Sparse attention ([64 x 131072] f32, k = 2048) is direct and takes the stream tier: the
/// clustered launch when the device has it (no scratch at all), else the filter over
/// 64 x 4 chunks and the final selection, a block per segment.
#[test]
fn sparse_attention_takes_the_stream_tier() {
    let plan = launch(&strided(64, 131_072, 2048));
    assert!(plan.direct);
    assert_eq!(plan.tiers, BatchedTiers::STREAM);
    let cluster = plan.cluster.expect("a direct call of the stream bin");
    assert_eq!(cluster, cluster_layout(4, 2048));
    assert_eq!(plan.steps(32, Some(())), [Step::Cluster(())]);
    assert_eq!(plan.scratch(true), Scratch::default());
    assert_eq!(
        plan.steps(32, None::<()>),
        [
            Step::StreamFilter {
                items: 64 * 4,
                ctas: 4
            },
            Step::StreamFinal {
                blocks: 64,
                shared_bytes: plan.stream.shared_bytes
            },
        ]
    );
    let scratch = plan.scratch(false);
    assert_eq!(scratch.stream_ranks, plan.stream.rank_words);
    assert_eq!(scratch.stream_counts, plan.stream.count_words);
    // Offsets keep the tier and the clustered launch, a cluster per position of the stream
    // tier's list, after the control stages that make the list.
    let offsets = CallShape {
        layout: LayoutShape::Offsets,
        ..strided(64, 131_072, 2048)
    };
    let plan = launch(&offsets);
    assert!(!plan.direct);
    assert_eq!(plan.cluster, Some(cluster_layout(4, 2048)));
    assert_eq!(plan.stream_slots, 64);
    assert_eq!(
        plan.steps(32, Some(())),
        [
            Step::Items {
                kernel: BatchedKernel::Control,
                items: u64::from(BLOCK_THREADS),
                stage: BT_STAGE_CONTROL,
                shift: 0,
                half: 0,
            },
            Step::Cluster(()),
        ]
    );
    assert_eq!(plan.scratch(true).stream_ranks, 0);
}

/// Sorted sets larger than a block sorts are sorted in global memory: a bitonic network of
/// sort_span slots per segment after the radix select's passes (one per key byte).
#[test]
fn large_sorted_sets_are_sorted_in_global_memory() {
    let shape = strided(16, 1 << 20, 4096);
    let plan = launch(&shape);
    assert_eq!(plan.tiers, BatchedTiers::LARGE);
    assert!(plan.global_sort && plan.sort_span == 4096);
    assert_eq!(plan.flags & BT_GLOBAL_SORT, BT_GLOBAL_SORT);
    let steps = plan.steps(32, None::<()>);
    let stages = |stage: u32| {
        steps
            .iter()
            .filter(|s| matches!(s, Step::Items { stage: x, .. } if *x == stage))
            .count()
    };
    assert_eq!(stages(BT_STAGE_LARGE_HISTOGRAM), 4);
    // log2(4096) = 12 merge sizes of 1, 2, ..., 12 steps.
    assert_eq!(stages(BT_STAGE_LARGE_SORT_STEP), 12 * 13 / 2);
    assert_eq!(steps.len(), 1 + 4 + 3 + 1 + 78 + 1);
    let scratch = plan.scratch(false);
    assert_eq!(scratch.large_selected, 16 * 4096);
    assert_eq!(scratch.large_ranks, scratch.large_selected);
    assert_eq!(scratch.large_chunks, 16 * ((1 << 20) / CHUNK_ITEMS));
}

/// A call of few long segments cuts them into smaller chunks, so its multi-block grid still
/// spreads over the device; many segments keep the full chunks. Each segment's chunk counts are
/// scanned by a block.
#[test]
fn few_long_segments_take_smaller_chunks() {
    let one = launch(&strided(1, 1 << 20, 4096));
    assert_eq!((one.chunk_items, one.chunks), (MIN_CHUNK_ITEMS, 512));
    let four = launch(&strided(4, 1 << 20, 4096));
    assert_eq!((four.chunk_items, four.chunks), (8192, 128));
    assert!(four.large_capacity * four.chunks >= LARGE_BLOCKS_TARGET);
    let many = launch(&strided(16, 1 << 20, 4096));
    assert_eq!((many.chunk_items, many.chunks), (CHUNK_ITEMS, 64));
    // The chunk counts' scratch holds every launch's, and never shrinks as segments are
    // added (a workspace measured for a call holds the calls of fewer segments).
    let mut last = 0;
    for n in 1..=40 {
        let plan = launch(&strided(n, 1 << 20, 4096));
        let words = plan.scratch(false).large_chunks;
        assert!(words >= plan.large_capacity * plan.chunks, "{n} segments");
        assert!(words >= last, "{n} segments: {words} < {last}");
        last = words;
    }
    let scan = one.steps(32, None::<()>).into_iter().find_map(|s| match s {
        Step::Items { stage, items, .. } if stage == BT_STAGE_LARGE_SCAN => Some(items),
        _ => None,
    });
    assert_eq!(scan, Some(u64::from(BLOCK_THREADS)));
}

/// A sorted output past what the global sort's 32-bit steps handle is an error, and a call
/// of no segment launches nothing.
#[test]
fn oversized_sorts_fail_and_empty_calls_launch_nothing() {
    let mut huge = strided(1, 1 << 40, 1 << 33);
    huge.per_segment_max = 1 << 33;
    assert!(matches!(
        plan(&huge, &SM_90),
        Err(KernelError::InvalidSpec { .. })
    ));
    let empty = strided(0, 256, 8);
    assert_eq!(plan(&empty, &SM_90).ok(), Some(None));
}

/// A direct call needs every segment valid, checked on the host: a size above the stride,
/// a last segment past the keys or an uncompiled direction leaves the checks to the device.
#[test]
fn direct_calls_are_checked_on_the_host() {
    assert!(strided(10, 256, 8).is_direct());
    let wide = CallShape {
        layout: LayoutShape::Strided {
            stride: 100,
            size: Some(256),
        },
        ..strided(10, 256, 8)
    };
    assert!(!wide.is_direct());
    let past = CallShape {
        num_keys: 10 * 256 - 1,
        ..strided(10, 256, 8)
    };
    assert!(!past.is_direct());
    let min = CallShape {
        direction: Some(1),
        ..strided(10, 256, 8)
    };
    assert!(!min.is_direct());
    assert!(!launch(&min).direct);
}

/// A refused `k` above the size: a call whose one `k` fits its one size stays direct (nothing
/// can be refused); one whose `k` is above it runs the control stages, so the device reports
/// it, with the flag set for RESOLVE.
#[test]
fn a_refused_k_above_the_size_is_reported_from_the_device() {
    let fits = CallShape {
        reject_k_above_size: true,
        ..strided(10, 256, 8)
    };
    assert!(fits.is_direct());
    let plan = launch(&fits);
    assert_eq!(plan.flags & BT_REJECT_K_ABOVE_SIZE, BT_REJECT_K_ABOVE_SIZE);
    let above = CallShape {
        reject_k_above_size: true,
        k_bounds: (300, 300),
        k: Some(300),
        ..strided(10, 256, 8)
    };
    assert!(!above.is_direct());
    let plan = launch(&above);
    assert!(!plan.direct);
    assert_eq!(
        plan.flags & (BT_REJECT_K_ABOVE_SIZE | SEGMENT_DIRECT),
        BT_REJECT_K_ABOVE_SIZE
    );
    // Without the refusal the same call clamps, and is direct.
    let clamped = CallShape {
        reject_k_above_size: false,
        ..above
    };
    assert!(clamped.is_direct());
}

/// The TotalItems guarantee bounds the multi-block tier's scratch: each of its segments holds
/// more than the block tier takes.
#[test]
fn total_items_bound_the_multi_block_scratch() {
    let shape = CallShape {
        total_bounds: (0, 10 * (SORT_CAP as u64 + 1)),
        values: ValuesShape::Index,
        ..mixed()
    };
    let plan = launch(&shape);
    assert_eq!(plan.large_capacity, 10);
    assert_eq!(
        plan.scratch(false).large_state,
        10 * u64::from(BT_LARGE_WORDS)
    );
    assert_eq!(
        plan.flags & (SEGMENT_OFFSETS | BT_VALUES_ARE_INDEX | BT_K_PER_SEGMENT),
        SEGMENT_OFFSETS | BT_VALUES_ARE_INDEX | BT_K_PER_SEGMENT
    );
}

/// A filter grid that strides over more items than it has blocks gives every block every
/// chunk number in turn; one with enough blocks keeps one block per item.
#[test]
fn the_filter_grid_cycles_through_the_chunk_numbers() {
    assert_eq!(stride_coprime(256, 256, 4), 256);
    assert_eq!(stride_coprime(264, 700, 1), 264);
    assert_eq!(stride_coprime(264, 2048, 8), 263);
    assert_eq!(stride_coprime(264, 5000, 3), 263);
    assert_eq!(stride_coprime(264, 5000, 12), 263);
    assert_eq!(stride_coprime(4, 100, 8), 3);
    assert_eq!(stride_coprime(0, 100, 8), 1);
    for ctas in 1..=16u64 {
        let grid = u64::from(stride_coprime(264, 100_000, ctas));
        for block in [0, 1, grid - 1] {
            let chunks: std::collections::BTreeSet<u64> =
                (0..ctas).map(|k| (block + k * grid) % ctas).collect();
            assert_eq!(chunks.len() as u64, ctas, "ctas {ctas}, grid {grid}");
        }
    }
}

/// The stream tier runs where its final selection's shared memory fits a block (sm_80 and
/// sm_90: 163 and 227 KiB; its final needs 100-160 KiB), and its clustered launch where the
/// device also launches clusters (sm_90); elsewhere (sm_75: 64 KiB, sm_86 and sm_89: 99 KiB)
/// the multi-block tier takes the stream tier's segments, with its scratch and launches.
#[test]
fn the_stream_tier_runs_where_its_kernels_fit_the_device() {
    for key in [KeyType::U8, KeyType::F32, KeyType::F64] {
        for k in [1, 2048] {
            let shape = CallShape {
                key,
                ..strided(64, 131_072, k)
            };
            for (arch, device) in ARCHS {
                let what = format!("{arch}, {key:?} keys, k = {k}");
                let plan = launch_on(&shape, &device);
                let steps = plan.steps(key.bits(), plan.cluster.map(|_| ()));
                let stream_steps = steps.iter().filter(|step| {
                    matches!(
                        step,
                        Step::Cluster(()) | Step::StreamFilter { .. } | Step::StreamFinal { .. }
                    )
                });
                let large_steps = steps.iter().filter(|step| {
                    matches!(
                        step,
                        Step::Items {
                            kernel: BatchedKernel::Large,
                            ..
                        }
                    )
                });
                // The final's shared memory, as planned where the tier runs.
                let final_shared = u64::from(launch_on(&shape, &SM_90).stream.shared_bytes)
                    + shape.spec(BatchedKernel::StreamFinal).static_shared_bytes();
                match arch {
                    "sm_75" | "sm_86" | "sm_89" => {
                        assert_eq!(plan.tiers, BatchedTiers::LARGE, "{what}");
                        assert_eq!(plan.cluster, None, "{what}");
                        assert_eq!(stream_steps.count(), 0, "{what}");
                        // INIT, a histogram per key byte, COUNT, SCAN, COLLECT, WRITE.
                        assert_eq!(large_steps.count(), 5 + key.bits() as usize / 8, "{what}");
                        let scratch = plan.scratch(false);
                        assert_eq!(scratch.large_state, 64 * u64::from(BT_LARGE_WORDS));
                        assert_eq!(scratch.stream_ranks, 0, "{what}");
                    }
                    "sm_80" => {
                        assert_eq!(plan.tiers, BatchedTiers::STREAM, "{what}");
                        assert_eq!(plan.cluster, None, "{what}: no clusters before sm_90");
                        assert_eq!(stream_steps.count(), 2, "{what}");
                        assert!(final_shared <= device.shared_per_block, "{what}");
                    }
                    _ => {
                        assert_eq!(plan.tiers, BatchedTiers::STREAM, "{what}");
                        let cluster = plan.cluster.expect("sm_90 takes the clustered launch");
                        let spec = shape.spec(BatchedKernel::StreamCluster);
                        assert!(device.fits(&spec, cluster.shared_bytes), "{what}");
                        assert_eq!(stream_steps.count(), 1, "{what}");
                        assert_eq!(large_steps.count(), 0, "{what}");
                    }
                }
                // The boundary: exactly the final's shared memory runs the tier, a byte less
                // does not.
                let exact = limits(final_shared, false);
                assert_eq!(launch_on(&shape, &exact).tiers, BatchedTiers::STREAM);
                let short = limits(final_shared - 1, false);
                assert_eq!(launch_on(&shape, &short).tiers, BatchedTiers::LARGE);
            }
        }
    }
}

/// In a call of mixed segments, only the stream tier moves: on a 99 KiB device the warp and
/// block tiers stay, and the multi-block tier, which the call has anyway, takes the stream
/// tier's segments; the clustered launch needs clusters even where its blocks would fit.
#[test]
fn only_the_stream_tier_moves_on_small_devices() {
    let mixed = mixed();
    let all = BatchedTiers::WARP
        .or(BatchedTiers::BLOCK)
        .or(BatchedTiers::STREAM)
        .or(BatchedTiers::LARGE);
    assert_eq!(launch_on(&mixed, &SM_90).tiers, all);
    let small = launch_on(&mixed, &ARCHS[2].1);
    assert_eq!(small.tiers, all.without(BatchedTiers::STREAM));
    assert_eq!(
        (small.stream_capacity, small.scratch(false).stream_ranks),
        (0, 0)
    );
    let no_clusters = limits(227 * 1024, false);
    let plan = launch_on(&strided(64, 131_072, 2048), &no_clusters);
    assert_eq!((plan.tiers, plan.cluster), (BatchedTiers::STREAM, None));
}
