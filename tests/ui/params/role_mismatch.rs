// Rule: each argument takes a parameter built for it; a segment size passed as k is rejected.
use oxicub::{direction, env::Env, num_segments, segment_size};

fn main() {
    let _ = oxicub::contract::batched_topk(
        &segment_size::Static::<256>::new(),
        &segment_size::Static::<8>::new(),
        &direction::Max,
        &num_segments::uniform(16).unwrap(),
        &Env::new(),
    );
}
