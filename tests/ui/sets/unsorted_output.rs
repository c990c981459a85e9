// Rule: a set operation's output is sorted. `output_ordering::Unsorted` is not an ordering it
// can give; require nothing (stable_sorted) or `output_ordering::Sorted`.
use oxicub::sets::{self, op};
use oxicub::{order, output_ordering, require, Host};

fn main() -> Result<(), oxicub::Error> {
    let env = require!(output_ordering::Unsorted);
    let mut out = [0u8; 4];
    sets::keys(&Host::new(), op::Union, order::Ascending, &[1u8, 2][..], &[2u8, 3][..], &mut out[..], &env)?
        .check()?;
    Ok(())
}
