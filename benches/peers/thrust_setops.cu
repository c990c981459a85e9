// Peer: thrust::set_intersection / set_union / set_difference / set_symmetric_difference on two
// sorted int32 key arrays (multiset semantics, as std::set_*: a key present a times in A and b
// times in B appears min(a,b), max(a,b), max(a-b,0) and |a-b| times respectively).
//
// kinds: set_intersection | set_union | set_difference | set_symdiff
//        p1 = keys per input, p2 = key mask (2^31-1: sparse keys; 2^12-1: heavy duplicates).
// A is stream `seed`, B is stream `seed + 1`; both are sorted on the device before timing.
//
// thrust allocates temporary storage on every call; a user who cares passes an allocator, so we
// do: a caching allocator that keeps its largest block (common.cuh). thrust's set operations
// return the output end, which copies the output size back to the host and waits: that wait is
// part of what a thrust user pays, so it stays inside the timed region.
#include "common.cuh"

#include <thrust/execution_policy.h>
#include <thrust/set_operations.h>
#include <thrust/sort.h>

namespace oxb {

bool run_thrust_setops(const PlanItem& it, cudaStream_t s) {
  const std::string& kd = it.kind;
  if (kd != "set_intersection" && kd != "set_union" && kd != "set_difference" && kd != "set_symdiff") return false;
  const long long n = it.p1;
  const unsigned mask = (unsigned)it.p2;

  std::vector<DeviceBuffer<int>> a, b;
  CachingAllocator alloc;
  auto pol = thrust::cuda::par(alloc).on(s);
  for (int r = 0; r < std::max(1, it.rotations); ++r) {
    a.emplace_back((size_t)n);
    b.emplace_back((size_t)n);
    // Keys are below 2^31, so the u32 bits are the same non-negative int32 values.
    gen_u32(reinterpret_cast<unsigned*>(a.back().get()), n, it.seed, mask, s);
    gen_u32(reinterpret_cast<unsigned*>(b.back().get()), n, it.seed + 1, mask, s);
    thrust::sort(pol, a.back().get(), a.back().get() + n);
    thrust::sort(pol, b.back().get(), b.back().get() + n);
  }
  DeviceBuffer<int> out((size_t)(2 * n));  // the largest possible output (union, symmetric difference)
  long long out_len = 0;

  Timing t = time_runs(s, it, [&](int r) {
    const int *a0 = a[r].get(), *a1 = a[r].get() + n, *b0 = b[r].get(), *b1 = b[r].get() + n;
    int* end = nullptr;
    if (kd == "set_intersection") {
      end = thrust::set_intersection(pol, a0, a1, b0, b1, out.get());
    } else if (kd == "set_union") {
      end = thrust::set_union(pol, a0, a1, b0, b1, out.get());
    } else if (kd == "set_difference") {
      end = thrust::set_difference(pol, a0, a1, b0, b1, out.get());
    } else {
      end = thrust::set_symmetric_difference(pol, a0, a1, b0, b1, out.get());
    }
    out_len = end - out.get();
  });
  CUDA_CHECK(cudaStreamSynchronize(s));

  std::vector<int> keys(out_len);
  if (out_len > 0)
    CUDA_CHECK(cudaMemcpy(keys.data(), out.get(), (size_t)out_len * sizeof(int), cudaMemcpyDeviceToHost));
  emit_result(it, "thrust", t, digest_i32(keys),
              "thrust::" + std::string(kd == "set_symdiff" ? "set_symmetric_difference" : kd) +
                  " with a caching allocator, " + std::to_string(out_len) + " keys out");
  return true;
}

}  // namespace oxb
