// Family transform_keys: apply the radix transform (INVERSE = 0) or its inverse (INVERSE = 1)
// to every element. Grid-stride loop with 64-bit indices.
namespace oxicub {

template <class Key, u32 BLOCK_THREADS, int INVERSE>
__device__ __forceinline__ void transform_keys(const TransformKeysParams& params) {
    typedef typename Key::Bits Bits;
    const Bits* input = reinterpret_cast<const Bits*>(params.input);
    Bits* output = reinterpret_cast<Bits*>(params.output);
    const u64 stride = grid_threads(BLOCK_THREADS);
    for (u64 i = global_thread_index(BLOCK_THREADS); i < params.len; i += stride) {
        const Bits raw = input[i];
        output[i] = INVERSE ? Key::from_radix(raw) : Key::to_radix(raw);
    }
}

}  // namespace oxicub
