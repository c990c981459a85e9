// Rule: the top-k kernels carry a value as one 4- or 8-byte word; a 2-byte value does not
// build (a post-monomorphization error: `cargo build` reports it, `cargo check` may not).
use oxicub::{k, topk, Env, Host};

fn main() {
    let keys = [1u32, 9, 4];
    let values = [10u16, 20, 30];
    let (mut top, mut top_values) = ([0u32; 1], [0u16; 1]);
    let _ = topk::max_pairs(
        &Host::new(),
        &keys[..],
        &values[..],
        &mut top[..],
        &mut top_values[..],
        &k::Static::<1>::new(),
        &Env::new(),
    );
}
