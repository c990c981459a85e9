// Rule: static bounds are non-empty for per-segment parameters too.
use oxicub::segment_size;

fn main() {
    let sizes = [64i64, 128];
    let _sizes = segment_size::PerSegment::<_, 512, 256>::new(&sizes[..]);
}
