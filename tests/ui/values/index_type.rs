// Rule: source indices are written as u32, u64 or i64; a narrower index type is rejected at
// the call.
use oxicub::{k, topk, Env, Host};

fn main() {
    let keys = [1u32, 9, 4];
    let (mut top, mut at) = ([0u32; 1], [0u16; 1]);
    let _ = topk::max_indices(
        &Host::new(),
        &keys[..],
        &mut top[..],
        &mut at[..],
        &k::Static::<1>::new(),
        &Env::new(),
    );
}
