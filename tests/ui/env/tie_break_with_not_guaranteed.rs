// Rule: a tie-break only means something when the result set is deterministic.
// `not_guaranteed` may return any subset of the boundary ties, so there is nothing to break.
use oxicub::{determinism, require, tie_break};

fn main() {
    let _env = require!(determinism::NotGuaranteed, tie_break::PreferSmallerIndex);
}
