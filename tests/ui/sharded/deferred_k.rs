// Rule: sharded top-k sizes its exchange from `k` when the ranks agree, so `k` is known on the
// host (`Static` or `uniform`): a deferred `k`, read on the device, does not compile.
use oxicub::sharded::{HostRank, Problem, Shards};
use oxicub::{direction, k, Error, Host};

fn agree<'c>(
    rank: &'c mut HostRank,
    produced_earlier: &i64,
) -> Result<Problem<'c, f32, u32, HostRank>, Error> {
    Problem::agree(
        &Host::new(),
        rank,
        Shards::new(&[10, 10])?,
        4,
        k::Deferred::<_, 0, 8>::new(produced_earlier),
        direction::Max,
    )
}

fn main() {
    let _ = agree;
}
