//! A batched call on the host backend, its parameters already typed: the problem for the call's
//! layout, outputs filled with poison, the entry point, and the check.

use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::segments::{Listed, Outcome};
use oxicub_algorithms::{ChoicesOn, Error, Host, PerSegmentOn, SourceIndex, ValuesOn};
use oxicub_env::Environment;
use oxicub_params::{
    role, DiscreteParam, DiscreteParamFor, ParamFor, SelectDirection, SingleValue,
};

use super::{BatchedCall, Layout};
use crate::cases::poison;
use crate::fuzz::{Entry, FuzzValue};
use crate::oracle::RefKey;

/// Segment sizes the host backend reads.
pub trait SizesOnHost: ParamFor<role::SegmentSize> + PerSegmentOn<Host> {}
impl<T: ParamFor<role::SegmentSize> + PerSegmentOn<Host>> SizesOnHost for T {}

/// A batched `k` the host backend reads.
pub trait KOnHost: ParamFor<role::K> + PerSegmentOn<Host> {}
impl<T: ParamFor<role::K> + PerSegmentOn<Host>> KOnHost for T {}

/// A direction the host backend reads.
pub trait DirectionOnHost:
    DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection> + ChoicesOn<Host>
{
}
impl<T> DirectionOnHost for T where
    T: DiscreteParamFor<SelectDirection>
        + DiscreteParam<Option = SelectDirection>
        + ChoicesOn<Host>
{
}

/// A number of segments the host backend reads.
pub trait CountOnHost: ParamFor<role::NumSegments> + SingleValue + ValuesOn<Host> {}
impl<T: ParamFor<role::NumSegments> + SingleValue + ValuesOn<Host>> CountOnHost for T {}

/// The values of `len` keys (pairs): each names its key's place.
fn values<V: FuzzValue>(len: usize) -> Vec<V> {
    (0..len as u64).map(V::from_source).collect()
}

/// The call's result with the outcome's check applied.
fn checked(result: Result<Outcome, Error>) -> Result<Result<(), Error>, Error> {
    result.map(Outcome::check)
}

/// `keys` cut into slices of `lens` (the listed layout's segments).
fn cut<'a, T>(items: &'a [T], lens: &[usize]) -> Vec<&'a [T]> {
    let mut rest = items;
    lens.iter()
        .map(|&len| {
            let (head, tail) = rest.split_at(len);
            rest = tail;
            head
        })
        .collect()
}

impl<Key: RefKey> BatchedCall<Key> {
    /// Runs the call on the host with these parameters (the call's own, typed) under `env`
    /// and checks it: values `V` (pairs), indices `I`.
    pub fn run_on_host<V, I, S, K, D, N, E>(&self, env: &E, sizes: S, k: K, direction: D, count: N)
    where
        V: FuzzValue,
        I: FuzzValue + SourceIndex,
        S: SizesOnHost,
        K: KOnHost,
        D: DirectionOnHost,
        N: CountOnHost,
        E: Environment,
    {
        match &self.layout {
            Layout::Strided { stride } => {
                let problem = Problem::strided(*stride, sizes, k, direction, count);
                self.run_problem::<V, I, _, E>(&self.with_out_stride(problem), env)
            }
            Layout::Offsets { begin, end } => {
                let problem = Problem::offsets(&begin[..], &end[..], sizes, k, direction, count);
                self.run_problem::<V, I, _, E>(&self.with_out_stride(problem), env)
            }
            Layout::Listed { lens } => {
                let problem = self.with_out_stride(Problem::listed(sizes, k, direction, count));
                self.run_listed::<V, I, S, K, D, N, E>(&problem, lens, env)
            }
        }
    }

    /// `problem` with the call's `out_stride`, if it sets one.
    fn with_out_stride<L, S, K, D, N>(
        &self,
        problem: Problem<L, S, K, D, N>,
    ) -> Problem<L, S, K, D, N> {
        match self.out_stride {
            Some(out_stride) => problem.out_stride(out_stride),
            None => problem,
        }
    }

    fn run_problem<V, I, P, E>(&self, problem: &P, env: &E)
    where
        V: FuzzValue,
        I: FuzzValue + SourceIndex,
        P: batched_topk::ProblemOn<Host>,
        E: Environment,
    {
        let (host, keys, r) = (Host::new(), &self.keys[..], env.resolved());
        let mut out_keys = vec![poison::<Key>(); self.out_lens[0]];
        match self.entry {
            Entry::Keys => {
                let result =
                    batched_topk::select_keys(&host, problem, keys, &mut out_keys[..], env);
                self.check::<V>(r, &checked(result), &out_keys, None);
            }
            Entry::Pairs => {
                let values = values::<V>(self.values_len);
                let mut out_values = vec![V::poison(); self.out_lens[1]];
                let (out, out_v) = (&mut out_keys[..], &mut out_values[..]);
                let result =
                    batched_topk::select_pairs(&host, problem, keys, &values[..], out, out_v, env);
                self.check(r, &checked(result), &out_keys, Some(&out_values));
            }
            Entry::Indices => {
                let mut out_indices = vec![I::poison(); self.out_lens[1]];
                let (out, out_i) = (&mut out_keys[..], &mut out_indices[..]);
                let result = batched_topk::select_indices(&host, problem, keys, out, out_i, env);
                self.check(r, &checked(result), &out_keys, Some(&out_indices));
            }
        }
    }

    fn run_listed<V, I, S, K, D, N, E>(
        &self,
        problem: &Problem<Listed, S, K, D, N>,
        lens: &[usize],
        env: &E,
    ) where
        V: FuzzValue,
        I: FuzzValue + SourceIndex,
        Problem<Listed, S, K, D, N>: batched_topk::ProblemOn<Host>,
        E: Environment,
    {
        let (host, r) = (Host::new(), env.resolved());
        let segments = cut(&self.keys, lens);
        let mut out_keys = vec![poison::<Key>(); self.out_lens[0]];
        match self.entry {
            Entry::Keys => {
                let result = batched_topk::select_keys_listed(
                    &host,
                    problem,
                    &segments,
                    &mut out_keys[..],
                    env,
                );
                self.check::<V>(r, &checked(result), &out_keys, None);
            }
            Entry::Pairs => {
                // Value slice i names the places of key slice i (as far as their lengths agree).
                let mut values: Vec<Vec<V>> = Vec::new();
                let mut first = 0;
                for (i, &len) in self.value_lens.iter().enumerate() {
                    values.push((first..first + len as u64).map(V::from_source).collect());
                    first += lens.get(i).map_or(len, |&l| l) as u64;
                }
                let values: Vec<&[V]> = values.iter().map(|v| &v[..]).collect();
                let mut out_values = vec![V::poison(); self.out_lens[1]];
                let (out, out_v) = (&mut out_keys[..], &mut out_values[..]);
                let result = batched_topk::select_pairs_listed(
                    &host, problem, &segments, &values, out, out_v, env,
                );
                self.check(r, &checked(result), &out_keys, Some(&out_values));
            }
            Entry::Indices => {
                let mut out_indices = vec![I::poison(); self.out_lens[1]];
                let (out, out_i) = (&mut out_keys[..], &mut out_indices[..]);
                let result =
                    batched_topk::select_indices_listed(&host, problem, &segments, out, out_i, env);
                self.check(r, &checked(result), &out_keys, Some(&out_indices));
            }
        }
    }
}
