// The FlashInfer peer program: `flashinfer_routing PLAN` (the protocol of cub_peers.cu, impl
// "flashinfer"). Built by build-flashinfer.sh from the pack that get-flashinfer.sh makes.
//
// DeepSeek-V3 routing: FlashInfer 0.7.2.post1's `fused_topk_deepseek` (default backend). Its
// Python wrapper checks the arguments and calls the tvm-ffi binding NoAuxTc, which checks them
// again, picks the types from the tensors' dtypes and calls
// tensorrt_llm::kernels::invokeNoAuxTc<InputT, BiasT, OutputT, IdxT>
// (data/csrc/fused_moe/noAuxTcKernels.cu): one launch of deepseek_v3_topk_kernel, a block of
// 256 threads per token. This program calls invokeNoAuxTc<float, float, float, int32_t> (f32
// logits, bias and weights, as NoAuxTc does for f32 tensors) directly, with the wrapper's
// default launch_with_pdl = true, on FlashInfer's own source compiled with the flags of
// FlashInfer's JIT for that module (build-flashinfer.sh lists them). So the time is the kernel's
// launch and run, without the wrapper's host work (argument checks and the dispatch through
// torch's custom-op layer and tvm-ffi), which the events would count at decode sizes.
//
// kinds: "route_deepseek_v3"  p1 = tokens, p2 = experts (256), p3 = k (8); 8 groups, top 4, weights
//                             renormalised, times 2.5 (workloads.rs: Router). Logits from gen.cuh
//                             (oxb_route_logit); the bias: 256 f32 zeros.
//        "route_softmax"      unsupported: FlashInfer's softmax routing runs on SM 10.x/12.x only
//                             (see kSoftmaxUnsupported).
//
// Besides the digest (each token's ids sorted ascending), the note reports how many tokens' ids
// differ from a host reference in f64 and how close those tokens came to another answer (the
// relative margin between the last kept group and the best dropped one): the kernel's sigmoid is
// 0.5 tanh(x / 2) + 0.5, and the JIT's -use_fast_math turns tanhf into the tanh.approx.f32
// instruction (relative error about 2^-11), more than the closest group margins the generator
// makes (about 2e-5). Where the build also linked the kernel compiled without -use_fast_math
// (OXB_FI_PRECISE, build-flashinfer.sh), the same count is given for it: a diagnostic of that
// cause, not timed and not a column.
#define OXB_GEN_KERNELS
#include "common.cuh"

#include <array>
#include <cmath>
#include <optional>

#include "flashinfer/trtllm/fused_moe/noAuxTcKernels.h"

#ifdef OXB_FI_PRECISE
// The same source compiled without -use_fast_math, its entry points renamed at compile time
// (build-flashinfer.sh) so both link into this program.
namespace tensorrt_llm::kernels {
template <typename InputT, typename BiasT, typename OutputT, typename IdxT>
void invokeNoAuxTcPrecise(InputT* scores, BiasT* bias, OutputT* topk_values, IdxT* topk_indices,
                          int64_t const num_tokens, int64_t const num_experts, int64_t const n_group,
                          int64_t const topk_group, int64_t const topk, double const routed_scaling_factor,
                          bool const launch_with_pdl, cudaStream_t const stream, int16_t* routing_replay_out);
}
#endif

namespace oxb {

constexpr int kGroups = 8, kTopGroups = 4;
constexpr double kScale = 2.5;
const char* const kSoftmaxUnsupported =
    "FlashInfer has no softmax router that runs on Hopper: its softmax routing (trtllm_gen_routing, "
    "RoutingMethodType Renormalize / RenormalizeNaive) is built for SM 10.x and 12.x only "
    "(jit/fused_moe.py gen_trtllm_gen_routing_module: supported_major_versions [10, 12]; "
    "fused_moe/trtllm_gen_routing.py: _TRTLLM_GEN_ROUTING_SUPPORTED_CC = [100, 103, 120, 121]); "
    "on SM90 softmax routing exists only inside mono_moe's fused fp8 MoE (at most 8 tokens)";

// The bare launch (gen.cuh: oxb_empty, one block of 128 threads), timed like the router, once.
static Timing bare_launch(cudaStream_t s, const PlanItem& it) {
  static std::optional<Timing> t;
  if (!t) {
    t = time_runs(s, it, [&](int) {
      oxb_empty<<<1, 128, 0, s>>>();
      CUDA_CHECK(cudaGetLastError());
    });
  }
  return *t;
}

struct HostRoute {
  std::vector<int> ids;  // ascending
  double group_margin;   // (last kept group - best dropped group) / last kept group
};

// DeepSeek-V3's routing of one token in f64 with a zero bias (the logits make it unambiguous:
// workloads.rs, route_ids, holds the same steps).
static HostRoute v3_reference(unsigned long long seed, unsigned long long token, int experts, int k) {
  std::vector<double> s(experts);
  for (int e = 0; e < experts; ++e) s[e] = 1.0 / (1.0 + std::exp(-(double)oxb_route_logit(seed, token, e, experts)));
  const int per_group = experts / kGroups;
  std::vector<double> group_score(kGroups);
  for (int g = 0; g < kGroups; ++g) {
    std::vector<double> v(s.begin() + g * per_group, s.begin() + (g + 1) * per_group);
    std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<double>());
    group_score[g] = v[0] + v[1];
  }
  std::vector<int> groups(kGroups);
  for (int g = 0; g < kGroups; ++g) groups[g] = g;
  std::stable_sort(groups.begin(), groups.end(), [&](int a, int b) { return group_score[a] > group_score[b]; });
  const double last = group_score[groups[kTopGroups - 1]];
  std::vector<int> candidates;
  for (int i = 0; i < kTopGroups; ++i)
    for (int j = 0; j < per_group; ++j) candidates.push_back(groups[i] * per_group + j);
  std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return s[a] > s[b]; });
  HostRoute r{std::vector<int>(candidates.begin(), candidates.begin() + k),
              (last - group_score[groups[kTopGroups]]) / last};
  std::sort(r.ids.begin(), r.ids.end());
  return r;
}

// How a device result's ids (canonical: sorted per token) compare with the f64 reference.
static std::string compare_with_reference(const std::vector<int>& ids, const std::vector<HostRoute>& ref, int k) {
  size_t differ = 0;
  double worst = 0, closest = INFINITY;
  for (size_t t = 0; t < ref.size(); ++t) {
    closest = std::min(closest, ref[t].group_margin);
    if (!std::equal(ref[t].ids.begin(), ref[t].ids.end(), ids.begin() + t * k)) {
      ++differ;
      worst = std::max(worst, ref[t].group_margin);
    }
  }
  char buf[256];
  if (differ == 0) {
    std::snprintf(buf, sizeof buf, "ids equal an f64 reference for all %zu tokens (closest kept-group margin %.1e)",
                  ref.size(), closest);
  } else {
    std::snprintf(buf, sizeof buf,
                  "%zu of %zu tokens' ids differ from an f64 reference, each with a kept-group margin of at most "
                  "%.1e (relative; the closest of all tokens %.1e)",
                  differ, ref.size(), worst, closest);
  }
  return buf;
}

using Invoke = void (*)(float*, float*, float*, int32_t*, int64_t, int64_t, int64_t, int64_t, int64_t, double, bool,
                        cudaStream_t, int16_t*);

static bool run_route(const PlanItem& it, cudaStream_t s) {
  if (it.kind == "route_softmax") {
    emit_status(it.name, "flashinfer", "unsupported", kSoftmaxUnsupported);
    return true;
  }
  if (it.kind != "route_deepseek_v3") return false;
  const long long tokens = it.p1, experts = it.p2, k = it.p3;
  if (experts != 256 || k != 8 || tokens < 1) throw std::runtime_error("route_deepseek_v3: expected 256 experts, k 8");

  std::vector<DeviceBuffer<float>> in;
  for (int r = 0; r < std::max(1, it.rotations); ++r) {
    in.emplace_back((size_t)(tokens * experts));
    gen_route_logits(in.back().get(), tokens, it.seed, (unsigned)experts, s);
  }
  DeviceBuffer<float> bias((size_t)experts), weights((size_t)(tokens * k));
  DeviceBuffer<int32_t> ids((size_t)(tokens * k));
  CUDA_CHECK(cudaMemsetAsync(bias.get(), 0, experts * sizeof(float), s));

  const Invoke fast = &tensorrt_llm::kernels::invokeNoAuxTc<float, float, float, int32_t>;
  auto route = [&](Invoke invoke, int r) {
    invoke(in[r].get(), bias.get(), weights.get(), ids.get(), tokens, experts, kGroups, kTopGroups, k, kScale,
           /*launch_with_pdl=*/true, s, /*routing_replay_out=*/nullptr);
    CUDA_CHECK(cudaGetLastError());
  };
  Timing t = time_runs(s, it, [&](int r) { route(fast, r); });
  CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<int> canonical = ids.to_host();
  for (long long i = 0; i < tokens; ++i) std::sort(canonical.begin() + i * k, canonical.begin() + (i + 1) * k);

  std::vector<HostRoute> ref((size_t)tokens);
  for (long long i = 0; i < tokens; ++i) ref[i] = v3_reference(it.seed, i, (int)experts, (int)k);
  std::string note = compare_with_reference(canonical, ref, (int)k);
#ifdef OXB_FI_PRECISE
  {
    const Invoke precise = &tensorrt_llm::kernels::invokeNoAuxTcPrecise<float, float, float, int32_t>;
    route(precise, 0);
    CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<int> p = ids.to_host();
    for (long long i = 0; i < tokens; ++i) std::sort(p.begin() + i * k, p.begin() + (i + 1) * k);
    note += "; the same kernel built without -use_fast_math (tanhf, not tanh.approx; not timed): " +
            compare_with_reference(p, ref, (int)k);
  }
#endif
  Timing launch = bare_launch(s, it);
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "; bare launch %.4f ms (empty kernel, 1 block of 128 threads, median of %d), flashinfer/launch %.2f",
                launch.median_ms, launch.reps, t.median_ms / launch.median_ms);
  emit_result(it, "flashinfer", t, digest_i32(canonical),
              "fused_topk_deepseek's kernel: tensorrt_llm::kernels::invokeNoAuxTc<float, float, float, int32_t> "
              "(FlashInfer 0.7.2.post1, default backend, built with its JIT's flags), launch_with_pdl, "
              "8 groups, top 4, k 8, scale 2.5; " +
                  note + buf);
  return true;
}

}  // namespace oxb

int main(int argc, char** argv) {
  using namespace oxb;
  return peer_main(argc, argv, "flashinfer_routing", "flashinfer", run_route,
                   [](const PlanItem& it) { return "no FlashInfer peer for kind " + it.kind; });
}
