// Family digit_histogram: count how many keys have each value of one radix digit (of the
// transformed key). Each block counts into a shared-memory histogram of 32-bit counters, then
// adds it into the global histogram with atomics. The host sizes the grid so that one block
// never sees 2^32 keys or more, so the 32-bit shared counters cannot overflow. The global
// histogram (COUNT_BYTES = 4 or 8) must be zeroed before the launch.
namespace oxicub {

template <int COUNT_BYTES> struct CountOf;
template <> struct CountOf<4> { typedef unsigned int Type; };
template <> struct CountOf<8> { typedef unsigned long long Type; };

template <class Key, u32 BLOCK_THREADS, int DIGIT_BITS, int COUNT_BYTES>
__device__ __forceinline__ void digit_histogram(const DigitHistogramParams& params) {
    typedef typename Key::Bits Bits;
    typedef typename CountOf<COUNT_BYTES>::Type Count;
    constexpr u32 BINS = 1u << DIGIT_BITS;
    __shared__ u32 block_counts[BINS];

    for (u32 bin = threadIdx.x; bin < BINS; bin += BLOCK_THREADS) {
        block_counts[bin] = 0;
    }
    __syncthreads();

    const Bits* keys = reinterpret_cast<const Bits*>(params.keys);
    const u64 stride = grid_threads(BLOCK_THREADS);
    for (u64 i = global_thread_index(BLOCK_THREADS); i < params.len; i += stride) {
        const u32 digit = radix_digit<DIGIT_BITS>(Key::to_radix(keys[i]), params.bit_offset);
        atomicAdd(&block_counts[digit], 1u);
    }
    __syncthreads();

    Count* histogram = reinterpret_cast<Count*>(params.histogram);
    for (u32 bin = threadIdx.x; bin < BINS; bin += BLOCK_THREADS) {
        const u32 count = block_counts[bin];
        if (count != 0) {
            atomicAdd(&histogram[bin], (Count)count);
        }
    }
}

}  // namespace oxicub
