// Rule: the operation is one of `sets::op`'s types; anything else does not build.
use oxicub::sets;
use oxicub::{order, Env, Host};

#[derive(Clone, Copy)]
struct Xor;

fn main() -> Result<(), oxicub::Error> {
    let mut out = [0u8; 4];
    sets::keys(&Host::new(), Xor, order::Ascending, &[1u8, 2][..], &[2u8, 3][..], &mut out[..], &Env::new())?
        .check()?;
    Ok(())
}
