// Rule: each requirement is given once; two tie-breaks cannot both hold.
use oxicub::{determinism, require, tie_break};

fn main() {
    let _env = require!(
        determinism::RunToRun,
        tie_break::PreferSmallerIndex,
        tie_break::PreferLargerIndex
    );
}
