// Rule: each requirement is given once; two determinism requirements contradict or repeat.
use oxicub::{determinism, require};

fn main() {
    let _env = require!(determinism::RunToRun, determinism::GpuToGpu);
}
