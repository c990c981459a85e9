//! Test support shared by oxicub's test suites, host and GPU, of every algorithm.
//!
//! * [`oracle`]: plain sequential references written from the documented contracts (the
//!   contract's key order, top-k by a full sort), and checkers that assert exactly what a set
//!   of requirements promises. They share no code with the implementations they check.
//! * [`cases`]: deterministic inputs ([`SplitMix64`], [`sample_keys`] with the edge values of
//!   each key type, tie-heavy and score-like keys) and the poison written into outputs.
//! * [`batched_topk`]: batched top-k cases (segments, k and direction each), the builders for
//!   each tier's shapes, the per-segment check, and one case run on the host and the GPU and
//!   compared.
//! * [`fuzz`]: generated calls of every algorithm's public API on the host backend, with the
//!   oracle's prediction of each (the exact error of a bad input, or what every output slot
//!   holds); the fuzz tests of `crates/algorithms/tests/fuzz_*.rs` run them under proptest.
//! * [`routing`]: the MoE routing oracle, each router step by step from its model code.
//! * [`gpu_or_skip`]: the [`Cuda`] backend, or a printed skip line when there is no GPU; with
//!   `OXICUB_REQUIRE_GPU=1` a missing GPU fails the test instead, so a run on a GPU machine can
//!   never pass by skipping.
//! * [`for_every_env!`] and [`every_key_type!`]: a check run under every valid environment,
//!   or for every key type.
//!
//! ```
//! use oxicub_test::{gpu_or_skip, sample_keys};
//!
//! let keys: Vec<f32> = sample_keys(1000, 7);
//! if let Some(cuda) = gpu_or_skip() {
//!     let _device_keys = cuda.upload_keys(&keys);
//! }
//! ```

#![deny(missing_docs)]

pub mod batched_topk;
pub mod cases;
pub mod fuzz;
pub mod oracle;
pub mod routing;
pub mod seed_sets;
pub mod seed_sort;
pub mod set_batches;
pub mod sharded;

pub use cases::{all_keys, sample_keys, SplitMix64};
pub use oxicub_algorithms::Cuda;

/// The crates that the exported macros name through `$crate`, so a test crate needs none of
/// them as its own dependency.
#[doc(hidden)]
pub mod __macro_support {
    pub use half;
    pub use oxicub_env;
}

/// The environment variable that turns a missing GPU into a test failure.
///
/// ```
/// assert_eq!(oxicub_test::REQUIRE_GPU_VAR, "OXICUB_REQUIRE_GPU");
/// ```
pub const REQUIRE_GPU_VAR: &str = "OXICUB_REQUIRE_GPU";

/// The [`Cuda`] backend on device 0, or `None` after printing
/// `skipped: no GPU (<reason>)` with the current test's name. With `OXICUB_REQUIRE_GPU=1` a
/// missing GPU panics (fails the test) instead.
///
/// ```
/// if let Some(cuda) = oxicub_test::gpu_or_skip() {
///     println!("testing on {cuda}");
/// }
/// ```
pub fn gpu_or_skip() -> Option<Cuda> {
    match Cuda::new(0) {
        Ok(cuda) => Some(cuda),
        Err(why) => {
            let test = std::thread::current()
                .name()
                .unwrap_or("<unnamed>")
                .to_owned();
            if std::env::var(REQUIRE_GPU_VAR).is_ok_and(|v| v == "1") {
                panic!("{REQUIRE_GPU_VAR}=1 but no GPU is usable in {test}: {why}");
            }
            println!("skipped: no GPU ({why}) in {test}");
            None
        }
    }
}

/// Calls `$f(args.., &env)` for every valid environment: the default and each of the 21 valid
/// combinations of determinism x tie-break x output ordering (`NotGuaranteed` takes no
/// tie-break).
///
/// ```
/// use oxicub_env::Environment;
/// use oxicub_test::for_every_env;
///
/// fn count<E: Environment>(seen: &mut Vec<String>, env: &E) {
///     seen.push(format!("{:?}", env.resolved()));
/// }
/// let mut seen = Vec::new();
/// for_every_env!(count(&mut seen));
/// assert_eq!(seen.len(), 22);
/// ```
#[macro_export]
macro_rules! for_every_env {
    ($f:ident ( $($arg:expr),* )) => {{
        use $crate::__macro_support::oxicub_env::{
            determinism as d, output_ordering as o, require, tie_break as t, Env,
        };
        $f($($arg,)* &Env::new());
        $crate::for_every_env!(@orders $f ($($arg),*) d::NotGuaranteed);
        $crate::for_every_env!(@ties $f ($($arg),*) d::RunToRun);
        $crate::for_every_env!(@ties $f ($($arg),*) d::GpuToGpu);
    }};
    (@ties $f:ident ($($arg:expr),*) $d:expr) => {{
        $crate::for_every_env!(@orders $f ($($arg),*) $d, t::Unspecified);
        $crate::for_every_env!(@orders $f ($($arg),*) $d, t::PreferSmallerIndex);
        $crate::for_every_env!(@orders $f ($($arg),*) $d, t::PreferLargerIndex);
    }};
    (@orders $f:ident ($($arg:expr),*) $($req:expr),*) => {{
        $f($($arg,)* &require!($($req,)* o::Unsorted));
        $f($($arg,)* &require!($($req,)* o::Sorted));
        $f($($arg,)* &require!($($req,)* o::StableSorted));
    }};
}

/// Evaluates `$body` with `$env` bound to the environment of a
/// [`sharded::Contract`](crate::sharded::Contract).
///
/// ```
/// use oxicub_env::Requirements;
/// use oxicub_test::sharded::Contract;
///
/// let pinned = oxicub_test::with_contract_env!(Contract::OptOutSorted, |env| env.resolved().pins_output());
/// assert!(!pinned);
/// ```
#[macro_export]
macro_rules! with_contract_env {
    ($contract:expr, |$env:ident| $body:expr) => {{
        use $crate::__macro_support::oxicub_env::{
            determinism as d, output_ordering as o, require, tie_break as t, Env,
        };
        match $contract {
            $crate::sharded::Contract::Smaller => {
                let $env = Env::new();
                $body
            }
            $crate::sharded::Contract::Larger => {
                let $env = require!(t::PreferLargerIndex);
                $body
            }
            $crate::sharded::Contract::OptOutUnsorted => {
                let $env = require!(d::NotGuaranteed, o::Unsorted);
                $body
            }
            $crate::sharded::Contract::OptOutSorted => {
                let $env = require!(d::NotGuaranteed, o::Sorted);
                $body
            }
        }
    }};
}

/// Runs `$each::<K>($arg, seed)` for every radix key type K, with seeds `$seed`,
/// `$seed + 1`, ... in the order u8, u16, u32, u64, i8, i16, i32, i64, f16, bf16, f32, f64.
///
/// ```
/// use oxicub_algorithms::radix::RadixKey;
/// use oxicub_test::every_key_type;
///
/// fn each<K: RadixKey>(names: &mut Vec<String>, seed: u64) {
///     names.push(format!("{} {seed}", K::KEY_TYPE));
/// }
/// let mut names = Vec::new();
/// every_key_type!(each, &mut names, 3);
/// assert_eq!(names.len(), 12);
/// ```
#[macro_export]
macro_rules! every_key_type {
    ($each:ident, $arg:expr, $seed:expr) => {{
        let seed: u64 = $seed;
        $each::<u8>($arg, seed);
        $each::<u16>($arg, seed + 1);
        $each::<u32>($arg, seed + 2);
        $each::<u64>($arg, seed + 3);
        $each::<i8>($arg, seed + 4);
        $each::<i16>($arg, seed + 5);
        $each::<i32>($arg, seed + 6);
        $each::<i64>($arg, seed + 7);
        $each::<$crate::__macro_support::half::f16>($arg, seed + 8);
        $each::<$crate::__macro_support::half::bf16>($arg, seed + 9);
        $each::<f32>($arg, seed + 10);
        $each::<f64>($arg, seed + 11);
    }};
}
