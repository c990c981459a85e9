// Rule: static bounds are non-empty: `Uniform<MIN, MAX>` needs MIN <= MAX.
use oxicub::k;

fn main() {
    let _k = k::Uniform::<9, 8>::new(8);
}
