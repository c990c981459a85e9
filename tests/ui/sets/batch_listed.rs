// Rule: a batched set operation reads each input's segments where they lie (strided rows or
// offsets into the input): a listed layout does not build.
use oxicub::segments::Listed;
use oxicub::sets::Batch;
use oxicub::{num_segments, segment_size};

fn main() -> Result<(), oxicub::params::ParamError> {
    let sizes = || segment_size::PerSegment::<()>::new(());
    let _batch = Batch::new(Listed::default(), sizes(), Listed::default(), sizes(), num_segments::uniform(2)?);
    Ok(())
}
