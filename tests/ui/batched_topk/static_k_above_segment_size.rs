// Rule: a static k whose lower bound is above every segment size the types allow can never be
// met: the call does not build (a post-monomorphization error of the front check).
use oxicub::batched_topk::{self, Problem};
use oxicub::{direction, k, num_segments, segment_size, Env, Host};

fn main() {
    let keys = [0f32; 256];
    let problem = Problem::strided(
        256,
        segment_size::Uniform::<1, 256>::new(256).unwrap(),
        k::Static::<300>::new(),
        direction::Max,
        num_segments::uniform(1).unwrap(),
    );
    let mut out = [0f32; 256];
    let _ = batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut out[..], &Env::new());
}
