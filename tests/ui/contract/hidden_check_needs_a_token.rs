// Rule: the front check's hidden method, which builds the request the kernels trust, takes a
// token only oxicub can make: no code outside the crate can call it and reuse its request.
use oxicub::batched_topk::{Problem, ProblemOn};
use oxicub::{direction, k, num_segments, segment_size, Env, Host};

fn main() {
    let problem = Problem::strided(
        4,
        segment_size::Static::<4>::new(),
        k::Static::<1>::new(),
        direction::Max,
        num_segments::uniform(1).unwrap(),
    );
    let _ = ProblemOn::<Host>::checked(&problem, Default::default(), 4, &Env::new(), &[]);
}
