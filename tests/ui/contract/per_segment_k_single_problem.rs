// Rule: single-problem top-k has one k; per-segment values belong to batched top-k.
use oxicub::{env::Env, k};

fn main() {
    let ks = [8i64, 16];
    let _ = oxicub::contract::topk(1 << 20, &k::PerSegment::<_>::new(&ks[..]), &Env::new());
}
