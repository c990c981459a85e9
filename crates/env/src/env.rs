//! The environment: requirements in fixed slots (a typestate) and guarantees.

use crate::guarantees::Guarantees;
use crate::requirement::{
    determinism, output_ordering, slot, tie_break, Determinism, DeterminismRequirement,
    OrderingRequirement, OutputOrdering, Requirement, TieBreak, TieBreakRequirement, Unset,
};
use core::marker::PhantomData;
use frunk::hlist::{HCons, HNil};
use oxicub_params::role::Role;
use oxicub_params::{Bounds, Guarantee, Param, ParamError};

/// What a caller requires of an algorithm's result and what it guarantees about the inputs. (The
/// stream a call runs on is its backend's: `Cuda::on_stream` gives a backend on another stream
/// that shares the loaded kernels.)
///
/// `D`, `T` and `O` are the determinism, tie-break and output-ordering slots: [`Unset`] until a
/// requirement fills them. `G` is the list of guarantees (a frunk HList). Build
/// one with [`require!`](crate::require) and query it through [`Requirements`]; an unset slot
/// resolves to the committed default contract: `gpu_to_gpu`, `prefer_smaller_index`,
/// `stable_sorted`.
///
/// ```
/// use oxicub::env::{require, determinism, output_ordering, Requirements, OutputOrdering, TieBreak};
/// use oxicub::params::guarantee::MaxK;
///
/// let env = require!(determinism::RunToRun, output_ordering::Sorted).guarantee(MaxK::<8>::new());
/// let r = env.resolved();
/// assert_eq!(r.ordering, OutputOrdering::Sorted);
/// // run_to_run without a tie-break: any deterministic rule (the seeds' API default).
/// assert_eq!(r.tie_break, TieBreak::Unspecified);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Env<D = Unset, T = Unset, O = Unset, G = HNil> {
    guarantees: G,
    requirements: PhantomData<(D, T, O)>,
}

impl Env {
    /// The empty environment: every requirement at its default, no guarantee.
    pub const fn new() -> Self {
        Env {
            guarantees: HNil,
            requirements: PhantomData,
        }
    }
}

impl Default for Env {
    fn default() -> Self {
        Env::new()
    }
}

impl<D, T, O, G> Env<D, T, O, G> {
    /// Adds a requirement. Each slot can be filled once, and a tie-break only goes with a
    /// deterministic result set; both rules are checked at compile time.
    pub fn with<R: Requirement>(self, requirement: R) -> <R::Slot as Place<Self, R>>::Output
    where
        R::Slot: Place<Self, R>,
    {
        let _ = requirement;
        <R::Slot as Place<Self, R>>::place(self)
    }

    /// Adds a guarantee about a parameter's values (option 2 of the parameter proposal); it is
    /// merged with the parameter's own bounds and the tightest wins.
    ///
    /// ```
    /// use oxicub::env::Env;
    /// use oxicub::params::{guarantee::MaxK, k, Bounds};
    ///
    /// let env = Env::new().guarantee(MaxK::<8>::new());
    /// assert_eq!(env.bounds_of(&k::Uniform::<1, 64>::new(4)?)?, Bounds::exactly(4));
    /// assert!(env.bounds_of(&k::Uniform::<1, 64>::new(9)?).is_err());
    /// # Ok::<(), oxicub::params::ParamError>(())
    /// ```
    pub fn guarantee<R: Role, const MIN: i64, const MAX: i64>(
        self,
        guarantee: Guarantee<R, MIN, MAX>,
    ) -> Env<D, T, O, HCons<Guarantee<R, MIN, MAX>, G>> {
        Env {
            guarantees: HCons {
                head: guarantee,
                tail: self.guarantees,
            },
            requirements: PhantomData,
        }
    }

    /// Rebuilds the environment with other requirement slots: only this module may do that,
    /// after checking the rules.
    fn retype<D2, T2, O2>(self) -> Env<D2, T2, O2, G> {
        Env {
            guarantees: self.guarantees,
            requirements: PhantomData,
        }
    }
}

impl<D, T, O, G: Guarantees> Env<D, T, O, G> {
    /// The tightest bounds on `param` from everything known: its type, its runtime bounds and
    /// this environment's guarantees. Where all are static, a contradiction is a compile error.
    pub fn bounds_of<P: Param>(&self, param: &P) -> Result<Bounds, ParamError> {
        crate::guarantees::merged_bounds(param, &self.guarantees)
    }
}

/// Places requirement `R` into its slot of environment `E`: implemented by each slot marker.
pub trait Place<E, R> {
    /// The environment with the slot filled.
    type Output;
    /// Fills the slot.
    fn place(env: E) -> Self::Output;
}

/// The determinism slot is still free.
#[diagnostic::on_unimplemented(
    message = "determinism is required twice (it is already `{Self}`)",
    label = "second determinism requirement",
    note = "give each requirement once: keep one of the `determinism::*` requirements"
)]
pub trait DeterminismNotYetRequired {}
impl DeterminismNotYetRequired for Unset {}

/// The tie-break slot is still free.
#[diagnostic::on_unimplemented(
    message = "a tie-break is required twice (it is already `{Self}`)",
    label = "second tie-break requirement",
    note = "give each requirement once: keep one of the `tie_break::*` requirements"
)]
pub trait TieBreakNotYetRequired {}
impl TieBreakNotYetRequired for Unset {}

/// The output-ordering slot is still free.
#[diagnostic::on_unimplemented(
    message = "the output ordering is required twice (it is already `{Self}`)",
    label = "second output-ordering requirement",
    note = "give each requirement once: keep one of the `output_ordering::*` requirements"
)]
pub trait OrderingNotYetRequired {}
impl OrderingNotYetRequired for Unset {}

/// A determinism that a tie-break can refine (anything but `NotGuaranteed`).
#[diagnostic::on_unimplemented(
    message = "a tie-break cannot be required together with `{Self}`",
    label = "this tie-break has no meaning when the result set is not deterministic",
    note = "require `determinism::RunToRun` or `determinism::GpuToGpu` to pin the boundary ties, \
            or drop the tie-break to keep the fast not-guaranteed path"
)]
pub trait AcceptsTieBreak {}
impl AcceptsTieBreak for Unset {}
impl AcceptsTieBreak for determinism::RunToRun {}
impl AcceptsTieBreak for determinism::GpuToGpu {}

/// The tie-break slot's content is compatible with the determinism `D` being added.
#[diagnostic::on_unimplemented(
    message = "`{D}` cannot be required together with the tie-break `{Self}`",
    label = "a not-guaranteed result set has no tie-break",
    note = "drop the tie-break, or require `determinism::RunToRun` / `determinism::GpuToGpu` \
            instead of `{D}`"
)]
pub trait TieBreakAllowedWith<D> {}
impl<D> TieBreakAllowedWith<D> for Unset {}
macro_rules! tie_breaks_allowed_with_deterministic {
    ($($t:ident),*) => {$(
        impl TieBreakAllowedWith<determinism::RunToRun> for tie_break::$t {}
        impl TieBreakAllowedWith<determinism::GpuToGpu> for tie_break::$t {}
    )*};
}
tie_breaks_allowed_with_deterministic!(Unspecified, PreferSmallerIndex, PreferLargerIndex);

impl<R, D, T, O, G> Place<Env<D, T, O, G>, R> for slot::Determinism
where
    R: DeterminismRequirement,
    D: DeterminismNotYetRequired,
    T: TieBreakAllowedWith<R>,
{
    type Output = Env<R, T, O, G>;
    fn place(env: Env<D, T, O, G>) -> Self::Output {
        env.retype()
    }
}

impl<R, D, T, O, G> Place<Env<D, T, O, G>, R> for slot::TieBreak
where
    R: TieBreakRequirement,
    D: AcceptsTieBreak,
    T: TieBreakNotYetRequired,
{
    type Output = Env<D, R, O, G>;
    fn place(env: Env<D, T, O, G>) -> Self::Output {
        env.retype()
    }
}

impl<R, D, T, O, G> Place<Env<D, T, O, G>, R> for slot::OutputOrdering
where
    R: OrderingRequirement,
    O: OrderingNotYetRequired,
{
    type Output = Env<D, T, R, G>;
    fn place(env: Env<D, T, O, G>) -> Self::Output {
        env.retype()
    }
}

/// Resolves the determinism slot: unset means the default, `gpu_to_gpu`.
pub trait ResolveDeterminism {
    /// The effective requirement.
    type Resolved: DeterminismRequirement;
}
impl ResolveDeterminism for Unset {
    type Resolved = determinism::GpuToGpu;
}

/// Resolves the tie-break slot given the determinism slot `D`: unset means the default contract
/// (`prefer_smaller_index`) when determinism is unset too, and `unspecified` (the seeds' API
/// default: any deterministic rule, or none at all for `not_guaranteed`) when determinism was
/// required explicitly.
pub trait ResolveTieBreak<D> {
    /// The effective requirement.
    type Resolved: TieBreakRequirement;
}
impl ResolveTieBreak<Unset> for Unset {
    type Resolved = tie_break::PreferSmallerIndex;
}

/// Resolves the output-ordering slot: unset means the default, `stable_sorted`.
pub trait ResolveOrdering {
    /// The effective requirement.
    type Resolved: OrderingRequirement;
}
impl ResolveOrdering for Unset {
    type Resolved = output_ordering::StableSorted;
}

macro_rules! resolves_to_itself {
    (determinism: $($d:ident),*; tie_break: $($t:ident),*; ordering: $($o:ident),*) => {
        $(
            impl ResolveDeterminism for determinism::$d {
                type Resolved = determinism::$d;
            }
            impl ResolveTieBreak<determinism::$d> for Unset {
                type Resolved = tie_break::Unspecified;
            }
        )*
        $(
            impl<D> ResolveTieBreak<D> for tie_break::$t {
                type Resolved = tie_break::$t;
            }
        )*
        $(
            impl ResolveOrdering for output_ordering::$o {
                type Resolved = output_ordering::$o;
            }
        )*
    };
}
resolves_to_itself!(
    determinism: NotGuaranteed, RunToRun, GpuToGpu;
    tie_break: Unspecified, PreferSmallerIndex, PreferLargerIndex;
    ordering: Unsorted, Sorted, StableSorted
);

/// The effective requirements of an environment, defaults applied.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Resolved {
    /// The effective determinism.
    pub determinism: Determinism,
    /// The effective tie-break (`Unspecified` under `NotGuaranteed`).
    pub tie_break: TieBreak,
    /// The effective output ordering.
    pub ordering: OutputOrdering,
}

impl Resolved {
    /// `true` when the selected set is reproducible.
    pub const fn is_deterministic(&self) -> bool {
        !matches!(self.determinism, Determinism::NotGuaranteed)
    }

    /// `true` when the selected set is fully pinned by an explicit tie-break, so every GPU and
    /// the host oracle select the same items.
    pub const fn pins_result_set(&self) -> bool {
        self.is_deterministic() && !matches!(self.tie_break, TieBreak::Unspecified)
    }

    /// `true` when the output is fully determined, bit for bit: a pinned set, stable sorted.
    pub const fn pins_output(&self) -> bool {
        self.pins_result_set() && matches!(self.ordering, OutputOrdering::StableSorted)
    }
}

/// An environment whose requirements can be queried, defaults applied: what algorithms consume.
///
/// ```
/// use oxicub::env::{Env, Requirements, Determinism, TieBreak, OutputOrdering};
///
/// // Nothing required: the seeds' committed contract.
/// type Default = Env;
/// assert_eq!(Default::DETERMINISM, Determinism::GpuToGpu);
/// assert_eq!(Default::TIE_BREAK, TieBreak::PreferSmallerIndex);
/// assert_eq!(Default::ORDERING, OutputOrdering::StableSorted);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an oxicub environment",
    label = "expected an environment",
    note = "build one with `require!(..)` (or `Env::new()` for the default contract)"
)]
pub trait Requirements {
    /// The effective determinism requirement.
    type Determinism: DeterminismRequirement;
    /// The effective tie-break requirement.
    type TieBreak: TieBreakRequirement;
    /// The effective output-ordering requirement.
    type Ordering: OrderingRequirement;
    /// The effective determinism.
    const DETERMINISM: Determinism = <Self::Determinism as DeterminismRequirement>::VALUE;
    /// The effective tie-break.
    const TIE_BREAK: TieBreak = <Self::TieBreak as TieBreakRequirement>::VALUE;
    /// The effective output ordering.
    const ORDERING: OutputOrdering = <Self::Ordering as OrderingRequirement>::VALUE;
    /// All three, as values.
    const RESOLVED: Resolved = Resolved {
        determinism: Self::DETERMINISM,
        tie_break: Self::TIE_BREAK,
        ordering: Self::ORDERING,
    };

    /// All three, as values.
    fn resolved(&self) -> Resolved {
        Self::RESOLVED
    }
}

impl<D, T, O, G> Requirements for Env<D, T, O, G>
where
    D: ResolveDeterminism,
    T: ResolveTieBreak<D>,
    O: ResolveOrdering,
{
    type Determinism = D::Resolved;
    type TieBreak = T::Resolved;
    type Ordering = O::Resolved;
}

/// Everything an algorithm reads from its environment: the requirements and the guarantees.
/// Algorithms take `E: Environment`.
///
/// ```
/// use oxicub::env::{require, determinism, Environment, Requirements, Determinism};
/// use oxicub::params::{guarantee::MaxK, k, Bounds};
///
/// fn k_bounds<E: Environment>(env: &E) -> Result<Bounds, oxicub::params::ParamError> {
///     assert_eq!(E::DETERMINISM, Determinism::RunToRun);
///     oxicub::env::merged_bounds(&k::uniform(4)?, env.guarantees())
/// }
/// let env = require!(determinism::RunToRun).guarantee(MaxK::<8>::new());
/// assert_eq!(k_bounds(&env)?, Bounds::exactly(4));
/// # Ok::<(), oxicub::params::ParamError>(())
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an oxicub environment",
    label = "expected an environment",
    note = "build one with `require!(..)` (or `Env::new()` for the default contract)"
)]
pub trait Environment: Requirements {
    /// The guarantee list.
    type Guarantees: Guarantees;
    /// The guarantees.
    fn guarantees(&self) -> &Self::Guarantees;
}

impl<D, T, O, G> Environment for Env<D, T, O, G>
where
    Self: Requirements,
    G: Guarantees,
{
    type Guarantees = G;
    fn guarantees(&self) -> &G {
        &self.guarantees
    }
}
