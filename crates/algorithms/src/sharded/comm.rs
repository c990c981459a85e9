//! Communicators: what moves the candidates between ranks.

use std::any::Any;
use std::sync::{Arc, Barrier, Mutex};

use crate::backend::{Backend, Host};
use crate::sealed::{Sealed, Token};
use crate::Error;

/// A group of ranks that call sharded top-k together, for backend `B`: [`HostRank`] on
/// [`Host`], `Nccl` on [`Cuda`](crate::Cuda) (the `nccl` feature). Sealed.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a communicator for `{B}`",
    note = "use `sharded::HostRanks` with `Host`, and `sharded::Nccl` (the `nccl` feature) with \
            `Cuda`"
)]
pub trait Communicator<B: Backend + ?Sized>: Sealed {
    /// This rank, in `0..ranks()`.
    fn rank(&self) -> usize;

    /// The number of ranks.
    fn ranks(&self) -> usize;

    /// Every rank's `send` (all of one length on every rank), in rank order, into `recv`
    /// (`ranks() * send.len()` elements). Every rank calls it, in the same order.
    #[doc(hidden)]
    fn all_gather<T: Copy + Send + Sync + 'static>(
        &self,
        token: Token,
        backend: &B,
        send: B::Slice<'_, T>,
        recv: B::SliceMut<'_, T>,
    ) -> Result<(), Error>;

    /// Runs `exchanges` (one or several [`all_gather`](Communicator::all_gather)s, the only
    /// way they are called) as one group, in order with `backend`'s work.
    #[doc(hidden)]
    fn grouped(
        &self,
        token: Token,
        backend: &B,
        exchanges: &mut dyn FnMut() -> Result<(), Error>,
    ) -> Result<(), Error> {
        let _ = (token, backend);
        exchanges()
    }
}

/// Ranks as threads of one process on the [`Host`] backend: [`HostRanks::new`] gives one
/// [`HostRank`] per rank, each moved to its own thread. The exchange is a copy through shared
/// memory between two barriers, so every rank must call every sharded function the others
/// call (a rank that stops calling leaves the others waiting, as with NCCL).
///
/// ```
/// use oxicub::sharded::HostRanks;
///
/// let ranks = HostRanks::new(4)?;
/// assert_eq!(ranks.iter().map(|r| r.rank()).collect::<Vec<_>>(), [0, 1, 2, 3]);
/// assert!(HostRanks::new(0).is_err());
/// # Ok::<(), oxicub::Error>(())
/// ```
#[derive(Debug)]
pub struct HostRanks;

impl HostRanks {
    /// `ranks` connected ranks (at least one).
    #[allow(clippy::new_ret_no_self)]
    pub fn new(ranks: usize) -> Result<Vec<HostRank>, Error> {
        if ranks == 0 {
            return Err(Error::InvalidArgument {
                arg: "ranks",
                reason: "a group has at least one rank".to_owned(),
            });
        }
        let group = Arc::new(Group {
            barrier: Barrier::new(ranks),
            slots: Mutex::new((0..ranks).map(|_| None).collect()),
        });
        Ok((0..ranks)
            .map(|rank| HostRank {
                rank,
                ranks,
                group: Arc::clone(&group),
            })
            .collect())
    }
}

/// One rank of a [`HostRanks`] group.
#[derive(Debug)]
pub struct HostRank {
    rank: usize,
    ranks: usize,
    group: Arc<Group>,
}

impl HostRank {
    /// This rank, in `0..ranks()`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn ranks(&self) -> usize {
        self.ranks
    }
}

type Slot = Option<Arc<dyn Any + Send + Sync>>;

struct Group {
    barrier: Barrier,
    slots: Mutex<Vec<Slot>>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group").finish_non_exhaustive()
    }
}

impl Sealed for HostRank {}

impl Communicator<Host> for HostRank {
    fn rank(&self) -> usize {
        self.rank
    }

    fn ranks(&self) -> usize {
        self.ranks
    }

    fn all_gather<T: Copy + Send + Sync + 'static>(
        &self,
        _: Token,
        _: &Host,
        send: &[T],
        recv: &mut [T],
    ) -> Result<(), Error> {
        let poisoned = |_| Error::InvalidArgument {
            arg: "comm",
            reason: "a rank of this group panicked during an exchange".to_owned(),
        };
        self.group.slots.lock().map_err(poisoned)?[self.rank] = Some(Arc::new(send.to_vec()));
        self.group.barrier.wait();
        let all: Vec<Slot> = self.group.slots.lock().map_err(poisoned)?.clone();
        // Every rank has read every slot before any rank writes the next exchange's.
        self.group.barrier.wait();
        let n = send.len();
        let mut mismatch = None;
        for (r, slot) in all.iter().enumerate() {
            match slot.as_ref().and_then(|s| s.downcast_ref::<Vec<T>>()) {
                Some(theirs) if theirs.len() == n && recv.len() >= (r + 1) * n => {
                    recv[r * n..(r + 1) * n].copy_from_slice(theirs);
                }
                _ => mismatch = mismatch.or(Some(r)),
            }
        }
        match mismatch {
            None => Ok(()),
            // Sizes come from the agreed problem: a mismatch is this module's bug, reported
            // rather than written past a buffer.
            Some(rank) => Err(Error::RanksDisagree {
                field: "exchange",
                rank,
                theirs: "another length or type".to_owned(),
                ours: format!("{n} elements of {}", std::any::type_name::<T>()),
            }),
        }
    }
}
