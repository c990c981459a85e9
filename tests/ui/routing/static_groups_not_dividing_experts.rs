// Rule: a router whose static groups do not divide its static experts can never route: the call
// does not build (a post-monomorphization error of the front check).
use oxicub::params::{experts, groups, k, top_groups};
use oxicub::routing::{self, scoring, Router};
use oxicub::{Env, Host};

fn main() {
    let router = Router::grouped(
        experts::Static::<256>::new(),
        groups::Static::<7>::new(),
        top_groups::Static::<4>::new(),
        k::Static::<8>::new(),
        scoring::Sigmoid,
    );
    let logits = [0f32; 256];
    let (mut ids, mut weights) = ([0u32; 8], [0f32; 8]);
    let _ = routing::route(&Host::new(), &router, &logits[..], None, &mut ids[..], &mut weights[..], &Env::new());
}
