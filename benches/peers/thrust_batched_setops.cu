// Peer: batched set intersection (pair i = A's segment i with B's segment i, each pair's result
// after the one before) with thrust, which has no batched set operation, in the two ways a thrust
// user would write it:
//   "thrust loop"   one thrust::set_intersection per pair, each writing after the last one's end.
//                   Each call returns its end, so it copies its count back and waits: a host
//                   round trip per pair, which is what this way costs its users, so it is timed.
//                   With 2^16 pairs a run takes seconds: this way runs LOOP_WARMUP + LOOP_REPS
//                   times (at most the plan's counts), the reps its line reports.
//   "thrust tagged" one thrust::set_intersection over 64-bit keys (pair << 32 | key), which match
//                   and order pair by pair. The tagged copies of the inputs are built before
//                   timing, and the call writes tagged keys, not the u32 keys and per-pair offsets
//                   the others write (derived on the host afterwards, for the digest): both favour
//                   this way.
//
// kind: batched_set_intersection  p1 = pairs, p2 = max_exp, p3 = key mask.
// A's segment lengths are oxb_powerlaw_len of stream `seed` (max_exp p2), B's of stream
// `seed + 1`; A's keys are oxb_u32 of stream `seed + 2` under the mask, B's of stream `seed + 3`;
// every segment is sorted on the device before timing (cub::DeviceSegmentedSort::SortKeys).
// Both ways use the caching allocator (common.cuh). Digest, as bench-gpu's: the output keys (pair
// after pair), then the pairs + 1 output offsets as int64 words.
#include "common.cuh"

#include <cub/device/device_segmented_sort.cuh>

#include <thrust/execution_policy.h>
#include <thrust/set_operations.h>

namespace oxb {
namespace {

constexpr int LOOP_WARMUP = 1;
constexpr int LOOP_REPS = 5;

// The int64 offsets (length pairs + 1) of the power-law segments of stream `seed`.
std::vector<long long> powerlaw_offsets(unsigned long long seed, long long pairs, unsigned max_exp) {
  std::vector<long long> off((size_t)pairs + 1, 0);
  for (long long i = 0; i < pairs; ++i)
    off[(size_t)i + 1] = off[(size_t)i] + (long long)oxb_powerlaw_len(seed, (unsigned long long)i, max_exp);
  return off;
}

// One input: its offsets on the host and on the device, and `rotations` copies of its keys.
struct Side {
  std::vector<long long> off;
  DeviceBuffer<long long> d_off;
  std::vector<DeviceBuffer<unsigned>> keys;
  long long n() const { return off.back(); }
};

// The segments of length stream `len_seed`, holding the keys of stream `key_seed` under the
// item's mask, each segment sorted ascending.
Side make_side(const PlanItem& it, unsigned long long len_seed, unsigned long long key_seed, cudaStream_t s) {
  const long long pairs = it.p1;
  Side side;
  side.off = powerlaw_offsets(len_seed, pairs, (unsigned)it.p2);
  const long long n = side.n();
  side.d_off = DeviceBuffer<long long>(side.off.size());
  CUDA_CHECK(cudaMemcpyAsync(side.d_off.get(), side.off.data(), side.off.size() * sizeof(long long),
                             cudaMemcpyHostToDevice, s));
  DeviceBuffer<unsigned> raw((size_t)n);
  gen_u32(raw.get(), n, key_seed, (unsigned)it.p3, s);
  for (int r = 0; r < std::max(1, it.rotations); ++r) side.keys.emplace_back((size_t)n);

  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(nullptr, temp_bytes, raw.get(), side.keys[0].get(), n, pairs,
                                                side.d_off.get(), side.d_off.get() + 1, s));
  DeviceBuffer<unsigned char> temp(std::max<size_t>(temp_bytes, 1));
  for (auto& keys : side.keys) {
    size_t bytes = temp_bytes;
    CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(temp.get(), bytes, raw.get(), keys.get(), n, pairs,
                                                  side.d_off.get(), side.d_off.get() + 1, s));
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
  return side;
}

// tagged[j] = (p << 32) | keys[j] for every key j of pair p; a block per pair (grid-stride).
__global__ void tag_pairs(const unsigned* __restrict__ keys, const long long* __restrict__ off, long long pairs,
                          unsigned long long* __restrict__ tagged) {
  for (long long p = blockIdx.x; p < pairs; p += gridDim.x) {
    const long long end = off[p + 1];
    for (long long j = off[p] + threadIdx.x; j < end; j += blockDim.x)
      tagged[j] = ((unsigned long long)p << 32) | keys[j];
  }
}

// The canonical batched result: the keys' words, then the offsets' int64 words (low first).
std::string digest_batched(const std::vector<unsigned>& keys, const std::vector<long long>& at) {
  std::vector<uint32_t> w(keys.size() + 2 * at.size());
  if (!keys.empty()) std::memcpy(w.data(), keys.data(), keys.size() * sizeof(unsigned));
  if (!at.empty()) std::memcpy(w.data() + keys.size(), at.data(), at.size() * sizeof(long long));
  return digest_words(w.data(), w.size());
}

}  // namespace

bool run_thrust_batched_setops(const PlanItem& it, cudaStream_t s) {
  if (it.kind != "batched_set_intersection") return false;
  const long long pairs = it.p1;
  Side a = make_side(it, it.seed, it.seed + 2, s);
  Side b = make_side(it, it.seed + 1, it.seed + 3, s);
  const long long na = a.n(), nb = b.n();
  const int rotations = std::max(1, it.rotations);
  CachingAllocator alloc;
  auto pol = thrust::cuda::par(alloc).on(s);

  {
    DeviceBuffer<unsigned> out((size_t)std::min(na, nb));
    std::vector<long long> at((size_t)pairs + 1, 0);
    PlanItem few = it;
    few.warmup = std::min(it.warmup, LOOP_WARMUP);
    few.reps = std::min(it.reps, LOOP_REPS);
    Timing t = time_runs(s, few, [&](int r) {
      const unsigned *ka = a.keys[r].get(), *kb = b.keys[r].get();
      unsigned* end = out.get();
      for (size_t p = 0; p < (size_t)pairs; ++p) {
        end = thrust::set_intersection(pol, ka + a.off[p], ka + a.off[p + 1], kb + b.off[p], kb + b.off[p + 1], end);
        at[p + 1] = end - out.get();
      }
    });
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<unsigned> keys((size_t)at.back());
    if (!keys.empty())
      CUDA_CHECK(cudaMemcpy(keys.data(), out.get(), keys.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    emit_result(it, "thrust loop", t, digest_batched(keys, at),
                "thrust::set_intersection once per pair (" + std::to_string(pairs) +
                    " calls, each waiting for its count), outputs written pair after pair; " +
                    std::to_string(few.reps) + " runs after " + std::to_string(few.warmup) + " warm-up, " +
                    std::to_string(keys.size()) + " keys out");
  }

  {
    std::vector<DeviceBuffer<unsigned long long>> ta, tb;
    const unsigned grid = (unsigned)std::min<long long>(std::max<long long>(pairs, 1), 65536);
    for (int r = 0; r < rotations; ++r) {
      ta.emplace_back((size_t)na);
      tb.emplace_back((size_t)nb);
      tag_pairs<<<grid, 256, 0, s>>>(a.keys[r].get(), a.d_off.get(), pairs, ta.back().get());
      CUDA_CHECK(cudaGetLastError());
      tag_pairs<<<grid, 256, 0, s>>>(b.keys[r].get(), b.d_off.get(), pairs, tb.back().get());
      CUDA_CHECK(cudaGetLastError());
    }
    CUDA_CHECK(cudaStreamSynchronize(s));
    DeviceBuffer<unsigned long long> out((size_t)std::min(na, nb));
    long long out_len = 0;
    Timing t = time_runs(s, it, [&](int r) {
      unsigned long long* end =
          thrust::set_intersection(pol, ta[r].get(), ta[r].get() + na, tb[r].get(), tb[r].get() + nb, out.get());
      out_len = end - out.get();
    });
    CUDA_CHECK(cudaStreamSynchronize(s));

    std::vector<unsigned long long> tagged((size_t)out_len);
    if (out_len > 0)
      CUDA_CHECK(cudaMemcpy(tagged.data(), out.get(), tagged.size() * sizeof(unsigned long long),
                            cudaMemcpyDeviceToHost));
    std::vector<unsigned> keys(tagged.size());
    std::vector<long long> at((size_t)pairs + 1, 0);
    for (size_t j = 0; j < tagged.size(); ++j) {
      const unsigned long long p = tagged[j] >> 32;
      if (p >= (unsigned long long)pairs) throw std::runtime_error("thrust tagged: an output key's pair is out of range");
      keys[j] = (unsigned)tagged[j];
      ++at[p + 1];
    }
    for (size_t p = 0; p < (size_t)pairs; ++p) at[p + 1] += at[p];
    emit_result(it, "thrust tagged", t, digest_batched(keys, at),
                "one thrust::set_intersection over 64-bit keys pair << 32 | key; the tagged inputs are built "
                "before timing (not timed), and it writes tagged keys, not u32 keys + pair offsets (derived on "
                "the host after timing): both favour it; " +
                    std::to_string(keys.size()) + " keys out");
  }
  return true;
}

}  // namespace oxb
