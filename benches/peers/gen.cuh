// oxicub benchmark: the shared deterministic input generator.
//
// One source, three compilers: nvcc builds it into the CUB/thrust peers, NVRTC (through cudarc)
// builds it into bench-gpu, and NVRTC (through cupy.RawKernel) builds it into the torch peer. So
// every implementation benchmarks on bit-identical inputs without shipping data files. bench-gpu
// also carries a host copy in Rust (benches/gpu/gen.rs) for its CPU reference, and the run checks
// that all of them print the same digest of the first 2^20 values.
//
// Rules for this file: no #include (NVRTC gets no include path here), C-style names, and every
// kernel `extern "C"` so the Rust and Python sides find it by its plain name.
//
// Generator: value i of stream `seed` is fmix(seed + (i + 1) * GOLDEN), the SplitMix64 output
// function applied to a counter, so any element can be produced independently (counter-based).
//   f32 key : the top 24 bits / 2^24, uniform in [0, 1) and exact in f32 (so about N / 2^24 copies
//             of each value: large inputs have ties, which the digests below are insensitive to).
//   u32 key : the top 32 bits AND mask (mask = 2^b - 1): uniform in [0, 2^b), non-negative as int32.
//             With the full mask, reinterpreted as int32, it is a uniform random int32 key.
//   near key: i + (value i mod (R + 1)): key i plus a uniform offset in [0, R], both bounds
//             inclusive ("keys near their sorted places", the locality sort's input).
//   router logit: per token t, value t of the stream picks an affine permutation of the experts
//             (oxb_route_logit below): every token's logits are the same grid in another order.

#ifndef OXB_GEN_CUH
#define OXB_GEN_CUH

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define OXB_HD __host__ __device__
#else
#define OXB_HD
#endif

#define OXB_GOLDEN 0x9E3779B97F4A7C15ull

// The SplitMix64 output function (a bijection on 64-bit words). Also the mixer of the result digest.
OXB_HD inline unsigned long long oxb_fmix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

OXB_HD inline unsigned long long oxb_mix(unsigned long long seed, unsigned long long i) {
  return oxb_fmix64(seed + (i + 1ull) * OXB_GOLDEN);
}

OXB_HD inline float oxb_f32(unsigned long long seed, unsigned long long i) {
  // 24 bits fit the f32 mantissa, so the conversion and the scaling by 2^-24 are exact.
  return (float)(unsigned int)(oxb_mix(seed, i) >> 40) * (1.0f / 16777216.0f);
}

// Ascending rows ("ramp"): key j of a row of `len` keys (len <= 2^17) is (j * 128 + r) / 2^24,
// r in [0, 128) drawn once per row (row = i / len). Exact in f32, strictly increasing along a row,
// so a row's k largest keys are its last k: the order sorted or time-ordered scores arrive in.
OXB_HD inline float oxb_ramp_f32(unsigned long long seed, unsigned long long i, unsigned int len) {
  unsigned long long row = i / len, j = i - row * len;
  unsigned int r = (unsigned int)(oxb_mix(seed, row) >> 57);
  return (float)((unsigned int)(j << 7) | r) * (1.0f / 16777216.0f);
}

// bf16 key i: the top 16 bits of oxb_f32's bit pattern (the f32 key truncated toward zero), so
// in [0, 1) with 8 significant bits: large rows hold long runs of equal keys, as bf16 logits do.
// Integer-only (the f32 key is m / 2^24 with m the stream's top 24 bits), so the host code of
// every language computes the same bits.
OXB_HD inline unsigned short oxb_bf16_bits(unsigned long long seed, unsigned long long i) {
  unsigned int m = (unsigned int)(oxb_mix(seed, i) >> 40);
  if (m == 0u) return 0;
  unsigned int e = 23u;  // m in [2^e, 2^(e+1))
  while ((m >> e) == 0u) --e;
  unsigned int bits = ((e + 103u) << 23) | ((m << (23u - e)) & 0x7FFFFFu);
  return (unsigned short)(bits >> 16);
}

// Tie-heavy key i ("ties"): 1 + j / 2^23 with j the stream's top 6 bits, so every key shares
// its top 26 bits (one bin of any coarse 11- or 16-bit histogram) and a row of L keys holds
// about L / 64 copies of each of its 64 values: at k = L / 64 the k-th key's tie class (the best
// value's copies) straddles k. A selection that drops candidates returns other keys; one that
// breaks the k-th key's ties otherwise than its contract says returns other indices.
OXB_HD inline unsigned int oxb_tie_bits(unsigned long long seed, unsigned long long i) {
  return 0x3F800000u | (unsigned int)(oxb_mix(seed, i) >> 58);
}

// Ragged rows ("decode": most rows shorter than the longest): the length of row `row` of a
// [rows x len] matrix with k selected a row: k + floor(u^2 (len - k)), u = the stream's top 24
// bits / 2^24 (stream `seed + 1`; the keys are stream `seed`), so every row holds at least k
// keys, a row's expected length is k + (len - k) / 3 and a third of the rows are shorter than
// k + (len - k) / 9. Integer-only, as above.
OXB_HD inline unsigned int oxb_ragged_len(unsigned long long seed, unsigned long long row, unsigned int len,
                                          unsigned int k) {
  unsigned long long r = oxb_mix(seed + 1ull, row) >> 40;
  return k + (unsigned int)((((r * r) >> 24) * (unsigned long long)(len - k)) >> 24);
}

OXB_HD inline unsigned int oxb_u32(unsigned long long seed, unsigned long long i, unsigned int mask) {
  return (unsigned int)(oxb_mix(seed, i) >> 32) & mask;
}

// Near-sorted int32 key i ("i + rand(0, R)"): i + (oxb_mix(seed, i) mod (range + 1)), the offset
// uniform in [0, range] with both bounds inclusive (up to a bias of (range + 1) / 2^64). In 32-bit
// unsigned arithmetic: the key is exact for i + range < 2^31 (then a non-negative int32).
OXB_HD inline int oxb_near_i32(unsigned long long seed, unsigned long long i, unsigned int range) {
  unsigned int r = (unsigned int)(oxb_mix(seed, i) % ((unsigned long long)range + 1ull));
  return (int)((unsigned int)i + r);
}

// Power-law ("log-uniform") segment length for segment i: an exponent e uniform in [0, max_exp],
// then a length uniform in [2^e, 2^(e+1)). Equal numbers of segments per octave means a density
// proportional to 1/length: many tiny segments, and a few huge ones that hold most of the items.
// Integer-only, so the host code of every language computes the same offsets.
OXB_HD inline unsigned int oxb_powerlaw_len(unsigned long long seed, unsigned long long i, unsigned int max_exp) {
  unsigned long long r = oxb_mix(seed, i);
  unsigned int e = (unsigned int)(r % (unsigned long long)(max_exp + 1u));
  unsigned int low = (unsigned int)(r >> 32) & ((1u << e) - 1u);
  return (1u << e) + low;
}

// MoE router logit of expert `expert` for token `token`, over `experts` experts (a power of two,
// 2 to 2^16): h = value `token` of stream `seed`; an affine permutation p(e) = (e * m + o) mod E
// with m odd (the low bits of h, lowest set) and o (bits 32 and up of h); logit = (p - E/2) / (E/2).
// For E = 256: -1 .. 127/128 in steps of 1/128, each exactly once per token, exact in f32 and in
// bf16 (at most 8 significant bits). Why this shape: distinct logits on a coarse grid make the
// routing unambiguous for every faithful implementation. Sigmoid scores of neighbouring logits
// differ by at least ~1.5e-3, and the DeepSeek-V3 group scores (the sum of a group's two best of
// 32) at the kept/dropped boundary by at least 2.2e-5 relative over all 2^15 permutations
// (bench-gpu --selftest checks both), about 190 f32 ulps; so the expert ids can be compared bit
// for bit across implementations whose sigmoid or exp differ in the last bits and whose
// tie-breaks differ (no ties occur). The scale is applied as halvings, exact under any compiler
// flags (a division by E/2 would not be under -use_fast_math).
OXB_HD inline float oxb_route_logit(unsigned long long seed, unsigned long long token, unsigned int expert,
                                    unsigned int experts) {
  unsigned long long h = oxb_mix(seed, token);
  unsigned int mask = experts - 1u;
  unsigned int m = ((unsigned int)h & mask) | 1u;
  unsigned int o = (unsigned int)(h >> 32) & mask;
  unsigned int p = (expert * m + o) & mask;
  float scale = 1.0f;
  for (unsigned int half = experts >> 1; half > 1u; half >>= 1) scale *= 0.5f;
  return (float)((int)p - (int)(experts >> 1)) * scale;
}

// The kernels are defined under NVRTC (bench-gpu, cupy), and with nvcc only in the one translation
// unit that defines OXB_GEN_KERNELS (a __global__ defined in several units would clash at link).
#if defined(__CUDACC_RTC__) || (defined(__CUDACC__) && defined(OXB_GEN_KERNELS))
// Grid-stride fills: out[i] = value i of stream `seed`, for i in [0, n).
extern "C" __global__ void oxb_gen_f32(float* out, unsigned long long n, unsigned long long seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = oxb_f32(seed, i);
  }
}

extern "C" __global__ void oxb_gen_ramp_f32(float* out, unsigned long long n, unsigned long long seed,
                                            unsigned int len) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = oxb_ramp_f32(seed, i, len);
  }
}

extern "C" __global__ void oxb_gen_bf16(unsigned short* out, unsigned long long n, unsigned long long seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = oxb_bf16_bits(seed, i);
  }
}

extern "C" __global__ void oxb_gen_tie_bits(unsigned int* out, unsigned long long n, unsigned long long seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = oxb_tie_bits(seed, i);
  }
}

// The row lengths of a ragged [rows x len] matrix (oxb_ragged_len), as int32.
extern "C" __global__ void oxb_gen_ragged_len(int* out, unsigned long long rows, unsigned long long seed,
                                              unsigned int len, unsigned int k) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < rows;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = (int)oxb_ragged_len(seed, i, len, k);
  }
}

extern "C" __global__ void oxb_gen_u32(unsigned int* out, unsigned long long n, unsigned long long seed,
                                       unsigned int mask) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = oxb_u32(seed, i, mask);
  }
}

extern "C" __global__ void oxb_gen_near_i32(int* out, unsigned long long n, unsigned long long seed,
                                            unsigned int range) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = oxb_near_i32(seed, i, range);
  }
}

extern "C" __global__ void oxb_gen_powerlaw_len(unsigned int* out, unsigned long long n, unsigned long long seed,
                                                unsigned int max_exp) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    out[i] = oxb_powerlaw_len(seed, i, max_exp);
  }
}

// Router logits, row-major [n / experts x experts]: out[i] = oxb_route_logit(seed, i / experts,
// i mod experts, experts).
extern "C" __global__ void oxb_gen_route_logits(float* out, unsigned long long n, unsigned long long seed,
                                                unsigned int experts) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    unsigned long long token = i / experts;
    out[i] = oxb_route_logit(seed, token, (unsigned int)(i - token * experts), experts);
  }
}

// An empty kernel: the cost of a bare launch, timed like the implementations (the decode-size
// routing rows are compared with it).
extern "C" __global__ void oxb_empty() {}

// A plain vectorized copy, for the bandwidth measurement next to cuMemcpyDtoD (the better of the
// two is the floor's bandwidth). n16 = number of 16-byte words.
extern "C" __global__ void oxb_copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, unsigned long long n16) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n16;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    dst[i] = src[i];
  }
}
#endif

#endif  // OXB_GEN_CUH
