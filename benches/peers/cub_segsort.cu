// Peer: cub::DeviceSegmentedSort (CCCL 3.5), f32 keys ascending within each segment.
//
// kinds: "segsort"         p1 = segments, p2 = length of every segment: SortKeys
//        "segsort_pl"      p1 = segments, p2 = max_exp: power-law lengths from oxb_powerlaw_len
//                          (gen.cuh): SortKeys
//        "segsort_pairs"   p1 = segments, p2 = length: StableSortPairs, u32 values, value i = i
//                          (the key's global position)
//        "segsort_argsort" p1 = segments, p2 = length: StableSortPairs, int64 values, value i =
//                          i mod length (the key's index within its segment): CUB has no argsort,
//                          so the indices are an input it reads (8 bytes a key more than oxicub
//                          and torch read)
// Segments are given as an array of int64 offsets (begin = off, end = off + 1), the usual way to
// call it. Keys-only sort: stability is invisible in the output, so the unstable SortKeys is the
// fair choice; with values it is visible (equal keys' values in input order), so StableSortPairs.
// Temporary storage is allocated once, outside the timed region; the value inputs are built on the
// host once, before it.
#include "common.cuh"

#include <cub/device/device_segmented_sort.cuh>

namespace oxb {

// The int64 offsets of the item's segments (length segments + 1), uploaded.
static DeviceBuffer<long long> segment_offsets(const PlanItem& it, long long& n) {
  const long long segments = it.p1;
  std::vector<long long> off((size_t)segments + 1, 0);
  for (long long i = 0; i < segments; ++i) {
    long long len = it.kind == "segsort_pl" ? (long long)oxb_powerlaw_len(it.seed, (unsigned long long)i, (unsigned)it.p2)
                                            : it.p2;
    off[(size_t)i + 1] = off[(size_t)i] + len;
  }
  n = off.back();
  DeviceBuffer<long long> d_off(off.size());
  CUDA_CHECK(cudaMemcpy(d_off.get(), off.data(), off.size() * sizeof(long long), cudaMemcpyHostToDevice));
  return d_off;
}

static void run_keys(const PlanItem& it, cudaStream_t s) {
  const long long segments = it.p1;
  long long n = 0;
  DeviceBuffer<long long> d_off = segment_offsets(it, n);
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
}

// StableSortPairs of uniform rows, value i = value_of(i): the keys and values out digested together.
template <class V, class ValueOf>
static void run_pairs(const PlanItem& it, cudaStream_t s, ValueOf value_of, const std::string& note) {
  const long long segments = it.p1;
  long long n = 0;
  DeviceBuffer<long long> d_off = segment_offsets(it, n);
  std::vector<V> values((size_t)n);
  for (long long i = 0; i < n; ++i) values[(size_t)i] = value_of(i);
  std::vector<DeviceBuffer<float>> keys_in;
  std::vector<DeviceBuffer<V>> values_in;
  for (int r = 0; r < std::max(1, it.rotations); ++r) {
    keys_in.emplace_back((size_t)n);
    gen_f32(keys_in.back().get(), n, it.seed, s);
    values_in.emplace_back((size_t)n);
    CUDA_CHECK(cudaMemcpy(values_in.back().get(), values.data(), (size_t)n * sizeof(V), cudaMemcpyHostToDevice));
  }
  DeviceBuffer<float> keys_out((size_t)n);
  DeviceBuffer<V> values_out((size_t)n);

  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairs(nullptr, temp_bytes, keys_in[0].get(), keys_out.get(),
                                                       values_in[0].get(), values_out.get(), n, segments, d_off.get(),
                                                       d_off.get() + 1, s));
  DeviceBuffer<unsigned char> temp(std::max<size_t>(temp_bytes, 1));

  Timing t = time_runs(s, it, [&](int r) {
    size_t bytes = temp_bytes;
    CUDA_CHECK(cub::DeviceSegmentedSort::StableSortPairs(temp.get(), bytes, keys_in[r].get(), keys_out.get(),
                                                         values_in[r].get(), values_out.get(), n, segments,
                                                         d_off.get(), d_off.get() + 1, s));
  });
  CUDA_CHECK(cudaStreamSynchronize(s));

  emit_result(it, "cub", t, digest_pairs(keys_out.to_host(), values_out.to_host()),
              note + ", int64 offsets, " + std::to_string(n) + " keys");
}

bool run_cub_segsort(const PlanItem& it, cudaStream_t s) {
  if (it.kind == "segsort" || it.kind == "segsort_pl") {
    run_keys(it, s);
  } else if (it.kind == "segsort_pairs") {
    run_pairs<unsigned>(
        it, s, [](long long i) { return (unsigned)i; },
        "cub::DeviceSegmentedSort::StableSortPairs, u32 values (value i = i)");
  } else if (it.kind == "segsort_argsort") {
    const long long len = it.p2;
    run_pairs<long long>(
        it, s, [len](long long i) { return i % len; },
        "cub::DeviceSegmentedSort::StableSortPairs, int64 values = index within the segment (an input: "
        "CUB has no argsort)");
  } else {
    return false;
  }
  return true;
}

}  // namespace oxb
