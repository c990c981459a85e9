// Every valid (determinism, tie_break, output_ordering) combination builds, with each slot given
// or left to its default, and resolves as the requirement model says (checked in const context).
use oxicub::env::{Env, Requirements, Unset};
use oxicub::{determinism as d, output_ordering as o, require, tie_break as t};
use oxicub::{Determinism, OutputOrdering, TieBreak};

macro_rules! resolves {
    ($env:ty => $det:ident, $tb:ident, $ord:ident) => {
        const _: () = {
            assert!(matches!(<$env as Requirements>::DETERMINISM, Determinism::$det));
            assert!(matches!(<$env as Requirements>::TIE_BREAK, TieBreak::$tb));
            assert!(matches!(<$env as Requirements>::ORDERING, OutputOrdering::$ord));
        };
    };
}

macro_rules! orderings {
    ($D:ty, $T:ty => $det:ident, $tb:ident) => {
        resolves!(Env<$D, $T, Unset> => $det, $tb, StableSorted);
        resolves!(Env<$D, $T, o::Unsorted> => $det, $tb, Unsorted);
        resolves!(Env<$D, $T, o::Sorted> => $det, $tb, Sorted);
        resolves!(Env<$D, $T, o::StableSorted> => $det, $tb, StableSorted);
    };
}

// nothing required: the committed default contract
orderings!(Unset, Unset => GpuToGpu, PreferSmallerIndex);
orderings!(Unset, t::Unspecified => GpuToGpu, Unspecified);
orderings!(Unset, t::PreferSmallerIndex => GpuToGpu, PreferSmallerIndex);
orderings!(Unset, t::PreferLargerIndex => GpuToGpu, PreferLargerIndex);
// not_guaranteed takes no tie-break
orderings!(d::NotGuaranteed, Unset => NotGuaranteed, Unspecified);
// run_to_run and gpu_to_gpu take every tie-break; unset means "any deterministic rule"
orderings!(d::RunToRun, Unset => RunToRun, Unspecified);
orderings!(d::RunToRun, t::Unspecified => RunToRun, Unspecified);
orderings!(d::RunToRun, t::PreferSmallerIndex => RunToRun, PreferSmallerIndex);
orderings!(d::RunToRun, t::PreferLargerIndex => RunToRun, PreferLargerIndex);
orderings!(d::GpuToGpu, Unset => GpuToGpu, Unspecified);
orderings!(d::GpuToGpu, t::Unspecified => GpuToGpu, Unspecified);
orderings!(d::GpuToGpu, t::PreferSmallerIndex => GpuToGpu, PreferSmallerIndex);
orderings!(d::GpuToGpu, t::PreferLargerIndex => GpuToGpu, PreferLargerIndex);

fn main() {
    // The builder produces exactly those types, in any order of the requirements.
    let _: Env<d::NotGuaranteed, Unset, o::Unsorted> = require!(o::Unsorted, d::NotGuaranteed);
    let _: Env<d::RunToRun, t::PreferLargerIndex, o::Sorted> =
        require!(t::PreferLargerIndex, o::Sorted, d::RunToRun);
    let _: Env<d::GpuToGpu, t::Unspecified, o::StableSorted> =
        require!(o::StableSorted, d::GpuToGpu, t::Unspecified);
    let _: Env<Unset, t::PreferSmallerIndex, Unset> = require!(t::PreferSmallerIndex);
    let _: Env = require!();
}
