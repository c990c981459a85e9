// Rule: two static guarantees for the same parameter must overlap.
use oxicub::guarantee::{KRange, MaxK};
use oxicub::{k, Env};

fn main() {
    let env = Env::new().guarantee(MaxK::<8>::new()).guarantee(KRange::<16, 64>::new());
    let _ = env.bounds_of(&k::Uniform::<1, 64>::new(4).unwrap());
}
