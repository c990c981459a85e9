// Peer: cub::DeviceTopK (CCCL 3.5), one problem of n f32 keys, the k largest keys
// (cub_device_topk.cuh).
#include "cub_device_topk.cuh"

#include <cuda/std/execution>
#include <cuda/stream_ref>

// The peers are meant to run against CCCL 3.5 (.cccl/include), not the older copy bundled with nvcc.
static_assert(CCCL_VERSION >= 3005000, "compile with -I .cccl/include (CCCL 3.5 headers)");

namespace oxb {

bool run_cub_topk(const PlanItem& it, cudaStream_t s) {
  if (it.kind != "topk") return false;
  time_cub_device_topk(it, s, "cub", "cub::DeviceTopK::MaxKeys, unsorted, not deterministic");
  return true;
}

}  // namespace oxb
