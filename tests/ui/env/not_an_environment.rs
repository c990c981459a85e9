// Rule: the last argument of an algorithm is an environment built with `require!` or `Env`.
use oxicub::{determinism, k};

fn main() {
    let _ = oxicub::contract::topk(1024, &k::Static::<8>::new(), &determinism::RunToRun);
}
