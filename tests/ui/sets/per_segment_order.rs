// Rule: both inputs of one set operation are sorted in one order: a per-segment order does not
// build (it belongs to batched calls).
use oxicub::sets::{self, op};
use oxicub::{order, Env, Host, SortOrder};

fn main() -> Result<(), oxicub::Error> {
    let orders = [SortOrder::Ascending];
    let mut out = [0u8; 2];
    sets::keys(
        &Host::new(),
        op::Intersection,
        order::PerSegment::<_>::new(&orders[..]),
        &[1u8, 2][..],
        &[2u8, 3][..],
        &mut out[..],
        &Env::new(),
    )?
    .check()?;
    Ok(())
}
