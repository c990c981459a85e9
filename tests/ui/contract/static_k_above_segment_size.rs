// Rule: a static k above every segment size the types allow is a mistake in the types:
// no segment could ever hold k items.
use oxicub::{direction, env::Env, k, num_segments, segment_size};

fn main() {
    let _ = oxicub::contract::batched_topk(
        &segment_size::Uniform::<1, 256>::new(256).unwrap(),
        &k::Static::<300>::new(),
        &direction::Max,
        &num_segments::uniform(16).unwrap(),
        &Env::new(),
    );
}
