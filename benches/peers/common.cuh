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
// - The unit that defines OXB_GEN_KERNELS (each peer program's main unit: cub_peers.cu,
//   flashinfer_routing.cu) also gets the generator launchers, the generator check and the plan
//   reader, at the end of this file.
#pragma once

#include "gen.cuh"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
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
// bf16 keys as their bits (oxb_bf16_bits).
void gen_bf16_bits(unsigned short* out, unsigned long long n, unsigned long long seed, cudaStream_t s);
// Tie-heavy f32 keys (oxb_tie_bits), as floats.
void gen_tie_f32(float* out, unsigned long long n, unsigned long long seed, cudaStream_t s);
// Router logits [tokens x experts] (oxb_route_logit).
void gen_route_logits(float* out, unsigned long long tokens, unsigned long long seed, unsigned experts,
                      cudaStream_t s);

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

// The row lengths of a ragged batched workload (kind "batched_ragged": oxb_ragged_len).
inline std::vector<long long> ragged_lens(const PlanItem& it) {
  std::vector<long long> lens((size_t)it.p1);
  for (long long r = 0; r < it.p1; ++r) lens[(size_t)r] = oxb_ragged_len(it.seed, (unsigned long long)r, (unsigned)it.p2, (unsigned)it.p3);
  return lens;
}

// The canonical digest of a tie-heavy batched result (kind "batched_ties"): each row's k keys
// sorted descending, rows in order, then each row's k indices (within the row) sorted ascending,
// rows in order: the selected set, so a selection that breaks the k-th key's ties otherwise
// than "the smaller index first" differs. `keys` and `indices` are [rows x k].
// Returns that digest and the keys' alone (for emit_result's keys_digest).
inline std::pair<std::string, std::string> digest_ties(std::vector<float> keys, std::vector<uint32_t> indices,
                                                       size_t rows, size_t k) {
  if (keys.size() != rows * k || indices.size() != rows * k) throw std::runtime_error("digest_ties: sizes");
  std::vector<uint32_t> w(2 * rows * k);
  for (size_t r = 0; r < rows; ++r) {
    std::sort(keys.begin() + r * k, keys.begin() + (r + 1) * k, [](float a, float b) { return a > b; });
    std::sort(indices.begin() + r * k, indices.begin() + (r + 1) * k);
  }
  std::memcpy(w.data(), keys.data(), rows * k * 4);
  std::memcpy(w.data() + rows * k, indices.data(), rows * k * 4);
  return {digest_words(w.data(), w.size()), digest_words(w.data(), rows * k)};
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
// `keys_digest`: for a result digested with its index sets (kind "batched_ties"), the digest of
// the keys alone (bench-gpu then tells lost candidates from other tied indices); empty: none.
inline void emit_result(const PlanItem& it, const char* impl, const Timing& t, const std::string& digest,
                        const std::string& note, const std::string& keys_digest = "") {
  const std::string keys = keys_digest.empty() ? "" : ",\"keys_digest\":\"" + keys_digest + "\"";
  std::printf(
      "{\"workload\":\"%s\",\"impl\":\"%s\",\"status\":\"ok\",\"median_ms\":%.6f,\"min_ms\":%.6f,\"reps\":%d,"
      "\"rotations\":%d,\"digest\":\"%s\"%s,\"note\":\"%s\"}\n",
      json_escape(it.name).c_str(), impl, t.median_ms, t.min_ms, t.reps, it.rotations, digest.c_str(), keys.c_str(),
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

#ifdef OXB_GEN_KERNELS
inline unsigned grid_for(unsigned long long n) {
  unsigned long long blocks = (n + 255) / 256;
  return (unsigned)std::min<unsigned long long>(std::max<unsigned long long>(blocks, 1), 65536);
}

void gen_f32(float* out, unsigned long long n, unsigned long long seed, cudaStream_t s) {
  oxb_gen_f32<<<grid_for(n), 256, 0, s>>>(out, n, seed);
  CUDA_CHECK(cudaGetLastError());
}

void gen_ramp_f32(float* out, unsigned long long n, unsigned long long seed, unsigned len, cudaStream_t s) {
  oxb_gen_ramp_f32<<<grid_for(n), 256, 0, s>>>(out, n, seed, len);
  CUDA_CHECK(cudaGetLastError());
}

void gen_u32(unsigned* out, unsigned long long n, unsigned long long seed, unsigned mask, cudaStream_t s) {
  oxb_gen_u32<<<grid_for(n), 256, 0, s>>>(out, n, seed, mask);
  CUDA_CHECK(cudaGetLastError());
}

void gen_bf16_bits(unsigned short* out, unsigned long long n, unsigned long long seed, cudaStream_t s) {
  oxb_gen_bf16<<<grid_for(n), 256, 0, s>>>(out, n, seed);
  CUDA_CHECK(cudaGetLastError());
}

void gen_tie_f32(float* out, unsigned long long n, unsigned long long seed, cudaStream_t s) {
  oxb_gen_tie_bits<<<grid_for(n), 256, 0, s>>>(reinterpret_cast<unsigned int*>(out), n, seed);
  CUDA_CHECK(cudaGetLastError());
}

void gen_near_i32(int* out, unsigned long long n, unsigned long long seed, unsigned range, cudaStream_t s) {
  oxb_gen_near_i32<<<grid_for(n), 256, 0, s>>>(out, n, seed, range);
  CUDA_CHECK(cudaGetLastError());
}

void gen_route_logits(float* out, unsigned long long tokens, unsigned long long seed, unsigned experts,
                      cudaStream_t s) {
  const unsigned long long n = tokens * experts;
  oxb_gen_route_logits<<<grid_for(n), 256, 0, s>>>(out, n, seed, experts);
  CUDA_CHECK(cudaGetLastError());
}

// The generator check (kind "generator"): digests of the first p1 values of the f32 stream `seed`,
// the u32 stream `seed + 1` (full mask), the power-law lengths of stream `seed + 2` (max_exp p2),
// the near-sorted int32 keys of stream `seed + 3` (i + rand(0, p3)) and the router logits of
// stream `seed + 4` over 256 experts, all generated on the device. bench-gpu compares them with
// its host (Rust) generator.
void run_generator(const PlanItem& it, cudaStream_t s, const char* impl) {
  const unsigned long long n = (unsigned long long)it.p1;
  DeviceBuffer<float> f((size_t)n), route((size_t)n);
  DeviceBuffer<unsigned> u((size_t)n), pl((size_t)n);
  DeviceBuffer<int> near_keys((size_t)n);
  gen_f32(f.get(), n, it.seed, s);
  gen_u32(u.get(), n, it.seed + 1, 0xFFFFFFFFu, s);
  oxb_gen_powerlaw_len<<<grid_for(n), 256, 0, s>>>(pl.get(), n, it.seed + 2, (unsigned)it.p2);
  CUDA_CHECK(cudaGetLastError());
  gen_near_i32(near_keys.get(), n, it.seed + 3, (unsigned)it.p3, s);
  gen_route_logits(route.get(), n / 256, it.seed + 4, 256, s);
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<unsigned> hu = u.to_host(), hpl = pl.to_host();
  std::printf(
      "{\"workload\":\"%s\",\"impl\":\"%s\",\"status\":\"ok\",\"digest_f32\":\"%s\",\"digest_u32\":\"%s\","
      "\"digest_powerlaw\":\"%s\",\"digest_near\":\"%s\",\"digest_route\":\"%s\"}\n",
      json_escape(it.name).c_str(), impl, digest_f32(f.to_host()).c_str(), digest_words(hu.data(), hu.size()).c_str(),
      digest_words(hpl.data(), hpl.size()).c_str(), digest_i32(near_keys.to_host()).c_str(),
      digest_f32(route.to_host()).c_str());
  std::fflush(stdout);
}

// The plan: one workload per line (name kind seed p1 p2 p3 warmup reps rotations), '#' starts a
// comment.
std::vector<PlanItem> read_plan(const char* path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error(std::string("cannot open plan ") + path);
  std::vector<PlanItem> items;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    PlanItem it;
    if (!(ss >> it.name >> it.kind >> it.seed >> it.p1 >> it.p2 >> it.p3 >> it.warmup >> it.reps >> it.rotations))
      throw std::runtime_error("bad plan line: " + line);
    items.push_back(it);
  }
  return items;
}

// A peer program's main: reads the plan, then per item runs the generator check or `handle`
// (false: no such operation here, reported as unsupported with `unsupported(item)`); an exception
// is reported as an error line for that item. A non-sticky error (bad argument, out of memory)
// is cleared and the run goes on; after a sticky one (e.g. an illegal address) the context is
// unusable, so the rest is reported as not run.
int peer_main(int argc, char** argv, const char* program, const char* impl,
              const std::function<bool(const PlanItem&, cudaStream_t)>& handle,
              const std::function<std::string(const PlanItem&)>& unsupported) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PLAN\n", argv[0]);
    return 2;
  }
  std::vector<PlanItem> items;
  cudaStream_t s = nullptr;
  try {
    items = read_plan(argv[1]);
    CUDA_CHECK(cudaSetDevice(0));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
  int failures = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const PlanItem& it = items[i];
    std::fprintf(stderr, "%s: %s\n", program, it.name.c_str());
    try {
      if (it.kind == "generator") {
        run_generator(it, s, impl);
      } else if (!handle(it, s)) {
        emit_status(it.name, impl, "unsupported", unsupported(it));
      }
    } catch (const std::exception& e) {
      ++failures;
      emit_status(it.name, impl, "error", e.what());
      cudaGetLastError();
      if (cudaDeviceSynchronize() != cudaSuccess) {
        for (size_t j = i + 1; j < items.size(); ++j)
          emit_status(items[j].name, impl, "error", "not run: an earlier CUDA error left the context unusable");
        return 1;
      }
    }
  }
  cudaStreamDestroy(s);
  return failures == 0 ? 0 : 1;
}
#endif  // OXB_GEN_KERNELS

}  // namespace oxb
