//! Top-k over rows whose keys are sharded across ranks (GPUs, or threads on the host), with
//! the single-device contract: every rank holds a contiguous range of columns of every row
//! (vocab-parallel logits, a context-parallel KV history), all ranks call together, and the
//! result is the top `k` of each *whole* row, with indices into the whole row, bit for bit what
//! [`batched_topk::select_indices`](crate::batched_topk::select_indices) returns on the
//! concatenated rows.
//!
//! # How
//!
//! Candidates are exchanged, never the keys (docs/design/sharded_topk.md):
//!
//! 1. each rank selects the top `min(k, its columns)` of each of its rows, stable sorted, with
//!    ties to the smaller index (the larger one under `PreferLargerIndex`);
//! 2. one all-gather gives every rank every rank's candidates;
//! 3. the candidates are joined into rows in rank order, each rank's local indices made global
//!    (its columns' offset added), and the top `k` of each row is selected again.
//!
//! This is exact for every contract with no second round: the contract's selection is a total
//! order on (key, index) restricted to the row, so the whole row's top `k` under it is among
//! the union of every shard's own top `k` under it, however wide a tie class at the `k`-th key
//! is or however it straddles the shards. The join keeps equal keys in global index order
//! (ranks in column order, each rank's candidates stable sorted), so the second selection's
//! ties by position are ties by global index.
//!
//! # The call
//!
//! * [`Shards`]: how many columns each rank holds, in rank order (uneven and empty shards are
//!   allowed; rank `r` holds the columns after those of ranks `0..r`).
//! * [`Problem::agree`]: every rank states the problem (the shards, the rows, `k`, the
//!   direction, who receives the result, the key and index types) and the ranks check, in one
//!   blocking exchange, that they state the same one: a rank that differs gets
//!   [`Error::RanksDisagree`] on every rank. The problem holds the communicator until it is
//!   dropped, and the exchanges of its calls are sized from the agreement alone, so no rank
//!   can send more than another receives.
//! * [`select_indices`]: on every rank, this rank's shard of the rows (`rows x` its columns,
//!   row-major) in, the top `min(k, total columns)` of every row out (keys and global indices,
//!   row `i` at `i * min(k, total)`), on every rank or on the root only
//!   ([`Delivery`]). A rank whose own arguments are wrong still takes part in the exchange (so
//!   no peer waits forever), returns its error, and its peers' outcomes report
//!   [`Error::PeerFailed`] naming it.
//!
//! Under a determinism (the default `gpu_to_gpu`, or `run_to_run`) the output is stable
//! sorted (equal keys by global index) whatever ordering is required, and ties go to the
//! smaller global index unless `PreferLargerIndex` is required: the strongest contract of
//! each tie-break, which every weaker requirement accepts. A caller that opts out
//! (`determinism::NotGuaranteed`) gets the opt-out in both stages, in the required ordering:
//! any `k` items with the top keys of each whole row (the union of the shards' top keys still
//! holds enough of the `k`-th key), from the cheaper selections; the exchange is the same.
//!
//! # Communicators
//!
//! * [`HostRanks`]: ranks as threads of one process on the [`Host`](crate::Host) backend, the
//!   oracle of the GPU tests and what CI tests the merge logic with.
//! * `Nccl` (the `nccl` feature): an NCCL communicator on a [`Cuda`](crate::Cuda) backend's
//!   stream, one process per GPU or one process driving several.
//!
//! ```
//! use oxicub::sharded::{self, HostRanks, Problem, Shards};
//! use oxicub::params::{direction, k};
//! use oxicub::{Env, Host};
//!
//! // One row of 6 keys over two ranks (4 + 2 columns); the tie at 8 straddles the shards.
//! let row = [10u32, 8, 1, 8, /* rank 1: */ 8, 6];
//! let shards = Shards::new(&[4, 2])?;
//! let results = std::thread::scope(|scope| {
//!     let handles: Vec<_> = HostRanks::new(2)?
//!         .into_iter()
//!         .map(|rank| {
//!             let shards = shards.clone();
//!             scope.spawn(move || {
//!                 let (host, mut rank) = (Host::new(), rank);
//!                 let mine = if rank.rank() == 0 { &row[..4] } else { &row[4..] };
//!                 let problem = Problem::<u32, u32, _>::agree(
//!                     &host, &mut rank, shards, 1, k::Static::<3>::new(), direction::Max,
//!                 )?;
//!                 let (mut top, mut at) = ([0u32; 3], [0u32; 3]);
//!                 sharded::select_indices(&host, &problem, mine, &mut top[..], &mut at[..], &Env::new())?
//!                     .check()?;
//!                 Ok::<_, oxicub::Error>((top, at))
//!             })
//!         })
//!         .collect();
//!     Ok::<_, oxicub::Error>(handles.into_iter().map(|h| h.join().expect("no panic")).collect::<Vec<_>>())
//! })?;
//! for result in results {
//!     assert_eq!(result?, ([10, 8, 8], [0, 1, 3])); // the tie keeps the smaller global indices
//! }
//! # Ok::<(), oxicub::Error>(())
//! ```

mod comm;
mod cuda;
mod host;
#[cfg(feature = "nccl")]
mod nccl;
mod plan;

use std::marker::PhantomData;

use oxicub_env::Environment;
use oxicub_params::{
    direction, k, num_segments, role, segment_size, DiscreteParam, DiscreteParamFor, HostValue,
    ParamFor, SelectDirection,
};

pub use comm::{Communicator, HostRank, HostRanks};
#[cfg(feature = "nccl")]
pub use nccl::Nccl;
#[doc(hidden)]
pub use plan::Call;
pub(crate) use plan::Exchange;

use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::segments::Outcome;
use crate::values::SourceIndex;
use crate::Error;

/// How the columns of every row are split over the ranks: rank `r` holds `lens[r]` columns,
/// the ones after those of ranks `0..r`.
///
/// ```
/// use oxicub::sharded::Shards;
///
/// let shards = Shards::even(256_000, 3)?; // 85334 + 85333 + 85333
/// assert_eq!((shards.len(0), shards.offset(1), shards.total()), (85_334, 85_334, 256_000));
/// assert!(Shards::new(&[]).is_err());
/// # Ok::<(), oxicub::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shards {
    lens: Vec<usize>,
    offsets: Vec<u64>,
    total: u64,
}

impl Shards {
    /// Rank `r` holds `lens[r]` columns (zero allowed). At least one rank; the total must be an
    /// `i64` count.
    pub fn new(lens: &[usize]) -> Result<Shards, Error> {
        if lens.is_empty() {
            return Err(Error::InvalidArgument {
                arg: "lens",
                reason: "a sharded row has at least one rank".to_owned(),
            });
        }
        let mut offsets = Vec::with_capacity(lens.len());
        let mut total = 0u64;
        for &len in lens {
            offsets.push(total);
            total = total
                .checked_add(len as u64)
                .filter(|&t| t <= i64::MAX as u64)
                .ok_or_else(|| Error::TooLarge {
                    arg: "lens",
                    len: lens
                        .iter()
                        .map(|&l| l as u128)
                        .sum::<u128>()
                        .min(u64::MAX as u128) as u64,
                    max: i64::MAX as u64,
                    reason: "the columns of all shards are counted in an i64",
                })?;
        }
        Ok(Shards {
            lens: lens.to_vec(),
            offsets,
            total,
        })
    }

    /// `total` columns over `ranks` ranks as evenly as they go: the first `total % ranks`
    /// ranks hold one column more.
    pub fn even(total: usize, ranks: usize) -> Result<Shards, Error> {
        if ranks == 0 {
            return Shards::new(&[]);
        }
        let lens: Vec<usize> = (0..ranks)
            .map(|r| total / ranks + usize::from(r < total % ranks))
            .collect();
        Shards::new(&lens)
    }

    /// The number of ranks.
    pub fn ranks(&self) -> usize {
        self.lens.len()
    }

    /// The columns rank `rank` holds (0 past the last rank).
    pub fn len(&self, rank: usize) -> usize {
        self.lens.get(rank).copied().unwrap_or(0)
    }

    /// The first column rank `rank` holds, in the whole row (the total past the last rank).
    pub fn offset(&self, rank: usize) -> u64 {
        self.offsets.get(rank).copied().unwrap_or(self.total)
    }

    /// The columns of a whole row.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Every rank's number of columns, in rank order.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }
}

/// Which ranks receive the result.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// Every rank (each merges the exchanged candidates itself).
    #[default]
    Everyone,
    /// Rank `root` only; the other ranks' outputs are left untouched (and may be empty).
    Root(usize),
}

/// A sharded top-k problem every rank of a communicator agreed on ([`Problem::agree`]): the
/// shards, the number of rows, `k`, the direction, who receives the result, and the key and
/// index types (`K`, `I`). It holds this rank's communicator (`C`) exclusively until it is
/// dropped: every exchange on a communicator is then sized from one agreement, the same on
/// every rank, so no rank can send more than another receives (NCCL does not check that). To
/// run another problem, drop this one and agree on it; to keep several, give each its own
/// communicator.
#[derive(Debug)]
pub struct Problem<'c, K, I, C> {
    comm: &'c mut C,
    shards: Shards,
    rows: usize,
    k: u64,
    direction: SelectDirection,
    delivery: Delivery,
    rank: usize,
    exchange: Exchange,
    types: PhantomData<fn() -> (K, I)>,
}

impl<'c, K: RadixKey, I: SourceIndex, C> Problem<'c, K, I, C> {
    /// Every rank of `comm` states the problem and they check, in one blocking exchange, that
    /// they state the same one (delivered to [`Delivery::Everyone`]; see
    /// [`Problem::agree_delivering`]). The problem borrows `comm` until it is dropped.
    /// Errors: on every rank, [`Error::RanksDisagree`] naming
    /// the first field and rank that differ; on a rank whose own arguments are wrong (`shards`
    /// for another number of ranks than `comm`'s, `k` outside the environment-free bounds of
    /// its type, a whole row too long for `I`), that error, and [`Error::PeerFailed`] on the
    /// others.
    pub fn agree<B, Kp, Dir>(
        backend: &B,
        comm: &'c mut C,
        shards: Shards,
        rows: usize,
        k: Kp,
        direction: Dir,
    ) -> Result<Problem<'c, K, I, C>, Error>
    where
        B: ShardedBackend,
        C: Communicator<B>,
        Kp: ParamFor<role::K> + HostValue,
        Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    {
        Problem::agree_delivering(
            backend,
            comm,
            shards,
            rows,
            k,
            direction,
            Delivery::Everyone,
        )
    }

    /// [`Problem::agree`], delivering the result as `delivery` says.
    pub fn agree_delivering<B, Kp, Dir>(
        backend: &B,
        comm: &'c mut C,
        shards: Shards,
        rows: usize,
        k: Kp,
        direction: Dir,
        delivery: Delivery,
    ) -> Result<Problem<'c, K, I, C>, Error>
    where
        B: ShardedBackend,
        C: Communicator<B>,
        Kp: ParamFor<role::K> + HostValue,
        Dir: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>,
    {
        let stated = plan::Statement::of::<K, I>(&shards, rows, k.value(), &direction, delivery);
        let local = plan::check_local::<I>(
            comm.rank(),
            comm.ranks(),
            &shards,
            rows,
            direction.host_value(),
            delivery,
        );
        let words = stated.words(local.is_err());
        let all = backend.agree_words(Token::new(), &*comm, &words)?;
        local?;
        plan::Statement::compare(comm.rank(), &all)?;
        let k = stated.k;
        let exchange = Exchange::new(&shards, rows, k);
        Ok(Problem {
            rank: comm.rank(),
            comm,
            exchange,
            shards,
            rows,
            k,
            direction: stated.direction,
            delivery,
            types: PhantomData,
        })
    }

    /// This rank's communicator.
    pub fn comm(&self) -> &C {
        self.comm
    }

    /// The shards.
    pub fn shards(&self) -> &Shards {
        &self.shards
    }

    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// What each row writes: `min(k, total columns)`, also the output's row stride.
    ///
    /// ```
    /// # let (mut ranks, host) = (oxicub::sharded::HostRanks::new(1)?, oxicub::Host::new());
    /// use oxicub::sharded::{Problem, Shards};
    /// use oxicub::{direction, k};
    ///
    /// let problem = Problem::<f32, u32, _>::agree(&host, &mut ranks[0], Shards::new(&[10])?, 2, k::Static::<16>::new(), direction::Max)?;
    /// assert_eq!(problem.written(), 10);
    /// # Ok::<(), oxicub::Error>(())
    /// ```
    pub fn written(&self) -> usize {
        self.exchange.written
    }

    /// The key and index bytes one rank sends per call (its candidates, with padding to the
    /// widest shard's count, and two status words).
    pub fn bytes_sent(&self) -> usize {
        self.exchange.slot_items() * (std::mem::size_of::<K>() + std::mem::size_of::<I>())
            + 8 * plan::STATUS_WORDS
    }
}

/// A backend that runs sharded top-k: [`Host`](crate::Host) (with [`HostRanks`]) and
/// [`Cuda`](crate::Cuda) (with `Nccl`).
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not run sharded top-k",
    note = "sharded top-k runs on `Host` (with `sharded::HostRanks`) and on `Cuda` (with \
            `sharded::Nccl`, the `nccl` feature); `AnyBackend` has no communicator"
)]
pub trait ShardedBackend: crate::batched_topk::BatchedTopKBackend {
    /// Every rank's `words`, in rank order (blocking: the agreement's one exchange).
    #[doc(hidden)]
    fn agree_words<C: Communicator<Self>>(
        &self,
        token: Token,
        comm: &C,
        words: &[u64],
    ) -> Result<Vec<u64>, Error>;

    /// One sharded call whose local arguments were checked (`local` holds that check's
    /// error, if any: the call then takes part in the exchange with nothing to offer).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    fn sharded_checked<K: RadixKey, I: SourceIndex, C: Communicator<Self>>(
        &self,
        token: Token,
        call: plan::Call<'_>,
        comm: &C,
        keys: Self::Slice<'_, K>,
        out_keys: Self::SliceMut<'_, K>,
        out_indices: Self::SliceMut<'_, I>,
    ) -> Result<Outcome, Error>;
}

/// The top `min(k, total columns)` keys of every whole row with their indices in the whole
/// row, from this rank's shard `keys` (`rows x` this rank's columns, row-major). Every rank
/// calls it with the problem it agreed on; `out_keys` and `out_indices` hold
/// `rows * problem.written()` elements on the ranks that receive the result (row `i` at
/// `i * written`) and may be empty on the others. The environment's requirements are met with
/// the strongest contract of their tie-break (see the [module docs](self)); its guarantees on
/// `k` are checked.
///
/// Errors on this rank: `keys` of the wrong length ([`Error::LengthMismatch`]), outputs too
/// short ([`Error::BufferTooSmall`]), `k` outside the environment's guarantees. Such a
/// rank still takes part in the exchange; its peers' [`Outcome::check`](crate::Pending::check)
/// reports [`Error::PeerFailed`]; a peer that ran under other requirements (another
/// tie-break, or an opt-out) is [`Error::RanksDisagree`].
pub fn select_indices<B, K, I, C, E>(
    backend: &B,
    problem: &Problem<'_, K, I, C>,
    keys: B::Slice<'_, K>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
    env: &E,
) -> Result<Outcome, Error>
where
    B: ShardedBackend,
    K: RadixKey,
    I: SourceIndex,
    C: Communicator<B>,
    E: Environment,
{
    use crate::Buffer;
    let contract = plan::StageContract::of(env.resolved());
    let receives = match problem.delivery {
        Delivery::Everyone => true,
        Delivery::Root(root) => root == problem.rank,
    };
    let local = plan::check_call(
        problem,
        keys.len(),
        receives.then_some((out_keys.len(), out_indices.len())),
        env,
    );
    let call = plan::Call {
        exchange: &problem.exchange,
        rank: problem.rank,
        direction: problem.direction,
        contract,
        receives,
        local,
    };
    let comm: &C = problem.comm;
    backend.sharded_checked(Token::new(), call, comm, keys, out_keys, out_indices)
}

/// One stage of a sharded call: the top `k` of each row of `problem`, ties to the smaller
/// index (the larger with `prefer_larger`), stable sorted, with each key's index in its row
/// (`values` `None`: the local stage) or its value (the merge, whose values are the
/// candidates' global indices: ties by position are ties by global index, the join's order,
/// so the tie-break and the stable order carry over). The outcome is checked with the call's
/// own: checking it now would wait for the stream.
fn stage<B, K, I, P>(
    backend: &B,
    problem: &P,
    contract: plan::StageContract,
    keys: B::Slice<'_, K>,
    values: Option<B::Slice<'_, I>>,
    out_keys: B::SliceMut<'_, K>,
    out_indices: B::SliceMut<'_, I>,
) -> Result<Outcome, Error>
where
    B: crate::batched_topk::BatchedTopKBackend,
    K: RadixKey,
    I: SourceIndex,
    P: crate::batched_topk::ProblemOn<B>,
{
    use crate::batched_topk::{select_indices, select_pairs};
    fn under<B, K, I, P, E>(
        env: &E,
        backend: &B,
        problem: &P,
        keys: B::Slice<'_, K>,
        values: Option<B::Slice<'_, I>>,
        out_keys: B::SliceMut<'_, K>,
        out_indices: B::SliceMut<'_, I>,
    ) -> Result<Outcome, Error>
    where
        B: crate::batched_topk::BatchedTopKBackend,
        K: RadixKey,
        I: SourceIndex,
        P: crate::batched_topk::ProblemOn<B>,
        E: Environment,
    {
        match values {
            None => select_indices(backend, problem, keys, out_keys, out_indices, env),
            Some(values) => {
                select_pairs(backend, problem, keys, values, out_keys, out_indices, env)
            }
        }
    }
    use oxicub_env::{determinism::NotGuaranteed, output_ordering, tie_break, Env};
    use plan::StageContract;
    let opt_out = Env::new().with(NotGuaranteed);
    match contract {
        StageContract::Smaller => under(
            &Env::new(),
            backend,
            problem,
            keys,
            values,
            out_keys,
            out_indices,
        ),
        StageContract::Larger => {
            let env = Env::new().with(tie_break::PreferLargerIndex);
            under(&env, backend, problem, keys, values, out_keys, out_indices)
        }
        StageContract::OptOutUnsorted => {
            let env = opt_out.with(output_ordering::Unsorted);
            under(&env, backend, problem, keys, values, out_keys, out_indices)
        }
        StageContract::OptOutSorted => {
            let env = opt_out.with(output_ordering::Sorted);
            under(&env, backend, problem, keys, values, out_keys, out_indices)
        }
        StageContract::OptOutStable => {
            let env = opt_out.with(output_ordering::StableSorted);
            under(&env, backend, problem, keys, values, out_keys, out_indices)
        }
    }
}

/// The batched problem of `rows` rows of `len` keys, top `k` of each, rows written `stride`
/// apart: each stage of a sharded call.
#[allow(clippy::type_complexity)]
fn strided(
    len: usize,
    k: usize,
    dir: SelectDirection,
    rows: usize,
    stride: usize,
) -> Result<
    crate::batched_topk::Problem<
        crate::segments::Strided,
        segment_size::Uniform,
        k::Uniform,
        direction::Choice<direction::Either>,
        num_segments::Uniform,
    >,
    Error,
> {
    Ok(crate::batched_topk::Problem::strided(
        len,
        segment_size::uniform(Error::item_count(len)?)?,
        k::uniform(Error::item_count(k)?)?,
        direction::Choice::new(dir)?,
        num_segments::uniform(Error::item_count(rows)?)?,
    )
    .out_stride(stride))
}
