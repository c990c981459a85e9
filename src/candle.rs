//! oxicub on [candle](https://docs.rs/candle-core) tensors (feature `candle`): top-k of a
//! tensor and of each row of one, read in place (no copy of the input) and returned as new
//! tensors on the input's device.
//!
//! * [`topk()`]: the `k` best items of a one-dimensional tensor, with their positions.
//! * [`batched_topk()`]: the `min(k, n)` best items of each row of a tensor whose last dimension
//!   is `n` (a MoE router's `[tokens x experts]` logits), with their positions in the row (the
//!   expert ids); the outputs have the input's shape with `min(k, n)` as the last dimension.
//!
//! Keys of every candle type but the 8-bit floats (`u8`, `u32`, `i16`, `i32`, `i64`, `f16`,
//! `bf16`, `f32`, `f64`); positions as `u32`, `i32` or `i64` (`I`). The results are those of
//! oxicub's default requirements: deterministic, ties to the smaller position, sorted from the
//! best (NaN above every number for `Max`, `-0.0` below `+0.0`).
//!
//! The input must be contiguous (a strided view is refused with [`Error::InvalidArgument`]
//! naming `.contiguous()`, never copied behind the caller's back). CPU tensors run on
//! [`Host`]; CUDA tensors are not taken yet (the error says so).
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use oxicub::candle::batched_topk;
//! use oxicub::params::SelectDirection;
//!
//! // Two tokens, four experts: the top 2 of each row.
//! let logits = Tensor::new(&[[0.1f32, 0.9, 0.3, 0.9], [5.0, -1.0, 7.0, 6.0]], &Device::Cpu)?;
//! let (top, expert) = batched_topk::<u32>(&logits, 2, SelectDirection::Max)?;
//! assert_eq!(top.to_vec2::<f32>()?, [[0.9, 0.9], [7.0, 6.0]]);
//! assert_eq!(expert.to_vec2::<u32>()?, [[1, 3], [2, 3]]); // ties: the smaller index first
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use candle_core::{DType, Device, Storage, Tensor, WithDType};
use half::{bf16, f16};
use oxicub_algorithms::batched_topk::{self, Problem};
use oxicub_algorithms::radix::RadixKey;
use oxicub_algorithms::{topk as single, Error, Host, Pending, SourceIndex};
use oxicub_env::Env;
use oxicub_params::{direction, k as kp, num_segments, segment_size, SelectDirection};

/// Runs `$run` with the contiguous keys of `$x` as a slice of its element type.
macro_rules! by_dtype {
    ($x:expr, |$keys:ident| $run:expr) => {{
        let x: &Tensor = $x;
        let (storage, layout) = x.storage_and_layout();
        let Storage::Cpu(cpu) = &*storage else {
            return Err(Error::InvalidArgument {
                arg: "tensor",
                reason: format!(
                    "on {:?}: oxicub's candle functions take CPU tensors for now",
                    x.device()
                ),
            });
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            return Err(Error::InvalidArgument {
                arg: "tensor",
                reason: "is not contiguous: call `.contiguous()` first (oxicub reads the \
                         tensor in place and copies nothing behind your back)"
                    .to_owned(),
            });
        };
        match x.dtype() {
            DType::U8 => by_dtype!(@run cpu, start, end, u8, |$keys| $run),
            DType::U32 => by_dtype!(@run cpu, start, end, u32, |$keys| $run),
            DType::I16 => by_dtype!(@run cpu, start, end, i16, |$keys| $run),
            DType::I32 => by_dtype!(@run cpu, start, end, i32, |$keys| $run),
            DType::I64 => by_dtype!(@run cpu, start, end, i64, |$keys| $run),
            DType::F16 => by_dtype!(@run cpu, start, end, f16, |$keys| $run),
            DType::BF16 => by_dtype!(@run cpu, start, end, bf16, |$keys| $run),
            DType::F32 => by_dtype!(@run cpu, start, end, f32, |$keys| $run),
            DType::F64 => by_dtype!(@run cpu, start, end, f64, |$keys| $run),
            other => Err(Error::InvalidArgument {
                arg: "tensor",
                reason: format!("{other:?} keys have no radix order in oxicub"),
            }),
        }
    }};
    (@run $cpu:ident, $start:ident, $end:ident, $t:ty, |$keys:ident| $run:expr) => {{
        let all = $cpu.as_slice::<$t>().map_err(candle_error)?;
        let $keys: &[$t] = &all[$start..$end];
        $run
    }};
}

/// A candle failure, as oxicub's error naming the tensor.
fn candle_error(error: candle_core::Error) -> Error {
    Error::InvalidArgument {
        arg: "tensor",
        reason: format!("candle: {error}"),
    }
}

/// The `k` best items of the one-dimensional tensor `x` (`k` at most its length), in order
/// from the best, and their positions in `x`.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use oxicub::params::SelectDirection;
///
/// let scores = Tensor::new(&[3i64, -7, 12, 0], &Device::Cpu)?;
/// let (low, at) = oxicub::candle::topk::<i64>(&scores, 2, SelectDirection::Min)?;
/// assert_eq!((low.to_vec1::<i64>()?, at.to_vec1::<i64>()?), (vec![-7, 0], vec![1, 3]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn topk<I: SourceIndex + WithDType>(
    x: &Tensor,
    k: usize,
    direction: SelectDirection,
) -> Result<(Tensor, Tensor), Error> {
    if x.rank() != 1 {
        return Err(Error::InvalidArgument {
            arg: "tensor",
            reason: format!(
                "top-k takes a one-dimensional tensor, not one of shape {:?} (batched_topk \
                 takes each row of the last dimension)",
                x.dims()
            ),
        });
    }
    by_dtype!(x, |keys| select::<_, I>(keys, k, direction, x.device()))
}

/// The `min(k, n)` best items of each row of `x` (its last dimension, of length `n`), each row
/// in order from the best, and their positions in the row; both of `x`'s shape with `min(k, n)`
/// as the last dimension.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use oxicub::params::SelectDirection;
///
/// let x = Tensor::new(&[[[1f32, 4.0, 2.0]], [[8.0, 8.0, -1.0]]], &Device::Cpu)?; // [2, 1, 3]
/// let (top, at) = oxicub::candle::batched_topk::<i32>(&x, 5, SelectDirection::Max)?; // k above n
/// assert_eq!(top.dims(), [2, 1, 3]);
/// assert_eq!(at.flatten_all()?.to_vec1::<i32>()?, [1, 2, 0, 0, 1, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn batched_topk<I: SourceIndex + WithDType>(
    x: &Tensor,
    k: usize,
    direction: SelectDirection,
) -> Result<(Tensor, Tensor), Error> {
    let Some((&n, outer)) = x.dims().split_last() else {
        return Err(Error::InvalidArgument {
            arg: "tensor",
            reason: "batched top-k takes rows: a tensor of at least one dimension".to_owned(),
        });
    };
    let mut shape = outer.to_vec();
    shape.push(k.min(n));
    by_dtype!(x, |keys| select_rows::<_, I>(keys, n, k, direction, &shape))
}

/// Single-problem top-k on the host, into new tensors on `device`.
fn select<K: RadixKey + WithDType, I: SourceIndex + WithDType>(
    keys: &[K],
    k: usize,
    direction: SelectDirection,
    device: &Device,
) -> Result<(Tensor, Tensor), Error> {
    let mut top = vec![K::from_f64(0.0); k];
    let mut at = vec![I::from_f64(0.0); k];
    single::select_indices(
        &Host::new(),
        &direction::Choice::<direction::Either>::new(direction)?,
        keys,
        &mut top[..],
        &mut at[..],
        &kp::uniform(k as i64)?,
        &Env::new(),
    )
    .and_then(Pending::check)?;
    Ok((
        Tensor::from_vec(top, k, device).map_err(candle_error)?,
        Tensor::from_vec(at, k, device).map_err(candle_error)?,
    ))
}

/// Batched top-k over rows of `n` on the host, into new tensors of `shape`.
fn select_rows<K: RadixKey + WithDType, I: SourceIndex + WithDType>(
    keys: &[K],
    n: usize,
    k: usize,
    direction: SelectDirection,
    shape: &[usize],
) -> Result<(Tensor, Tensor), Error> {
    let written = k.min(n);
    let rows = num_segments::rows(keys.len(), n.max(1))?;
    let out_len = rows.get() as usize * written;
    let (mut top, mut at) = (
        vec![K::from_f64(0.0); out_len],
        vec![I::from_f64(0.0); out_len],
    );
    if out_len > 0 {
        let problem = Problem::strided(
            n,
            segment_size::uniform(n as i64)?,
            kp::uniform(k as i64)?,
            direction::Choice::<direction::Either>::new(direction)?,
            rows,
        )
        .out_stride(written);
        batched_topk::select_indices(
            &Host::new(),
            &problem,
            keys,
            &mut top[..],
            &mut at[..],
            &Env::new(),
        )
        .and_then(Pending::check)?;
    }
    Ok((
        Tensor::from_vec(top, shape, &Device::Cpu).map_err(candle_error)?,
        Tensor::from_vec(at, shape, &Device::Cpu).map_err(candle_error)?,
    ))
}
