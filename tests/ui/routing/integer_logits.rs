// Rule: a router reads f32, f16 or bf16 logits; integer logits do not build.
use oxicub::params::{experts, k};
use oxicub::routing::{self, scoring, Router};
use oxicub::{Env, Host};

fn main() {
    let router = Router::new(experts::Static::<8>::new(), k::Static::<2>::new(), scoring::Softmax);
    let logits = [0u32; 8];
    let (mut ids, mut weights) = ([0u32; 2], [0f32; 2]);
    let _ = routing::route(&Host::new(), &router, &logits[..], None, &mut ids[..], &mut weights[..], &Env::new());
}
