// Peer: cub::DeviceMerge::MergeKeys (CCCL 3.5), two sorted int32 key arrays merged ascending
// (cuda::std::less<>), int64 counts as its signature takes them. CUB documents the merge as
// unstable; with keys only, equal keys are the same bits, so its output equals std::merge's.
//
// kind: "merge"  p1 = keys per input, p2 = key mask (as the set rows: A is stream `seed`, B is
//                stream `seed + 1`, both sorted on the device before timing).
// Temporary storage is sized and allocated once, outside the timed region; the output size is
// known (m + n), so nothing is copied back inside it.
#include "common.cuh"

#include <cub/device/device_merge.cuh>

#include <cuda/std/functional>

#include <thrust/execution_policy.h>
#include <thrust/sort.h>

namespace oxb {

bool run_cub_merge(const PlanItem& it, cudaStream_t s) {
  if (it.kind != "merge") return false;
  const long long n = it.p1;
  const unsigned mask = (unsigned)it.p2;

  std::vector<DeviceBuffer<int>> a, b;
  for (int r = 0; r < std::max(1, it.rotations); ++r) {
    a.emplace_back((size_t)n);
    b.emplace_back((size_t)n);
    // Keys are below 2^31, so the u32 bits are the same non-negative int32 values.
    gen_u32(reinterpret_cast<unsigned*>(a.back().get()), n, it.seed, mask, s);
    gen_u32(reinterpret_cast<unsigned*>(b.back().get()), n, it.seed + 1, mask, s);
    thrust::sort(thrust::cuda::par.on(s), a.back().get(), a.back().get() + n);
    thrust::sort(thrust::cuda::par.on(s), b.back().get(), b.back().get() + n);
  }
  DeviceBuffer<int> out((size_t)(2 * n));
  const ::cuda::std::less<> ascending{};

  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceMerge::MergeKeys(nullptr, temp_bytes, a[0].get(), n, b[0].get(), n, out.get(), ascending, s));
  DeviceBuffer<unsigned char> temp(std::max<size_t>(temp_bytes, 1));

  Timing t = time_runs(s, it, [&](int r) {
    size_t bytes = temp_bytes;
    CUDA_CHECK(cub::DeviceMerge::MergeKeys(temp.get(), bytes, a[r].get(), n, b[r].get(), n, out.get(), ascending, s));
  });
  CUDA_CHECK(cudaStreamSynchronize(s));

  emit_result(it, "cub", t, digest_i32(out.to_host()),
              "cub::DeviceMerge::MergeKeys, int32 keys, " + std::to_string(2 * n) + " keys out");
  return true;
}

}  // namespace oxb
