// Peer: cub::DeviceBatchedTopK (CCCL 3.5), `segments` rows of `len` f32 keys, the k largest keys
// of each row.
//
// DeviceBatchedTopK takes iterators of per-segment iterators: d_keys_in[i] is the start of row i.
// We give it a transform iterator over a counting iterator (row i -> base + i * len), which is
// what a user with a dense [segments x len] matrix would write. Segment size and k are passed as
// compile-time constants (cuda::args::constant), the most information the API can take, so CUB
// specializes as far as it can; that needs one instantiation per (len, k) shape, listed in
// run_cub_batched_topk below. As for DeviceTopK, CCCL 3.5 implements only the opted-out contract
// (not_guaranteed, tie_break::unspecified, unsorted), so results are compared in canonical form.
//
// CCCL 3.5's DeviceBatchedTopK handles only segments that one thread block can hold (its largest
// policy tile is 256 threads x 64 items = 16384 keys; a larger constant segment size fails a
// static_assert). For the long-row shapes (32768 and 131072 keys) the CUB peer is therefore what a
// CUB user is left with: cub::DeviceTopK called once per row, in a loop on the same stream. The
// result line's note says which of the two ran.
#include "common.cuh"

#include <cub/device/device_batched_topk.cuh>
#include <cub/device/device_topk.cuh>

#include <cuda_bf16.h>
#include <functional>
#include <type_traits>

#include <cuda/argument>
#include <cuda/execution.determinism.h>
#include <cuda/execution.output_ordering.h>
#include <cuda/execution.require.h>
#include <cuda/execution.tie_break.h>
#include <cuda/iterator>
#include <cuda/std/execution>
#include <cuda/stream_ref>

namespace oxb {
namespace {

// Row i of a dense row-major matrix.
template <class T>
struct RowStart {
  T* base;
  long long len;
  __host__ __device__ T* operator()(long long i) const { return base + i * len; }
};

template <int Len, int K>
void batched(const PlanItem& it, cudaStream_t s) {
  const long long segments = it.p1;
  const long long n = segments * Len;
  std::vector<DeviceBuffer<float>> in;
  for (int r = 0; r < std::max(1, it.rotations); ++r) {
    in.emplace_back((size_t)n);
    gen_f32(in.back().get(), n, it.seed, s);
  }
  DeviceBuffer<float> out((size_t)(segments * K));

  auto env = cuda::std::execution::env{
      cuda::execution::require(cuda::execution::determinism::not_guaranteed, cuda::execution::tie_break::unspecified,
                               cuda::execution::output_ordering::unsorted),
      cuda::stream_ref{s}};
  auto rows_in = [&](int r) {
    return cuda::make_transform_iterator(cuda::counting_iterator<long long>(0), RowStart<const float>{in[r].get(), Len});
  };
  auto rows_out = cuda::make_transform_iterator(cuda::counting_iterator<long long>(0), RowStart<float>{out.get(), K});

  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceBatchedTopK::MaxKeys(nullptr, temp_bytes, rows_in(0), rows_out, cuda::args::constant<Len>{},
                                             cuda::args::constant<K>{}, segments, env));
  DeviceBuffer<unsigned char> temp(std::max<size_t>(temp_bytes, 1));

  Timing t = time_runs(s, it, [&](int r) {
    size_t bytes = temp_bytes;
    CUDA_CHECK(cub::DeviceBatchedTopK::MaxKeys(temp.get(), bytes, rows_in(r), rows_out, cuda::args::constant<Len>{},
                                               cuda::args::constant<K>{}, segments, env));
  });
  CUDA_CHECK(cudaStreamSynchronize(s));

  std::vector<float> keys = out.to_host();
  canonical_topk(keys, (size_t)segments, (size_t)K);
  emit_result(it, "cub", t, digest_f32(keys),
              "cub::DeviceBatchedTopK::MaxKeys, constant segment size and k, unsorted, not deterministic");
}

// Rows too long for DeviceBatchedTopK: one cub::DeviceTopK call per row (see the top of this
// file). Keys f32 (uniform, ascending, ragged or tie-heavy rows) or bf16 (__nv_bfloat16,
// generated as their bits). Ragged rows ("batched_ragged"): row r takes its first L_r keys; CUB
// needs each length on the host for its call, so the lengths are computed on the host (a
// serving engine would have to copy them there first: that copy and its wait are not timed).
// Tie-heavy rows ("batched_ties"): MaxPairs, the values the indices within the row (a counting
// iterator), digested with each row's index set: CCCL 3.5 offers only tie_break::unspecified,
// so which of equal keys it keeps is not specified.
template <class Key>
void batched_by_rows(const PlanItem& it, cudaStream_t s) {
  const long long segments = it.p1, len = it.p2, k = it.p3;
  const long long n = segments * len;
  const bool ties = it.kind == "batched_ties";
  std::vector<DeviceBuffer<Key>> in;
  for (int r = 0; r < std::max(1, it.rotations); ++r) {
    in.emplace_back((size_t)n);
    if constexpr (std::is_same_v<Key, __nv_bfloat16>) {
      gen_bf16_bits(reinterpret_cast<unsigned short*>(in.back().get()), n, it.seed, s);
    } else if (it.kind == "batched_ramp") {
      gen_ramp_f32(in.back().get(), n, it.seed, (unsigned)len, s);
    } else if (ties) {
      gen_tie_f32(in.back().get(), n, it.seed, s);
    } else {
      gen_f32(in.back().get(), n, it.seed, s);
    }
  }
  std::vector<long long> lens = it.kind == "batched_ragged" ? ragged_lens(it) : std::vector<long long>((size_t)segments, len);
  DeviceBuffer<Key> out((size_t)(segments * k));
  DeviceBuffer<uint32_t> at(ties ? (size_t)(segments * k) : 1);
  auto env = cuda::std::execution::env{
      cuda::execution::require(cuda::execution::determinism::not_guaranteed,
                               cuda::execution::output_ordering::unsorted),
      cuda::stream_ref{s}};
  auto index = cuda::counting_iterator<uint32_t>(0);
  // One row's call; the temporary storage of the longest row serves every call.
  auto row_topk = [&](void* temp, size_t& bytes, const Key* keys, long long row, long long size) {
    if (ties) {
      return cub::DeviceTopK::MaxPairs(temp, bytes, keys, out.get() + row * k, index, at.get() + row * k, size, k, env);
    }
    return cub::DeviceTopK::MaxKeys(temp, bytes, keys, out.get() + row * k, size, k, env);
  };
  size_t temp_bytes = 0;
  CUDA_CHECK(row_topk(nullptr, temp_bytes, in[0].get(), 0, len));
  DeviceBuffer<unsigned char> temp(std::max<size_t>(temp_bytes, 1));

  Timing t = time_runs(s, it, [&](int r) {
    for (long long row = 0; row < segments; ++row) {
      size_t bytes = temp_bytes;
      CUDA_CHECK(row_topk(temp.get(), bytes, in[r].get() + row * len, row, lens[(size_t)row]));
    }
  });
  CUDA_CHECK(cudaStreamSynchronize(s));

  std::string note = ties ? "cub::DeviceTopK::MaxPairs once per row (indices as values), unsorted, tie_break unspecified"
                          : "cub::DeviceTopK once per row: DeviceBatchedTopK (CCCL 3.5) takes segments of at most 16384 keys";
  if (it.kind == "batched_ragged") note += "; each row's length read on the host (copy not timed)";
  if constexpr (std::is_same_v<Key, __nv_bfloat16>) {
    std::vector<Key> keys = out.to_host();
    std::vector<uint32_t> words(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      unsigned short b;
      std::memcpy(&b, &keys[i], 2);
      words[i] = b;
    }
    for (long long row = 0; row < segments; ++row)
      std::sort(words.begin() + row * k, words.begin() + (row + 1) * k, std::greater<uint32_t>());
    emit_result(it, "cub", t, digest_words(words.data(), words.size()), note);
  } else if (ties) {
    auto [digest, keys_digest] = digest_ties(out.to_host(), at.to_host(), (size_t)segments, (size_t)k);
    emit_result(it, "cub", t, digest, note, keys_digest);
  } else {
    std::vector<float> keys = out.to_host();
    canonical_topk(keys, (size_t)segments, (size_t)k);
    emit_result(it, "cub", t, digest_f32(keys), note);
  }
}

}  // namespace

bool run_cub_batched_topk(const PlanItem& it, cudaStream_t s) {
  if (it.kind != "batched" && it.kind != "batched_ramp" && it.kind != "batched_bf16" && it.kind != "batched_ragged" &&
      it.kind != "batched_ties")
    return false;
  const long long len = it.p2, k = it.p3;
  // One instantiation per benchmarked shape (see the top of this file); ascending rows
  // ("batched_ramp") only at lengths the per-row path takes.
  if (it.kind == "batched_ramp" && len <= 16384) {
    emit_status(it.name, "cub", "unsupported", "ascending rows are benchmarked only above 16384 keys");
  } else if (it.kind == "batched" && len == 64 && k == 6) {
    batched<64, 6>(it, s);
  } else if (it.kind == "batched" && len == 256 && k == 8) {
    batched<256, 8>(it, s);
  } else if (len > 16384 && it.kind == "batched_bf16") {
    batched_by_rows<__nv_bfloat16>(it, s);
  } else if (len > 16384) {
    batched_by_rows<float>(it, s);
  } else {
    emit_status(it.name, "cub", "unsupported",
                "no DeviceBatchedTopK instantiation for len=" + std::to_string(len) + ", k=" + std::to_string(k) +
                    " in benches/peers/cub_batched.cu");
  }
  return true;
}

}  // namespace oxb
