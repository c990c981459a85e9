//! The compile-fail suite: one file per contract of the API, each with the message a user sees.
//!
//! trybuild runs `cargo build` (not `cargo check`) because the suite has pass cases, so the
//! contracts enforced by const evaluation (post-monomorphization) are exercised too.

#[test]
fn ui() {
    // trybuild drives cargo. `cargo test` always sets `CARGO`, so under cargo (CI, any developer
    // machine) this never skips; only a packed test binary run directly on a machine without a
    // Rust toolchain (the GPU machine) has nothing to build with.
    if std::env::var_os("CARGO").is_none() {
        println!("skipped: no cargo to drive trybuild (test binary run outside cargo)");
        return;
    }
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    for area in ["batched_topk", "topk", "values"] {
        t.compile_fail(format!("tests/ui/{area}/*.rs"));
    }
    t.pass("tests/ui/pass/*.rs");
}
