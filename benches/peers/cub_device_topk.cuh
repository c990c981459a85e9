// cub::DeviceTopK::MaxKeys over one problem of n f32 keys (kind "topk": n = p1, k = p2), timed
// and reported as `impl`: shared by the CUB 3.5 peer (cub_topk.cu) and the CCCL-main peer
// (cub_main_batched.cu), each compiled against its own CCCL. Both versions implement only the
// opted-out contract for DeviceTopK (they static_assert determinism::not_guaranteed and
// output_ordering::unsorted), so the keys come back in no particular order: the canonical form
// (sorted descending on the host) is what is compared. Temporary storage is sized and allocated
// once, outside the timed region, as a user who calls it repeatedly would do.
#pragma once

#include "common.cuh"

#include <cub/device/device_topk.cuh>

#include <cuda/execution.determinism.h>
#include <cuda/execution.output_ordering.h>
#include <cuda/execution.require.h>
#include <cuda/std/execution>
#include <cuda/stream_ref>

namespace oxb {

inline void time_cub_device_topk(const PlanItem& it, cudaStream_t s, const char* impl, const std::string& note) {
  const long long n = it.p1, k = it.p2;
  // The rotated inputs are identical copies (same seed): different addresses, same result.
  std::vector<DeviceBuffer<float>> in;
  for (int r = 0; r < std::max(1, it.rotations); ++r) {
    in.emplace_back((size_t)n);
    gen_f32(in.back().get(), n, it.seed, s);
  }
  DeviceBuffer<float> out((size_t)k);
  auto env = cuda::std::execution::env{
      cuda::execution::require(cuda::execution::determinism::not_guaranteed,
                               cuda::execution::output_ordering::unsorted),
      cuda::stream_ref{s}};
  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceTopK::MaxKeys(nullptr, temp_bytes, in[0].get(), out.get(), n, k, env));
  DeviceBuffer<unsigned char> temp(std::max<size_t>(temp_bytes, 1));
  Timing t = time_runs(s, it, [&](int r) {
    size_t bytes = temp_bytes;
    CUDA_CHECK(cub::DeviceTopK::MaxKeys(temp.get(), bytes, in[r].get(), out.get(), n, k, env));
  });
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> keys = out.to_host();
  canonical_topk(keys, 1, (size_t)k);
  emit_result(it, impl, t, digest_f32(keys), note);
}

}  // namespace oxb
