// Rule: the tie-break/determinism rule holds in either order of the requirements.
use oxicub::{determinism, require, tie_break};

fn main() {
    let _env = require!(tie_break::PreferLargerIndex, determinism::NotGuaranteed);
}
