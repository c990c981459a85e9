// Rule: a select direction is max or min; a sort order is not a select direction.
use oxicub::{env::Env, k, num_segments, order, segment_size};

fn main() {
    let _ = oxicub::contract::batched_topk(
        &segment_size::Static::<256>::new(),
        &k::Static::<8>::new(),
        &order::Descending,
        &num_segments::uniform(16).unwrap(),
        &Env::new(),
    );
}
