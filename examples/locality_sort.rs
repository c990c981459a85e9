//! Locality sort of keys that start near their places (the seed's `i + rand(0, 25)`, and
//! `i + rand(0, 1000)`) and of random keys, on the GPU when there is one (else the host), each
//! checked against a plain sort, with the merge passes' statistics (the seed's table: on keys
//! near their places few tiles merge).
//!
//! `cargo run --release --example locality_sort [log2 of the number of keys, default 26 on a
//! GPU, 20 on the host]`

use oxicub::{locality_sort, order, AnyBackend, Env};

/// SplitMix64: a fixed stream of pseudo-random words.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn main() -> Result<(), oxicub::Error> {
    let (backend, explained) = AnyBackend::auto_explained();
    let default_log2 = if matches!(backend, AnyBackend::Cuda(_)) {
        26
    } else {
        20
    };
    let log2 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse::<u32>().ok())
        .unwrap_or(default_log2)
        .min(30);
    let n = 1usize << log2;
    println!("{explained}; {n} i32 keys");
    let mut state = 1u64;
    let mut near = |spread: u64| -> Vec<i32> {
        (0..n)
            .map(|i| i as i32 + (next(&mut state) % spread) as i32)
            .collect()
    };
    let inputs = [
        ("i + rand(0, 25)", near(25)),
        ("i + rand(0, 1000)", near(1000)),
        ("random", near(1 << 30)),
    ];
    for (what, keys) in inputs {
        let mut sorted = vec![0i32; n];
        let start = std::time::Instant::now();
        let statistics = locality_sort::sort_keys(
            &backend,
            &order::Ascending,
            &keys[..],
            &mut sorted[..],
            &Env::new(),
        )?
        .check()?;
        let elapsed = start.elapsed();
        let mut expected = keys.clone();
        expected.sort_unstable();
        assert_eq!(sorted, expected, "{what}: not the sorted keys");
        println!(
            "\n{what}: sorted in {:.1} ms (on AnyBackend: copies to and from a GPU included)",
            elapsed.as_secs_f64() * 1e3
        );
        print!("{statistics}");
    }
    Ok(())
}
