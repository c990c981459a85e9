//! The compile-fail suite: one file per contract of the API, each with the message a user sees.
//!
//! `tests/ui/<area>/*.rs` are the compile-fail cases, one folder per area of the API (`env`:
//! requirements and environments, `params`: parameter bounds, roles and guarantees,
//! `contract`: the algorithms' front checks, `keys` and `values`: what travels to the GPU,
//! `topk` and `batched_topk`: those contracts at the calls a user writes); every folder but
//! `pass/` is an area, so a new area needs no change here. `tests/ui/pass/*.rs` must compile:
//! trybuild runs `cargo build` (not `cargo check`) because the suite has pass cases, so the
//! contracts enforced by const evaluation (post-monomorphization) are exercised too.
//!
//! The `.stderr` files hold the messages of the compiler pinned in `rust-toolchain.toml`;
//! regenerate them with `TRYBUILD=overwrite cargo test --test ui`.

use std::path::Path;

/// The folder of pass cases; every other folder of `tests/ui` is an area of compile-fail cases.
const PASS: &str = "pass";

#[test]
fn ui() {
    // trybuild drives cargo. `cargo test` always sets `CARGO`, so under cargo (CI, any developer
    // machine) this never skips; only a packed test binary run directly on a machine without a
    // Rust toolchain (the GPU machine) has nothing to build with.
    if std::env::var_os("CARGO").is_none() {
        println!("skipped: no cargo to drive trybuild (test binary run outside cargo)");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let mut areas: Vec<String> = std::fs::read_dir(&root)
        .expect("tests/ui")
        .map(|entry| entry.expect("an entry of tests/ui"))
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_dir()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != PASS)
        .collect();
    areas.sort();
    assert!(!areas.is_empty(), "no compile-fail areas under tests/ui");
    let t = trybuild::TestCases::new();
    for area in &areas {
        t.compile_fail(format!("tests/ui/{area}/*.rs"));
    }
    t.pass(format!("tests/ui/{PASS}/*.rs"));
}
