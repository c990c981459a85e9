// Rule: only segment sizes may be given as bounds alone (`PerSegment<()>`: the layout's offsets
// give the values); a `k` needs values.
use oxicub::batched_topk::{self, Problem};
use oxicub::{direction, k, num_segments, segment_size, Env, Host};

fn main() {
    let keys = [1u32, 5, 3, 2];
    let problem = Problem::strided(
        4,
        segment_size::Static::<4>::new(),
        k::PerSegment::<(), 0, 4>::new(()),
        direction::Max,
        num_segments::uniform(1).unwrap(),
    );
    let mut out = [0u32; 4];
    let _ = batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut out[..], &Env::new());
}
