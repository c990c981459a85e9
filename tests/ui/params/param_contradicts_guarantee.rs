// Rule: a parameter's static range must agree with the environment's static guarantee for it
// (option 2 of the parameter proposal): here k is bounded to 16..=32 but the environment
// guarantees k <= 8.
use oxicub::guarantee::MaxK;
use oxicub::{k, Env};

fn main() {
    let env = Env::new().guarantee(MaxK::<8>::new());
    let _ = env.bounds_of(&k::Uniform::<16, 32>::new(16).unwrap());
}
