// Peer: cub::DeviceSegmentedSort::SortKeys (CCCL 3.5), f32 keys ascending within each segment.
//
// kinds: "segsort"    p1 = segments, p2 = length of every segment
//        "segsort_pl" p1 = segments, p2 = max_exp: power-law lengths from oxb_powerlaw_len (gen.cuh)
// Segments are given as an array of int64 offsets (begin = off, end = off + 1), the usual way to
// call it. Keys-only sort: stability is invisible in the output, so the unstable SortKeys is the
// fair choice. Temporary storage is allocated once, outside the timed region.
#include "common.cuh"

#include <cub/device/device_segmented_sort.cuh>

namespace oxb {

bool run_cub_segsort(const PlanItem& it, cudaStream_t s) {
  if (it.kind != "segsort" && it.kind != "segsort_pl") return false;
  const long long segments = it.p1;
  std::vector<long long> off((size_t)segments + 1, 0);
  for (long long i = 0; i < segments; ++i) {
    long long len = it.kind == "segsort" ? it.p2 : (long long)oxb_powerlaw_len(it.seed, (unsigned long long)i, (unsigned)it.p2);
    off[(size_t)i + 1] = off[(size_t)i] + len;
  }
  const long long n = off.back();

  DeviceBuffer<long long> d_off(off.size());
  CUDA_CHECK(cudaMemcpy(d_off.get(), off.data(), off.size() * sizeof(long long), cudaMemcpyHostToDevice));
  std::vector<DeviceBuffer<float>> in;
  for (int r = 0; r < std::max(1, it.rotations); ++r) {
    in.emplace_back((size_t)n);
    gen_f32(in.back().get(), n, it.seed, s);
  }
  DeviceBuffer<float> out((size_t)n);

  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(nullptr, temp_bytes, in[0].get(), out.get(), n, segments, d_off.get(),
                                                d_off.get() + 1, s));
  DeviceBuffer<unsigned char> temp(std::max<size_t>(temp_bytes, 1));

  Timing t = time_runs(s, it, [&](int r) {
    size_t bytes = temp_bytes;
    CUDA_CHECK(cub::DeviceSegmentedSort::SortKeys(temp.get(), bytes, in[r].get(), out.get(), n, segments, d_off.get(),
                                                  d_off.get() + 1, s));
  });
  CUDA_CHECK(cudaStreamSynchronize(s));

  emit_result(it, "cub", t, digest_f32(out.to_host()),
              "cub::DeviceSegmentedSort::SortKeys, int64 offsets, " + std::to_string(n) + " keys");
  return true;
}

}  // namespace oxb
