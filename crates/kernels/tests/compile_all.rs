//! Kernel compile check: every spec of every family compiles with NVRTC to a CUBIN for sm_90
//! (and every tier of the f32 and f64 batched top-k specs for sm_75, sm_80, sm_86 and sm_89,
//! where the kernels take their other paths), and the host's estimate of its static shared
//! memory bounds the CUBIN's.
//! Needs NVRTC, not a GPU or a driver. Without NVRTC it prints a skip line; with
//! `OXICUB_REQUIRE_NVRTC=1` a missing NVRTC fails the test.
//!
//! Which specs: with `OXICUB_COMPILE_CHECK=full` every one (the GPU suite sets it: its machine
//! compiles the whole registry in a few minutes); otherwise a covering subset of each list
//! ([`covering`]), which keeps CI's two cores to a fraction of the time (docs/testing.md,
//! "Kernel compile check").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use oxicub_kernels::families::batched_topk;
use oxicub_kernels::{compile_cubin, nvrtc_version, Arch, KernelError, KernelFamily, KernelSpec};

mod common;
use common::nvrtc_or_skip;

/// Every spec of every family in the registry ([`KernelFamily::ALL`], [`KernelFamily::specs`]).
#[test]
fn every_spec_of_every_family_compiles_for_sm_90() {
    for family in KernelFamily::ALL {
        compile_all(family.name(), family.specs(), Arch::SM_90);
    }
}

/// Below sm_90 the batched top-k kernels take their other paths: the stream tier's final is a
/// plain launch (no `griddepcontrol`), the clustered kernel is compiled without its body (the
/// plans never launch it there), and below sm_80 the warp sums and maxima are shuffles instead
/// of `__reduce_*_sync`. The f32 and f64 specs (every tier, 4- and 8-byte ranks, keys only and
/// with values) compile for sm_80 and sm_75; for sm_86 and sm_89, whose source paths are
/// sm_80's, every tier compiles once per rank width (f32 with 4-byte values, f64 with 8-byte
/// values). The plans choose tiers by the device's shared memory (sm_86 and sm_89 run the
/// stream tier's segments in the multi-block tier), never by what compiles: every tier
/// compiles for every architecture here.
#[test]
fn batched_topk_specs_compile_below_sm_90() {
    use oxicub_kernels::KeyType;
    let every_width: Vec<KernelSpec> = batched_topk::specs()
        .into_iter()
        .filter(|spec| matches!(spec.key(), KeyType::F32 | KeyType::F64))
        .collect();
    assert_eq!(every_width.len(), 2 * 3 * 9, "every tier of f32 and f64");
    for arch in [
        Arch::from_compute_capability(8, 0),
        Arch::from_compute_capability(7, 5),
    ] {
        compile_all("batched_topk f32 and f64", every_width.clone(), arch);
    }
    // A key's width in bytes as the values' width: f32 with 4-byte values, f64 with 8-byte.
    let one_width: Vec<KernelSpec> = every_width
        .into_iter()
        .filter(|spec| spec.constant("VALUE_BYTES") == Some(i64::from(spec.key().bits() / 8)))
        .collect();
    assert_eq!(
        one_width.len(),
        2 * 9,
        "every tier of f32 and f64, one value width each"
    );
    for arch in [
        Arch::from_compute_capability(8, 6),
        Arch::from_compute_capability(8, 9),
    ] {
        compile_all("batched_topk f32 and f64", one_width.clone(), arch);
    }
}

/// What representative calls instantiate, from their static bounds alone: MoE routing
/// (`segment_size::Static<256>`, `k::Static<8>`) compiles the warp tier and nothing for large k
/// or large segments; sparse attention only the stream tier (its filter and final selection, and
/// their clustered form); unbounded per-segment parameters every tier.
#[test]
fn batched_topk_calls_instantiate_only_what_their_bounds_allow() {
    use oxicub_kernels::families::batched_topk::{specs_for, BatchedTiers};
    use oxicub_kernels::{KeyType, Tier};
    let calls = [
        (
            "MoE [tokens x 256] k = Static<8>",
            (256, 256),
            (8, 8),
            1usize,
        ),
        ("[4096 x Static<64>] k = Static<6>", (64, 64), (6, 6), 1),
        (
            "sparse attention [q x 131072] k = Static<2048>",
            (131_072, 131_072),
            (2048, 2048),
            3,
        ),
        (
            "segments Uniform<512, 2048>, k Uniform<1, 64>",
            (512, 2048),
            (1, 64),
            1,
        ),
        (
            "per-segment sizes and k, unbounded",
            (0, i64::MAX),
            (0, i64::MAX),
            6,
        ),
    ];
    let mut all = Vec::new();
    for (call, sizes, k, kernels_expected) in calls {
        let tiers = BatchedTiers::for_bounds(sizes, k);
        let items = BatchedTiers::warp_items(sizes.1.min(256));
        let specs = specs_for(KeyType::F32, 4, tiers, items);
        println!("{call}:");
        for spec in &specs {
            println!("    {spec} ({:?})", spec.tier());
        }
        assert_eq!(specs.len(), 1 + kernels_expected, "{call}");
        all.extend(specs);
    }
    let moe = specs_for(
        KeyType::F32,
        4,
        BatchedTiers::for_bounds((256, 256), (8, 8)),
        8,
    );
    assert!(moe
        .iter()
        .all(|s| !matches!(s.tier(), Tier::BlockPerSegment | Tier::BlocksPerSegment)));
    compile_all("batched_topk (representative calls)", all, Arch::SM_90);
}

/// The static shared memory of the kernel in a CUBIN (an ELF64 image): the sizes of its
/// `.nv.shared.*` sections.
fn static_shared_in_cubin(cubin: &[u8], spec: &KernelSpec) -> u64 {
    assert!(
        cubin.starts_with(b"\x7fELF") && cubin[4] == 2,
        "{spec}: not an ELF64 image"
    );
    let u16_at = |at: usize| u64::from(u16::from_le_bytes([cubin[at], cubin[at + 1]]));
    let u32_at = |at: usize| {
        u64::from(u32::from_le_bytes([
            cubin[at],
            cubin[at + 1],
            cubin[at + 2],
            cubin[at + 3],
        ]))
    };
    let u64_at = |at: usize| u32_at(at) | (u32_at(at + 4) << 32);
    let headers = u64_at(0x28) as usize;
    let (entry, count, names) = (u16_at(0x3A) as usize, u16_at(0x3C), u16_at(0x3E) as usize);
    let header = |i: usize| headers + i * entry;
    let strings = u64_at(header(names) + 24) as usize;
    let name = |i: usize| {
        let at = strings + u32_at(header(i)) as usize;
        let end = at
            + cubin[at..]
                .iter()
                .position(|&b| b == 0)
                .expect("a NUL-ended name");
        &cubin[at..end]
    };
    (0..count as usize)
        .filter(|&i| name(i).starts_with(b".nv.shared."))
        .map(|i| u64_at(header(i) + 32))
        .sum()
}

/// Whether to compile every spec (`OXICUB_COMPILE_CHECK=full`) rather than a covering subset.
fn full_check() -> bool {
    std::env::var("OXICUB_COMPILE_CHECK").is_ok_and(|v| v == "full")
}

/// A subset of `specs` in which, within each tier, every template argument takes each of its
/// values at least once, and each key width meets each value of every other argument (value
/// widths, ops, static bounds, block sizes). Greedy, in list order, so the subset is the same
/// on every run. What it can miss is a failure that needs two non-key arguments together.
fn covering(specs: Vec<KernelSpec>) -> Vec<KernelSpec> {
    let mut seen = std::collections::HashSet::new();
    specs
        .into_iter()
        .filter(|spec| {
            // `|` and not `any`: every feature of a kept spec counts as seen.
            features(spec)
                .into_iter()
                .fold(false, |new, feature| seen.insert(feature) | new)
        })
        .collect()
}

/// What [`covering`] covers of one spec: each template argument's value within the tier, and
/// with the key's width.
fn features(spec: &KernelSpec) -> Vec<String> {
    let shown = spec.to_string();
    let args = shown
        .split_once('<')
        .map_or("", |(_, rest)| rest.trim_end_matches('>'));
    let tier = format!("{}/{:?}", spec.family(), spec.tier());
    let width = spec.key().bits();
    let mut features = Vec::new();
    for (at, arg) in args.split(", ").enumerate() {
        features.push(format!("{tier} {at}={arg}"));
        if at > 0 {
            features.push(format!("{tier} key{width} {at}={arg}"));
        }
    }
    features
}

/// The covering subset is what it says: every feature of a family's specs is in it. Needs no
/// NVRTC.
#[test]
fn the_covering_subset_covers_every_argument_of_every_tier() {
    use std::collections::HashSet;
    let mut kept = 0;
    let mut listed = 0;
    for family in KernelFamily::ALL {
        let all = family.specs();
        let subset = covering(all.clone());
        let wanted: HashSet<String> = all.iter().flat_map(features).collect();
        let covered: HashSet<String> = subset.iter().flat_map(features).collect();
        assert_eq!(wanted, covered, "{family}");
        assert!(subset.iter().all(|spec| all.contains(spec)));
        println!("{family}: {} of {} specs", subset.len(), all.len());
        kept += subset.len();
        listed += all.len();
    }
    println!("every family: {kept} of {listed} specs");
}

/// Compiles `specs` (all, or a covering subset: [`full_check`]) for `arch` on a few threads
/// and reports every failure.
fn compile_all(what: &str, specs: Vec<KernelSpec>, arch: Arch) {
    if !nvrtc_or_skip() {
        return;
    }
    let listed = specs.len();
    let specs = if full_check() { specs } else { covering(specs) };
    let next = AtomicUsize::new(0);
    let failures: Mutex<Vec<KernelError>> = Mutex::new(Vec::new());
    let estimates: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(8);
    let start = std::time::Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while let Some(spec) = specs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    match compile_cubin(spec, arch) {
                        Ok(cubin) => {
                            // The host's estimate of the static shared memory (the launch
                            // checks and the dynamic limit rest on it) must bound the kernel's.
                            let actual = static_shared_in_cubin(&cubin, spec);
                            let estimate = spec.static_shared_bytes();
                            if estimate < actual {
                                estimates
                                    .lock()
                                    .expect("no panics while holding")
                                    .push(format!(
                                        "{spec}: static shared memory {actual} B, the host \
                                     estimates {estimate} B"
                                    ));
                            }
                        }
                        Err(e) => failures.lock().expect("no panics while holding").push(e),
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().expect("no panics while holding");
    for failure in &failures {
        eprintln!("{failure}\n");
    }
    let (major, minor) = nvrtc_version().expect("NVRTC loaded above");
    println!(
        "{what}: compiled {} of {} kernel variants ({} listed) for {arch} with NVRTC {major}.{minor} in {:.1?} ({workers} threads)",
        specs.len() - failures.len(),
        specs.len(),
        listed,
        start.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} kernel variants failed to compile",
        failures.len()
    );
    let estimates = estimates.into_inner().expect("no panics while holding");
    assert!(
        estimates.is_empty(),
        "{} kernel variants have more static shared memory than the host estimates:\n{}",
        estimates.len(),
        estimates.join("\n")
    );
}
