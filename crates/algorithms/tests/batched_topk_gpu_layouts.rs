//! Batched top-k on the GPU against the host backend, the segment layouts and their violations: bad
//! per-segment values (direction bytes, offsets out of order or past the buffer) reported like the
//! host, k outside its bounds with a deferred count read on the device, and the listed layout
//! (every segment in its own allocation, bad sizes, too short lists). Each test skips without a GPU
//! (fails with OXICUB_REQUIRE_GPU=1).

use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::{Cuda, Error, Host};
use oxicub_env::{require, tie_break, Env, Environment};
use oxicub_params::{direction, k, num_segments, segment_size, SelectDirection};
use oxicub_test::batched_topk::{check_on_gpu, Case};
use oxicub_test::cases::{poison, POISON_INDEX};
use oxicub_test::oracle::{check_top_k, RefKey};
use oxicub_test::{for_every_env, gpu_or_skip, sample_keys};

#[test]
fn bad_per_segment_values_are_reported_like_the_host() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys: Vec<i64> = sample_keys(100, 18);
    let base = Case::contiguous(keys, &[10, 20, 30, 40], &[3, 4, 5, 6], &[0, 1, 0, 1]);
    // A direction byte outside the option set.
    let case = Case {
        dirs: vec![0, 1, 2, 1],
        ..base.clone()
    };
    check_on_gpu(&cuda, &case, &Env::new());
    // Offsets out of order, past the buffer.
    let case = Case {
        begin: vec![0, 10, 31, 60],
        end: vec![10, 30, 30, 100],
        ..base.clone()
    };
    check_on_gpu(&cuda, &case, &Env::new());
    let case = Case {
        end: vec![10, 30, 60, 101],
        ..base.clone()
    };
    check_on_gpu(&cuda, &case, &Env::new());
}

#[test]
fn k_outside_its_bounds_and_a_deferred_count_on_the_device() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys: Vec<f32> = sample_keys(4 * 64, 19);
    let device_keys = cuda.upload(&keys).expect("upload");
    let ks = cuda.upload(&[6i64, 9, 6, 6]).expect("upload");
    let count = cuda.upload(&[5i64]).expect("upload");
    let problem = Problem::strided(
        64,
        segment_size::Static::<64>::new(),
        k::PerSegment::<_, 0, 8>::new(ks.as_view())
            .with_bounds(0, 6)
            .expect("bounds"),
        direction::Max,
        num_segments::Deferred::<_, 0, 4>::new(count.as_view()),
    );
    let mut out = cuda.upload(&[-1.0f32; 4 * 6]).expect("poison");
    let err = batched_topk::select_keys(
        &cuda,
        &problem,
        device_keys.as_view(),
        out.as_view_mut(),
        &Env::new(),
    )
    .expect("call")
    .check()
    .unwrap_err();
    // The count (5 > 4) is reported first; 4 segments were processed, segment 1 skipped.
    assert!(
        matches!(&err, Error::Param(e) if e.param() == "num_segments"),
        "{err}"
    );
    let got = cuda.download(&out.as_view()).expect("download");
    assert!(got[6..12].iter().all(|&v| v == -1.0), "segment 1 wrote");
    let count = cuda.upload(&[4i64]).expect("upload");
    let problem = Problem::strided(
        64,
        segment_size::Static::<64>::new(),
        k::PerSegment::<_, 0, 8>::new(ks.as_view())
            .with_bounds(0, 6)
            .expect("bounds"),
        direction::Max,
        num_segments::Deferred::<_, 0, 4>::new(count.as_view()),
    );
    let err = batched_topk::select_keys(
        &cuda,
        &problem,
        device_keys.as_view(),
        out.as_view_mut(),
        &Env::new(),
    )
    .expect("call")
    .check()
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "segment 1: k = 9 is outside its bounds [0, 6]"
    );
}

/// The value carried with item `j` of segment `i` in the listed tests: both recoverable.
fn listed_value(i: usize, j: usize) -> u64 {
    ((i as u64) << 32 | j as u64) ^ 0x5A5A_0000_0000_0000
}

/// The listed layout: every segment (keys and values) in its own device allocation, one
/// element past its start, so most segments are not 16-byte aligned; pairs with 8-byte values
/// from per-segment value buffers. Against the host (which joins the slices), per segment.
fn check_listed<K: RefKey, E: Environment>(cuda: &Cuda, case: &Case<K>, env: &E) {
    let r = env.resolved();
    let n = case.ks.len();
    let segment = |i: usize| &case.keys[case.begin[i] as usize..case.end[i] as usize];
    let values: Vec<Vec<u64>> = (0..n)
        .map(|i| (0..segment(i).len()).map(|j| listed_value(i, j)).collect())
        .collect();
    let sizes = || {
        segment_size::PerSegment::<(), 0, { 1 << 40 }>::new(())
            .with_bounds(0, case.max_size())
            .expect("bounds")
    };
    let stride = case.stride();
    let len = (n * stride).max(1);

    let host_segments: Vec<&[K]> = (0..n).map(segment).collect();
    let host_values: Vec<&[u64]> = values.iter().map(|v| &v[..]).collect();
    let problem = Problem::listed(
        sizes(),
        k::PerSegment::<_, 0, { 1 << 40 }>::new(&case.ks[..])
            .with_bounds(0, case.max_k())
            .expect("bounds"),
        direction::PerSegment::<_>::new(&case.dirs[..]),
        num_segments::uniform(n as i64).expect("n"),
    );
    let (mut host_keys, mut host_vals) = (vec![poison::<K>(); len], vec![POISON_INDEX; len]);
    let host = batched_topk::select_pairs_listed(
        &Host::new(),
        &problem,
        &host_segments,
        &host_values,
        &mut host_keys[..],
        &mut host_vals[..],
        env,
    )
    .expect("host call")
    .check()
    .map_err(|e| e.to_string());

    // One allocation per segment, the segment one element in.
    let device_keys: Vec<_> = (0..n)
        .map(|i| {
            let mut padded = vec![poison::<K>()];
            padded.extend_from_slice(segment(i));
            cuda.upload_keys(&padded).expect("upload")
        })
        .collect();
    let device_values: Vec<_> = values
        .iter()
        .map(|v| {
            let mut padded = vec![POISON_INDEX];
            padded.extend_from_slice(v);
            cuda.upload(&padded).expect("upload")
        })
        .collect();
    let key_views: Vec<_> = (0..n)
        .map(|i| device_keys[i].as_view().slice(1..1 + segment(i).len()))
        .collect();
    let value_views: Vec<_> = (0..n)
        .map(|i| device_values[i].as_view().slice(1..1 + segment(i).len()))
        .collect();
    let ks = cuda.upload(&case.ks).expect("upload");
    let dirs = cuda.upload(&case.dirs).expect("upload");
    let problem = Problem::listed(
        sizes(),
        k::PerSegment::<_, 0, { 1 << 40 }>::new(ks.as_view())
            .with_bounds(0, case.max_k())
            .expect("bounds"),
        direction::PerSegment::<_>::new(dirs.as_view()),
        num_segments::uniform(n as i64).expect("n"),
    );
    let mut out_keys = cuda.upload_keys(&vec![poison::<K>(); len]).expect("poison");
    let mut out_vals = cuda.upload(&vec![POISON_INDEX; len]).expect("poison");
    let gpu = batched_topk::select_pairs_listed(
        cuda,
        &problem,
        &key_views,
        &value_views,
        out_keys.as_view_mut(),
        out_vals.as_view_mut(),
        env,
    )
    .expect("gpu call")
    .check()
    .map_err(|e| e.to_string());
    assert_eq!(gpu, host, "{r:?}: the reported error");
    let gpu_keys = cuda.download_keys(&out_keys).expect("download");
    let gpu_vals = cuda.download(&out_vals.as_view()).expect("download");
    for i in 0..n {
        let seg = segment(i);
        let written = (case.ks[i] as usize).min(seg.len());
        let base = i * stride;
        let what = format!(
            "{} listed segment {i} ({} keys) k={} {r:?}",
            K::KEY_TYPE,
            seg.len(),
            case.ks[i]
        );
        // Each value names its own segment and item: decode the index within the segment.
        let indices: Vec<u64> = gpu_vals[base..base + written]
            .iter()
            .map(|&v| {
                let v = v ^ 0x5A5A_0000_0000_0000;
                assert_eq!(v >> 32, i as u64, "{what}: a value from another segment");
                v & 0xFFFF_FFFF
            })
            .collect();
        let dir = if case.dirs[i] == 0 {
            SelectDirection::Max
        } else {
            SelectDirection::Min
        };
        check_top_k(
            &what,
            seg,
            written,
            dir,
            r,
            &gpu_keys[base..base + written],
            &indices,
        );
        assert!(
            gpu_vals[base + written..base + stride]
                .iter()
                .all(|&x| x == POISON_INDEX),
            "{what}: a slot past the results was written"
        );
        if r.pins_output() {
            assert_eq!(
                gpu_vals[base..base + written],
                host_vals[base..base + written],
                "{what}: values differ from the host"
            );
        }
    }
}

#[test]
fn listed_segments_each_in_its_own_allocation() {
    let Some(cuda) = gpu_or_skip() else { return };
    // Every tier (tiny, shared-memory and huge segments), every requirement combination.
    let case = Case::mixed(sample_keys::<f32>, 31);
    for_every_env!(check_listed(&cuda, &case));
    // Narrow and wide keys: element addresses of 1- and 8-byte types.
    check_listed(&cuda, &Case::mixed(sample_keys::<u8>, 32), &Env::new());
    check_listed(&cuda, &Case::mixed(sample_keys::<i16>, 33), &Env::new());
    check_listed(&cuda, &Case::mixed(sample_keys::<f64>, 34), &Env::new());
    check_listed(
        &cuda,
        &Case::mixed(sample_keys::<half::bf16>, 35),
        &require!(tie_break::PreferLargerIndex),
    );
}

#[test]
fn listed_segments_with_bad_sizes_and_too_short_lists() {
    let Some(cuda) = gpu_or_skip() else { return };
    let a = cuda.upload(&[1.0f32, 2.0, 3.0]).expect("upload");
    let b = cuda.upload(&[4.0f32; 9]).expect("upload");
    let views = [a.as_view(), b.as_view()];
    let mut out = cuda.upload(&[-1.0f32; 8]).expect("upload");
    // A segment longer than the declared bound: reported for that segment, the other written.
    let problem = Problem::listed(
        segment_size::PerSegment::<(), 0, 4>::new(()),
        k::Static::<2>::new(),
        direction::Max,
        num_segments::uniform(2).expect("n"),
    );
    let err =
        batched_topk::select_keys_listed(&cuda, &problem, &views, out.as_view_mut(), &Env::new())
            .expect("call")
            .check()
            .expect_err("a segment of 9 keys against a bound of 4");
    assert!(
        matches!(
            err,
            Error::InvalidSegment {
                segment: 1,
                arg: "segment_sizes",
                value: 9,
                ..
            }
        ),
        "{err}"
    );
    let got = cuda.download(&out.as_view()).expect("download");
    assert_eq!(got[..4], [3.0, 2.0, -1.0, -1.0]);
    // Fewer slices than segments: an error before anything runs.
    let problem = Problem::listed(
        segment_size::PerSegment::<(), 0, 16>::new(()),
        k::Static::<2>::new(),
        direction::Max,
        num_segments::uniform(3).expect("n"),
    );
    let err =
        batched_topk::select_keys_listed(&cuda, &problem, &views, out.as_view_mut(), &Env::new())
            .expect_err("two slices for three segments");
    assert!(
        matches!(
            err,
            Error::BufferTooSmall {
                arg: "segments",
                ..
            }
        ),
        "{err}"
    );
}

/// Batched top-k indices over rows of per-row lengths and `k` (at most 256, direction max):
/// strided over the lengths, or the offsets `begin..end` (`$offsets`), each problem finished
/// by `.$modify(..)`; the outcome checked.
macro_rules! per_row_indices {
    (
        $backend:expr,
        $offsets:expr,
        $max_size:literal,
        ($keys:expr, $sizes:expr, $begin:expr, $end:expr, $ks:expr, $rows:expr, $stride:expr),
        $out:expr,
        $at:expr,
        $modify:ident($($arg:expr),*)
    ) => {
        if $offsets {
            let problem = Problem::offsets(
                $begin,
                $end,
                segment_size::PerSegment::<(), 0, $max_size>::new(()),
                k::PerSegment::<_, 0, 256>::new($ks),
                direction::Max,
                num_segments::uniform($rows as i64).expect("n"),
            )
            .$modify($($arg),*);
            batched_topk::select_indices($backend, &problem, $keys, $out, $at, &Env::new())
        } else {
            let problem = Problem::strided(
                $stride,
                segment_size::PerSegment::<_, 0, $max_size>::new($sizes),
                k::PerSegment::<_, 0, 256>::new($ks),
                direction::Max,
                num_segments::uniform($rows as i64).expect("n"),
            )
            .$modify($($arg),*);
            batched_topk::select_indices($backend, &problem, $keys, $out, $at, &Env::new())
        }
        .expect("front check")
        .check()
    };
}

/// `reject_k_above_size` on the device: per-row lengths and k (some k above its row's length,
/// some rows empty), strided and offsets, every tier's sizes; the report (the smallest such
/// row, `k`, its value) and every output equal the host's, outputs poisoned; a uniform k above
/// a uniform size (no direct call: reported from the device) names segment 0.
#[test]
fn a_refused_k_above_size_is_reported_like_the_host() {
    let Some(cuda) = gpu_or_skip() else { return };
    let rows = 300usize;
    let stride = 5000usize;
    let keys: Vec<f32> = sample_keys(rows * stride, 41);
    let mut rng = oxicub_test::SplitMix64::new(42);
    let sizes: Vec<i64> = (0..rows)
        .map(|r| match r % 7 {
            0 => 0,
            1 => 3000 + (rng.next_u64() % 2000) as i64,
            _ => (rng.next_u64() % 300) as i64,
        })
        .collect();
    let ks: Vec<i64> = (0..rows).map(|_| (rng.next_u64() % 257) as i64).collect();
    let (begin, end): (Vec<i64>, Vec<i64>) = (0..rows)
        .map(|r| ((r * stride) as i64, (r * stride) as i64 + sizes[r]))
        .unzip();
    let device_keys = cuda.upload(&keys).expect("upload");
    let device_sizes = cuda.upload(&sizes).expect("upload");
    let device_ks = cuda.upload(&ks).expect("upload");
    let device_begin = cuda.upload(&begin).expect("upload");
    let device_end = cuda.upload(&end).expect("upload");
    let out_len = rows * 256;
    let report = |result: Result<(), Error>| match result {
        Err(Error::InvalidSegment {
            segment,
            arg,
            value,
            ..
        }) => (segment, arg, value),
        other => panic!("a refused k: {other:?}"),
    };
    for offsets in [false, true] {
        // Host.
        let (mut host_top, mut host_at) = (vec![poison::<f32>(); out_len], vec![u32::MAX; out_len]);
        let host_result = per_row_indices!(
            &Host::new(),
            offsets,
            5000,
            (
                &keys[..],
                &sizes[..],
                &begin[..],
                &end[..],
                &ks[..],
                rows,
                stride
            ),
            &mut host_top[..],
            &mut host_at[..],
            reject_k_above_size()
        );
        // Device.
        let mut top = cuda
            .upload(&vec![poison::<f32>(); out_len])
            .expect("poison");
        let mut at = cuda.upload(&vec![u32::MAX; out_len]).expect("poison");
        let device_result = per_row_indices!(
            &cuda,
            offsets,
            5000,
            (
                device_keys.as_view(),
                device_sizes.as_view(),
                device_begin.as_view(),
                device_end.as_view(),
                device_ks.as_view(),
                rows,
                stride
            ),
            top.as_view_mut(),
            at.as_view_mut(),
            reject_k_above_size()
        );
        assert_eq!(
            report(device_result),
            report(host_result),
            "offsets: {offsets}"
        );
        let got_top = cuda.download(&top.as_view()).expect("download");
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(
            bits(&got_top) == bits(&host_top),
            "offsets: {offsets}: keys"
        );
        assert!(
            cuda.download(&at.as_view()).expect("download") == host_at,
            "offsets: {offsets}: indices"
        );
    }
    // Uniform k above a uniform size: not a direct call, segment 0 reported by the device.
    let problem = Problem::strided(
        stride,
        segment_size::uniform(100).expect("size"),
        k::uniform(101).expect("k"),
        direction::Max,
        num_segments::uniform(rows as i64).expect("n"),
    )
    .reject_k_above_size()
    .out_stride(101);
    let mut top = cuda
        .upload(&vec![poison::<f32>(); rows * 101])
        .expect("poison");
    let result = batched_topk::select_keys(
        &cuda,
        &problem,
        device_keys.as_view(),
        top.as_view_mut(),
        &Env::new(),
    )
    .expect("front check")
    .check();
    assert_eq!(report(result), (0, "k", 101));
    assert!(cuda
        .download(&top.as_view())
        .expect("download")
        .iter()
        .all(|v| v.to_bits() == poison::<f32>().to_bits()));
}

/// `fill_past_k` on the device (the control kernel's FILL stage after every tier): per-row
/// lengths (empty rows, rows shorter than k, long rows of every tier) and per-row k, strided
/// and offsets, i32 indices filled with -1 and keys with -inf, outputs poisoned: every slot
/// equals the host's, an invalid row's slots untouched; copied values' slots stay poisoned.
#[test]
fn slots_past_k_take_the_fill_like_the_host() {
    let Some(cuda) = gpu_or_skip() else { return };
    let rows = 200usize;
    let stride = 6000usize;
    let keys: Vec<f32> = sample_keys(rows * stride, 51);
    let mut rng = oxicub_test::SplitMix64::new(52);
    let sizes: Vec<i64> = (0..rows)
        .map(|r| match r % 5 {
            0 => 0,
            1 => 2500 + (rng.next_u64() % 3500) as i64,
            _ => (rng.next_u64() % 400) as i64,
        })
        .collect();
    let mut ks: Vec<i64> = (0..rows).map(|_| (rng.next_u64() % 257) as i64).collect();
    ks[13] = 300; // outside the bounds: row 13 is invalid, its slots untouched
    let (begin, end): (Vec<i64>, Vec<i64>) = (0..rows)
        .map(|r| ((r * stride) as i64, (r * stride) as i64 + sizes[r]))
        .unzip();
    let device_keys = cuda.upload(&keys).expect("upload");
    let device_sizes = cuda.upload(&sizes).expect("upload");
    let device_ks = cuda.upload(&ks).expect("upload");
    let device_begin = cuda.upload(&begin).expect("upload");
    let device_end = cuda.upload(&end).expect("upload");
    let out_len = rows * 256;
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for offsets in [false, true] {
        let (mut host_top, mut host_at) = (vec![poison::<f32>(); out_len], vec![7i32; out_len]);
        let host_result = per_row_indices!(
            &Host::new(),
            offsets,
            6000,
            (
                &keys[..],
                &sizes[..],
                &begin[..],
                &end[..],
                &ks[..],
                rows,
                stride
            ),
            &mut host_top[..],
            &mut host_at[..],
            fill_past_k(f32::NEG_INFINITY, -1)
        );
        let mut top = cuda
            .upload(&vec![poison::<f32>(); out_len])
            .expect("poison");
        let mut at = cuda.upload(&vec![7i32; out_len]).expect("poison");
        let device_result = per_row_indices!(
            &cuda,
            offsets,
            6000,
            (
                device_keys.as_view(),
                device_sizes.as_view(),
                device_begin.as_view(),
                device_end.as_view(),
                device_ks.as_view(),
                rows,
                stride
            ),
            top.as_view_mut(),
            at.as_view_mut(),
            fill_past_k(f32::NEG_INFINITY, -1)
        );
        let segment = |r: Result<(), Error>| match r {
            Err(Error::InvalidSegment { segment, .. }) => segment,
            other => panic!("row 13's k: {other:?}"),
        };
        assert_eq!(segment(device_result), segment(host_result));
        let got_top = cuda.download(&top.as_view()).expect("download");
        assert!(
            bits(&got_top) == bits(&host_top),
            "offsets: {offsets}: keys"
        );
        assert!(
            cuda.download(&at.as_view()).expect("download") == host_at,
            "offsets: {offsets}: indices"
        );
    }
    // Pairs: the key slots filled, the copied values' slots left as they were.
    let values: Vec<u64> = (0..keys.len() as u64).collect();
    let device_values = cuda.upload(&values).expect("upload");
    macro_rules! problem {
        ($sizes:expr, $ks:expr) => {
            Problem::strided(
                stride,
                segment_size::PerSegment::<_, 0, 6000>::new($sizes),
                k::PerSegment::<_, 0, 256>::new($ks),
                direction::Min,
                num_segments::uniform(rows as i64).expect("n"),
            )
            .fill_past_k(f32::INFINITY, 0)
        };
    }
    let (mut host_top, mut host_values) = (vec![poison::<f32>(); out_len], vec![u64::MAX; out_len]);
    let _ = batched_topk::select_pairs(
        &Host::new(),
        &problem!(&sizes[..], &ks[..]),
        &keys[..],
        &values[..],
        &mut host_top[..],
        &mut host_values[..],
        &Env::new(),
    )
    .expect("front check")
    .check();
    let mut top = cuda
        .upload(&vec![poison::<f32>(); out_len])
        .expect("poison");
    let mut carried = cuda.upload(&vec![u64::MAX; out_len]).expect("poison");
    let _ = batched_topk::select_pairs(
        &cuda,
        &problem!(device_sizes.as_view(), device_ks.as_view()),
        device_keys.as_view(),
        device_values.as_view(),
        top.as_view_mut(),
        carried.as_view_mut(),
        &Env::new(),
    )
    .expect("front check")
    .check();
    let got_top = cuda.download(&top.as_view()).expect("download");
    assert!(bits(&got_top) == bits(&host_top), "pairs: keys");
    assert!(
        cuda.download(&carried.as_view()).expect("download") == host_values,
        "pairs: values"
    );
}

/// Per-row sizes and `k` held as `i32` (what engines keep) are read by the kernels as they
/// are: every tier's row lengths, empty rows, and a negative `k` in one row (reported with its
/// value, so the width is not truncated); outputs and report equal the host's over the same
/// values as `i64`, outputs poisoned.
#[test]
fn i32_sizes_and_k_equal_their_i64_form() {
    let Some(cuda) = gpu_or_skip() else { return };
    let rows = 240usize;
    let stride = 6000usize;
    let keys: Vec<f32> = sample_keys(rows * stride, 61);
    let mut rng = oxicub_test::SplitMix64::new(62);
    let sizes: Vec<i64> = (0..rows)
        .map(|r| match r % 6 {
            0 => 0,
            1 => 2500 + (rng.next_u64() % 3500) as i64,
            _ => (rng.next_u64() % 500) as i64,
        })
        .collect();
    let mut ks: Vec<i64> = (0..rows).map(|_| (rng.next_u64() % 257) as i64).collect();
    ks[101] = -1;
    let narrow = |v: &[i64]| v.iter().map(|&x| x as i32).collect::<Vec<i32>>();
    let (sizes32, ks32) = (narrow(&sizes), narrow(&ks));
    let device_keys = cuda.upload(&keys).expect("upload");
    let device_sizes = cuda.upload(&sizes32).expect("upload");
    let device_ks = cuda.upload(&ks32).expect("upload");
    // The macro builds the offsets form too; this call is strided.
    let unused_offsets = cuda.upload(&[0i64]).expect("upload");
    let out_len = rows * 256;
    let report = |result: Result<(), Error>| match result {
        Err(Error::InvalidSegment {
            segment,
            arg,
            value,
            ..
        }) => (segment, arg, value),
        other => panic!("row 101's k: {other:?}"),
    };
    let (mut host_top, mut host_at) = (vec![poison::<f32>(); out_len], vec![u32::MAX; out_len]);
    let host_result = per_row_indices!(
        &Host::new(),
        false,
        6000,
        (
            &keys[..],
            &sizes[..],
            &[0i64][..],
            &[0i64][..],
            &ks[..],
            rows,
            stride
        ),
        &mut host_top[..],
        &mut host_at[..],
        fill_past_k(f32::NEG_INFINITY, i64::from(u32::MAX - 1))
    );
    assert_eq!(report(host_result.clone()), (101, "k", -1)); // i32 on the host: batched_topk_host
    let mut top = cuda
        .upload(&vec![poison::<f32>(); out_len])
        .expect("poison");
    let mut at = cuda.upload(&vec![u32::MAX; out_len]).expect("poison");
    let device_result = per_row_indices!(
        &cuda,
        false,
        6000,
        (
            device_keys.as_view(),
            device_sizes.as_view(),
            unused_offsets.as_view(),
            unused_offsets.as_view(),
            device_ks.as_view(),
            rows,
            stride
        ),
        top.as_view_mut(),
        at.as_view_mut(),
        fill_past_k(f32::NEG_INFINITY, i64::from(u32::MAX - 1))
    );
    assert_eq!(report(device_result), report(host_result));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let got_top = cuda.download(&top.as_view()).expect("download");
    assert!(bits(&got_top) == bits(&host_top), "keys");
    assert!(
        cuda.download(&at.as_view()).expect("download") == host_at,
        "indices"
    );
}
