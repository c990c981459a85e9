// Rule: the same check sees segment-size bounds given as environment guarantees.
use oxicub::guarantee::MaxSegmentSize;
use oxicub::{direction, env::Env, k, num_segments, segment_size};

fn main() {
    let sizes = [3i64, 5, 8];
    let _ = oxicub::contract::batched_topk(
        &segment_size::PerSegment::<_>::new(&sizes[..]),
        &k::Static::<16>::new(),
        &direction::Max,
        &num_segments::uniform(3).unwrap(),
        &Env::new().guarantee(MaxSegmentSize::<8>::new()),
    );
}
