// Rule: sort values travel as one word of up to 8 bytes; a wider value type does not build.
use oxicub::segmented_sort::{self, Problem};
use oxicub::{num_segments, order, segment_size, Env, Host};

fn main() -> Result<(), oxicub::Error> {
    let problem = Problem::strided(
        1,
        segment_size::Static::<1>::new(),
        order::Ascending,
        num_segments::uniform(1)?,
    );
    let (mut keys, mut values) = ([0u8; 1], [[0u64; 2]; 1]);
    segmented_sort::sort_pairs(
        &Host::new(),
        &problem,
        &[1u8][..],
        &[[1u64, 2]][..],
        &mut keys[..],
        &mut values[..],
        &Env::new(),
    )?
    .check()?;
    Ok(())
}
