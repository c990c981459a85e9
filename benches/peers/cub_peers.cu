// The CUB / thrust peer program: `cub_peers PLAN`. Reads the plan that bench-gpu wrote (one
// workload per line: name kind seed p1 p2 p3 warmup reps rotations; '#' starts a comment), runs
// each workload it has an implementation for, and prints one JSON line per workload on stdout.
// Progress and diagnostics go to stderr.
//
// This unit also holds the generator kernels (gen.cuh, under OXB_GEN_KERNELS), so it is the only
// one that launches them; the others call gen_f32 / gen_u32 / gen_near_i32 below.
#define OXB_GEN_KERNELS
#include "common.cuh"

#include <fstream>
#include <sstream>

namespace oxb {

static unsigned grid_for(unsigned long long n) {
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

void gen_near_i32(int* out, unsigned long long n, unsigned long long seed, unsigned range, cudaStream_t s) {
  oxb_gen_near_i32<<<grid_for(n), 256, 0, s>>>(out, n, seed, range);
  CUDA_CHECK(cudaGetLastError());
}

// The generator check (kind "generator"): digests of the first p1 values of the f32 stream `seed`,
// the u32 stream `seed + 1` (full mask), the power-law lengths of stream `seed + 2` (max_exp p2)
// and the near-sorted int32 keys of stream `seed + 3` (i + rand(0, p3)), all generated on the
// device. bench-gpu compares them with its host (Rust) generator.
static void run_generator(const PlanItem& it, cudaStream_t s) {
  const unsigned long long n = (unsigned long long)it.p1;
  DeviceBuffer<float> f((size_t)n);
  DeviceBuffer<unsigned> u((size_t)n), pl((size_t)n);
  DeviceBuffer<int> near_keys((size_t)n);
  gen_f32(f.get(), n, it.seed, s);
  gen_u32(u.get(), n, it.seed + 1, 0xFFFFFFFFu, s);
  oxb_gen_powerlaw_len<<<grid_for(n), 256, 0, s>>>(pl.get(), n, it.seed + 2, (unsigned)it.p2);
  CUDA_CHECK(cudaGetLastError());
  gen_near_i32(near_keys.get(), n, it.seed + 3, (unsigned)it.p3, s);
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<unsigned> hu = u.to_host(), hpl = pl.to_host();
  std::printf(
      "{\"workload\":\"%s\",\"impl\":\"cub\",\"status\":\"ok\",\"digest_f32\":\"%s\",\"digest_u32\":\"%s\","
      "\"digest_powerlaw\":\"%s\",\"digest_near\":\"%s\"}\n",
      json_escape(it.name).c_str(), digest_f32(f.to_host()).c_str(), digest_words(hu.data(), hu.size()).c_str(),
      digest_words(hpl.data(), hpl.size()).c_str(), digest_i32(near_keys.to_host()).c_str());
  std::fflush(stdout);
}

static std::vector<PlanItem> read_plan(const char* path) {
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

}  // namespace oxb

int main(int argc, char** argv) {
  using namespace oxb;
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
    std::fprintf(stderr, "cub_peers: %s\n", e.what());
    return 1;
  }
  int failures = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const PlanItem& it = items[i];
    std::fprintf(stderr, "cub_peers: %s\n", it.name.c_str());
    try {
      bool handled = false;
      if (it.kind == "generator") {
        run_generator(it, s);
        handled = true;
      }
      handled = handled || run_cub_topk(it, s) || run_cub_batched_topk(it, s) || run_cub_segsort(it, s) ||
                run_cub_radix_sort(it, s) || run_thrust_setops(it, s) || run_cub_merge(it, s) ||
                run_thrust_batched_setops(it, s);
      if (!handled) emit_status(it.name, "cub", "unsupported", "no CUB/thrust peer for kind " + it.kind);
    } catch (const std::exception& e) {
      ++failures;
      emit_status(it.name, "cub", "error", e.what());
      // A non-sticky error (bad argument, out of memory) is cleared and the run goes on; after a
      // sticky one (e.g. an illegal address) the context is unusable, so the rest is reported.
      cudaGetLastError();
      if (cudaDeviceSynchronize() != cudaSuccess) {
        for (size_t j = i + 1; j < items.size(); ++j)
          emit_status(items[j].name, "cub", "error", "not run: an earlier CUDA error left the context unusable");
        return 1;
      }
    }
  }
  cudaStreamDestroy(s);
  return failures == 0 ? 0 : 1;
}
