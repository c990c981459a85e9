//! The backend-free part of sharded top-k: what the ranks agree on, how the exchanged
//! candidates are laid out and joined, and the checks of one call (docs/design/sharded_topk.md,
//! "The exchange").

use oxicub_env::{Determinism, Environment, OutputOrdering, Resolved, TieBreak};
use oxicub_params::{k, DiscreteParam, SelectDirection};

use super::{Delivery, Problem, Shards};
use crate::radix::RadixKey;
use crate::values::SourceIndex;
use crate::Error;

/// Status words each rank sends with its candidates: whether its own arguments failed, and
/// the tie-break it ran under (the candidates' layout depends on it).
pub(crate) const STATUS_WORDS: usize = 2;

/// What the ranks exchange on one call, the same on every rank once they agreed: rank `r`
/// offers the top `local_k[r] = min(k, lens[r])` of each row with their global indices (its
/// local ones plus `offsets[r]`), in a slot of `slot` (the largest `local_k`) per row; the
/// joined rows hold `candidates` (their sum) each, and the result `written = min(k, total)` per
/// row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Exchange {
    pub(crate) rows: usize,
    pub(crate) lens: Vec<usize>,
    pub(crate) offsets: Vec<u64>,
    pub(crate) local_k: Vec<usize>,
    pub(crate) slot: usize,
    pub(crate) candidates: usize,
    pub(crate) written: usize,
}

impl Exchange {
    pub(crate) fn new(shards: &Shards, rows: usize, k: u64) -> Exchange {
        let local_k: Vec<usize> = shards
            .lens()
            .iter()
            .map(|&len| k.min(len as u64) as usize)
            .collect();
        Exchange {
            rows,
            lens: shards.lens().to_vec(),
            offsets: (0..shards.ranks()).map(|r| shards.offset(r)).collect(),
            slot: local_k.iter().copied().max().unwrap_or(0),
            candidates: local_k.iter().sum(),
            written: k.min(shards.total()) as usize,
            local_k,
        }
    }

    /// The elements one rank sends (keys, and as many indices).
    pub(crate) fn slot_items(&self) -> usize {
        self.rows * self.slot
    }

    pub(crate) fn ranks(&self) -> usize {
        self.lens.len()
    }

    /// How the gathered candidates become rows, one entry per rank that offers any: (where
    /// its slots start in the gathered buffer, its first column in the joined rows, its
    /// count). The gathered buffer holds rank `r`'s slots from `r * slot_items()`, row `i`'s
    /// `slot` apart; the joined rows are `candidates` apart, the ranks' columns in rank order.
    pub(crate) fn joins(&self) -> Vec<(usize, usize, usize)> {
        let mut column = 0;
        let mut joins = Vec::with_capacity(self.ranks());
        for (r, &count) in self.local_k.iter().enumerate() {
            if count > 0 {
                joins.push((r * self.slot_items(), column, count));
                column += count;
            }
        }
        joins
    }
}

/// One call, checked on this rank (`local`: the error of its own arguments, if any). Only
/// [`select_indices`](super::select_indices) makes one.
#[derive(Debug)]
pub struct Call<'a> {
    pub(crate) exchange: &'a Exchange,
    pub(crate) rank: usize,
    pub(crate) direction: SelectDirection,
    pub(crate) contract: StageContract,
    pub(crate) receives: bool,
    pub(crate) local: Result<(), Error>,
}

impl Call<'_> {
    /// The status words this rank sends.
    pub(crate) fn status(&self) -> [u64; STATUS_WORDS] {
        [u64::from(self.local.is_err()), self.contract as u64]
    }
}

/// The contract both stages of a call run under, from the caller's requirements: the
/// strongest of their tie-break, or, when the caller opted out of determinism, the opt-out
/// with the caller's ordering (docs/design/sharded_topk.md, "The exchange").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StageContract {
    /// gpu_to_gpu, prefer_smaller_index, stable_sorted (also for a determinism without a
    /// tie-break: the answer must still be reproducible).
    Smaller = 0,
    /// gpu_to_gpu, prefer_larger_index, stable_sorted.
    Larger = 1,
    /// not_guaranteed, unsorted.
    OptOutUnsorted = 2,
    /// not_guaranteed, sorted.
    OptOutSorted = 3,
    /// not_guaranteed, stable_sorted.
    OptOutStable = 4,
}

impl StageContract {
    pub(crate) fn of(requirements: Resolved) -> StageContract {
        match (requirements.determinism, requirements.tie_break) {
            (Determinism::NotGuaranteed, _) => match requirements.ordering {
                OutputOrdering::Unsorted => StageContract::OptOutUnsorted,
                OutputOrdering::Sorted => StageContract::OptOutSorted,
                OutputOrdering::StableSorted => StageContract::OptOutStable,
            },
            (_, TieBreak::PreferLargerIndex) => StageContract::Larger,
            _ => StageContract::Smaller,
        }
    }

    fn name(word: u64) -> &'static str {
        match word {
            0 => "prefer_smaller_index, stable_sorted",
            1 => "prefer_larger_index, stable_sorted",
            2 => "not_guaranteed, unsorted",
            3 => "not_guaranteed, sorted",
            _ => "not_guaranteed, stable_sorted",
        }
    }
}

/// The first peer whose status words report a failure or another stage contract than this
/// rank's (`all`: every rank's words, in rank order).
pub(crate) fn peer_error(rank: usize, all: &[u64]) -> Option<Error> {
    let words: Vec<&[u64]> = all.chunks(STATUS_WORDS).collect();
    let mine = words.get(rank)?;
    for (r, theirs) in words.iter().enumerate() {
        if theirs[0] != 0 && r != rank {
            return Some(Error::PeerFailed { rank: r });
        }
    }
    words.iter().enumerate().find_map(|(r, theirs)| {
        (theirs[1] != mine[1]).then(|| Error::RanksDisagree {
            field: "requirements",
            rank: r,
            theirs: StageContract::name(theirs[1]).to_owned(),
            ours: StageContract::name(mine[1]).to_owned(),
        })
    })
}

/// Checks one call's own arguments on this rank.
pub(crate) fn check_call<K: RadixKey, I: SourceIndex, C, E: Environment>(
    problem: &Problem<'_, K, I, C>,
    keys: usize,
    outputs: Option<(usize, usize)>,
    env: &E,
) -> Result<(), Error> {
    let expected = problem.rows * problem.shards.len(problem.rank);
    Error::check_len("keys", keys, expected, "rows * shards.len(rank)")?;
    if let Some((out_keys, out_indices)) = outputs {
        let required = problem.rows * problem.exchange.written;
        for (arg, len) in [("out_keys", out_keys), ("out_indices", out_indices)] {
            if len < required {
                return Err(Error::BufferTooSmall {
                    arg,
                    len,
                    required,
                    required_from: "rows * min(k, shards.total())",
                });
            }
        }
    }
    let total = Error::item_count(problem.shards.total() as usize)?;
    crate::contract::topk(total, &k::uniform(problem.k as i64)?, env)?;
    Ok(())
}

/// What a rank states about the problem: the words every rank compares.
#[derive(Clone, Debug)]
pub(crate) struct Statement {
    pub(crate) k: u64,
    pub(crate) direction: SelectDirection,
    words: [u64; FIELDS.len()],
}

/// The statement's fields, in the order of its words (the first word is the failure flag).
const FIELDS: [&str; 10] = [
    "failed",
    "shards.ranks()",
    "rows",
    "k",
    "direction",
    "delivery",
    "key type",
    "index type",
    "shards",
    "candidates per row",
];

impl Statement {
    pub(crate) fn of<K: RadixKey, I: SourceIndex>(
        shards: &Shards,
        rows: usize,
        k: i64,
        direction: &impl DiscreteParam<Option = SelectDirection>,
        delivery: Delivery,
    ) -> Statement {
        let k = k.max(0) as u64;
        // A per-segment direction has no one value: stated as max, refused by `check_local`.
        let dir = direction.host_value().unwrap_or(SelectDirection::Max);
        let exchange = Exchange::new(shards, rows, k);
        let words = [
            0,
            shards.ranks() as u64,
            rows as u64,
            k,
            dir as u64,
            match delivery {
                Delivery::Everyone => 0,
                Delivery::Root(root) => 1 + root as u64,
            },
            fnv(format!("{:?}/{}", K::KEY_TYPE, std::mem::size_of::<K>()).bytes()),
            fnv(std::any::type_name::<I>().bytes()),
            fnv(shards
                .lens()
                .iter()
                .flat_map(|len| (*len as u64).to_le_bytes())),
            // With rows, k and the shards' hash equal, these are too; compared exactly since
            // the exchange's sizes rest on them.
            (exchange.slot as u64) << 32 | exchange.candidates as u64,
        ];
        Statement {
            k,
            direction: dir,
            words,
        }
    }

    /// The words this rank sends (`failed`: its own arguments failed).
    pub(crate) fn words(&self, failed: bool) -> Vec<u64> {
        let mut words = self.words.to_vec();
        words[0] = u64::from(failed);
        words
    }

    /// Every rank's statement against this rank's: the first failed peer, else the first
    /// field (in order) and rank that differ.
    pub(crate) fn compare(rank: usize, all: &[u64]) -> Result<(), Error> {
        let statements: Vec<&[u64]> = all.chunks(FIELDS.len()).collect();
        if let Some(r) = statements.iter().position(|words| words[0] != 0) {
            return Err(Error::PeerFailed { rank: r });
        }
        let mine = statements[rank];
        for (field, name) in FIELDS.iter().enumerate().skip(1) {
            if let Some(r) = statements.iter().position(|w| w[field] != mine[field]) {
                return Err(Error::RanksDisagree {
                    field: name,
                    rank: r,
                    theirs: statements[r][field].to_string(),
                    ours: mine[field].to_string(),
                });
            }
        }
        Ok(())
    }

    /// The number of words a statement has.
    pub(crate) const WORDS: usize = FIELDS.len();
}

/// FNV-1a of `bytes`: a statement word for what is not a number.
fn fnv(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Checks the arguments of [`Problem::agree`] on this rank.
pub(crate) fn check_local<I: SourceIndex>(
    rank: usize,
    ranks: usize,
    shards: &Shards,
    rows: usize,
    direction: Option<SelectDirection>,
    delivery: Delivery,
) -> Result<(), Error> {
    if shards.ranks() != ranks {
        return Err(Error::InvalidArgument {
            arg: "shards",
            reason: format!(
                "has {} ranks, the communicator {ranks} (this is rank {rank})",
                shards.ranks()
            ),
        });
    }
    if direction.is_none() {
        return Err(Error::InvalidArgument {
            arg: "direction",
            reason: "sharded top-k takes one direction known on the host (direction::Max, \
                     direction::Min or direction::Choice)"
                .to_owned(),
        });
    }
    if let Delivery::Root(root) = delivery {
        if root >= ranks {
            return Err(Error::InvalidArgument {
                arg: "delivery",
                reason: format!("the root {root} is not a rank (0..{ranks})"),
            });
        }
    }
    if shards.total() > I::MAX_ITEMS {
        return Err(Error::TooLarge {
            arg: "shards",
            len: shards.total(),
            max: I::MAX_ITEMS,
            reason: "the index type cannot hold every index of a whole row; use u64 or i64",
        });
    }
    let most = shards.lens().iter().copied().max().unwrap_or(0);
    if rows.checked_mul(most).is_none() {
        return Err(Error::TooLarge {
            arg: "rows",
            len: rows as u64,
            max: (usize::MAX / most.max(1)) as u64,
            reason: "rows times a shard's columns must be a buffer length",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Exchange, Shards};

    #[test]
    fn uneven_shards_join_row_by_row_in_rank_order() {
        // k = 3 over shards of 4, 1 and 0 columns: rank 0 offers 3, rank 1 offers 1.
        let shards = Shards::new(&[4, 1, 0]).expect("shards");
        let exchange = Exchange::new(&shards, 2, 3);
        assert_eq!(exchange.local_k, [3, 1, 0]);
        assert_eq!(
            (exchange.slot, exchange.candidates, exchange.written),
            (3, 4, 3)
        );
        assert_eq!(exchange.joins(), [(0, 0, 3), (6, 3, 1)]);
    }

    #[test]
    fn k_above_the_whole_row_writes_the_row() {
        let shards = Shards::new(&[2, 3]).expect("shards");
        let exchange = Exchange::new(&shards, 1, 10);
        assert_eq!(
            (exchange.slot, exchange.candidates, exchange.written),
            (3, 5, 5)
        );
    }
}
