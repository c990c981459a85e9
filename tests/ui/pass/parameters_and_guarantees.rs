// Every parameter kind goes through the front checks, with guarantees from the environment;
// static knowledge is available in const context for dispatch.
use oxicub::env::{merged_static_bounds, Env};
use oxicub::guarantee::{MaxK, MaxSegmentSize, TotalItems};
use oxicub::{contract, direction, k, num_segments, require, segment_size, determinism};
use oxicub::{Bounds, Param, SelectDirection};

type G = oxicub::env::HList!(MaxSegmentSize<4096>, MaxK<64>);
const K_BOUNDS: Bounds = merged_static_bounds::<k::Uniform<1, 2048>, G>();
const _: () = assert!(K_BOUNDS.min == 1 && K_BOUNDS.max == 64);
const _: () = assert!(<k::Static<8> as Param>::IS_EXACT);

fn main() -> Result<(), oxicub::ParamError> {
    let sizes = [0i64, 17, 4096, 256];
    let ks = [0i64, 8, 64, 4];
    let dirs = [0u8, 1, 0, 1];
    let env = require!(determinism::RunToRun)
        .guarantee(MaxSegmentSize::<4096>::new())
        .guarantee(MaxK::<64>::new())
        .guarantee(TotalItems::<0, { 1 << 20 }>::new());
    let checked = contract::batched_topk(
        &segment_size::PerSegment::<_, 0, 1_000_000>::new(&sizes[..]).with_bounds(0, 4096)?,
        &k::PerSegment::<_, 0, 2048>::new(&ks[..]),
        &direction::PerSegment::<_>::new(&dirs[..]),
        &num_segments::Deferred::<_, 1, 4>::new("device value"),
        &env,
    )?;
    assert_eq!(checked.k, Bounds::new(0, 64));
    assert_eq!(checked.segment_sizes, Bounds::new(0, 4096));
    assert_eq!(checked.num_segments, Bounds::new(1, 4));

    let uniform_direction = direction::Choice::<direction::Either>::new(SelectDirection::Min)?;
    contract::batched_topk(
        &segment_size::Uniform::<1, 256>::new(64)?,
        &k::Uniform::<1, 8>::new(6)?,
        &uniform_direction,
        &num_segments::uniform(4096)?,
        &Env::new(),
    )?;
    contract::topk(1 << 28, &k::Deferred::<_, 1, 16_384>::new("device value"), &Env::new())?;
    Ok(())
}
