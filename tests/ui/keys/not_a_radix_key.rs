// Rule: keys are the types with an order-preserving radix transform (integers of 1 to 8 bytes,
// f16, bf16, f32, f64); any other type is rejected at the call with the list.
use oxicub::{k, topk, Env, Host};

fn main() {
    let keys = [(1u32, 2u32), (3, 4)];
    let mut top = [(0u32, 0u32); 1];
    let _ = topk::max_keys(&Host::new(), &keys[..], &mut top[..], &k::Static::<1>::new(), &Env::new());
}
