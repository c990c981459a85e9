// Rule: values travel to the GPU as raw bytes, so a value type with padding bytes (here the
// three after the `u8` of `(u8, u32)`) is rejected at the call, with the fix in the message.
use oxicub::{k, topk, Env, Host};

fn main() {
    let keys = [1u32, 9, 4];
    let values = [(1u8, 10u32), (2, 20), (3, 30)];
    let (mut top, mut top_values) = ([0u32; 1], [(0u8, 0u32); 1]);
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
