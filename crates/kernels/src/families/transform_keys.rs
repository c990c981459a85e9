//! Family `transform_keys`: the radix transform (or its inverse) over a whole array.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut};

use crate::codegen::{kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::radix::{KeyType, RadixKey};
use crate::{KernelError, KernelRuntime, KernelSpec};
use crate::{KernelFamily, Tier};

kernel_params! {
    /// Parameters of `transform_keys` (pointers to `len` elements of the key's bit width).
    struct TransformKeysParams {
        input: u64,
        output: u64,
        len: u64,
    }
}

/// Threads per block.
const BLOCK_THREADS: u32 = 256;

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "transform_keys",
    header: include_str!("../../cuda/transform_keys/transform_keys.cuh"),
    constants: &[],
    params_name: TransformKeysParams::CXX_NAME,
    params_declaration: TransformKeysParams::cxx_declaration,
    template_args: &[
        TemplateArg::Key,
        TemplateArg::BlockThreads,
        TemplateArg::Const("INVERSE"),
    ],
    static_shared_bytes: |_| 0,
};

/// Which way to transform.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransformOp {
    /// Key to radix code ([`RadixKey::to_radix`]).
    Encode,
    /// Radix code to key ([`RadixKey::from_radix`]).
    Decode,
}

impl KernelSpec {
    /// The spec of the `transform_keys` kernel for `key`.
    ///
    /// ```
    /// use oxicub::kernels::{KernelSpec, KeyType, TransformOp};
    ///
    /// let spec = KernelSpec::transform_keys(KeyType::BF16, TransformOp::Decode);
    /// assert_eq!(spec.to_string(), "oxicub::transform_keys<oxicub::KeyBF16, 256, 1>");
    /// ```
    pub fn transform_keys(key: KeyType, op: TransformOp) -> KernelSpec {
        KernelSpec {
            family: KernelFamily::TransformKeys,
            key,
            value: None,
            direction: None,
            tier: Tier::GridStride,
            block_threads: BLOCK_THREADS,
            consts: vec![("INVERSE", i64::from(op == TransformOp::Decode))],
        }
    }
}

/// Every `transform_keys` spec: each key type, each way.
///
/// ```
/// assert_eq!(oxicub::kernels::families::transform_keys::specs().len(), 12 * 2);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    let mut specs = Vec::new();
    for key in KeyType::ALL {
        for op in [TransformOp::Encode, TransformOp::Decode] {
            specs.push(KernelSpec::transform_keys(key, op));
        }
    }
    specs
}

fn launch_transform(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    spec: KernelSpec,
    (input, output): (u64, u64),
    len: usize,
) -> Result<(), KernelError> {
    if len == 0 {
        return Ok(());
    }
    let kernel = runtime.kernel(&spec)?;
    let len = len as u64;
    let grid = runtime.grid_blocks(&kernel, len, 1);
    runtime.launch(
        stream,
        &kernel,
        grid,
        TransformKeysParams { input, output, len },
    )
}

/// Writes the radix code of every key: `codes[i] = keys[i].to_radix()`. Asynchronous on
/// `stream`.
///
/// ```no_run
/// use oxicub::kernels::{open_context, transform_keys, KernelRuntime};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let keys = stream.clone_htod(&[1.5f32, -2.0, 0.0]).map_err(|e| e.to_string())?;
/// let mut codes = stream.alloc_zeros::<u32>(3).map_err(|e| e.to_string())?;
/// transform_keys(&runtime, &stream, &keys.as_view(), &mut codes.as_view_mut())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn transform_keys<K: RadixKey>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    keys: &CudaView<'_, K>,
    codes: &mut CudaViewMut<'_, K::Bits>,
) -> Result<(), KernelError> {
    super::check_same_length(runtime, ("keys", keys), ("codes", &*codes))?;
    let spec = KernelSpec::transform_keys(K::KEY_TYPE, TransformOp::Encode);
    let len = keys.len();
    let (ptrs, _guards) = super::device_ptrs(stream, keys, codes);
    launch_transform(runtime, stream, spec, ptrs, len)
}

/// Writes the key of every radix code: `keys[i] = K::from_radix(codes[i])`. Asynchronous on
/// `stream`.
///
/// ```no_run
/// use oxicub::kernels::{inverse_transform_keys, open_context, KernelRuntime};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let codes = stream.clone_htod(&[0x8000_0000u32]).map_err(|e| e.to_string())?;
/// let mut keys = stream.alloc_zeros::<f32>(1).map_err(|e| e.to_string())?;
/// inverse_transform_keys(&runtime, &stream, &codes.as_view(), &mut keys.as_view_mut())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn inverse_transform_keys<K: RadixKey>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    codes: &CudaView<'_, K::Bits>,
    keys: &mut CudaViewMut<'_, K>,
) -> Result<(), KernelError> {
    super::check_same_length(runtime, ("codes", codes), ("keys", &*keys))?;
    let spec = KernelSpec::transform_keys(K::KEY_TYPE, TransformOp::Decode);
    let len = codes.len();
    let (ptrs, _guards) = super::device_ptrs(stream, codes, keys);
    launch_transform(runtime, stream, spec, ptrs, len)
}
