// Rule: each requirement is given once; the output ordering is one of unsorted, sorted,
// stable_sorted.
use oxicub::{output_ordering, require};

fn main() {
    let _env = require!(output_ordering::Sorted, output_ordering::StableSorted);
}
