//! The requirement model: defaults, resolution of every valid combination, and the rules.

use oxicub_env::{
    determinism as det, output_ordering as ord, require, tie_break as tb, Determinism, Env,
    OutputOrdering, Requirements, Resolved, TieBreak,
};

/// The resolution rules written out from the seeds' text, independent of the typestate: an unset
/// slot takes the committed default, except that an unset tie-break under an explicit determinism
/// is `unspecified` (the seeds' API default).
fn expected(d: Option<Determinism>, t: Option<TieBreak>, o: Option<OutputOrdering>) -> Resolved {
    Resolved {
        determinism: d.unwrap_or(Determinism::GpuToGpu),
        tie_break: match (d, t) {
            (_, Some(t)) => t,
            (None, None) => TieBreak::PreferSmallerIndex,
            (Some(_), None) => TieBreak::Unspecified,
        },
        ordering: o.unwrap_or(OutputOrdering::StableSorted),
    }
}

#[test]
fn nothing_required_is_the_committed_contract() {
    let r = Env::new().resolved();
    assert_eq!(
        r,
        Resolved {
            determinism: Determinism::GpuToGpu,
            tie_break: TieBreak::PreferSmallerIndex,
            ordering: OutputOrdering::StableSorted,
        }
    );
    assert!(r.pins_output());
    assert_eq!(require!().resolved(), r);
}

/// Every valid combination of explicit requirements, each slot either given or not, in two
/// insertion orders, resolves as the rules say.
#[test]
fn every_valid_combination_resolves_as_documented() {
    macro_rules! check {
        ($d:expr, $t:expr, $o:expr; $($req:expr),*) => {{
            let forward = require!($($req),*).resolved();
            assert_eq!(forward, expected($d, $t, $o), "require!({})", stringify!($($req),*));
        }};
    }
    macro_rules! orderings {
        ($d:expr, $t:expr; $($req:expr),*) => {
            check!($d, $t, None; $($req),*);
            check!($d, $t, Some(OutputOrdering::Unsorted); ord::Unsorted $(, $req)*);
            check!($d, $t, Some(OutputOrdering::Sorted); $($req,)* ord::Sorted);
            check!($d, $t, Some(OutputOrdering::StableSorted); ord::StableSorted $(, $req)*);
        };
    }
    macro_rules! tie_breaks {
        ($d:expr; $($req:expr),*) => {
            orderings!($d, None; $($req),*);
            orderings!($d, Some(TieBreak::Unspecified); tb::Unspecified $(, $req)*);
            orderings!($d, Some(TieBreak::PreferSmallerIndex); $($req,)* tb::PreferSmallerIndex);
            orderings!($d, Some(TieBreak::PreferLargerIndex); tb::PreferLargerIndex $(, $req)*);
        };
    }
    tie_breaks!(None;);
    tie_breaks!(Some(Determinism::RunToRun); det::RunToRun);
    tie_breaks!(Some(Determinism::GpuToGpu); det::GpuToGpu);
    // not_guaranteed admits no tie-break
    orderings!(Some(Determinism::NotGuaranteed), None; det::NotGuaranteed);
}

#[test]
fn pinning_follows_the_worked_example() {
    // not_guaranteed: sets differ between runs
    assert!(!require!(det::NotGuaranteed).resolved().is_deterministic());
    // run_to_run with an implementation-defined tie-break: deterministic, not pinned across
    // implementations
    let r = require!(det::RunToRun, ord::StableSorted).resolved();
    assert!(r.is_deterministic() && !r.pins_result_set());
    // an explicit tie-break pins the set; stable sorted then pins the output bit for bit
    let r = require!(det::RunToRun, tb::PreferSmallerIndex, ord::StableSorted).resolved();
    assert!(r.pins_output());
    let r = require!(det::GpuToGpu, tb::PreferLargerIndex, ord::Sorted).resolved();
    assert!(r.pins_result_set() && !r.pins_output());
}

#[test]
fn resolved_types_match_resolved_values() {
    type E = Env<det::RunToRun, oxicub_env::Unset, ord::Unsorted>;
    const R: Resolved = <E as Requirements>::RESOLVED;
    assert_eq!(R.tie_break, TieBreak::Unspecified);
    assert_eq!(R.ordering, OutputOrdering::Unsorted);
    let names = [
        Determinism::NotGuaranteed.to_string(),
        TieBreak::PreferLargerIndex.to_string(),
        OutputOrdering::StableSorted.to_string(),
    ];
    assert_eq!(
        names,
        ["not_guaranteed", "prefer_larger_index", "stable_sorted"]
    );
}
