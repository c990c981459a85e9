// oxicub benchmark peers: what every peer translation unit shares. Host-side C++20.
//
// - CUDA_CHECK: every CUDA return code is checked; a failure throws, and the driver in
//   cub_peers.cu reports it as an error line for that workload.
// - Plan: one workload per line, written by bench-gpu (benches/gpu/peers.rs holds the format).
// - time_runs: warm-up, then `reps` runs, each between two CUDA events on the peer's stream,
//   rotating over `rotations` identical copies of the input so that small inputs are not served
//   from a warm L2; returns the median and the minimum in milliseconds.
// - digest: the canonical result digest shared with bench-gpu (Rust) and torch_peers.py (numpy):
//   over 32-bit words w[0..n): sum_i fmix64((i << 32) | w[i]) mod 2^64, printed as "n:%016x".
//   Position-sensitive, so it checks order as well as content. A result with values (sort pairs,
//   argsort) is one sequence of words: the keys, then the values' little-endian 32-bit words
//   (an 8-byte value is two words, low first): digest_pairs.
#pragma once

#include "gen.cuh"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#define CUDA_CHECK(expr)                                                                       \
  do {                                                                                         \
    cudaError_t oxb_err_ = (expr);                                                             \
    if (oxb_err_ != cudaSuccess) {                                                             \
      throw std::runtime_error(std::string(#expr) + " failed at " + __FILE__ + ":" +          \
                               std::to_string(__LINE__) + ": " + cudaGetErrorName(oxb_err_) + \
                               " (" + cudaGetErrorString(oxb_err_) + ")");                     \
    }                                                                                          \
  } while (0)

namespace oxb {

struct PlanItem {
  std::string name;
  std::string kind;
  unsigned long long seed = 0;
  long long p1 = 0, p2 = 0, p3 = 0;
  int warmup = 0, reps = 0, rotations = 1;
};

// Owning device buffer (cudaMalloc/cudaFree); no copies, moves only.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n > 0) CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);  // nothing sensible to do with an error in a destructor
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  std::vector<T> to_host() const {
    std::vector<T> h(n_);
    if (n_ > 0) CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// thrust allocates temporary storage on every call unless it is given an allocator, as a user who
// cares gives it one (thrust::cuda::par(alloc)): this one keeps one device block and hands it out
// again when it is large enough.
class CachingAllocator {
 public:
  using value_type = char;
  CachingAllocator() = default;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator() {
    if (block_) cudaFree(block_);
  }
  char* allocate(std::ptrdiff_t n) {
    if (in_use_) throw std::runtime_error("CachingAllocator: one allocation at a time");
    if ((size_t)n > size_) {
      if (block_) CUDA_CHECK(cudaFree(block_));
      block_ = nullptr;
      size_ = 0;
      CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&block_), (size_t)n));
      size_ = (size_t)n;
    }
    in_use_ = true;
    return block_;
  }
  void deallocate(char*, size_t) { in_use_ = false; }

 private:
  char* block_ = nullptr;
  size_t size_ = 0;
  bool in_use_ = false;
};

// Fill `out` on `s` from the shared generator (gen.cuh); defined in cub_peers.cu, the unit that
// holds the generator kernels.
void gen_f32(float* out, unsigned long long n, unsigned long long seed, cudaStream_t s);
void gen_ramp_f32(float* out, unsigned long long n, unsigned long long seed, unsigned len, cudaStream_t s);
void gen_u32(unsigned* out, unsigned long long n, unsigned long long seed, unsigned mask, cudaStream_t s);
void gen_near_i32(int* out, unsigned long long n, unsigned long long seed, unsigned range, cudaStream_t s);

// The digest described at the top of this file.
inline std::string digest_words(const uint32_t* w, size_t n) {
  unsigned long long sum = 0;
  for (size_t i = 0; i < n; ++i) sum += oxb_fmix64(((unsigned long long)i << 32) | w[i]);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu:%016llx", n, sum);
  return buf;
}

inline std::string digest_f32(const std::vector<float>& v) {
  static_assert(sizeof(float) == 4);
  std::vector<uint32_t> w(v.size());
  if (!v.empty()) std::memcpy(w.data(), v.data(), v.size() * 4);
  return digest_words(w.data(), w.size());
}

inline std::string digest_i32(const std::vector<int>& v) {
  std::vector<uint32_t> w(v.size());
  if (!v.empty()) std::memcpy(w.data(), v.data(), v.size() * 4);
  return digest_words(w.data(), w.size());
}

// Keys and their values as one digest: the key words at [0, n), then the value words from n (a
// 4-byte value at word n + j, an 8-byte value at n + 2j (low) and n + 2j + 1 (high); this host is
// little-endian, like every CUDA host).
template <class K, class V>
inline std::string digest_pairs(const std::vector<K>& keys, const std::vector<V>& values) {
  static_assert(sizeof(K) == 4 && sizeof(V) % 4 == 0, "keys of 4 bytes, values of 4 or 8");
  if (keys.size() != values.size()) throw std::runtime_error("digest_pairs: keys and values differ in length");
  const size_t n = keys.size(), vw = sizeof(V) / 4;
  std::vector<uint32_t> w(n + n * vw);
  if (n > 0) {
    std::memcpy(w.data(), keys.data(), n * sizeof(K));
    std::memcpy(w.data() + n, values.data(), n * sizeof(V));
  }
  return digest_words(w.data(), w.size());
}

// Top-k canonical form: each segment's k keys sorted descending, segments in order.
inline void canonical_topk(std::vector<float>& keys, size_t segments, size_t k) {
  for (size_t s = 0; s < segments; ++s)
    std::sort(keys.begin() + s * k, keys.begin() + (s + 1) * k, [](float a, float b) { return a > b; });
}

struct Timing {
  double median_ms = 0, min_ms = 0;
  int reps = 0;
};

// Runs `op(rotation)` warmup times, then `reps` times between events on `stream`.
// `op` must only enqueue work on `stream` (or synchronize it itself, as thrust does when it
// returns a count: that host wait is then part of the time, as it is for thrust's users).
inline Timing time_runs(cudaStream_t stream, const PlanItem& it, const std::function<void(int)>& op) {
  int rot = std::max(1, it.rotations);
  for (int i = 0; i < it.warmup; ++i) op(i % rot);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<cudaEvent_t> ev(2 * (size_t)it.reps);
  for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
  std::vector<double> ms((size_t)it.reps);
  try {
    for (int r = 0; r < it.reps; ++r) {
      CUDA_CHECK(cudaEventRecord(ev[2 * r], stream));
      op(r % rot);
      CUDA_CHECK(cudaEventRecord(ev[2 * r + 1], stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int r = 0; r < it.reps; ++r) {
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, ev[2 * r], ev[2 * r + 1]));
      ms[r] = t;
    }
  } catch (...) {
    for (auto e : ev) cudaEventDestroy(e);
    throw;
  }
  for (auto e : ev) CUDA_CHECK(cudaEventDestroy(e));
  Timing t;
  t.reps = it.reps;
  std::sort(ms.begin(), ms.end());
  t.min_ms = ms.empty() ? 0 : ms.front();
  t.median_ms = ms.empty() ? 0 : (ms.size() % 2 ? ms[ms.size() / 2] : 0.5 * (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]));
  return t;
}

inline std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if ((unsigned char)c < 0x20) {
      o += ' ';
    } else {
      o += c;
    }
  }
  return o;
}

// One result line on stdout, the protocol bench-gpu reads (benches/gpu/peers.rs).
inline void emit_result(const PlanItem& it, const char* impl, const Timing& t, const std::string& digest,
                        const std::string& note) {
  std::printf(
      "{\"workload\":\"%s\",\"impl\":\"%s\",\"status\":\"ok\",\"median_ms\":%.6f,\"min_ms\":%.6f,\"reps\":%d,"
      "\"rotations\":%d,\"digest\":\"%s\",\"note\":\"%s\"}\n",
      json_escape(it.name).c_str(), impl, t.median_ms, t.min_ms, t.reps, it.rotations, digest.c_str(),
      json_escape(note).c_str());
  std::fflush(stdout);
}

inline void emit_status(const std::string& workload, const char* impl, const char* status, const std::string& note) {
  std::printf("{\"workload\":\"%s\",\"impl\":\"%s\",\"status\":\"%s\",\"note\":\"%s\"}\n",
              json_escape(workload).c_str(), impl, status, json_escape(note).c_str());
  std::fflush(stdout);
}

// Entry points of the translation units (each compiled separately, in parallel).
// Each returns false when it does not handle the item's kind.
bool run_cub_topk(const PlanItem& it, cudaStream_t s);
bool run_cub_batched_topk(const PlanItem& it, cudaStream_t s);
bool run_cub_segsort(const PlanItem& it, cudaStream_t s);
bool run_cub_radix_sort(const PlanItem& it, cudaStream_t s);
bool run_thrust_setops(const PlanItem& it, cudaStream_t s);
bool run_cub_merge(const PlanItem& it, cudaStream_t s);
bool run_thrust_batched_setops(const PlanItem& it, cudaStream_t s);

}  // namespace oxb
