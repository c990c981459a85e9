//! The compile-fail suite: one file per contract of the API, each with the message a user sees.
//!
//! trybuild runs `cargo build` (not `cargo check`) because the suite has pass cases, so the
//! contracts enforced by const evaluation (post-monomorphization) are exercised too.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
