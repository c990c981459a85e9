// The CCCL-main peer program: `cub_main_peers PLAN` (the protocol of cub_peers.cu, impl names
// "cub-main ..."). Built by build-cub-main.sh against the CCCL main snapshot that get-cccl-main.sh
// packs (.cccl-main/cccl-main-include.tar.gz, its VERSION file names the commit).
//
// What CCCL main adds over the 3.5 peer (cub_batched.cu): cub::DeviceBatchedTopK's
// thread-block-cluster backend (SM 9.0+), which takes segments larger than one thread block (up to
// 2^21 keys, a static_assert on the segment size's compile-time upper bound) and the deterministic
// selection requirements. Output ordering is still unsorted only (sorted / stable_sorted
// static_assert), and cub::DeviceTopK still accepts only not_guaranteed + unsorted.
//
// Variants (one result line each), all through DeviceBatchedTopK::MaxPairs with the index within
// the row as value, so both the keys and the selected indices are compared:
//   "cub-main"                      determinism::not_guaranteed, tie_break::unspecified
//   "cub-main gpu_to_gpu+smaller"   determinism::gpu_to_gpu, tie_break::prefer_smaller_index
//   "cub-main gpu_to_gpu+larger"    determinism::gpu_to_gpu, tie_break::prefer_larger_index
// each with output_ordering::unsorted. The other two accepted pairs, (run_to_run, unspecified) and
// (gpu_to_gpu, unspecified), compile to the same cluster agent as gpu_to_gpu+smaller (the agent
// only asks "deterministic?" and "prefer larger?"), so they are not timed separately.
//
// Which backend runs is decided by CUB from the static segment-size bound and the requirements:
// a deterministic request always runs the cluster backend; a non-deterministic one runs the
// single-block ("baseline") backend below a static maximum segment size of 8192 keys, the cluster
// backend from there on. Each line's note says which.
//
// Arguments: rows of a dense matrix are a transform iterator over a counting iterator (row i ->
// base + i * len), as in cub_batched.cu. Uniform long rows pass the segment size and k as host
// values under compile-time bounds (cuda::args::immediate + cuda::args::bounds): one instantiation
// per (key type, requirement) serves every long-row shape; CUB sizes the cluster launch from the
// runtime value, and its kernels do not specialize on the bound beyond "below 8192 or not" (the
// bound is set to the API's maximum, 2^21, as FlashInfer's cub_topk.cu does). Ragged rows pass
// their lengths as a device array (cuda::args::deferred_sequence) with the static bound
// kRaggedBound and the plan's row length as runtime bound. The small shapes ([R x 64] k 6,
// [R x 256] k 8) pass constants, as cub_batched.cu does.
//
// Built as one file compiled several times, each with -DOXB_CM_PART=<n> selecting the kernels it
// instantiates (the parts compile in parallel); part 0 holds main and the generator kernels.
#ifndef OXB_CM_PART
#define OXB_CM_PART 0
#endif
#if OXB_CM_PART == 0
#define OXB_GEN_KERNELS
#endif
#include "cub_device_topk.cuh"

// Without it, nvcc 13.0 rejects every deterministic request: dispatch_batched_topk.cuh's
// "tuned policy selector forced the baseline backend" static_assert sits in an `if constexpr`
// branch that is discarded for these requests, but its condition depends only on the enclosing
// function's template arguments, so the front end evaluates it anyway. The macro (which CUB's own
// tests and benchmarks, and FlashInfer's cub_topk.cu, define) turns the checks for unsupported
// architectures into runtime cudaErrorNotSupported results; this program targets sm_90 only,
// where every request here is supported.
#define CUB_DISABLE_TOPK_UNSUPPORTED_ARCH_ASSERT
#include <cub/device/device_batched_topk.cuh>
#include <cub/device/device_topk.cuh>

#include <cuda/argument>
#include <cuda/execution.determinism.h>
#include <cuda/execution.output_ordering.h>
#include <cuda/execution.require.h>
#include <cuda/execution.tie_break.h>
#include <cuda/iterator>
#include <cuda/std/execution>
#include <cuda/stream_ref>
#include <cuda_bf16.h>

static_assert(CCCL_VERSION >= 3006000, "compile with -I <CCCL main>/include (get-cccl-main.sh)");

namespace oxb {
namespace cm {

[[maybe_unused]] constexpr int kSegBound = 1 << 21;      // DeviceBatchedTopK's maximum static segment-size bound
[[maybe_unused]] constexpr int kRaggedBound = 131072;    // the ragged workloads' static row-length bound
[[maybe_unused]] constexpr int kKBound = 1 << 21;        // k's bound is not used by main's kernels; kept wide

enum class Req { fast, smaller, larger };

inline const char* impl_name(Req r) {
  switch (r) {
    case Req::fast: return "cub-main";
    case Req::smaller: return "cub-main gpu_to_gpu+smaller";
    default: return "cub-main gpu_to_gpu+larger";
  }
}

inline const char* req_text(Req r) {
  switch (r) {
    case Req::fast: return "require(determinism::not_guaranteed, tie_break::unspecified, output_ordering::unsorted)";
    case Req::smaller:
      return "require(determinism::gpu_to_gpu, tie_break::prefer_smaller_index, output_ordering::unsorted)";
    default: return "require(determinism::gpu_to_gpu, tie_break::prefer_larger_index, output_ordering::unsorted)";
  }
}

template <Req R>
auto make_env(cudaStream_t s) {
  namespace ex = cuda::execution;
  if constexpr (R == Req::fast) {
    return cuda::std::execution::env{
        ex::require(ex::determinism::not_guaranteed, ex::tie_break::unspecified, ex::output_ordering::unsorted),
        cuda::stream_ref{s}};
  } else if constexpr (R == Req::smaller) {
    return cuda::std::execution::env{
        ex::require(ex::determinism::gpu_to_gpu, ex::tie_break::prefer_smaller_index, ex::output_ordering::unsorted),
        cuda::stream_ref{s}};
  } else {
    return cuda::std::execution::env{
        ex::require(ex::determinism::gpu_to_gpu, ex::tie_break::prefer_larger_index, ex::output_ordering::unsorted),
        cuda::stream_ref{s}};
  }
}

// Row i of a dense row-major matrix.
template <class T>
struct RowStart {
  T* base;
  long long len;
  __host__ __device__ T* operator()(long long i) const { return base + i * len; }
};

// Every row's values are its indices 0, 1, 2, ...
struct RowIota {
  __host__ __device__ cuda::counting_iterator<int> operator()(long long) const { return cuda::counting_iterator<int>(0); }
};

// What one timed variant hands back.
struct Run {
  Timing t;
  std::vector<uint32_t> keys;  // [rows x k], the key bits (bf16: zero-extended)
  std::vector<int> idx;        // [rows x k], index within the row
};

// The static segment-size bound of a segment-size argument (decides the backend, with Req).
template <class SizeArg>
constexpr long long static_max_seg() {
  return (long long)cuda::args::__traits<SizeArg>::highest;
}

// One MaxPairs variant over `rows` rows, `in[r]` the rotated inputs (row stride `stride`), k per row.
template <Req R, class Key, class SizeArg, class KArg>
Run run_pairs(const PlanItem& it, cudaStream_t s, const std::vector<DeviceBuffer<Key>>& in, long long rows,
              long long stride, long long k, SizeArg sizes, KArg karg) {
  DeviceBuffer<Key> out((size_t)(rows * k));
  DeviceBuffer<int> idx((size_t)(rows * k));
  auto env = make_env<R>(s);
  auto keys_in = [&](int r) {
    return cuda::make_transform_iterator(cuda::counting_iterator<long long>(0), RowStart<const Key>{in[r].get(), stride});
  };
  auto keys_out = cuda::make_transform_iterator(cuda::counting_iterator<long long>(0), RowStart<Key>{out.get(), k});
  auto vals_in = cuda::make_transform_iterator(cuda::counting_iterator<long long>(0), RowIota{});
  auto vals_out = cuda::make_transform_iterator(cuda::counting_iterator<long long>(0), RowStart<int>{idx.get(), k});
  auto nseg = cuda::args::immediate{(int)rows};

  size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceBatchedTopK::MaxPairs(nullptr, temp_bytes, keys_in(0), keys_out, vals_in, vals_out, sizes, karg,
                                              nseg, env));
  DeviceBuffer<unsigned char> temp(std::max<size_t>(temp_bytes, 1));
  Run run;
  run.t = time_runs(s, it, [&](int r) {
    size_t bytes = temp_bytes;
    CUDA_CHECK(cub::DeviceBatchedTopK::MaxPairs(temp.get(), bytes, keys_in(r), keys_out, vals_in, vals_out, sizes, karg,
                                                nseg, env));
  });
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<Key> hk = out.to_host();
  run.keys.resize(hk.size());
  for (size_t i = 0; i < hk.size(); ++i) {
    if constexpr (sizeof(Key) == 4) {
      std::memcpy(&run.keys[i], &hk[i], 4);
    } else {
      unsigned short b;
      std::memcpy(&b, &hk[i], 2);
      run.keys[i] = b;
    }
  }
  run.idx = idx.to_host();
  return run;
}

// The three variants of one workload, each reported through `report(req, run, backend)`.
template <class Key, class SizeArg, class KArg, class Report>
void run_variants(const PlanItem& it, cudaStream_t s, const std::vector<DeviceBuffer<Key>>& in, long long rows,
                  long long stride, long long k, SizeArg sizes, KArg karg, const Report& report) {
  // The selector's rule (dispatch_batched_topk.cuh, policy_selector_from_types): cluster when
  // deterministic or the static bound is >= 8192 (cluster_beneficial_min_segment_size), on SM 9.0+.
  const bool big = static_max_seg<SizeArg>() >= 8192;
  report(Req::fast, run_pairs<Req::fast>(it, s, in, rows, stride, k, sizes, karg), big ? "cluster" : "single-block");
  report(Req::smaller, run_pairs<Req::smaller>(it, s, in, rows, stride, k, sizes, karg), "cluster");
  report(Req::larger, run_pairs<Req::larger>(it, s, in, rows, stride, k, sizes, karg), "cluster");
}

// The instantiations, one part each (see the top of this file).
using F32Rows = std::vector<DeviceBuffer<float>>;
using Bf16Rows = std::vector<DeviceBuffer<__nv_bfloat16>>;
using Reporter = std::function<void(Req, Run, const char*)>;

void uniform_f32(const PlanItem& it, cudaStream_t s, const F32Rows& in, long long rows, long long len, long long k,
                 const Reporter& rep);
void ragged_f32(const PlanItem& it, cudaStream_t s, const F32Rows& in, const int* lens, long long rows, long long len,
                long long k, const Reporter& rep);
void uniform_bf16(const PlanItem& it, cudaStream_t s, const Bf16Rows& in, long long rows, long long len, long long k,
                  const Reporter& rep);
bool small_f32(const PlanItem& it, cudaStream_t s, const F32Rows& in, long long rows, long long len, long long k,
               const Reporter& rep);
void gen_ragged_len(int* out, unsigned long long rows, unsigned long long seed, unsigned len, unsigned k,
                    cudaStream_t s);

#if OXB_CM_PART == 1
void uniform_f32(const PlanItem& it, cudaStream_t s, const F32Rows& in, long long rows, long long len, long long k,
                 const Reporter& rep) {
  run_variants(it, s, in, rows, len, k, cuda::args::immediate{(int)len, cuda::args::bounds<1, kSegBound>()},
               cuda::args::immediate{(int)k, cuda::args::bounds<1, kKBound>()}, rep);
}
#endif

#if OXB_CM_PART == 2
void ragged_f32(const PlanItem& it, cudaStream_t s, const F32Rows& in, const int* lens, long long rows, long long len,
                long long k, const Reporter& rep) {
  // Static bound kRaggedBound; the runtime bounds [k, len] (every row holds at least k keys).
  run_variants(it, s, in, rows, len, k,
               cuda::args::deferred_sequence{lens, cuda::args::bounds<0, kRaggedBound>(),
                                             cuda::args::bounds((int)k, (int)len)},
               cuda::args::immediate{(int)k, cuda::args::bounds<1, kKBound>()}, rep);
}
#endif

#if OXB_CM_PART == 3
void uniform_bf16(const PlanItem& it, cudaStream_t s, const Bf16Rows& in, long long rows, long long len, long long k,
                  const Reporter& rep) {
  run_variants(it, s, in, rows, len, k, cuda::args::immediate{(int)len, cuda::args::bounds<1, kSegBound>()},
               cuda::args::immediate{(int)k, cuda::args::bounds<1, kKBound>()}, rep);
}
#endif

#if OXB_CM_PART == 4
bool small_f32(const PlanItem& it, cudaStream_t s, const F32Rows& in, long long rows, long long len, long long k,
               const Reporter& rep) {
  if (len == 64 && k == 6) {
    run_variants(it, s, in, rows, len, k, cuda::args::constant<64>{}, cuda::args::constant<6>{}, rep);
  } else if (len == 256 && k == 8) {
    run_variants(it, s, in, rows, len, k, cuda::args::constant<256>{}, cuda::args::constant<8>{}, rep);
  } else {
    return false;
  }
  return true;
}
#endif

#if OXB_CM_PART == 0
void gen_ragged_len(int* out, unsigned long long rows, unsigned long long seed, unsigned len, unsigned k,
                    cudaStream_t s) {
  oxb_gen_ragged_len<<<grid_for(rows), 256, 0, s>>>(out, rows, seed, len, k);
  CUDA_CHECK(cudaGetLastError());
}

// emit_result with one more field: "index_digest", over each row's selected indices sorted
// ascending, rows in order.
void emit_result_idx(const PlanItem& it, const char* impl, const Timing& t, const std::string& digest,
                     const std::string& index_digest, const std::string& note) {
  std::printf(
      "{\"workload\":\"%s\",\"impl\":\"%s\",\"status\":\"ok\",\"median_ms\":%.6f,\"min_ms\":%.6f,\"reps\":%d,"
      "\"rotations\":%d,\"digest\":\"%s\",\"index_digest\":\"%s\",\"note\":\"%s\"}\n",
      json_escape(it.name).c_str(), impl, t.median_ms, t.min_ms, t.reps, it.rotations, digest.c_str(),
      index_digest.c_str(), json_escape(note).c_str());
  std::fflush(stdout);
}

// Canonical digests of a [rows x k] result: keys sorted descending (all keys are non-negative, so
// their bit patterns order as their values), indices sorted ascending. Also checks on the host,
// from the generator, that every returned key is the key at its returned index within the row
// (and that the index lies in the row's length): the count of pairs that are not goes in the note.
struct Checked {
  std::string keys, idx;
  // Keys then indices as one digest (common.cuh: digest_ties; kind "batched_ties").
  std::string keys_then_idx;
  size_t bad_pairs = 0;
};

Checked canonical(Run& run, long long rows, long long k, const std::function<uint32_t(long long, long long)>& key_at,
                  const std::function<long long(long long)>& row_len) {
  Checked c;
  for (long long r = 0; r < rows; ++r) {
    const long long len = row_len(r);
    for (long long j = 0; j < k; ++j) {
      const long long i = run.idx[r * k + j];
      if (i < 0 || i >= len || key_at(r, i) != run.keys[r * k + j]) ++c.bad_pairs;
    }
    std::sort(run.keys.begin() + r * k, run.keys.begin() + (r + 1) * k, std::greater<uint32_t>());
    std::sort(run.idx.begin() + r * k, run.idx.begin() + (r + 1) * k);
  }
  c.keys = digest_words(run.keys.data(), run.keys.size());
  std::vector<uint32_t> w(run.idx.begin(), run.idx.end());
  c.idx = digest_words(w.data(), w.size());
  std::vector<uint32_t> both(run.keys.begin(), run.keys.end());
  both.insert(both.end(), w.begin(), w.end());
  c.keys_then_idx = digest_words(both.data(), both.size());
  return c;
}

std::string backend_note(const char* backend, Req r, const std::string& args, size_t bad_pairs) {
  std::string note = std::string("cub::DeviceBatchedTopK::MaxPairs (CCCL main), ") + backend + " backend, " +
                     req_text(r) + ", " + args + ", values = index within the row";
  if (bad_pairs) note += "; " + std::to_string(bad_pairs) + " returned (key, index) pairs do not match the input";
  return note;
}

unsigned f32_bits(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}

bool run_batched(const PlanItem& it, cudaStream_t s) {
  const std::string& kind = it.kind;
  if (kind != "batched" && kind != "batched_ramp" && kind != "batched_bf16" && kind != "batched_ragged" &&
      kind != "batched_ties")
    return false;
  const long long rows = it.p1, len = it.p2, k = it.p3;
  const int rot = std::max(1, it.rotations);
  auto unsupported = [&](const std::string& why) {
    for (Req r : {Req::fast, Req::smaller, Req::larger}) emit_status(it.name, impl_name(r), "unsupported", why);
    return true;
  };
  if (rows < 1 || len < 1 || k < 1 || k > len) throw std::runtime_error("batched: bad shape");
  if (len > kSegBound)
    return unsupported("rows of " + std::to_string(len) +
                       " keys: cub::DeviceBatchedTopK (CCCL main) static_asserts a segment-size bound of at most 2^21");
  if (rows > 2147483647LL) return unsupported("more than 2^31 - 1 rows");

  auto report_with = [&](const std::function<uint32_t(long long, long long)>& key_at,
                         const std::function<long long(long long)>& row_len, const std::string& args) {
    return [&, key_at, row_len, args](Req r, Run run, const char* backend) {
      Checked c = canonical(run, rows, k, key_at, row_len);
      const std::string note = backend_note(backend, r, args, c.bad_pairs);
      if (c.bad_pairs != 0) {
        // Keys that are not the keys at their indices: a wrong result whatever the keys' digest.
        const std::string bad = "bad-pairs:" + std::to_string(c.bad_pairs);
        c.keys = c.idx = c.keys_then_idx = bad;
      }
      if (kind == "batched_ties") {
        // Digested with the index sets (bench-gpu's reference keeps the smaller indices of the
        // k-th key's ties); the keys alone as keys_digest.
        emit_result(it, impl_name(r), run.t, c.keys_then_idx, note, c.keys);
      } else {
        emit_result_idx(it, impl_name(r), run.t, c.keys, c.idx, note);
      }
    };
  };
  auto full_row = [len](long long) { return len; };

  if (kind == "batched_bf16") {
    Bf16Rows in;
    for (int r = 0; r < rot; ++r) {
      in.emplace_back((size_t)(rows * len));
      gen_bf16_bits(reinterpret_cast<unsigned short*>(in.back().get()), rows * len, it.seed, s);
    }
    const unsigned long long seed = it.seed;
    uniform_bf16(it, s, in, rows, len, k,
                 report_with([=](long long r, long long i) { return (uint32_t)oxb_bf16_bits(seed, r * len + i); },
                             full_row,
                             "__nv_bfloat16 keys, segment size immediate{len, bounds<1, 2^21>}, k immediate{k, "
                             "bounds<1, 2^21>}"));
    return true;
  }

  F32Rows in;
  for (int r = 0; r < rot; ++r) {
    in.emplace_back((size_t)(rows * len));
    if (kind == "batched_ramp") {
      gen_ramp_f32(in.back().get(), rows * len, it.seed, (unsigned)len, s);
    } else if (kind == "batched_ties") {
      gen_tie_f32(in.back().get(), rows * len, it.seed, s);
    } else {
      gen_f32(in.back().get(), rows * len, it.seed, s);
    }
  }
  const unsigned long long seed = it.seed;
  std::function<uint32_t(long long, long long)> key_at;
  if (kind == "batched_ramp") {
    key_at = [=](long long r, long long i) { return f32_bits(oxb_ramp_f32(seed, r * len + i, (unsigned)len)); };
  } else if (kind == "batched_ties") {
    key_at = [=](long long r, long long i) { return oxb_tie_bits(seed, r * len + i); };
  } else {
    key_at = [=](long long r, long long i) { return f32_bits(oxb_f32(seed, r * len + i)); };
  }

  if (kind == "batched_ragged") {
    if (len > kRaggedBound)
      return unsupported("ragged rows of " + std::to_string(len) + " keys: this program's static bound is " +
                         std::to_string(kRaggedBound));
    DeviceBuffer<int> lens((size_t)rows);
    gen_ragged_len(lens.get(), rows, it.seed, (unsigned)len, (unsigned)k, s);
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<int> hl = lens.to_host();
    ragged_f32(it, s, in, lens.get(), rows, len, k,
               report_with(key_at, [hl](long long r) { return (long long)hl[r]; },
                           "f32 keys, per-row sizes deferred_sequence{d_lengths (int32), bounds<0, 131072>, "
                           "bounds(k, len)}, k immediate{k, bounds<1, 2^21>}"));
    return true;
  }

  auto small_rep = report_with(key_at, full_row, "f32 keys, segment size and k as cuda::args::constant");
  if (len < 8192) {
    if (!small_f32(it, s, in, rows, len, k, small_rep))
      return unsupported("no constant-size instantiation for len=" + std::to_string(len) + ", k=" + std::to_string(k) +
                         " in benches/peers/cub_main_batched.cu (rows below 8192 keys are instantiated per shape)");
    return true;
  }
  uniform_f32(it, s, in, rows, len, k,
              report_with(key_at, full_row,
                          "f32 keys, segment size immediate{len, bounds<1, 2^21>}, k immediate{k, bounds<1, 2^21>}"));
  return true;
}

// cub::DeviceTopK on main: still only not_guaranteed + unsorted (device_topk.cuh static_asserts
// it), so one variant.
bool run_topk(const PlanItem& it, cudaStream_t s) {
  if (it.kind != "topk") return false;
  time_cub_device_topk(it, s, "cub-main",
                       "cub::DeviceTopK::MaxKeys (CCCL main), require(determinism::not_guaranteed, "
                       "output_ordering::unsorted): the only requirements main's DeviceTopK accepts");
  for (const char* impl : {"cub-main gpu_to_gpu+smaller", "cub-main gpu_to_gpu+larger"})
    emit_status(it.name, impl, "unsupported",
                "cub::DeviceTopK (CCCL main) static_asserts determinism::not_guaranteed and unsorted output");
  return true;
}
#endif

}  // namespace cm
}  // namespace oxb

#if OXB_CM_PART == 0
int main(int argc, char** argv) {
  using namespace oxb;
  return peer_main(
      argc, argv, "cub_main_peers", "cub-main",
      [](const PlanItem& it, cudaStream_t s) { return cm::run_batched(it, s) || cm::run_topk(it, s); },
      [](const PlanItem& it) { return "no CCCL-main peer for kind " + it.kind; });
}
#endif
