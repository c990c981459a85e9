//! Fuzz: single-problem top-k on the host backend, every public entry point (`max_*`, `min_*`,
//! `select_*` with a static, chosen or per-segment direction, `select_*_owned`; keys, pairs and
//! indices) with `k` static, uniform or deferred and guarantees on `k`, against the oracle's
//! prediction (`oxicub_test::fuzz::topk`): the exact error of every bad input, or the selection
//! in the first `k` slots and poison in every other. The number of cases is each test's
//! constant, or `PROPTEST_CASES` (see docs/testing.md).

use std::marker::PhantomData;

use oxicub_algorithms::segments::{Outcome, Pending};
use oxicub_algorithms::{topk, Host, SourceIndex, ValuesOn};
use oxicub_env::Environment;
use oxicub_params::{
    direction, k, role, DiscreteParam, DiscreteParamFor, ParamFor, SelectDirection, SingleValue,
};
use oxicub_test::cases::poison;
use oxicub_test::fuzz::topk::{Direction, DirectionKind, Kinds, TopKCall};
use oxicub_test::fuzz::{
    self, deferred, Entry, FuzzValue, GuaranteeSpec, PrintOnPanic, Single, SingleKind, Tape,
};
use oxicub_test::oracle::RefKey;
use oxicub_test::with_requirements;
use proptest::prelude::*;

/// Cases of [`every_entry_point`] in CI.
const CASES: u32 = 20_000;
/// Cases of each of the narrower tests in CI.
const NARROW_CASES: u32 = 6_000;

/// A `k` parameter the host backend reads.
trait KOnHost: ParamFor<role::K> + SingleValue + ValuesOn<Host> {}
impl<T: ParamFor<role::K> + SingleValue + ValuesOn<Host>> KOnHost for T {}

/// A direction parameter of `select_*`.
trait DirectionParam:
    DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>
{
}
impl<T: DiscreteParamFor<SelectDirection> + DiscreteParam<Option = SelectDirection>> DirectionParam
    for T
{
}

fn values<V: FuzzValue>(len: usize) -> Vec<V> {
    (0..len as u64).map(V::from_source).collect()
}

/// One call with its environment and its `k` typed; `V` and `I` are the value and index types
/// of pairs and indices.
struct Run<'a, Key, V, I, E, Kp> {
    call: &'a TopKCall<Key>,
    env: &'a E,
    k: &'a Kp,
    types: PhantomData<(V, I)>,
}

impl<'a, Key, V, I, E, Kp> Run<'a, Key, V, I, E, Kp>
where
    Key: RefKey,
    V: FuzzValue,
    I: FuzzValue + SourceIndex,
    E: Environment,
    Kp: KOnHost,
{
    fn new(call: &'a TopKCall<Key>, env: &'a E, k: &'a Kp) -> Self {
        Run {
            call,
            env,
            k,
            types: PhantomData,
        }
    }

    /// Every kind of direction, `select_*` into caller buffers or owned.
    fn any_direction(&self) {
        let owned = self.call.owned;
        match &self.call.direction {
            Direction::Function(_) if owned => unreachable!("no owned max_*/min_* function"),
            Direction::Function(direction) => self.function(*direction),
            Direction::Max => self.select(&direction::Max, owned),
            Direction::Min => self.select(&direction::Min, owned),
            Direction::Choice(d) => {
                let choice = direction::Choice::<direction::Either>::new(*d).expect("either");
                self.select(&choice, owned)
            }
            Direction::PerSegment(bytes) => {
                self.select(&direction::PerSegment::<_>::new(&bytes[..]), owned)
            }
        }
    }

    fn select<D: DirectionParam>(&self, direction: &D, owned: bool) {
        if owned {
            self.owned(direction)
        } else {
            self.to_buffers(direction)
        }
    }

    /// `max_*` or `min_*` into caller buffers.
    fn function(&self, direction: SelectDirection) {
        let (call, env, k) = (self.call, self.env, self.k);
        let (host, keys, r) = (Host::new(), &call.keys[..], env.resolved());
        let max = direction == SelectDirection::Max;
        let mut out_keys = vec![poison::<Key>(); call.out_lens[0]];
        match call.entry {
            Entry::Keys => {
                let out = &mut out_keys[..];
                let result = if max {
                    topk::max_keys(&host, keys, out, k, env)
                } else {
                    topk::min_keys(&host, keys, out, k, env)
                };
                call.check::<V>(r, &result.and_then(Outcome::check), &out_keys, None);
            }
            Entry::Pairs => {
                let values = values::<V>(call.values_len);
                let mut out_values = vec![V::poison(); call.out_lens[1]];
                let (out, out_v) = (&mut out_keys[..], &mut out_values[..]);
                let result = if max {
                    topk::max_pairs(&host, keys, &values[..], out, out_v, k, env)
                } else {
                    topk::min_pairs(&host, keys, &values[..], out, out_v, k, env)
                };
                call.check(
                    r,
                    &result.and_then(Outcome::check),
                    &out_keys,
                    Some(&out_values),
                );
            }
            Entry::Indices => {
                let mut out_indices = vec![I::poison(); call.out_lens[1]];
                let (out, out_i) = (&mut out_keys[..], &mut out_indices[..]);
                let result = if max {
                    topk::max_indices(&host, keys, out, out_i, k, env)
                } else {
                    topk::min_indices(&host, keys, out, out_i, k, env)
                };
                call.check(
                    r,
                    &result.and_then(Outcome::check),
                    &out_keys,
                    Some(&out_indices),
                );
            }
        }
    }

    /// `select_*` into caller buffers.
    fn to_buffers<D: DirectionParam>(&self, direction: &D) {
        let (call, env, k) = (self.call, self.env, self.k);
        let (host, keys, r) = (Host::new(), &call.keys[..], env.resolved());
        let mut out_keys = vec![poison::<Key>(); call.out_lens[0]];
        match call.entry {
            Entry::Keys => {
                let result = topk::select_keys(&host, direction, keys, &mut out_keys[..], k, env);
                call.check::<V>(r, &result.and_then(Outcome::check), &out_keys, None);
            }
            Entry::Pairs => {
                let values = values::<V>(call.values_len);
                let mut out_values = vec![V::poison(); call.out_lens[1]];
                let (out, out_v) = (&mut out_keys[..], &mut out_values[..]);
                let result =
                    topk::select_pairs(&host, direction, keys, &values[..], out, out_v, k, env);
                call.check(
                    r,
                    &result.and_then(Outcome::check),
                    &out_keys,
                    Some(&out_values),
                );
            }
            Entry::Indices => {
                let mut out_indices = vec![I::poison(); call.out_lens[1]];
                let (out, out_i) = (&mut out_keys[..], &mut out_indices[..]);
                let result = topk::select_indices(&host, direction, keys, out, out_i, k, env);
                call.check(
                    r,
                    &result.and_then(Outcome::check),
                    &out_keys,
                    Some(&out_indices),
                );
            }
        }
    }

    /// `select_*_owned`.
    fn owned<D: DirectionParam>(&self, direction: &D) {
        let (call, env, k) = (self.call, self.env, self.k);
        let (host, keys, r) = (Host::new(), &call.keys[..], env.resolved());
        match call.entry {
            Entry::Keys => {
                let result = topk::select_keys_owned(&host, direction, keys, k, env);
                call.check_owned::<V>(r, result.and_then(Pending::check).map(|keys| (keys, None)));
            }
            Entry::Pairs => {
                let values = values::<V>(call.values_len);
                let result = topk::select_pairs_owned(&host, direction, keys, &values[..], k, env);
                call.check_owned(
                    r,
                    result
                        .and_then(Pending::check)
                        .map(|(keys, values)| (keys, Some(values))),
                );
            }
            Entry::Indices => {
                let result =
                    topk::select_indices_owned::<_, _, _, I, _, _>(&host, direction, keys, k, env);
                call.check_owned(
                    r,
                    result
                        .and_then(Pending::check)
                        .map(|(keys, indices)| (keys, Some(indices))),
                );
            }
        }
    }
}

/// Every entry point, every kind of `k` and direction.
fn run_any<Key: RefKey, V: FuzzValue, I: FuzzValue + SourceIndex, E: Environment>(
    call: &TopKCall<Key>,
    env: &E,
) {
    match &call.k {
        Single::Static => {
            let k = k::Static::<{ fuzz::topk::STATIC_K }>::new();
            Run::<Key, V, I, E, _>::new(call, env, &k).any_direction()
        }
        Single::Uniform(value) => {
            let k = k::uniform(*value).expect("a count");
            Run::<Key, V, I, E, _>::new(call, env, &k).any_direction()
        }
        Single::Deferred { value, bounds } => {
            let k = deferred::<role::K>(value, *bounds);
            Run::<Key, V, I, E, _>::new(call, env, &k).any_direction()
        }
    }
}

/// `select_*` into caller buffers with a chosen direction, `k` uniform or deferred: the calls
/// run under every requirement set and key type.
const NARROW_KINDS: Kinds = Kinds {
    entries: &[Entry::Indices, Entry::Keys, Entry::Pairs],
    owned: &[false],
    directions: &[DirectionKind::Choice],
    k: &[SingleKind::Uniform, SingleKind::Deferred],
};

fn run_narrow<Key: RefKey, V: FuzzValue, I: FuzzValue + SourceIndex, E: Environment>(
    call: &TopKCall<Key>,
    env: &E,
) {
    let Direction::Choice(d) = call.direction else {
        unreachable!("NARROW_KINDS chooses the direction")
    };
    let choice = direction::Choice::<direction::Either>::new(d).expect("either");
    match &call.k {
        Single::Uniform(value) => {
            let k = k::uniform(*value).expect("a count");
            Run::<Key, V, I, E, _>::new(call, env, &k).to_buffers(&choice)
        }
        Single::Deferred { value, bounds } => {
            let k = deferred::<role::K>(value, *bounds);
            Run::<Key, V, I, E, _>::new(call, env, &k).to_buffers(&choice)
        }
        Single::Static => unreachable!("not among NARROW_KINDS"),
    }
}

fn env_of<Key>(call: &TopKCall<Key>) -> fuzz::GuaranteeEnv {
    GuaranteeSpec {
        k: call.k_guarantees,
        ..GuaranteeSpec::NONE
    }
    .env()
}

/// One case of [`every_key_type`] for key type `Key`.
fn key_type_case<Key: RefKey, V: FuzzValue, I: FuzzValue + SourceIndex>(tape: &[u32]) {
    let call = TopKCall::<Key>::generate(&mut Tape::new(tape), &NARROW_KINDS);
    let _print = PrintOnPanic(&call);
    run_narrow::<Key, V, I, _>(&call, &env_of(&call));
}

proptest! {
    #![proptest_config(fuzz::config(CASES))]

    /// Every entry point and parameter kind, `f32` keys (NaNs, signed zeros and ties among
    /// them), `u64` values, `u32` indices.
    #[test]
    fn every_entry_point(tape in fuzz::tapes()) {
        let call = TopKCall::<f32>::generate(&mut Tape::new(&tape), &TopKCall::<f32>::ALL_KINDS);
        let _print = PrintOnPanic(&call);
        run_any::<f32, u64, u32, _>(&call, &env_of(&call));
    }
}

proptest! {
    #![proptest_config(fuzz::config(NARROW_CASES))]

    /// Every requirement set (the default and the 21 combinations).
    #[test]
    fn every_requirement_set(tape in fuzz::tapes(), set in 0..fuzz::REQUIREMENT_SETS) {
        let call = TopKCall::<i16>::generate(&mut Tape::new(&tape), &NARROW_KINDS);
        let _print = PrintOnPanic(&(set, &call));
        with_requirements!(set, env_of(&call), |env| run_narrow::<i16, f32, i64, _>(&call, env));
    }

    /// Every key type, with value and index types of both widths.
    #[test]
    fn every_key_type(tape in fuzz::tapes(), key_type in 0..12usize) {
        match key_type {
            0 => key_type_case::<u8, u32, u64>(&tape),
            1 => key_type_case::<u16, f64, i64>(&tape),
            2 => key_type_case::<u32, i32, u32>(&tape),
            3 => key_type_case::<u64, i64, u64>(&tape),
            4 => key_type_case::<i8, f32, i64>(&tape),
            5 => key_type_case::<i16, u64, u32>(&tape),
            6 => key_type_case::<i32, u32, u64>(&tape),
            7 => key_type_case::<i64, f64, i64>(&tape),
            8 => key_type_case::<half::f16, u32, u32>(&tape),
            9 => key_type_case::<half::bf16, u64, u64>(&tape),
            10 => key_type_case::<f32, i64, i64>(&tape),
            _ => key_type_case::<f64, f32, u32>(&tape),
        }
    }
}

/// An owned result with a deferred `k` has `min(bounds.max, keys.len())` items, its first `k`
/// written and the rest zero bits, on every backend (one rule: the length is known before the
/// call reads `k`, which `Cuda` reads on the device).
#[test]
fn owned_with_a_deferred_k_has_the_documented_length() {
    let value = 2i64;
    let k = k::Deferred::<_, 0, 5>::new(&value);
    let keys = [1u32, 5, 3, 4, 2, 9, 7];
    let top = topk::select_keys_owned(
        &Host::new(),
        &direction::Max,
        &keys[..],
        &k,
        &oxicub_env::Env::new(),
    )
    .and_then(Pending::check)
    .expect("a valid call");
    assert_eq!(top, [9, 7, 0, 0, 0], "min(bounds.max, keys.len()) items");
}
