//! Host-backend benches (criterion): CPU regressions show on any machine, GPU or not.
//!
//! `cargo bench --bench host`. Inputs come from a fixed-seed generator so runs compare.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use oxicub::env::{determinism, output_ordering, require, Env};
use oxicub::radix::RadixDigit;
use oxicub::{k, radix, topk, Host};
use std::hint::black_box;

/// Uniform f32 keys in [0, 1) from a fixed-seed splitmix64 stream.
fn keys_f32(n: usize) -> Vec<f32> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            (z >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

fn radix_primitives(c: &mut Criterion) {
    let host = Host::new();
    let n = 1 << 22;
    let keys = keys_f32(n);
    let mut group = c.benchmark_group("radix");
    group.throughput(Throughput::Bytes((n * 4) as u64));
    group.bench_function("transform_keys f32 2^22", |b| {
        let mut codes = vec![0u32; n];
        b.iter(|| radix::transform_keys(&host, black_box(&keys[..]), &mut codes[..]))
    });
    group.bench_function("digit_histogram f32 2^22 top byte", |b| {
        let mut hist = vec![0u32; 256];
        let digit = RadixDigit::byte(3).expect("byte 3 of a 32-bit key");
        b.iter(|| radix::digit_histogram(&host, black_box(&keys[..]), digit, &mut hist[..]))
    });
    group.finish();
}

fn single_problem_topk(c: &mut Criterion) {
    let host = Host::new();
    let n = 1 << 22;
    let keys = keys_f32(n);
    let mut group = c.benchmark_group("topk max_keys f32 2^22");
    group.throughput(Throughput::Bytes((n * 4) as u64));
    for kv in [8i64, 1024, 16384] {
        let kp = k::uniform(kv).expect("a count");
        let mut out = vec![0f32; kv as usize];
        group.bench_with_input(BenchmarkId::new("default contract", kv), &kv, |b, _| {
            b.iter(|| topk::max_keys(&host, black_box(&keys[..]), &mut out[..], &kp, &Env::new()))
        });
        let fast = require!(determinism::NotGuaranteed, output_ordering::Unsorted);
        group.bench_with_input(BenchmarkId::new("opt-out", kv), &kv, |b, _| {
            b.iter(|| topk::max_keys(&host, black_box(&keys[..]), &mut out[..], &kp, &fast))
        });
    }
    group.finish();
}

criterion_group!(benches, radix_primitives, single_problem_topk);
criterion_main!(benches);
