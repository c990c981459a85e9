// Every set operation, both orders as types and as a run-time choice, keys, pairs and indices,
// with the inputs' guarantees in the environment: all build and run on the host.
use oxicub::sets::{self, op};
use oxicub::{guarantee, order, Env, Host, SortOrder};

fn main() -> Result<(), oxicub::Error> {
    let host = Host::new();
    let (a, b) = ([1u32, 2, 2, 7], [2u32, 3, 7, 7]);
    let mut out = [0u32; 8];
    sets::keys(&host, op::Intersection, order::Ascending, &a[..], &b[..], &mut out[..], &Env::new())?.check()?;
    sets::keys(&host, op::Union, order::Choice::<order::Either>::new(SortOrder::Ascending)?, &a[..], &b[..], &mut out[..], &Env::new())?.check()?;
    let (mut values, mut from) = ([0i8; 8], [0i64; 8]);
    sets::pairs(&host, op::SymmetricDifference, order::Ascending, &a[..], &[1i8, 2, 3, 4][..], &b[..], &[5i8, 6, 7, 8][..], &mut out[..], &mut values[..], &Env::new())?.check()?;
    sets::indices(&host, op::Merge, order::Ascending, &a[..], &b[..], &mut out[..], &mut from[..], &Env::new())?.check()?;
    let (c, d) = ([9u32, 5, 1], [8u32, 5]);
    let promised = Env::new()
        .guarantee(guarantee::NoDuplicateKeys::new())
        .guarantee(guarantee::SortedInputs::new());
    sets::keys(&host, op::Difference, order::Descending, &c[..], &d[..], &mut out[..], &promised)?.check()?;
    Ok(())
}
