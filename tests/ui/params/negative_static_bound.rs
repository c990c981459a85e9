// Rule: every oxicub parameter is a count, so a static bound below 0 is a mistake.
use oxicub::num_segments;

fn main() {
    let _n = num_segments::Uniform::<-1, 16>::new(4);
}
