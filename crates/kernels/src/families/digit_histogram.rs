//! Family `digit_histogram`: the histogram of one radix digit over all keys.

use std::sync::Arc;

use cudarc::driver::{CudaStream, CudaView, CudaViewMut};

use crate::codegen::{kernel_params, FamilyTable, KernelParams, TemplateArg};
use crate::radix::{CountType, HistogramCount, KeyType, RadixDigit, RadixKey};
use crate::{KernelError, KernelRuntime, KernelSpec};
use crate::{KernelFamily, Tier};

kernel_params! {
    /// Parameters of `digit_histogram`.
    struct DigitHistogramParams {
        /// `len` keys.
        keys: u64,
        /// `2^DIGIT_BITS` zeroed counters.
        histogram: u64,
        len: u64,
        bit_offset: u32,
        /// Explicit padding, always zero.
        reserved: u32,
    }
}

/// Threads per block.
const BLOCK_THREADS: u32 = 256;

pub(crate) static TABLE: FamilyTable = FamilyTable {
    name: "digit_histogram",
    header: include_str!("../../cuda/digit_histogram/digit_histogram.cuh"),
    constants: &[],
    params_name: DigitHistogramParams::CXX_NAME,
    params_declaration: DigitHistogramParams::cxx_declaration,
    template_args: &[
        TemplateArg::Key,
        TemplateArg::BlockThreads,
        TemplateArg::Const("DIGIT_BITS"),
        TemplateArg::Const("COUNT_BYTES"),
    ],
    // One 32-bit counter per bin.
    static_shared_bytes: |spec| 4u64 << spec.constant("DIGIT_BITS").unwrap_or(0).clamp(0, 32),
};

impl KernelSpec {
    /// The spec of the `digit_histogram` kernel: keys of type `key`, digits of `digit_bits`
    /// bits, counters of type `count`.
    ///
    /// ```
    /// use oxicub::kernels::{CountType, KernelSpec, KeyType};
    ///
    /// let spec = KernelSpec::digit_histogram(KeyType::I16, 11, CountType::U32);
    /// // 2048 counters, and the 1 KiB an sm_90 CUBIN adds to every kernel.
    /// assert_eq!(spec.static_shared_bytes(), 4 * 2048 + 1024);
    /// ```
    pub fn digit_histogram(key: KeyType, digit_bits: u32, count: CountType) -> KernelSpec {
        KernelSpec {
            family: KernelFamily::DigitHistogram,
            key,
            value: None,
            direction: None,
            tier: Tier::GridStride,
            block_threads: BLOCK_THREADS,
            consts: vec![
                ("DIGIT_BITS", i64::from(digit_bits)),
                ("COUNT_BYTES", i64::from(count.bytes())),
            ],
        }
    }
}

/// Digit widths of the representative specs: the smallest, a nibble, the default byte and the
/// largest supported width.
const REPRESENTATIVE_DIGIT_BITS: [u32; 4] = [1, 4, 8, crate::radix::MAX_DIGIT_BITS];

/// A representative set of the `digit_histogram` specs (every width from 1 to
/// [`MAX_DIGIT_BITS`](crate::radix::MAX_DIGIT_BITS) bits is valid): each key type with both
/// counter types and the smallest, a nibble's, the default and the largest digit widths.
///
/// ```
/// assert_eq!(oxicub::kernels::families::digit_histogram::specs().len(), 12 * 2 * 4);
/// ```
pub fn specs() -> Vec<KernelSpec> {
    let mut specs = Vec::new();
    for key in KeyType::ALL {
        for count in [CountType::U32, CountType::U64] {
            for digit_bits in REPRESENTATIVE_DIGIT_BITS {
                specs.push(KernelSpec::digit_histogram(key, digit_bits, count));
            }
        }
    }
    specs
}

/// The most keys one block may count: its shared-memory counters are 32-bit.
/// (Half of `u32::MAX`, so rounding in the grid-stride split never reaches the limit.)
const MAX_KEYS_PER_BLOCK: u64 = 1 << 31;

/// Overwrites `histogram` (`digit.bins()` counters) with the number of keys whose radix code
/// has each value of `digit`. Asynchronous on `stream`; any length of `keys`, including 0. With
/// `u32` counters the number of keys must be below `2^32`.
///
/// ```no_run
/// use oxicub::kernels::{digit_histogram, open_context, KernelRuntime, RadixDigit};
///
/// let runtime = KernelRuntime::new(open_context(0)?)?;
/// let stream = runtime.context().default_stream();
/// let keys = stream.clone_htod(&[1u32, 2, 3, 0x0100_0001]).map_err(|e| e.to_string())?;
/// let mut histogram = stream.alloc_zeros::<u64>(256).map_err(|e| e.to_string())?;
/// digit_histogram(&runtime, &stream, &keys.as_view(), RadixDigit::byte(0)?, &mut histogram.as_view_mut())?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn digit_histogram<K: RadixKey, C: HistogramCount>(
    runtime: &KernelRuntime,
    stream: &Arc<CudaStream>,
    keys: &CudaView<'_, K>,
    digit: RadixDigit,
    histogram: &mut CudaViewMut<'_, C>,
) -> Result<(), KernelError> {
    runtime.check_buffer("keys", keys)?;
    runtime.check_buffer("histogram", &*histogram)?;
    digit.check_fits(K::KEY_TYPE)?;
    if histogram.len() != digit.bins() {
        return Err(KernelError::LengthMismatch {
            buffer: "histogram",
            actual: histogram.len(),
            expected: digit.bins(),
        });
    }
    let len = keys.len() as u64;
    if len > C::COUNT_TYPE.max_count() {
        return Err(KernelError::TooLarge {
            buffer: "keys",
            len,
            max: C::COUNT_TYPE.max_count(),
            why: "the histogram counters are 32-bit; use u64 counters",
        });
    }
    runtime.during("cuMemsetD8Async", stream.memset_zeros(histogram))?;
    if len == 0 {
        return Ok(());
    }
    let spec = KernelSpec::digit_histogram(K::KEY_TYPE, digit.digit_bits(), C::COUNT_TYPE);
    let kernel = runtime.kernel(&spec)?;
    let grid = runtime.grid_blocks(&kernel, len, len.div_ceil(MAX_KEYS_PER_BLOCK));
    let ((keys_ptr, histogram_ptr), _guards) = super::device_ptrs(stream, keys, histogram);
    let params = DigitHistogramParams {
        keys: keys_ptr,
        histogram: histogram_ptr,
        len,
        bit_offset: digit.bit_offset(),
        reserved: 0,
    };
    runtime.launch(stream, &kernel, grid, params)
}
