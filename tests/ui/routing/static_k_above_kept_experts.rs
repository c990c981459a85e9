// Rule: a static k above the experts the kept groups can hold (top_groups x experts / groups)
// can never be met: the call does not build.
use oxicub::params::{experts, groups, k, top_groups};
use oxicub::routing::{self, scoring, Router};
use oxicub::{Env, Host};

fn main() {
    let router = Router::grouped(
        experts::Static::<16>::new(),
        groups::Static::<4>::new(),
        top_groups::Static::<1>::new(),
        k::Static::<8>::new(),
        scoring::Sigmoid,
    );
    let logits = [0f32; 16];
    let (mut ids, mut weights) = ([0u32; 8], [0f32; 8]);
    let _ = routing::route(&Host::new(), &router, &logits[..], None, &mut ids[..], &mut weights[..], &Env::new());
}
