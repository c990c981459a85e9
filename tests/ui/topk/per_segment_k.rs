// Rule: single-problem top-k takes one k (static, uniform or deferred); a per-segment k is a
// batched top-k parameter.
use oxicub::{k, topk, Env, Host};

fn main() {
    let keys = [1u32, 9, 4];
    let ks = [1i64, 2];
    let mut top = [0u32; 2];
    let _ = topk::max_keys(
        &Host::new(),
        &keys[..],
        &mut top[..],
        &k::PerSegment::<_, 0, 2>::new(&ks[..]),
        &Env::new(),
    );
}
