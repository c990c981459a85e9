// Rule: a router gives ties to the smaller expert id; an environment that requires the larger
// one does not build, and the message says what to change.
use oxicub::env::{require, tie_break};
use oxicub::params::{experts, k};
use oxicub::routing::{self, scoring, Router};
use oxicub::Host;

fn main() {
    let router = Router::new(experts::Static::<8>::new(), k::Static::<2>::new(), scoring::Softmax);
    let logits = [0f32; 8];
    let (mut ids, mut weights) = ([0u32; 2], [0f32; 2]);
    let env = require!(tie_break::PreferLargerIndex);
    let _ = routing::route(&Host::new(), &router, &logits[..], None, &mut ids[..], &mut weights[..], &env);
}
