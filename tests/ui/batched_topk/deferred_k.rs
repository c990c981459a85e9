// Rule: batched top-k's k gives a value for each segment (static, uniform or per segment); a
// deferred k (one value the host does not read) is not one of them.
use oxicub::batched_topk::{self, Problem};
use oxicub::{direction, k, num_segments, segment_size, Env, Host};

fn main() {
    let keys = [1f32, 5.0, 3.0, 2.0];
    let produced_earlier = 2i64;
    let problem = Problem::strided(
        2,
        segment_size::Static::<2>::new(),
        k::Deferred::<_, 0, 2>::new(&produced_earlier),
        direction::Max,
        num_segments::uniform(2).unwrap(),
    );
    let mut out = [0f32; 4];
    let _ = batched_topk::select_keys(&Host::new(), &problem, &keys[..], &mut out[..], &Env::new());
}
