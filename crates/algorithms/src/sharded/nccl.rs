//! NCCL: the communicator of sharded top-k on [`Cuda`] (the `nccl` feature).

use cudarc::driver::{CudaStream, CudaView, CudaViewMut};
use cudarc::nccl::{result as nccl_result, Comm, Id};

use super::Communicator;
use crate::backend::Cuda;
use crate::sealed::{Sealed, Token};
use crate::Error;

/// An NCCL communicator on a [`Cuda`] backend's stream: every exchange of a sharded call is
/// enqueued on that stream, in order with the call's kernels. One process per GPU
/// ([`Nccl::from_rank`], the unique id passed by the caller from rank 0 to the others) or one
/// process driving several GPUs ([`Nccl::for_devices`], each rank then called from its own
/// thread).
///
/// The constructors are `unsafe`: NCCL matches the collectives of its ranks by their order on
/// the communicator and does not check that they agree in size. oxicub sizes every exchange
/// of a problem from its agreement (and a problem holds the communicator), but a rank that
/// makes another sequence of sharded calls than its peers (agrees on a new problem while they
/// still select with the old one, say), or that issues its own collectives on [`Nccl::comm`]
/// out of step, pairs exchanges of different sizes, which NCCL may answer by writing past a
/// buffer.
///
/// NCCL is loaded at run time from `libnccl.so` (cudarc's loader does not try `libnccl.so.2`,
/// the name the `nvidia-nccl-cu13` wheel and PyTorch ship: link `libnccl.so` to it on the
/// library path). Without it every constructor returns [`Error::Communicator`].
///
/// ```no_run
/// use oxicub::sharded::{self, Nccl, Problem, Shards};
/// use oxicub::params::{direction, k};
/// use oxicub::{Cuda, Env};
///
/// // Two GPUs driven by one process, vocab-parallel logits [rows x 2 * 128000].
/// let backends = [Cuda::new(0)?, Cuda::new(1)?];
/// // SAFETY: each rank's thread below makes the same calls, agree then select_indices.
/// let comms = unsafe { Nccl::for_devices(&backends)? };
/// let shards = Shards::even(256_000, 2)?;
/// std::thread::scope(|scope| {
///     for (cuda, mut comm) in backends.iter().zip(comms) {
///         let shards = shards.clone();
///         scope.spawn(move || {
///             let problem = Problem::<f32, u32, _>::agree(cuda, &mut comm, shards, 4, k::Static::<50>::new(), direction::Max)?;
///             let logits = cuda.alloc_zeros::<f32>(4 * 128_000)?; // this rank's shard
///             let (mut top, mut token) = (cuda.alloc_zeros::<f32>(4 * 50)?, cuda.alloc_zeros::<u32>(4 * 50)?);
///             sharded::select_indices(cuda, &problem, logits.as_view(), top.as_view_mut(), token.as_view_mut(), &Env::new())?
///                 .check()
///         });
///     }
/// });
/// # Ok::<(), oxicub::Error>(())
/// ```
pub struct Nccl {
    comm: Comm,
}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nccl")
            .field("rank", &self.comm.rank())
            .field("ranks", &self.comm.world_size())
            .finish_non_exhaustive()
    }
}

fn nccl_error(call: &'static str) -> impl FnOnce(nccl_result::NcclError) -> Error {
    move |e| Error::Communicator {
        call,
        reason: format!("{:?}", e.0),
    }
}

/// [`Error::Communicator`] unless NCCL can be loaded (cudarc's loader panics when it cannot).
fn nccl_present() -> Result<(), Error> {
    // SAFETY: only asks the dynamic loader whether one of the library's names opens.
    if unsafe { cudarc::nccl::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::Communicator {
            call: "loading libnccl.so",
            reason: "NCCL is not on the library path (install the nvidia-nccl-cu13 wheel or \
                     PyTorch, and link libnccl.so to its libnccl.so.2)"
                .to_owned(),
        })
    }
}

impl Nccl {
    /// A new unique id for [`Nccl::from_rank`]: made on rank 0 and sent to every other rank
    /// (`id.internal()`, 128 bytes, by whatever the caller's processes share).
    pub fn unique_id() -> Result<Id, Error> {
        nccl_present()?;
        Id::new().map_err(nccl_error("ncclGetUniqueId"))
    }

    /// Rank `rank` of `ranks`, one per process, on `cuda`'s stream. Blocks until every rank
    /// has joined.
    ///
    /// # Safety
    ///
    /// Every rank makes the same sequence of sharded calls ([`Problem::agree`],
    /// [`select_indices`]) on this communicator, and any collective of its own on
    /// [`Nccl::comm`] at the same point of that sequence (see [`Nccl`]).
    ///
    /// [`Problem::agree`]: super::Problem::agree
    /// [`select_indices`]: super::select_indices
    pub unsafe fn from_rank(cuda: &Cuda, rank: usize, ranks: usize, id: Id) -> Result<Nccl, Error> {
        nccl_present()?;
        if rank >= ranks || i32::try_from(ranks).is_err() {
            return Err(Error::InvalidArgument {
                arg: "rank",
                reason: format!("{rank} is not a rank of {ranks}"),
            });
        }
        // NCCL takes the rank's device from the thread's current context.
        cuda.context()
            .bind_to_thread()
            .map_err(crate::error::driver_error("cuCtxSetCurrent"))?;
        let comm = Comm::from_rank(cuda.stream().clone(), rank, ranks, id)
            .map_err(nccl_error("ncclCommInitRank"))?;
        Ok(Nccl { comm })
    }

    /// One rank per backend (rank `i` on `backends[i]`'s stream, each backend on its own
    /// device), for one process driving several GPUs: call each rank from its own thread.
    ///
    /// # Safety
    ///
    /// As [`Nccl::from_rank`]: every rank makes the same sequence of sharded calls.
    pub unsafe fn for_devices(backends: &[Cuda]) -> Result<Vec<Nccl>, Error> {
        nccl_present()?;
        let streams = backends.iter().map(|b| b.stream().clone()).collect();
        let comms = Comm::from_devices(streams).map_err(nccl_error("ncclCommInitAll"))?;
        Ok(comms.into_iter().map(|comm| Nccl { comm }).collect())
    }

    /// The cudarc communicator.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The number of ranks.
    pub fn ranks(&self) -> usize {
        self.comm.world_size()
    }
}

impl Sealed for Nccl {}

// SAFETY: an NCCL communicator may be used from any thread, one thread at a time (NCCL's
// "thread safety" rules); `Nccl` is not `Sync`, so two threads never use one at once, and
// cudarc's `Comm` holds only the handle and its stream (itself `Send`).
unsafe impl Send for Nccl {}

impl Communicator<Cuda> for Nccl {
    fn rank(&self) -> usize {
        self.comm.rank()
    }

    fn ranks(&self) -> usize {
        self.comm.world_size()
    }

    fn all_gather<T: Copy + Send + Sync + 'static>(
        &self,
        _: Token,
        _: &Cuda,
        send: CudaView<'_, T>,
        mut recv: CudaViewMut<'_, T>,
    ) -> Result<(), Error> {
        let bytes = std::mem::size_of::<T>();
        if recv.len() != send.len() * self.ranks() {
            return Err(Error::LengthMismatch {
                arg: "recv",
                actual: recv.len(),
                expected: send.len() * self.ranks(),
                expected_from: "ranks * send.len()",
            });
        }
        // SAFETY: the views are reinterpreted as their bytes, which NCCL only copies (no value
        // of `u8` is invalid); the lengths cover exactly the same bytes.
        let (send, mut recv) = unsafe {
            (
                send.transmute::<u8>(send.len() * bytes),
                recv.transmute_mut::<u8>(recv.len() * bytes),
            )
        };
        let (Some(send), Some(recv)) = (send, recv.as_mut()) else {
            unreachable!("a view's own bytes always fit it")
        };
        self.comm
            .all_gather(&send, recv)
            .map_err(nccl_error("ncclAllGather"))?;
        Ok(())
    }

    fn grouped(
        &self,
        _: Token,
        backend: &Cuda,
        exchanges: &mut dyn FnMut() -> Result<(), Error>,
    ) -> Result<(), Error> {
        // The exchanges run on the communicator's stream: when the backend's is another (a
        // backend made with `Cuda::on_stream`, say), the two wait for each other around them.
        let (ours, theirs) = (self.comm.stream(), backend.stream());
        let other = ours.cu_stream() != theirs.cu_stream();
        let join = |waits: &CudaStream, on: &CudaStream| {
            waits
                .join(on)
                .map_err(crate::error::driver_error("cuStreamWaitEvent"))
        };
        if other {
            join(&ours, theirs)?;
        }
        nccl_result::group_start().map_err(nccl_error("ncclGroupStart"))?;
        // Each all-gather's buffers are the call's own, on these streams only: their cudarc
        // events need not outlive the group (NCCL enqueues the transfers at its end).
        let result = exchanges();
        let ended = nccl_result::group_end().map_err(nccl_error("ncclGroupEnd"));
        result.and(ended.map(|_| ()))?;
        if other {
            join(theirs, &ours)?;
        }
        Ok(())
    }
}
