//! Guarantees carried by the environment, and their merge with a parameter's own bounds.

use frunk::hlist::{HCons, HNil};
use oxicub_params::role::{Role, RoleId, RoleTable};
use oxicub_params::{BoundOrigin, Bounds, Guarantee, Param, ParamError};

/// A list of guarantees (a frunk HList of [`Guarantee`]s): the tightest bounds it gives each role,
/// statically and at run time.
///
/// ```
/// use frunk::hlist;
/// use oxicub::env::Guarantees;
/// use oxicub::params::guarantee::{MaxK, KRange};
/// use oxicub::params::{role::RoleId, Bounds};
///
/// type Two = frunk::HList!(MaxK<8>, KRange<2, 64>);
/// assert_eq!(<Two as Guarantees>::STATIC[RoleId::K as usize], Bounds::new(2, 8));
/// ```
pub trait Guarantees {
    /// Per role, the intersection of the static bounds of every guarantee for it.
    const STATIC: RoleTable;

    /// Per role, the intersection of the runtime bounds of every guarantee for it.
    fn runtime(&self, role: RoleId) -> Bounds;
}

impl Guarantees for HNil {
    const STATIC: RoleTable = [Bounds::COUNTS; RoleId::COUNT];

    fn runtime(&self, _role: RoleId) -> Bounds {
        Bounds::COUNTS
    }
}

/// Narrows one role's entry of a table; contradicting static guarantees do not compile.
const fn narrowed(mut table: RoleTable, role: RoleId, bounds: Bounds) -> RoleTable {
    let merged = table[role as usize].intersect(bounds);
    assert!(
        !merged.is_empty(),
        "oxicub: two guarantees in the environment contradict each other (their bounds for one \
         parameter do not overlap): drop one or widen it"
    );
    table[role as usize] = merged;
    table
}

impl<R: Role, const MIN: i64, const MAX: i64, Tail: Guarantees> Guarantees
    for HCons<Guarantee<R, MIN, MAX>, Tail>
{
    const STATIC: RoleTable =
        narrowed(Tail::STATIC, R::ID, Guarantee::<R, MIN, MAX>::STATIC_BOUNDS);

    fn runtime(&self, role: RoleId) -> Bounds {
        let rest = self.tail.runtime(role);
        if role == R::ID {
            rest.intersect(self.head.bounds())
        } else {
            rest
        }
    }
}

/// The static bounds of `P` merged with the static guarantees of `G`.
struct Merged<P, G>(core::marker::PhantomData<(P, G)>);

impl<P: Param, G: Guarantees> Merged<P, G> {
    const STATIC: Bounds = {
        let merged = P::STATIC_BOUNDS.intersect(G::STATIC[<P::Role as Role>::ID as usize]);
        assert!(
            !merged.is_empty(),
            "oxicub: a parameter's static bounds and the environment's static guarantee for it \
             have no value in common: widen the parameter's bounds or the guarantee"
        );
        merged
    };
}

/// The tightest static bounds of parameter type `P` under the guarantees `G`; a contradiction
/// is a compile error (`const` evaluation fails when this is used).
///
/// ```
/// use oxicub::env::{merged_static_bounds, Guarantees};
/// use oxicub::params::{guarantee::MaxK, k, Bounds};
///
/// const B: Bounds = merged_static_bounds::<k::Uniform<1, 64>, frunk::HList!(MaxK<8>)>();
/// assert_eq!(B, Bounds::new(1, 8));
/// ```
pub const fn merged_static_bounds<P: Param, G: Guarantees>() -> Bounds {
    Merged::<P, G>::STATIC
}

/// The tightest bounds on `param` from its type, its runtime bounds and the guarantees.
///
/// A contradiction that only shows at run time is an error naming the parameter: a host value
/// outside a guarantee is [`ParamError::OutOfBounds`] (origin: the guarantee), runtime bounds
/// disjoint from a guarantee are [`ParamError::ContradictsGuarantee`], and guarantees that
/// contradict each other are [`ParamError::ContradictoryGuarantees`].
pub fn merged_bounds<P: Param, G: Guarantees>(
    param: &P,
    guarantees: &G,
) -> Result<Bounds, ParamError> {
    let static_bounds = merged_static_bounds::<P, G>();
    let role = <P::Role as Role>::ID;
    let guaranteed = guarantees.runtime(role);
    if guaranteed.is_empty() {
        return Err(ParamError::ContradictoryGuarantees {
            param: P::NAME,
            bounds: guaranteed,
        });
    }
    let own = param.runtime_bounds();
    let merged = own.intersect(guaranteed).intersect(static_bounds);
    if merged.is_empty() {
        return Err(match param.host_value() {
            Some(value) => ParamError::OutOfBounds {
                param: P::NAME,
                value,
                bounds: guaranteed,
                origin: BoundOrigin::Guarantee,
            },
            None => ParamError::ContradictsGuarantee {
                param: P::NAME,
                param_bounds: own,
                guarantee: guaranteed,
            },
        });
    }
    Ok(merged)
}
