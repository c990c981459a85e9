// Rule: a sort's output is sorted. `output_ordering::Unsorted` is not an ordering a sort can
// give; require nothing (stable_sorted) or `output_ordering::Sorted`.
use oxicub::segmented_sort::{self, Problem};
use oxicub::{num_segments, order, output_ordering, require, segment_size, Host};

fn main() -> Result<(), oxicub::Error> {
    let env = require!(output_ordering::Unsorted);
    let problem = Problem::strided(
        2,
        segment_size::Static::<2>::new(),
        order::Ascending,
        num_segments::uniform(1)?,
    );
    let mut out = [0u8; 2];
    segmented_sort::sort_keys(&Host::new(), &problem, &[2u8, 1][..], &mut out[..], &env)?
        .check()?;
    Ok(())
}
