//! Single-problem top-k calls (`oxicub_algorithms::topk`): every entry point (`max_*`, `min_*`,
//! `select_*` with each kind of direction, `select_*_owned`), `k` static, uniform or deferred,
//! the environment's guarantees on `k`; what each returns and writes.
//!
//! The contract (`topk` module docs): one direction known on the host (a per-segment direction
//! is [`Expected::InvalidArgument`] naming `direction`, checked first); `k` merged with the
//! guarantees; a host `k` above `keys.len()` is an error naming `k` (so is a deferred `k`'s
//! lower bound above it); `values` must have `keys.len()` elements; each output at least
//! `min(k.max, keys.len())`. A deferred `k` is clamped into its merged bounds and
//! `keys.len()`, and one outside its bounds is reported by the outcome's check. The first `k`
//! slots of each output then hold the selection, the rest is untouched.

use oxicub_algorithms::Error;
use oxicub_env::Resolved;
use oxicub_params::{BoundOrigin, Bounds, SelectDirection};

use super::expected::assert_outcome;
use super::{
    check_selection, check_untouched, deferred_report, merged, Entry, Expected, FuzzValue, Single,
    SingleKind, Tape,
};
use crate::oracle::RefKey;

/// The value of a static `k` (`k::Static::<3>`).
pub const STATIC_K: i64 = 3;

/// Which function, and how it takes the direction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    /// `max_*` or `min_*`: the function's own.
    Function(SelectDirection),
    /// `select_*` with `direction::Max`.
    Max,
    /// `select_*` with `direction::Min`.
    Min,
    /// `select_*` with `direction::Choice::<Either>`.
    Choice(SelectDirection),
    /// `select_*` with `direction::PerSegment` over these bytes: not one direction.
    PerSegment(Vec<u8>),
}

/// The kinds of [`Direction`], for choosing which a test generates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectionKind {
    /// [`Direction::Function`].
    Function,
    /// [`Direction::Max`].
    Max,
    /// [`Direction::Min`].
    Min,
    /// [`Direction::Choice`].
    Choice,
    /// [`Direction::PerSegment`].
    PerSegment,
}

/// Which kinds a test's dispatch runs.
#[derive(Clone, Copy, Debug)]
pub struct Kinds {
    /// Entry points.
    pub entries: &'static [Entry],
    /// `select_*_owned` (`true`) or into caller buffers.
    pub owned: &'static [bool],
    /// Directions (an owned call has no [`DirectionKind::Function`]).
    pub directions: &'static [DirectionKind],
    /// `k`.
    pub k: &'static [SingleKind],
}

/// One single-problem top-k call.
#[derive(Clone, Debug)]
pub struct TopKCall<Key> {
    /// The entry point.
    pub entry: Entry,
    /// `select_*_owned` (no output buffers).
    pub owned: bool,
    /// The direction.
    pub direction: Direction,
    /// `k`.
    pub k: Single,
    /// Two guarantees on `k` in the environment.
    pub k_guarantees: [Bounds; 2],
    /// The keys.
    pub keys: Vec<Key>,
    /// The length of `values` (pairs); value `i` is `V::from_source(i)`.
    pub values_len: usize,
    /// The lengths of the output buffers: keys, then values or indices.
    pub out_lens: [usize; 2],
}

/// A call that passes the front check: how many items it selects, in which direction, and how
/// many it may write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopKRun {
    /// The direction.
    pub direction: SelectDirection,
    /// The number of items selected (and written).
    pub written: usize,
    /// The most items the call may write: `min(k.max, keys.len())` over the merged bounds.
    pub max_written: usize,
    /// Whether `k` is deferred.
    pub deferred: bool,
    /// What checking the outcome reports: a deferred `k` outside its bounds (the call then
    /// selects with `k` clamped into them).
    pub outcome: Option<Expected>,
}

impl<Key: RefKey> TopKCall<Key> {
    /// Every kind.
    pub const ALL_KINDS: Kinds = Kinds {
        entries: &[Entry::Keys, Entry::Pairs, Entry::Indices],
        owned: &[false, true],
        directions: &[
            DirectionKind::Choice,
            DirectionKind::Function,
            DirectionKind::Max,
            DirectionKind::Min,
            DirectionKind::PerSegment,
        ],
        k: &[
            SingleKind::Uniform,
            SingleKind::Static,
            SingleKind::Deferred,
        ],
    };

    /// A call from `tape` with parameters of `kinds`: mostly valid, with each bad input
    /// the contract names now and then.
    pub fn generate(tape: &mut Tape<'_>, kinds: &Kinds) -> TopKCall<Key> {
        let entry = tape.pick(kinds.entries);
        let owned = tape.pick(kinds.owned);
        // A per-segment direction is always rejected: rarely.
        let per_segment = kinds.directions.contains(&DirectionKind::PerSegment);
        let others: Vec<DirectionKind> = kinds
            .directions
            .iter()
            .copied()
            .filter(|&d| d != DirectionKind::PerSegment && !(owned && d == DirectionKind::Function))
            .collect();
        let direction_kind = if others.is_empty() || per_segment && tape.percent(5) {
            DirectionKind::PerSegment
        } else {
            tape.pick(&others)
        };
        let n = tape.below(65) as usize;
        let keys = tape.keys(n);
        let either = |tape: &mut Tape<'_>| tape.pick(&[SelectDirection::Max, SelectDirection::Min]);
        let direction = match direction_kind {
            DirectionKind::Function => Direction::Function(either(tape)),
            DirectionKind::Max => Direction::Max,
            DirectionKind::Min => Direction::Min,
            DirectionKind::Choice => Direction::Choice(either(tape)),
            DirectionKind::PerSegment => {
                Direction::PerSegment((0..tape.below(3)).map(|_| tape.below(2) as u8).collect())
            }
        };
        let k_value = |tape: &mut Tape<'_>| match tape.below(16) {
            0..=8 => tape.up_to(n as u64) as i64,
            9 | 10 => n as i64,
            11 => 0,
            12 => tape.up_to(8) as i64,
            13 => n as i64 + 1 + tape.below(3) as i64,
            _ => tape.pick(&[1 << 40, i64::MAX]),
        };
        let k = match tape.pick(kinds.k) {
            SingleKind::Static => Single::Static,
            SingleKind::Uniform => Single::Uniform(k_value(tape)),
            SingleKind::Deferred => {
                let bounds = tape.percent(70).then(|| tape.bounds(3, n as u64 + 2));
                let value = if tape.percent(10) {
                    tape.wild()
                } else {
                    k_value(tape)
                };
                Single::Deferred { value, bounds }
            }
        };
        let k_guarantees = super::GuaranteeSpec::generate(tape, [STATIC_K as u64; 4]).k;
        let mut call = TopKCall {
            entry,
            owned,
            direction,
            k,
            k_guarantees,
            keys,
            values_len: n,
            out_lens: [0; 2],
        };
        if tape.percent(4) {
            call.values_len = (n + 1).saturating_sub(tape.below(3) as usize);
        }
        let needed = match call.predict_run(false) {
            Ok(run) => run.max_written,
            Err(_) => tape.below(8) as usize,
        };
        for len in &mut call.out_lens {
            *len = needed + tape.below(3) as usize;
            if needed > 0 && tape.percent(4) {
                *len = needed - 1 - tape.below(needed as u64) as usize;
            }
        }
        call
    }

    /// What the front check reports, or what the call selects.
    pub fn predict(&self) -> Result<TopKRun, Expected> {
        self.predict_run(!self.owned)
    }

    /// [`predict`](Self::predict), the output buffers checked or not.
    fn predict_run(&self, check_outputs: bool) -> Result<TopKRun, Expected> {
        let direction = match &self.direction {
            Direction::Function(direction) | Direction::Choice(direction) => *direction,
            Direction::Max => SelectDirection::Max,
            Direction::Min => SelectDirection::Min,
            Direction::PerSegment(_) => {
                return Err(Expected::InvalidArgument { arg: "direction" });
            }
        };
        let n = self.keys.len();
        let (own, host) = match self.k {
            Single::Static => (Bounds::exactly(STATIC_K), Some(STATIC_K)),
            Single::Uniform(value) => (Bounds::exactly(value), Some(value)),
            Single::Deferred { bounds, .. } => (bounds.unwrap_or(Bounds::COUNTS), None),
        };
        let k = merged("k", own, host, self.k_guarantees)?;
        // A host k above the items, or a deferred k whose lower bound is.
        let least = host.unwrap_or(k.min);
        if least > n as i64 {
            return Err(Expected::OutOfBounds {
                param: "k",
                value: least,
                bounds: Bounds::new(0, n as i64),
                origin: BoundOrigin::Runtime,
            });
        }
        if self.entry == Entry::Pairs && self.values_len != n {
            return Err(Expected::LengthMismatch {
                arg: "values",
                actual: self.values_len,
                expected: n,
            });
        }
        let max_written = (k.max as u64).min(n as u64) as usize;
        if check_outputs {
            for (arg, len) in self.outputs() {
                if len < max_written {
                    return Err(Expected::BufferTooSmall {
                        arg,
                        len,
                        required: max_written,
                    });
                }
            }
        }
        let (written, outcome) = match self.k {
            Single::Deferred { value, .. } => deferred_report("k", value, own, k),
            _ => (least, None),
        };
        Ok(TopKRun {
            direction,
            written: (written as u64).min(n as u64) as usize,
            max_written,
            deferred: matches!(self.k, Single::Deferred { .. }),
            outcome,
        })
    }

    /// The output buffers the call takes, by name and length.
    pub fn outputs(&self) -> Vec<(&'static str, usize)> {
        match self.entry {
            Entry::Keys => vec![("out_keys", self.out_lens[0])],
            Entry::Pairs => vec![
                ("out_keys", self.out_lens[0]),
                ("out_values", self.out_lens[1]),
            ],
            Entry::Indices => vec![
                ("out_keys", self.out_lens[0]),
                ("out_indices", self.out_lens[1]),
            ],
        }
    }

    /// Checks a call into caller buffers: its checked outcome (`Outcome::check` of what it
    /// returned), and the outputs (which started as poison); `second` is the values or indices
    /// output (`None` for keys).
    pub fn check<V: FuzzValue>(
        &self,
        requirements: Resolved,
        result: &Result<(), Error>,
        out_keys: &[Key],
        second: Option<&[V]>,
    ) {
        let what = "top-k";
        match self.predict() {
            Err(expected) => {
                expected.assert_is(what, result);
                check_untouched(what, out_keys, second, 0);
            }
            Ok(run) => {
                assert_outcome(what, &run.outcome, result);
                let written = run.written;
                let second_written = second.map(|s| (&s[..written], 0));
                let (keys, direction) = (&self.keys[..], run.direction);
                check_selection(
                    what,
                    keys,
                    written,
                    direction,
                    requirements,
                    &out_keys[..written],
                    second_written,
                );
                check_untouched(what, &out_keys[written..], second.map(|s| &s[written..]), 0);
            }
        }
    }

    /// Checks a `select_*_owned` call: its checked result, the keys and (pairs, indices) the
    /// second buffer. For a deferred `k` the buffers hold `min(bounds.max, keys.len())` items,
    /// the first `k` written and the rest zero bits (as on every backend); a deferred `k`
    /// outside its bounds is the checked result's error.
    pub fn check_owned<V: FuzzValue>(
        &self,
        requirements: Resolved,
        result: Result<(Vec<Key>, Option<Vec<V>>), Error>,
    ) {
        let what = "top-k owned";
        match (self.predict(), result) {
            (Err(expected), result) => expected.assert_is(what, &result),
            (
                Ok(TopKRun {
                    outcome: Some(expected),
                    ..
                }),
                result,
            ) => expected.assert_is(what, &result),
            (Ok(_), Err(error)) => panic!("{what}: expected Ok, got {error:?}"),
            (Ok(run), Ok((keys, second))) => {
                let len = if run.deferred {
                    run.max_written
                } else {
                    run.written
                };
                assert_eq!(keys.len(), len, "{what}: the number of keys");
                match &second {
                    Some(second) => assert_eq!(second.len(), keys.len(), "{what}: second buffer"),
                    None => assert_eq!(self.entry, Entry::Keys, "{what}: no second buffer"),
                }
                let written = run.written;
                let second = second.as_ref().map(|s| (&s[..written], 0));
                let (direction, out_keys) = (run.direction, &keys[..written]);
                check_selection(
                    what,
                    &self.keys,
                    written,
                    direction,
                    requirements,
                    out_keys,
                    second,
                );
            }
        }
    }
}
