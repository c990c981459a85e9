//! Head flags and head indices turned into offsets on the GPU
//! (`segments::offsets_from_head_flags_on_device`, `offsets_from_head_indices_on_device`)
//! against the host functions, bit for bit: random flags and sorted unique indices over many
//! sizes and densities (a head at 0 given and omitted, bits past the keys set), every invalid
//! head reported with the host's error, too small offsets reported and never written past, and
//! flags on the device feeding a segmented sort's deferred `num_segments` with no host round
//! trip. Every output is poisoned first (offsets past the count, and a guard past each buffer,
//! must keep the poison). Each test skips without a GPU (fails with OXICUB_REQUIRE_GPU=1).

use cudarc::driver::CudaSlice;
use oxicub_algorithms::segmented_sort::{self, Problem};
use oxicub_algorithms::segments::{
    offsets_from_head_flags, offsets_from_head_flags_on_device, offsets_from_head_indices,
    offsets_from_head_indices_on_device,
};
use oxicub_algorithms::{Cuda, Error, Host, Pending};
use oxicub_env::Env;
use oxicub_params::{num_segments, order, segment_size};
use oxicub_test::{gpu_or_skip, sample_keys, SplitMix64};

/// The poison of every offset and count buffer.
const SENTINEL: i64 = -7;

/// Elements past each output view, which no call may write.
const GUARD: usize = 16;

/// The sizes every comparison runs over.
const SIZES: [usize; 7] = [0, 1, 31, 32, 33, 1000, (1 << 20) + 7];

/// Head densities, in 1024ths: none, sparse, a tenth, half, every key.
const DENSITIES: [u64; 5] = [0, 1, 100, 512, 1024];

/// What a device call left: its checked result (the error as a string, to compare with the
/// host's), the offsets and the count.
#[derive(Debug)]
struct OnDevice {
    checked: Result<usize, String>,
    begin: Vec<i64>,
    end: Vec<i64>,
    count: i64,
}

/// `data` on the device with one element more (the device allocates no empty buffers).
fn upload<T: cudarc::driver::DeviceRepr + Copy>(cuda: &Cuda, data: &[T], pad: T) -> CudaSlice<T> {
    let mut padded = data.to_vec();
    padded.push(pad);
    cuda.upload(&padded).expect("upload")
}

/// `len + GUARD` poisoned offsets.
fn poisoned(cuda: &Cuda, len: usize) -> CudaSlice<i64> {
    cuda.upload(&vec![SENTINEL; len + GUARD]).expect("poison")
}

/// Heads as flags (`heads` in `0..num_keys`) or as indices, on the device.
enum DeviceHeads<'a> {
    Flags(&'a [u32]),
    Indices(&'a [i64]),
}

/// Runs one device call with offsets of `capacity` elements (and `count_len` count elements),
/// checks the guards and returns what it left.
fn on_device(
    cuda: &Cuda,
    heads: DeviceHeads<'_>,
    num_keys: usize,
    capacity: (usize, usize),
) -> OnDevice {
    let (mut begin, mut end) = (poisoned(cuda, capacity.0), poisoned(cuda, capacity.1));
    let mut count = poisoned(cuda, 1);
    let pending = match heads {
        DeviceHeads::Flags(flags) => {
            let flags_on_device = upload(cuda, flags, u32::MAX);
            offsets_from_head_flags_on_device(
                cuda,
                flags_on_device.slice(..flags.len()),
                num_keys,
                begin.slice_mut(..capacity.0),
                end.slice_mut(..capacity.1),
                count.slice_mut(..1),
            )
        }
        DeviceHeads::Indices(heads) => {
            let heads_on_device = upload(cuda, heads, -1);
            offsets_from_head_indices_on_device(
                cuda,
                heads_on_device.slice(..heads.len()),
                num_keys,
                begin.slice_mut(..capacity.0),
                end.slice_mut(..capacity.1),
                count.slice_mut(..1),
            )
        }
    }
    .expect("the host checks pass");
    let checked = pending.check().map_err(|e| e.to_string());
    let download = |slice: &CudaSlice<i64>| cuda.download(&slice.as_view()).expect("download");
    let (begin, end, count) = (download(&begin), download(&end), download(&count));
    for (name, buffer, len) in [("begin", &begin, capacity.0), ("end", &end, capacity.1)] {
        assert!(
            buffer[len..].iter().all(|&v| v == SENTINEL),
            "{name}: written past its {len} elements: {:?}",
            &buffer[len..]
        );
    }
    assert!(count[1..].iter().all(|&v| v == SENTINEL), "count's guard");
    OnDevice {
        checked,
        begin: begin[..capacity.0].to_vec(),
        end: end[..capacity.1].to_vec(),
        count: count[0],
    }
}

/// The device's offsets equal the host's: the same count, the same offsets below it, the
/// poison above it.
fn same_as_host(what: &str, host: Result<(Vec<i64>, Vec<i64>), Error>, gpu: OnDevice) {
    let (begin, end) = match host {
        Ok(offsets) => offsets,
        Err(error) => {
            assert_eq!(gpu.checked, Err(error.to_string()), "{what}: the error");
            assert_eq!(gpu.count, 0, "{what}: no segment after an invalid head");
            return;
        }
    };
    let n = begin.len();
    assert_eq!(gpu.checked, Ok(n), "{what}: the checked count");
    assert_eq!(gpu.count, n as i64, "{what}: the device count");
    for (name, host, gpu) in [("begin", &begin, &gpu.begin), ("end", &end, &gpu.end)] {
        if let Some(j) = (0..n).find(|&j| host[j] != gpu[j]) {
            panic!(
                "{what}: {name}[{j}] of {n}: gpu {} host {}",
                gpu[j], host[j]
            );
        }
        assert!(
            gpu[n..].iter().all(|&v| v == SENTINEL),
            "{what}: {name} written past the count"
        );
    }
}

/// Random flags over `num_keys` keys (`density` 1024ths of the bits set, every bit of every
/// word: those past the keys too), `extra` words more, key 0's bit set or clear.
fn random_flags(
    rng: &mut SplitMix64,
    num_keys: usize,
    density: u64,
    extra: usize,
    key0: bool,
) -> Vec<u32> {
    let mut flags = vec![0u32; num_keys.div_ceil(32) + extra];
    for word in &mut flags {
        for bit in 0..32 {
            if rng.next_u64() % 1024 < density {
                *word |= 1 << bit;
            }
        }
    }
    if let Some(first) = flags.first_mut() {
        *first = if key0 { *first | 1 } else { *first & !1 };
    }
    flags
}

/// The heads the flags mark in `0..num_keys`, without or with the head at 0.
fn heads_of(flags: &[u32], num_keys: usize, key0: bool) -> Vec<i64> {
    let mut heads: Vec<i64> = (1..num_keys)
        .filter(|&j| (flags[j / 32] >> (j % 32)) & 1 == 1)
        .map(|j| j as i64)
        .collect();
    if key0 && num_keys > 0 {
        heads.insert(0, 0);
    }
    heads
}

#[test]
fn flags_give_the_host_offsets() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rng = SplitMix64::new(24);
    for num_keys in SIZES {
        for density in DENSITIES {
            for key0 in [false, true] {
                let extra = usize::from(key0);
                let flags = random_flags(&mut rng, num_keys, density, extra, key0);
                let what = format!("flags: {num_keys} keys, density {density}, key0 {key0}");
                let host = offsets_from_head_flags(&flags, num_keys);
                let segments = host.as_ref().map_or(0, |(begin, _)| begin.len());
                // Room for exactly the segments, and for every key.
                for capacity in [segments, num_keys + 3] {
                    let gpu = on_device(
                        &cuda,
                        DeviceHeads::Flags(&flags),
                        num_keys,
                        (capacity, capacity),
                    );
                    same_as_host(&what, host.clone(), gpu);
                }
            }
        }
    }
}

#[test]
fn indices_give_the_host_offsets() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rng = SplitMix64::new(25);
    for num_keys in SIZES {
        for density in DENSITIES {
            for key0 in [false, true] {
                let flags = random_flags(&mut rng, num_keys, density, 0, false);
                let heads = heads_of(&flags, num_keys, key0);
                let what = format!(
                    "indices: {num_keys} keys, {} heads, key0 {key0}",
                    heads.len()
                );
                let host = offsets_from_head_indices(&heads, num_keys);
                let segments = host.as_ref().map_or(0, |(begin, _)| begin.len());
                // Room for exactly the segments, and the documented `heads.len() + 1`.
                for capacity in [segments, heads.len() + 1] {
                    let gpu = on_device(
                        &cuda,
                        DeviceHeads::Indices(&heads),
                        num_keys,
                        (capacity, capacity),
                    );
                    same_as_host(&what, host.clone(), gpu);
                }
            }
        }
    }
    // No keys: no segment, a head at 0 given (even twice: the host takes it) or omitted.
    for heads in [&[][..], &[0], &[0, 0]] {
        let host = offsets_from_head_indices(heads, 0);
        let gpu = on_device(&cuda, DeviceHeads::Indices(heads), 0, (2, 2));
        same_as_host(&format!("no keys, heads {heads:?}"), host, gpu);
    }
}

#[test]
fn invalid_heads_are_the_host_errors() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut cases: Vec<(String, Vec<i64>, usize)> = [
        (&[5i64, 3][..], 10usize),
        (&[3, 3], 10),
        (&[10], 10),
        (&[-1], 10),
        (&[i64::MIN, 4], 10),
        (&[4, i64::MAX], 10),
        (&[0, 0], 5),
        (&[2, 0], 5),
        (&[0, 5], 0),
        (&[1], 0),
        (&[-1, 3, 2], 10),
        (&[1, 2, 2, 1, 99], 10),
    ]
    .iter()
    .map(|&(heads, n)| (format!("{heads:?} over {n}"), heads.to_vec(), n))
    .collect();
    // Deep in a long list, past the first block: the smallest invalid position wins, whichever
    // fault comes later.
    let n = (1 << 20) + 7;
    let long: Vec<i64> = (1..n as i64).step_by(3).collect();
    let (mut duplicate_first, mut outside_first) = (long.clone(), long.clone());
    duplicate_first[250_000] = duplicate_first[249_999];
    duplicate_first[280_000] = -5;
    outside_first[200_001] = n as i64;
    outside_first[300_000] = outside_first[299_999];
    let mut unsorted_last = long.clone();
    let last = unsorted_last.len() - 1;
    unsorted_last[last] = 1;
    cases.push((
        "a duplicate, then a negative head".into(),
        duplicate_first,
        n,
    ));
    cases.push((
        "a head = num_keys, then a duplicate".into(),
        outside_first,
        n,
    ));
    cases.push(("the last head unsorted".into(), unsorted_last, n));
    for (what, heads, num_keys) in cases {
        let host = offsets_from_head_indices(&heads, num_keys);
        assert!(
            matches!(host, Err(Error::InvalidArgument { arg: "heads", .. })),
            "{what}: the host rejects it"
        );
        let capacity = heads.len() + 1;
        let gpu = on_device(
            &cuda,
            DeviceHeads::Indices(&heads),
            num_keys,
            (capacity, capacity),
        );
        same_as_host(&what, host, gpu);
    }
}

#[test]
fn too_small_offsets_are_reported_and_never_written_past() {
    let Some(cuda) = gpu_or_skip() else { return };
    // Heads at 0, 3, 33 and 39 over 40 keys: four segments.
    let flags = [0b1001u32, 0b1000_0010];
    let heads = [3i64, 33, 39];
    for (begin_len, end_len, arg) in [
        (3, 4, "begin"),
        (4, 3, "end"),
        (0, 0, "begin"),
        (1, 9, "begin"),
    ] {
        for (what, device_heads) in [
            ("flags", DeviceHeads::Flags(&flags)),
            ("indices", DeviceHeads::Indices(&heads)),
        ] {
            let gpu = on_device(&cuda, device_heads, 40, (begin_len, end_len));
            let len = if arg == "begin" { begin_len } else { end_len };
            let expected = Error::BufferTooSmall {
                arg,
                len,
                required: 4,
                required_from: if what == "flags" {
                    "the number of segments the head flags describe"
                } else {
                    "the number of segments the head indices describe"
                },
            };
            assert_eq!(gpu.checked, Err(expected.to_string()), "{what}");
            // The true count is written; the offsets that fit are the right ones.
            assert_eq!(gpu.count, 4, "{what}");
            let (begin, end) = ([0, 3, 33, 39], [3, 33, 39, 40]);
            assert_eq!(gpu.begin, begin[..begin_len.min(4)], "{what}");
            assert_eq!(gpu.end[..end_len.min(4)], end[..end_len.min(4)], "{what}");
        }
    }
}

#[test]
fn host_checks_fail_at_once_like_the_host() {
    let Some(cuda) = gpu_or_skip() else { return };
    let flags = cuda.upload(&[1u32, 0]).expect("upload");
    let (mut begin, mut end) = (poisoned(&cuda, 4), poisoned(&cuda, 4));
    let mut count = poisoned(&cuda, 1);
    // Flags shorter than ceil(num_keys / 32) words: the host function's error.
    let host = offsets_from_head_flags(&[1, 0], 65).expect_err("short flags");
    let gpu = offsets_from_head_flags_on_device(
        &cuda,
        flags.as_view(),
        65,
        begin.slice_mut(..4),
        end.slice_mut(..4),
        count.slice_mut(..1),
    )
    .expect_err("short flags");
    assert!(matches!(
        gpu,
        Error::BufferTooSmall {
            arg: "flags",
            len: 2,
            required: 3,
            ..
        }
    ));
    assert_eq!(gpu.to_string(), host.to_string());
    // No room for the count.
    let heads = cuda.upload(&[2i64]).expect("upload");
    let gpu = offsets_from_head_indices_on_device(
        &cuda,
        heads.as_view(),
        5,
        begin.slice_mut(..4),
        end.slice_mut(..4),
        count.slice_mut(..0),
    )
    .expect_err("no count");
    assert!(
        matches!(
            gpu,
            Error::BufferTooSmall {
                arg: "count",
                len: 0,
                required: 1,
                ..
            }
        ),
        "{gpu}"
    );
    let gpu = offsets_from_head_flags_on_device(
        &cuda,
        flags.as_view(),
        64,
        begin.slice_mut(..4),
        end.slice_mut(..4),
        count.slice_mut(..0),
    )
    .expect_err("no count");
    assert!(matches!(gpu, Error::BufferTooSmall { arg: "count", .. }));
    // Nothing was launched: every buffer keeps its poison.
    for buffer in [&begin, &end, &count] {
        let values = cuda.download(&buffer.as_view()).expect("download");
        assert!(values.iter().all(|&v| v == SENTINEL));
    }
}

/// Flags (or indices) on the device become offsets and a device count that a segmented sort
/// takes as its deferred `num_segments`, with no host round trip between the calls; the
/// sorted keys equal the host's sort over the host's offsets.
#[test]
fn device_heads_feed_a_deferred_segmented_sort() {
    let Some(cuda) = gpu_or_skip() else { return };
    let mut rng = SplitMix64::new(26);
    for (num_keys, density) in [(100_000usize, 3u64), (70_001, 200), (5000, 0), (1, 1024)] {
        let flags = random_flags(&mut rng, num_keys, density, 0, false);
        let keys: Vec<f32> = sample_keys(num_keys, num_keys as u64);
        let (host_begin, host_end) = offsets_from_head_flags(&flags, num_keys).expect("flags");
        let sizes = || segment_size::PerSegment::<()>::new(());
        let mut host = vec![f32::NAN; num_keys];
        segmented_sort::sort_keys(
            &Host::new(),
            &Problem::offsets(
                &host_begin[..],
                &host_end[..],
                sizes(),
                order::Ascending,
                num_segments::uniform(host_begin.len() as i64).expect("count"),
            ),
            &keys[..],
            &mut host[..],
            &Env::new(),
        )
        .and_then(Pending::check)
        .expect("host");
        let host_bits: Vec<u32> = host.iter().map(|k| k.to_bits()).collect();

        let heads = heads_of(&flags, num_keys, false);
        for from_flags in [true, false] {
            let what = format!("{num_keys} keys, density {density}, from flags {from_flags}");
            // Room for a segment per key: the count is known only on the device.
            let capacity = num_keys;
            let (mut begin, mut end) = (poisoned(&cuda, capacity), poisoned(&cuda, capacity));
            let mut count = poisoned(&cuda, 1);
            let device_flags = upload(&cuda, &flags, 0);
            let device_heads = upload(&cuda, &heads, 0);
            let segments = if from_flags {
                offsets_from_head_flags_on_device(
                    &cuda,
                    device_flags.slice(..flags.len()),
                    num_keys,
                    begin.slice_mut(..capacity),
                    end.slice_mut(..capacity),
                    count.slice_mut(..1),
                )
            } else {
                offsets_from_head_indices_on_device(
                    &cuda,
                    device_heads.slice(..heads.len()),
                    num_keys,
                    begin.slice_mut(..capacity),
                    end.slice_mut(..capacity),
                    count.slice_mut(..1),
                )
            }
            .expect("the host checks pass");
            let device_keys = cuda.upload(&keys).expect("upload");
            let mut out = cuda.upload(&vec![f32::NAN; num_keys]).expect("poison");
            let sorted = segmented_sort::sort_keys(
                &cuda,
                &Problem::offsets(
                    begin.slice(..capacity),
                    end.slice(..capacity),
                    sizes(),
                    order::Ascending,
                    num_segments::Deferred::<_>::new(count.slice(..1))
                        .with_bounds(0, capacity as i64)
                        .expect("bounds"),
                ),
                device_keys.as_view(),
                out.as_view_mut(),
                &Env::new(),
            )
            .expect("the front check passes");
            // Both checked after both launches.
            assert_eq!(segments.check().expect(&what), host_begin.len(), "{what}");
            sorted.check().expect(&what);
            let gpu = cuda.download(&out.as_view()).expect("download");
            if let Some(j) = (0..num_keys).find(|&j| gpu[j].to_bits() != host_bits[j]) {
                panic!(
                    "{what}: position {j}: gpu {:#x} host {:#x}",
                    gpu[j].to_bits(),
                    host_bits[j]
                );
            }
        }
    }
}
