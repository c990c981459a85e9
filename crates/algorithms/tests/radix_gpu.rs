//! The radix primitives on the GPU against the host, bit for bit, for every key type; and the
//! argument checks, which need no GPU.

use half::{bf16, f16};
use oxicub_algorithms::radix::{self, HistogramCount, RadixDigit, RadixKey};
use oxicub_algorithms::{AnyBackend, Cuda, Error, Host, KernelError};
use oxicub_test::{all_keys, gpu_or_skip, sample_keys};

/// Lengths around block and grid boundaries, and one large enough for many grid-stride
/// iterations.
const LENGTHS: [usize; 8] = [0, 1, 31, 255, 256, 257, 100_003, 3_000_017];

fn host_codes<K: RadixKey>(keys: &[K]) -> Vec<K::Bits> {
    let mut codes = vec![K::Bits::default(); keys.len()];
    radix::transform_keys(&Host::new(), keys, &mut codes[..]).expect("host transform");
    codes
}

fn host_histogram<K: RadixKey, C: HistogramCount>(keys: &[K], digit: RadixDigit) -> Vec<C> {
    let mut histogram = vec![C::default(); digit.bins()];
    radix::digit_histogram(&Host::new(), keys, digit, &mut histogram[..]).expect("host histogram");
    histogram
}

/// Forward transform, inverse transform (round trip) on the GPU against the host.
fn check_transforms<K: RadixKey>(cuda: &Cuda, keys: &[K]) {
    let what = format!("{} x{}", K::KEY_TYPE, keys.len());
    let expected = host_codes(keys);
    let device_keys = cuda.upload_keys(keys).expect("upload");
    let mut codes = cuda.alloc_zeros::<K::Bits>(keys.len()).expect("alloc");
    radix::transform_keys(cuda, device_keys.as_view(), codes.as_view_mut()).expect(&what);
    let got = cuda.download(&codes.as_view()).expect("download");
    assert!(got == expected, "{what}: GPU codes differ from host codes");

    let mut decoded = cuda.alloc_keys::<K>(keys.len()).expect("alloc");
    radix::inverse_transform_keys(cuda, codes.as_view(), decoded.as_view_mut()).expect(&what);
    let decoded_bits: Vec<K::Bits> = cuda
        .download_keys(&decoded)
        .expect("download")
        .into_iter()
        .map(K::to_bits)
        .collect();
    let mut host_decoded = vec![
        keys.first()
            .copied()
            .unwrap_or(K::from_bits(Default::default()));
        keys.len()
    ];
    radix::inverse_transform_keys(&Host::new(), &expected[..], &mut host_decoded[..])
        .expect("host inverse");
    let host_bits: Vec<K::Bits> = host_decoded.into_iter().map(K::to_bits).collect();
    assert!(
        decoded_bits == host_bits,
        "{what}: GPU inverse differs from host inverse"
    );
}

/// Histograms of several digits, with both counter types, on the GPU against the host.
fn check_histograms<K: RadixKey>(cuda: &Cuda, keys: &[K]) {
    let bits = <K::Bits as radix::RadixBits>::BITS;
    let device_keys = cuda.upload_keys(keys).expect("upload");
    let mut digits: Vec<RadixDigit> = (0..bits / 8)
        .map(|b| RadixDigit::byte(b).expect("byte"))
        .collect();
    digits.push(RadixDigit::new(bits - 1, 1).expect("sign digit"));
    digits.push(RadixDigit::new(bits - 4, 11).expect("top digit, narrower than 11 bits"));
    digits.push(RadixDigit::new(3, 4).expect("nibble"));
    for digit in digits {
        let what = format!("{} x{} {digit:?}", K::KEY_TYPE, keys.len());
        let expected: Vec<u64> = host_histogram(keys, digit);
        assert_eq!(expected.iter().sum::<u64>(), keys.len() as u64);

        let mut histogram = cuda.alloc_zeros::<u64>(digit.bins()).expect("alloc");
        radix::digit_histogram(cuda, device_keys.as_view(), digit, histogram.as_view_mut())
            .expect(&what);
        assert_eq!(
            cuda.download(&histogram.as_view()).expect("download"),
            expected,
            "{what} (u64)"
        );

        let expected32: Vec<u32> = host_histogram(keys, digit);
        // Start from garbage: the histogram must be overwritten, not accumulated.
        let mut histogram32 = cuda.upload(&vec![7u32; digit.bins()]).expect("upload");
        radix::digit_histogram(
            cuda,
            device_keys.as_view(),
            digit,
            histogram32.as_view_mut(),
        )
        .expect(&what);
        assert_eq!(
            cuda.download(&histogram32.as_view()).expect("download"),
            expected32,
            "{what} (u32)"
        );
    }
}

fn check_key_type<K: RadixKey>(cuda: &Cuda, seed: u64) {
    for len in LENGTHS {
        let keys: Vec<K> = sample_keys(len, seed ^ len as u64);
        check_transforms(cuda, &keys);
        check_histograms(cuda, &keys);
    }
}

macro_rules! gpu_tests {
    ($($name:ident: $t:ty),* $(,)?) => {$(
        #[test]
        fn $name() {
            let Some(cuda) = gpu_or_skip() else { return };
            check_key_type::<$t>(&cuda, 0x5EED);
        }
    )*};
}

gpu_tests!(
    gpu_matches_host_u8: u8,
    gpu_matches_host_u16: u16,
    gpu_matches_host_u32: u32,
    gpu_matches_host_u64: u64,
    gpu_matches_host_i8: i8,
    gpu_matches_host_i16: i16,
    gpu_matches_host_i32: i32,
    gpu_matches_host_i64: i64,
    gpu_matches_host_f16: f16,
    gpu_matches_host_bf16: bf16,
    gpu_matches_host_f32: f32,
    gpu_matches_host_f64: f64,
);

/// Every bit pattern of the 8- and 16-bit types through the GPU transform, against the Rust
/// transform.
#[test]
fn gpu_transform_is_exhaustively_the_rust_transform_for_8_and_16_bits() {
    let Some(cuda) = gpu_or_skip() else { return };
    check_transforms::<u8>(&cuda, &all_keys());
    check_transforms::<i8>(&cuda, &all_keys());
    check_transforms::<u16>(&cuda, &all_keys());
    check_transforms::<i16>(&cuda, &all_keys());
    check_transforms::<f16>(&cuda, &all_keys());
    check_transforms::<bf16>(&cuda, &all_keys());
}

/// Views into the middle of a buffer (offset pointers) work like whole buffers.
#[test]
fn gpu_sub_views() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys: Vec<f32> = sample_keys(10_000, 11);
    let device_keys = cuda.upload(&keys).expect("upload");
    let mut codes = cuda.alloc_zeros::<u32>(10_000).expect("alloc");
    radix::transform_keys(
        &cuda,
        device_keys.slice(1..9_001),
        codes.slice_mut(3..9_003),
    )
    .expect("transform");
    let got = cuda.download(&codes.as_view()).expect("download");
    assert_eq!(&got[3..9_003], &host_codes(&keys[1..9_001])[..]);
    assert!(
        got[..3].iter().chain(&got[9_003..]).all(|&c| c == 0),
        "wrote outside the view"
    );
}

/// A kernel launched on a stream created outside oxicub (Cuda::from_stream).
#[test]
fn gpu_from_existing_stream() {
    let Some(cuda) = gpu_or_skip() else { return };
    let stream = cuda.context().new_stream().expect("stream");
    let other = Cuda::from_stream(stream).expect("from_stream");
    let keys: Vec<i64> = sample_keys(5_000, 5);
    let device_keys = other.upload(&keys).expect("upload");
    let mut histogram = other.alloc_zeros::<u64>(256).expect("alloc");
    let digit = RadixDigit::byte(7).expect("byte");
    radix::digit_histogram(
        &other,
        device_keys.as_view(),
        digit,
        histogram.as_view_mut(),
    )
    .expect("histogram");
    assert_eq!(
        other.download(&histogram.as_view()).expect("download"),
        host_histogram::<i64, u64>(&keys, digit)
    );
}

/// AnyBackend::auto picks the GPU here and gives the host's results.
#[test]
fn gpu_auto_backend_matches_host() {
    let Some(_cuda) = gpu_or_skip() else { return };
    let (backend, note) = AnyBackend::auto_explained();
    println!("{note}");
    assert_eq!(oxicub_algorithms::Backend::name(&backend), "cuda");
    let keys: Vec<bf16> = sample_keys(70_001, 9);
    let mut codes = vec![0u16; keys.len()];
    radix::transform_keys(&backend, &keys[..], &mut codes[..]).expect("transform");
    assert_eq!(codes, host_codes(&keys));
    let mut decoded = vec![bf16::ZERO; keys.len()];
    radix::inverse_transform_keys(&backend, &codes[..], &mut decoded[..]).expect("inverse");
    let mut histogram = vec![0u32; 2048];
    let digit = RadixDigit::new(5, 11).expect("digit");
    radix::digit_histogram(&backend, &keys[..], digit, &mut histogram[..]).expect("histogram");
    assert_eq!(histogram, host_histogram::<bf16, u32>(&keys, digit));
}

/// Length mismatches are caught before anything reaches the device.
#[test]
fn gpu_argument_errors() {
    let Some(cuda) = gpu_or_skip() else { return };
    let keys = cuda.upload(&[1u32, 2, 3]).expect("upload");
    let mut codes = cuda.alloc_zeros::<u32>(2).expect("alloc");
    let err = radix::transform_keys(&cuda, keys.as_view(), codes.as_view_mut()).unwrap_err();
    assert!(
        matches!(err, Error::LengthMismatch { arg: "codes", .. }),
        "{err}"
    );
    let mut histogram = cuda.alloc_zeros::<u64>(255).expect("alloc");
    let digit = RadixDigit::byte(0).expect("byte");
    let err =
        radix::digit_histogram(&cuda, keys.as_view(), digit, histogram.as_view_mut()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LengthMismatch {
                arg: "histogram",
                expected: 256,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn host_argument_errors() {
    let host = Host::new();
    let keys = [1u16, 2];
    let mut histogram = [0u64; 256];
    let err = radix::digit_histogram(
        &host,
        &keys[..],
        RadixDigit::byte(2).expect("byte"),
        &mut histogram[..],
    )
    .unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument { arg: "digit", .. }),
        "{err}"
    );
    let mut short = [0u64; 16];
    let err = radix::digit_histogram(
        &host,
        &keys[..],
        RadixDigit::byte(0).expect("byte"),
        &mut short[..],
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "`histogram` has 16 elements, expected 256 (= 2^digit.digit_bits())"
    );
    let mut decoded = [0u16; 3];
    let err = radix::inverse_transform_keys(&host, &keys[..], &mut decoded[..]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::LengthMismatch {
                arg: "keys",
                actual: 3,
                expected: 2,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn host_empty_inputs() {
    let host = Host::new();
    let keys: [f32; 0] = [];
    let mut codes: [u32; 0] = [];
    radix::transform_keys(&host, &keys[..], &mut codes[..]).expect("empty transform");
    let mut histogram = [9u32; 4];
    radix::digit_histogram(
        &host,
        &keys[..],
        RadixDigit::new(0, 2).expect("digit"),
        &mut histogram[..],
    )
    .expect("empty histogram");
    assert_eq!(histogram, [0; 4]);
}

/// The errors a machine without a GPU gets are errors, not panics.
#[test]
fn missing_gpu_is_an_error_not_a_panic() {
    match Cuda::new(0) {
        Ok(cuda) => println!("GPU present: {cuda}"),
        Err(Error::Kernel(
            KernelError::DriverUnavailable { .. } | KernelError::NoDevice { .. },
        )) => {}
        Err(other) => println!("no usable GPU: {other}"),
    }
    let (backend, note) = AnyBackend::auto_explained();
    println!("{note}");
    assert!(!backend.to_string().is_empty());
}
