//! Option 2 of the parameter proposal: guarantees in the environment, merged with parameters.

use oxicub_env::{merged_bounds, require, Env, Guarantees};
use oxicub_params::guarantee::{KRange, MaxK, MaxSegmentSize, MinSegmentSize, TotalItems};
use oxicub_params::role::RoleId;
use oxicub_params::{k, segment_size, BoundOrigin, Bounds, ParamError};
use proptest::prelude::*;

#[test]
fn no_guarantee_leaves_the_parameter_alone() {
    let p = k::Uniform::<1, 64>::new(9).unwrap();
    assert_eq!(Env::new().bounds_of(&p), Ok(Bounds::exactly(9)));
    let q = segment_size::PerSegment::<(), 1, 4096>::new(());
    assert_eq!(Env::new().bounds_of(&q), Ok(Bounds::new(1, 4096)));
}

#[test]
fn static_guarantees_intersect_per_role() {
    type G = frunk::HList!(MaxK<8>, MinSegmentSize<64>, MaxSegmentSize<256>, KRange<2, 32>);
    assert_eq!(G::STATIC[RoleId::K as usize], Bounds::new(2, 8));
    assert_eq!(
        G::STATIC[RoleId::SegmentSize as usize],
        Bounds::new(64, 256)
    );
    assert_eq!(G::STATIC[RoleId::NumSegments as usize], Bounds::COUNTS);
}

#[test]
fn a_value_outside_a_guarantee_names_the_guarantee() {
    let env = require!().guarantee(MaxK::<8>::new());
    assert_eq!(
        env.bounds_of(&k::uniform(9).unwrap()),
        Err(ParamError::OutOfBounds {
            param: "k",
            value: 9,
            bounds: Bounds::new(0, 8),
            origin: BoundOrigin::Guarantee,
        })
    );
}

#[test]
fn runtime_bounds_disjoint_from_a_guarantee_are_an_error() {
    let env = Env::new().guarantee(MaxSegmentSize::<4096>::new().between(0, 128).unwrap());
    let sizes = segment_size::PerSegment::<(), 0, 4096>::new(())
        .with_bounds(256, 1024)
        .unwrap();
    assert_eq!(
        env.bounds_of(&sizes),
        Err(ParamError::ContradictsGuarantee {
            param: "segment_sizes",
            param_bounds: Bounds::new(256, 1024),
            guarantee: Bounds::new(0, 128),
        })
    );
}

#[test]
fn runtime_guarantees_that_contradict_each_other_are_an_error() {
    let env = Env::new()
        .guarantee(TotalItems::<0, 1000>::new().between(0, 10).unwrap())
        .guarantee(TotalItems::<0, 1000>::new().between(20, 30).unwrap());
    let g = oxicub_env::Environment::guarantees(&env);
    let total = oxicub_params::Deferred::<oxicub_params::role::TotalItems, ()>::new(());
    assert!(matches!(
        merged_bounds(&total, g),
        Err(ParamError::ContradictoryGuarantees {
            param: "total_items",
            ..
        })
    ));
}

proptest! {
    /// The merged bounds are exactly the intersection of the parameter's runtime bounds and the
    /// guarantee, and the merge fails exactly when that intersection is empty.
    #[test]
    fn merged_bounds_are_the_intersection(
        pmin in 0i64..100, plen in 0i64..100, gmin in 0i64..100, glen in 0i64..100,
    ) {
        let param = k::PerSegment::<(), 0, 1000>::new(()).with_bounds(pmin, pmin + plen).unwrap();
        let guarantee = KRange::<0, 1000>::new().between(gmin, gmin + glen).unwrap();
        let env = Env::new().guarantee(guarantee);
        let expected = Bounds::new(pmin.max(gmin), (pmin + plen).min(gmin + glen));
        match env.bounds_of(&param) {
            Ok(b) => prop_assert_eq!(b, expected),
            Err(e) => {
                prop_assert!(expected.is_empty());
                let is_contradiction = matches!(e, ParamError::ContradictsGuarantee { .. });
                prop_assert!(is_contradiction);
            }
        }
    }

    /// A host value is accepted exactly when it lies inside the type's bounds and every guarantee.
    #[test]
    fn uniform_value_against_two_guarantees(v in 0i64..80, a in 0i64..40, b in 20i64..80) {
        let env = Env::new()
            .guarantee(KRange::<0, 100>::new().between(a, 100).unwrap())
            .guarantee(MaxK::<100>::new().between(0, b).unwrap());
        let accepted = k::Uniform::<1, 64>::new(v).and_then(|p| env.bounds_of(&p));
        prop_assert_eq!(accepted.is_ok(), (1..=64).contains(&v) && a <= v && v <= b);
    }
}
