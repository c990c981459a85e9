// Rule: `num_segments` is one value for the whole call; a per-segment value makes no sense.
use oxicub::{direction, env::Env, k, num_segments, segment_size};

fn main() {
    let counts = [4i64];
    let _ = oxicub::contract::batched_topk(
        &segment_size::Static::<64>::new(),
        &k::Static::<6>::new(),
        &direction::Max,
        &num_segments::PerSegment::<_>::new(&counts[..]),
        &Env::new(),
    );
}
