// The FlashInfer top-k peer program: `flashinfer_topk PLAN` (the protocol of cub_peers.cu). Built
// by build-flashinfer.sh from the pack that get-flashinfer.sh makes.
//
// FlashInfer 0.7.2.post1's `flashinfer.top_k` on Hopper either runs its CUB backend
// (csrc/cub_topk.cu: CCCL 3.6's cluster DeviceBatchedTopK, which is benchmarked by the project's
// own CUB peer, not here) or its native kernels: the Python wrapper allocates the values output
// and a 1 MiB row-state buffer (zeroed once, cached per device) and calls the tvm-ffi binding
// radix_topk (csrc/topk.cu), which calls
//   sampling::TopKDispatch<DType, int32_t>(input, indices, values, rows, k, d, row_states,
//                                          sorted_cuda, deterministic, tie_break, stream,
//                                          dsa_graph_safe = false)
// (include/flashinfer/topk.cuh). TopKDispatch picks FilteredTopK (one CTA per row, k <= 2048) or
// the multi-CTA RadixTopK by a heuristic that the environment variable FLASHINFER_TOPK_ALGO
// (filtered | multi_cta) overrides; with deterministic it adds a kernel that sorts each row's
// indices, with sorted_cuda (sorted && deterministic && k <= 2048) a stable sort by value. Its
// clusters backend runs on SM 10.x only. `flashinfer.top_k_ragged_transform` (per-row lengths on
// the device, indices plus a per-row offset) calls radix_topk_ragged_transform, which calls
// sampling::TopKRaggedTransformDispatch the same way.
//
// This program makes those calls itself, on FlashInfer's headers compiled with the flags of
// FlashInfer's JIT for the topk module. So the time is the kernels' launches and runs plus the
// dispatch's own host work (device attribute queries, the getenv), without the wrapper's (argument
// checks, torch's custom-op layer, tvm-ffi) and without the torch kernel that turns the int32
// indices into int64 (`indices.long()`), which a Python call also runs on the GPU.
//
// Two translation units from this one file: with OXB_FI_TOPK_KERNELS defined, the FlashInfer side
// (its headers, C++17 and the JIT's nvcc flags), which exports the plain functions declared
// below; without it, the peer (C++20, common.cuh and the generator), which calls them.
//
// Result lines, one per variant ("impl"), each a FlashInfer call on the same inputs:
//   "flashinfer"            top_k(x, k): sorted=False, deterministic=False, tie_break=0; the
//                           native dispatch's own choice of kernel (the note says which, and
//                           whether top_k would take its CUB backend for this shape instead)
//   "flashinfer filtered"   the same with FLASHINFER_TOPK_ALGO=filtered
//   "flashinfer multi_cta"  the same with FLASHINFER_TOPK_ALGO=multi_cta
//   "flashinfer det"        top_k(x, k, sorted=True, deterministic=True, tie_break=1): selection
//                           ties broken toward the smaller index, the k keys stably sorted
//                           descending on the device (k <= 2048); tie-break modes run only in
//                           FilteredTopK
// kinds: "batched" / "batched_ramp" / "batched_bf16" / "batched_ties"  [p1 rows x p2 keys],
//                           k = p3, f32 / f32 ascending / bf16 / tie-heavy f32 keys (gen.cuh)
//        "batched_ragged"   the same f32 matrix, row r holding its first oxb_ragged_len keys (the
//                           lengths in device memory): top_k_ragged_transform with offsets 0, so
//                           its indices are positions within the row; it returns indices only,
//                           has no sorted output ("det": deterministic, tie_break=1, the indices
//                           ascending)
//        "topk"             one row of p1 f32 keys, k = p2 ([1 x N])
// A variant that cannot take a shape is reported as unsupported, with the reason. Notably the
// multi-CTA RadixTopK splits a row over ceil(d / chunk) CTAs, each holding its chunk in shared
// memory (about 227 KB: 57,592 f32 keys on an H100) and waiting for the others at software
// barriers; nothing keeps the CTAs of a row within what the GPU holds at once (one per SM at that
// shared memory), so a longer row would hang the stream: such a launch is not made.
//
// Digests: "digest", each row's k selected keys sorted descending (bf16: each key's 16 bits as a
// word), rows in order, the keys looked up by the returned indices in the generator (host side);
// for "batched_ties" the keys then the index sets (common.cuh: digest_ties), with the keys' alone
// as "keys_digest". "index_digest", every kind: each row's indices sorted ascending, rows in order
// (which of equal keys were chosen). The note counts indices out of their row and returned values
// that differ from the keys at their indices, when there are any.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

namespace oxb::fi {

// The multi-CTA RadixTopK's launch shape for a row of d keys, computed as its launcher does.
struct MultiCtaShape {
  unsigned ctas_per_group = 0, chunk = 0, groups = 0, sms = 0;
};

cudaError_t topk_f32(float* in, int32_t* indices, float* values, uint32_t rows, uint32_t k, uint32_t d,
                     void* row_states, bool sorted, bool deterministic, int tie_break, cudaStream_t s);
cudaError_t topk_bf16(uint16_t* in, int32_t* indices, uint16_t* values, uint32_t rows, uint32_t k, uint32_t d,
                      void* row_states, bool sorted, bool deterministic, int tie_break, cudaStream_t s);
cudaError_t ragged_f32(float* in, int32_t* indices, const int32_t* offsets, int32_t* lengths, uint32_t rows,
                       uint32_t k, uint32_t max_len, void* row_states, bool deterministic, int tie_break,
                       cudaStream_t s);
// ShouldUseFilteredTopK's answer (it reads FLASHINFER_TOPK_ALGO too).
bool dispatch_takes_filtered(bool bf16, uint32_t rows, uint32_t k, uint32_t d, bool deterministic, int tie_break);
cudaError_t multi_cta_shape(bool bf16, uint32_t rows, uint32_t d, bool deterministic, MultiCtaShape* out);
bool can_implement_filtered();
unsigned filtered_max_k();
size_t row_state_bytes();  // sizeof(sampling::RadixRowState)

}  // namespace oxb::fi

#ifdef OXB_FI_TOPK_KERNELS
// ---- The FlashInfer side: the calls of csrc/topk.cu's bindings, less the tensor plumbing. ----
// topk.cuh uses math::ptx_rcp without including math.cuh; csrc/topk.cu gets it through
// sampling.cuh, included first.
#include <flashinfer/math.cuh>
#include <flashinfer/topk.cuh>

namespace oxb::fi {
namespace fs = flashinfer::sampling;

static fs::TopKTieBreak tie(int t) { return static_cast<fs::TopKTieBreak>(t); }

cudaError_t topk_f32(float* in, int32_t* indices, float* values, uint32_t rows, uint32_t k, uint32_t d,
                     void* row_states, bool sorted, bool deterministic, int tie_break, cudaStream_t s) {
  return fs::TopKDispatch<float, int32_t>(in, indices, values, rows, k, d, static_cast<fs::RadixRowState*>(row_states),
                                          sorted, deterministic, tie(tie_break), s, /*dsa_graph_safe=*/false);
}

cudaError_t topk_bf16(uint16_t* in, int32_t* indices, uint16_t* values, uint32_t rows, uint32_t k, uint32_t d,
                      void* row_states, bool sorted, bool deterministic, int tie_break, cudaStream_t s) {
  return fs::TopKDispatch<nv_bfloat16, int32_t>(
      reinterpret_cast<nv_bfloat16*>(in), indices, reinterpret_cast<nv_bfloat16*>(values), rows, k, d,
      static_cast<fs::RadixRowState*>(row_states), sorted, deterministic, tie(tie_break), s, /*dsa_graph_safe=*/false);
}

cudaError_t ragged_f32(float* in, int32_t* indices, const int32_t* offsets, int32_t* lengths, uint32_t rows,
                       uint32_t k, uint32_t max_len, void* row_states, bool deterministic, int tie_break,
                       cudaStream_t s) {
  return fs::TopKRaggedTransformDispatch<float, int32_t>(in, indices, offsets, lengths, /*row_starts=*/nullptr, rows,
                                                         k, max_len, static_cast<fs::RadixRowState*>(row_states),
                                                         deterministic, tie(tie_break), s, /*dsa_graph_safe=*/false);
}

bool dispatch_takes_filtered(bool bf16, uint32_t rows, uint32_t k, uint32_t d, bool deterministic, int tie_break) {
  return bf16 ? fs::ShouldUseFilteredTopK<nv_bfloat16>(rows, k, d, deterministic, tie(tie_break))
              : fs::ShouldUseFilteredTopK<float>(rows, k, d, deterministic, tie(tie_break));
}

// RadixTopKMultiCTA's (and RadixTopKRaggedTransformMultiCTA's) arithmetic, with its helpers.
template <typename DType>
static cudaError_t shape_of(uint32_t rows, uint32_t d, bool deterministic, MultiCtaShape* out) {
  using OrderedType = typename fs::RadixTopKTraits<DType>::OrderedType;
  constexpr uint32_t BLOCK_THREADS = 1024;
  const uint32_t vec_size = std::gcd(16 / sizeof(DType), d);
  int device = 0, num_sms = 0, max_smem_per_block = 0;
  FLASHINFER_CUDA_CALL(cudaGetDevice(&device));
  FLASHINFER_CUDA_CALL(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  FLASHINFER_CUDA_CALL(cudaDeviceGetAttribute(&max_smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  constexpr size_t fixed_smem_aligned = flashinfer::round_up(sizeof(uint32_t) * (256 + 256 + 5), 16);
  const size_t available =
      fs::GetRadixTopKAvailableOrderedSmemBytes<BLOCK_THREADS>(max_smem_per_block, fixed_smem_aligned, deterministic);
  if (available == 0) return cudaErrorInvalidValue;
  uint32_t max_chunk = flashinfer::round_down(uint32_t(available / sizeof(OrderedType)), vec_size);
  max_chunk = std::max(max_chunk, vec_size * BLOCK_THREADS);
  const uint32_t ctas = flashinfer::ceil_div(d, max_chunk);
  uint32_t chunk = flashinfer::round_up(flashinfer::ceil_div(d, ctas), vec_size);
  chunk = std::min(chunk, max_chunk);
  uint32_t groups = std::min(static_cast<uint32_t>(num_sms) / ctas, rows);
  if (groups == 0) groups = 1;
  *out = MultiCtaShape{ctas, chunk, groups, static_cast<unsigned>(num_sms)};
  return cudaSuccess;
}

cudaError_t multi_cta_shape(bool bf16, uint32_t rows, uint32_t d, bool deterministic, MultiCtaShape* out) {
  return bf16 ? shape_of<nv_bfloat16>(rows, d, deterministic, out) : shape_of<float>(rows, d, deterministic, out);
}

bool can_implement_filtered() { return fs::CanImplementFilteredTopK(); }
unsigned filtered_max_k() { return fs::FILTERED_TOPK_MAX_K; }
size_t row_state_bytes() { return sizeof(fs::RadixRowState); }

}  // namespace oxb::fi

#else
// ---- The peer. ----
#define OXB_GEN_KERNELS
#include "common.cuh"

#include <cstdlib>
#include <optional>

namespace oxb {
namespace {

constexpr const char* kAlgoEnv = "FLASHINFER_TOPK_ALGO";
constexpr size_t kRowStatesBytes = 1 << 20;  // topk.py: the cached, zeroed 1 MiB buffer

void gen_ragged_len(int* out, unsigned long long rows, unsigned long long seed, unsigned len, unsigned k,
                    cudaStream_t s) {
  oxb_gen_ragged_len<<<grid_for(rows), 256, 0, s>>>(out, rows, seed, len, k);
  CUDA_CHECK(cudaGetLastError());
}

// The row-state buffer, allocated and zeroed once per process as topk.py's _get_cache_buf does
// (the kernels leave it zeroed again for the next call).
void* row_states(cudaStream_t s) {
  static std::optional<DeviceBuffer<unsigned char>> buf;
  if (!buf) {
    buf.emplace(kRowStatesBytes);
    CUDA_CHECK(cudaMemsetAsync(buf->get(), 0, kRowStatesBytes, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
  }
  return buf->get();
}

void fi_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + " returned " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                             ")");
}

// emit_result (keys_digest as there) with the extra "index_digest" field.
void emit_topk_result(const PlanItem& it, const char* impl, const Timing& t, const std::string& digest,
                      const std::string& keys_digest, const std::string& index_digest, const std::string& note) {
  const std::string keys = keys_digest.empty() ? "" : ",\"keys_digest\":\"" + keys_digest + "\"";
  std::printf(
      "{\"workload\":\"%s\",\"impl\":\"%s\",\"status\":\"ok\",\"median_ms\":%.6f,\"min_ms\":%.6f,\"reps\":%d,"
      "\"rotations\":%d,\"digest\":\"%s\"%s,\"index_digest\":\"%s\",\"note\":\"%s\"}\n",
      json_escape(it.name).c_str(), impl, t.median_ms, t.min_ms, t.reps, it.rotations, digest.c_str(), keys.c_str(),
      index_digest.c_str(), json_escape(note).c_str());
  std::fflush(stdout);
}

enum class Keys { F32, Ramp, Bf16, Ties };

// One workload's shape, inputs and outputs.
struct Problem {
  Keys keys = Keys::F32;
  bool ragged = false;
  uint32_t rows = 0, d = 0, k = 0;
  std::vector<DeviceBuffer<float>> in_f32;
  std::vector<DeviceBuffer<unsigned short>> in_bf16;
  DeviceBuffer<int32_t> lengths, offsets, indices;
  DeviceBuffer<float> values_f32;
  DeviceBuffer<unsigned short> values_bf16;
  std::vector<uint32_t> host_len;  // the row lengths (d, or the ragged lengths)

  bool bf16() const { return keys == Keys::Bf16; }
};

// Key j of row r as a digest word (bits order like values: all keys are non-negative).
uint32_t key_word(const PlanItem& it, const Problem& p, uint64_t r, uint64_t j) {
  const uint64_t i = r * p.d + j;
  switch (p.keys) {
    case Keys::Ramp: {
      float f = oxb_ramp_f32(it.seed, i, p.d);
      uint32_t w;
      std::memcpy(&w, &f, 4);
      return w;
    }
    case Keys::Bf16:
      return oxb_bf16_bits(it.seed, i);
    case Keys::Ties:
      return oxb_tie_bits(it.seed, i);
    default: {
      float f = oxb_f32(it.seed, i);
      uint32_t w;
      std::memcpy(&w, &f, 4);
      return w;
    }
  }
}

// The variants (see the top of this file).
struct Variant {
  const char* impl;
  const char* algo;  // FLASHINFER_TOPK_ALGO, or nullptr
  bool sorted, deterministic;
  int tie_break;
  const char* call;  // the Python call it stands for
};

const Variant kVariants[] = {
    {"flashinfer", nullptr, false, false, 0, "top_k(x, k)"},
    {"flashinfer filtered", "filtered", false, false, 0, "top_k(x, k) with FLASHINFER_TOPK_ALGO=filtered"},
    {"flashinfer multi_cta", "multi_cta", false, false, 0, "top_k(x, k) with FLASHINFER_TOPK_ALGO=multi_cta"},
    {"flashinfer det", nullptr, true, true, 1, "top_k(x, k, sorted=True, deterministic=True, tie_break=1)"},
};

void set_algo(const char* algo) {
  if (algo) {
    setenv(kAlgoEnv, algo, 1);
  } else {
    unsetenv(kAlgoEnv);
  }
}

// Whether flashinfer.top_k (or top_k_ragged_transform) on an SM 9.x GPU, eager, sends this call to
// its CUB backend instead: topk.py can_use_cub_topk and is_cub_topk_beneficial /
// is_cub_ragged_transform_beneficial, the branches that apply without the clusters backend.
bool python_takes_cub(const Problem& p, const Variant& v) {
  if (v.sorted || v.deterministic) return false;
  if (v.algo != nullptr) return false;  // a forced native backend
  if (p.d > (1u << 21)) return false;
  const bool tie = v.tie_break != 0;
  if (p.ragged) {  // f32 only here
    if (tie) return (p.rows <= 32 && p.d >= 16384) || (p.rows <= 64 && p.d >= 32768);
    return (p.rows <= 32 && p.d >= 32768) || (p.rows <= 64 && p.d >= 65536);
  }
  if (p.rows < 128 || p.d <= 8192) return true;
  if (p.bf16() && p.d >= 131072) return !tie || p.rows <= 256;
  return !p.bf16() && p.k >= 4096 && p.d >= 65536;
}

// Which kernel TopKDispatch will run for this variant, or why the variant is not run.
struct Choice {
  bool filtered = false;
  fi::MultiCtaShape shape;
  std::string unsupported;  // non-empty: not run
};

Choice choose(const Problem& p, const Variant& v) {
  Choice c;
  const unsigned max_k = fi::filtered_max_k();
  const std::string ks = "k=" + std::to_string(p.k);
  if (v.tie_break != 0) {
    if (p.k > max_k || !fi::can_implement_filtered()) {
      c.unsupported = "tie_break needs FilteredTopK, which takes k <= " + std::to_string(max_k) + " (" + ks +
                      "): the dispatch returns cudaErrorNotSupported";
      return c;
    }
    c.filtered = true;
  } else if (v.algo && std::string(v.algo) == "filtered" && (p.k > max_k || p.d <= p.k)) {
    c.unsupported = "FilteredTopK takes k <= " + std::to_string(max_k) + " and rows longer than k (" + ks +
                    ", d=" + std::to_string(p.d) + "); the dispatch would run the multi-CTA RadixTopK instead";
    return c;
  } else {
    set_algo(v.algo);
    c.filtered = fi::dispatch_takes_filtered(p.bf16(), p.rows, p.k, p.d, v.deterministic, v.tie_break);
  }
  if (!c.filtered) {
    fi_check(fi::multi_cta_shape(p.bf16(), p.rows, p.d, v.deterministic, &c.shape), "multi-CTA shape");
    if (c.shape.ctas_per_group > c.shape.sms) {
      c.unsupported = std::string(v.algo ? "" : "the dispatch picks the multi-CTA RadixTopK; ") +
                      "its row of " + std::to_string(p.d) + " keys needs " + std::to_string(c.shape.ctas_per_group) +
                      " CTAs of " + std::to_string(c.shape.chunk) +
                      " keys in shared memory that wait for each other at software barriers, more than the " +
                      std::to_string(c.shape.sms) +
                      " SMs hold at once (one such CTA per SM): the launch would never finish (nothing in "
                      "FlashInfer 0.7.2.post1 guards it), so it is not made" +
                      (python_takes_cub(p, v) ? std::string()
                                              : std::string("; the Python call makes this same launch for this shape"));
    } else if (v.deterministic && c.shape.ctas_per_group > 256) {
      c.unsupported = "deterministic multi-CTA RadixTopK takes at most 256 CTAs per row";
    } else if (c.shape.groups * fi::row_state_bytes() > kRowStatesBytes) {
      // topk.py's comment: 1 MiB covers ~300 groups; a GPU with more SMs would overrun it.
      throw std::runtime_error("the multi-CTA RadixTopK's row states outgrow topk.py's 1 MiB buffer");
    }
  }
  return c;
}

std::string describe(const Problem& p, const Variant& v, const Choice& c) {
  const char* dtype = p.bf16() ? "nv_bfloat16" : "float";
  std::string call = p.ragged ? std::string("top_k_ragged_transform(x, offsets=0, lengths, k") +
                                    (v.deterministic ? ", deterministic=True, tie_break=1)" : ")") +
                                    (v.algo ? std::string(" with FLASHINFER_TOPK_ALGO=") + v.algo : std::string())
                              : std::string(v.call);
  std::string s = "FlashInfer 0.7.2.post1 " + call + ": sampling::" +
                  (p.ragged ? std::string("TopKRaggedTransformDispatch<float, int32_t>")
                            : "TopKDispatch<" + std::string(dtype) + ", int32_t>") +
                  (p.ragged ? "" : (v.sorted ? " (values and indices, sorted_output)" : " (values and indices)")) +
                  ", deterministic=" + (v.deterministic ? "true" : "false") +
                  ", tie_break=" + (v.tie_break == 1 ? "Small" : "None") + ", 1 MiB row states, built with its JIT's flags; ran ";
  if (c.filtered) {
    s += "FilteredTopK (one CTA of 1024 threads per row)";
    if (v.deterministic) s += p.ragged ? " + the index sort of each row" : " + the index sort + the stable value sort";
  } else {
    s += "the multi-CTA RadixTopK (" + std::to_string(c.shape.ctas_per_group) + " CTA(s) per row, " +
         std::to_string(c.shape.groups) + " row group(s) at a time)";
  }
  if (python_takes_cub(p, v))
    s += std::string("; flashinfer.") + (p.ragged ? "top_k_ragged_transform" : "top_k") +
         " itself sends this shape to its CUB backend on Hopper (topk.py is_cub_" +
         (p.ragged ? "ragged_transform" : "topk") + "_beneficial), not this kernel";
  s += "; not timed: the Python wrapper's host work";
  if (!p.ragged) s += " and its int32 -> int64 index conversion";
  return s;
}

void run_variant(const PlanItem& it, Problem& p, const Variant& v, cudaStream_t s) {
  const Choice c = choose(p, v);
  set_algo(v.algo);
  if (!c.unsupported.empty()) {
    emit_status(it.name, v.impl, "unsupported", c.unsupported);
    return;
  }
  void* rs = row_states(s);
  // Indices of -1, so that what a variant leaves unwritten shows in its digests, not the last one's.
  CUDA_CHECK(cudaMemsetAsync(p.indices.get(), 0xFF, p.indices.size() * sizeof(int32_t), s));
  auto op = [&](int r) {
    cudaError_t e;
    if (p.ragged) {
      e = fi::ragged_f32(p.in_f32[r].get(), p.indices.get(), p.offsets.get(), p.lengths.get(), p.rows, p.k, p.d, rs,
                         v.deterministic, v.tie_break, s);
    } else if (p.bf16()) {
      e = fi::topk_bf16(p.in_bf16[r].get(), p.indices.get(), p.values_bf16.get(), p.rows, p.k, p.d, rs, v.sorted,
                        v.deterministic, v.tie_break, s);
    } else {
      e = fi::topk_f32(p.in_f32[r].get(), p.indices.get(), p.values_f32.get(), p.rows, p.k, p.d, rs, v.sorted,
                       v.deterministic, v.tie_break, s);
    }
    fi_check(e, "FlashInfer's top-k dispatch");
  };
  Timing t = time_runs(s, it, op);
  // The outputs of the last timed run (every rotation holds the same keys).
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<int32_t> idx = p.indices.to_host();
  std::vector<uint32_t> vals;
  if (!p.ragged) {
    if (p.bf16()) {
      std::vector<unsigned short> h = p.values_bf16.to_host();
      vals.assign(h.begin(), h.end());
    } else {
      std::vector<float> h = p.values_f32.to_host();
      vals.resize(h.size());
      if (!h.empty()) std::memcpy(vals.data(), h.data(), h.size() * 4);
    }
  }
  const size_t k = p.k;
  std::vector<uint32_t> keys(p.rows * k), ids(p.rows * k);
  std::vector<float> key_f32(p.keys == Keys::Ties ? p.rows * k : 0);
  size_t bad_index = 0, bad_value = 0;
  for (size_t r = 0; r < p.rows; ++r) {
    for (size_t j = 0; j < k; ++j) {
      const int32_t x = idx[r * k + j];
      const bool ok = x >= 0 && (uint32_t)x < p.host_len[r];
      bad_index += !ok;
      keys[r * k + j] = ok ? key_word(it, p, r, (uint64_t)x) : 0xFFFFFFFFu;
      ids[r * k + j] = (uint32_t)x;
      if (!key_f32.empty()) {  // 0 for a bad index: no tie-heavy key, and no NaN to sort
        if (ok) std::memcpy(&key_f32[r * k + j], &keys[r * k + j], 4);
      }
      if (ok && !vals.empty() && vals[r * k + j] != keys[r * k + j]) ++bad_value;
    }
    std::sort(keys.begin() + r * k, keys.begin() + (r + 1) * k, std::greater<uint32_t>());
    std::sort(ids.begin() + r * k, ids.begin() + (r + 1) * k);
  }
  std::string note = describe(p, v, c);
  if (bad_index) note += "; " + std::to_string(bad_index) + " indices outside their row";
  if (bad_value) note += "; " + std::to_string(bad_value) + " returned values differ from the keys at their indices";
  if (p.keys == Keys::Ties) {
    // The digest holds the index sets too (common.cuh: digest_ties), the keys alone beside it.
    auto [digest, keys_digest] = digest_ties(std::move(key_f32), ids, p.rows, k);
    emit_topk_result(it, v.impl, t, digest, keys_digest, digest_words(ids.data(), ids.size()), note);
  } else {
    emit_topk_result(it, v.impl, t, digest_words(keys.data(), keys.size()), "", digest_words(ids.data(), ids.size()),
                     note);
  }
}

bool run_topk(const PlanItem& it, cudaStream_t s) {
  Problem p;
  if (it.kind == "topk") {
    p.rows = 1, p.d = (uint32_t)it.p1, p.k = (uint32_t)it.p2;
    if (it.p1 >= (1ll << 32)) throw std::runtime_error("topk: FlashInfer's row length is a uint32");
  } else if (it.kind == "batched" || it.kind == "batched_ramp" || it.kind == "batched_bf16" ||
             it.kind == "batched_ragged" || it.kind == "batched_ties") {
    p.rows = (uint32_t)it.p1, p.d = (uint32_t)it.p2, p.k = (uint32_t)it.p3;
    p.keys = it.kind == "batched_ramp"   ? Keys::Ramp
             : it.kind == "batched_bf16" ? Keys::Bf16
             : it.kind == "batched_ties" ? Keys::Ties
                                         : Keys::F32;
    p.ragged = it.kind == "batched_ragged";
  } else {
    return false;
  }
  if (p.rows < 1 || p.k < 1 || p.k > p.d) throw std::runtime_error("top-k: expected rows >= 1 and 1 <= k <= d");
  const unsigned long long n = (unsigned long long)p.rows * p.d;
  for (int r = 0; r < std::max(1, it.rotations); ++r) {
    if (p.bf16()) {
      p.in_bf16.emplace_back((size_t)n);
      gen_bf16_bits(p.in_bf16.back().get(), n, it.seed, s);
    } else {
      p.in_f32.emplace_back((size_t)n);
      if (p.keys == Keys::Ramp) {
        gen_ramp_f32(p.in_f32.back().get(), n, it.seed, p.d, s);
      } else if (p.keys == Keys::Ties) {
        gen_tie_f32(p.in_f32.back().get(), n, it.seed, s);
      } else {
        gen_f32(p.in_f32.back().get(), n, it.seed, s);
      }
    }
  }
  p.indices = DeviceBuffer<int32_t>((size_t)p.rows * p.k);
  if (p.ragged) {
    p.lengths = DeviceBuffer<int32_t>(p.rows);
    p.offsets = DeviceBuffer<int32_t>(p.rows);
    gen_ragged_len(p.lengths.get(), p.rows, it.seed, p.d, p.k, s);
    CUDA_CHECK(cudaMemsetAsync(p.offsets.get(), 0, p.rows * sizeof(int32_t), s));
    for (long long len : ragged_lens(it)) p.host_len.push_back((uint32_t)len);
  } else {
    p.host_len.assign(p.rows, p.d);
    if (p.bf16()) {
      p.values_bf16 = DeviceBuffer<unsigned short>((size_t)p.rows * p.k);
    } else {
      p.values_f32 = DeviceBuffer<float>((size_t)p.rows * p.k);
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(s));

  for (const Variant& v : kVariants) {
    try {
      run_variant(it, p, v, s);
    } catch (const std::exception& e) {
      set_algo(nullptr);
      cudaGetLastError();
      if (cudaDeviceSynchronize() != cudaSuccess) throw;  // the context is gone: peer_main reports the rest
      emit_status(it.name, v.impl, "error", e.what());
    }
  }
  set_algo(nullptr);
  return true;
}

}  // namespace
}  // namespace oxb

int main(int argc, char** argv) {
  using namespace oxb;
  unsetenv("FLASHINFER_TOPK_ALGO");  // each variant sets its own
  return peer_main(argc, argv, "flashinfer_topk", "flashinfer", run_topk,
                   [](const PlanItem& it) { return "no FlashInfer top-k peer for kind " + it.kind; });
}
#endif  // OXB_FI_TOPK_KERNELS
