// Peer: cub::DeviceRadixSort::SortKeys (CCCL 3.5), one array of int32 keys ascending, all 32 bits
// (begin_bit 0, end_bit 32), int num_items (32-bit offsets, as a CUB user with fewer than 2^31
// keys writes it). CUB has no locality sort: the radix sort is what a CUB user sorts int keys
// with, and it takes the same time whatever the keys' order.
//
// kinds: "locality_near"   p1 = n, p2 = R: key i = i + rand(0, R) (gen.cuh: oxb_near_i32)
//        "locality_random" p1 = n: random int32 keys (oxb_u32 with the full mask, reinterpreted)
// Temporary storage is allocated once, outside the timed region.
#include "common.cuh"

#include <climits>

#include <cub/device/device_radix_sort.cuh>

namespace oxb {

bool run_cub_radix_sort(const PlanItem& it, cudaStream_t s) {
  if (it.kind != "locality_near" && it.kind != "locality_random") return false;
  const long long n = it.p1;
  if (n < 0 || n > INT_MAX) throw std::runtime_error("locality sort: n does not fit an int");
  const int num_items = (int)n;

  std::vector<DeviceBuffer<int>> in;
  for (int r = 0; r < std::max(1, it.rotations); ++r) {
    in.emplace_back((size_t)n);
    if (it.kind == "locality_near") {
      gen_near_i32(in.back().get(), n, it.seed, (unsigned)it.p2, s);
    } else {
      gen_u32(reinterpret_cast<unsigned*>(in.back().get()), n, it.seed, 0xFFFFFFFFu, s);
    }
  }
  DeviceBuffer<int> out((size_t)n);

  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortKeys(nullptr, temp_bytes, in[0].get(), out.get(), num_items, 0, 32, s));
  DeviceBuffer<unsigned char> temp(std::max<size_t>(temp_bytes, 1));

  Timing t = time_runs(s, it, [&](int r) {
    size_t bytes = temp_bytes;
    CUDA_CHECK(cub::DeviceRadixSort::SortKeys(temp.get(), bytes, in[r].get(), out.get(), num_items, 0, 32, s));
  });
  CUDA_CHECK(cudaStreamSynchronize(s));

  emit_result(it, "cub", t, digest_i32(out.to_host()),
              "cub::DeviceRadixSort::SortKeys, int32 keys, bits [0, 32), " + std::to_string(n) + " keys");
  return true;
}

}  // namespace oxb
