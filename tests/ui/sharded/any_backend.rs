// Rule: sharded top-k needs a backend with a communicator: `Host` (with `HostRanks`) or `Cuda`
// (with `Nccl`); `AnyBackend` has none.
use oxicub::sharded::{HostRank, Problem, Shards};
use oxicub::{direction, k, AnyBackend, Error};

fn agree<'c>(
    backend: &AnyBackend,
    rank: &'c mut HostRank,
) -> Result<Problem<'c, f32, u32, HostRank>, Error> {
    Problem::agree(
        backend,
        rank,
        Shards::new(&[10, 10])?,
        4,
        k::Static::<2>::new(),
        direction::Max,
    )
}

fn main() {
    let _ = agree;
}
