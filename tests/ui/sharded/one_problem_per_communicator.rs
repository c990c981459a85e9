// Rule: a communicator serves one agreed problem at a time (the problem borrows it), so every
// exchange on it is sized from one agreement, the same on every rank. To switch problems, drop
// the first and agree again; to keep both, give each its own communicator.
use oxicub::sharded::{HostRank, Problem, Shards};
use oxicub::{direction, k, Error, Host};

fn two(rank: &mut HostRank) -> Result<(), Error> {
    let host = Host::new();
    let small = Problem::<f32, u32, _>::agree(&host, rank, Shards::new(&[8, 8])?, 4, k::Static::<2>::new(), direction::Max)?;
    let large = Problem::<f32, u32, _>::agree(&host, rank, Shards::new(&[8, 8])?, 4, k::Static::<8>::new(), direction::Max)?;
    let _ = (small.written(), large.written());
    Ok(())
}

fn main() {
    let _ = two;
}
