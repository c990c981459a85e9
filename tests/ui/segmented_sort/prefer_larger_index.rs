// Rule: a sort keeps equal keys in input order (the smaller source index first), so the
// tie-break `prefer_larger_index` contradicts it.
use oxicub::segmented_sort::{self, Problem};
use oxicub::{num_segments, order, require, segment_size, tie_break, Host};

fn main() -> Result<(), oxicub::Error> {
    let env = require!(tie_break::PreferLargerIndex);
    let problem = Problem::strided(
        2,
        segment_size::Static::<2>::new(),
        order::Descending,
        num_segments::uniform(1)?,
    );
    let (mut keys, mut values) = ([0u8; 2], [0u32; 2]);
    segmented_sort::sort_pairs(
        &Host::new(),
        &problem,
        &[2u8, 2][..],
        &[10u32, 11][..],
        &mut keys[..],
        &mut values[..],
        &env,
    )?
    .check()?;
    Ok(())
}
