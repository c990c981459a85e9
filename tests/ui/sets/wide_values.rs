// Rule: values travel as one word of up to 8 bytes; a wider value type does not build.
use oxicub::sets::{self, op};
use oxicub::{order, Env, Host};

fn main() -> Result<(), oxicub::Error> {
    let (mut keys, mut values) = ([0u8; 2], [[0u64; 2]; 2]);
    sets::pairs(
        &Host::new(),
        op::Merge,
        order::Ascending,
        &[1u8][..],
        &[[1u64, 2]][..],
        &[2u8][..],
        &[[3u64, 4]][..],
        &mut keys[..],
        &mut values[..],
        &Env::new(),
    )?
    .check()?;
    Ok(())
}
