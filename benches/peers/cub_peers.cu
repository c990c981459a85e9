// The CUB / thrust peer program: `cub_peers PLAN`. Reads the plan that bench-gpu wrote (one
// workload per line: name kind seed p1 p2 p3 warmup reps rotations; '#' starts a comment), runs
// each workload it has an implementation for, and prints one JSON line per workload on stdout.
// Progress and diagnostics go to stderr.
//
// This unit also holds the generator kernels (gen.cuh, under OXB_GEN_KERNELS), so it is the only
// one that launches them; the others call gen_f32 / gen_u32 / gen_near_i32 (common.cuh).
#define OXB_GEN_KERNELS
#include "common.cuh"

int main(int argc, char** argv) {
  using namespace oxb;
  return peer_main(
      argc, argv, "cub_peers", "cub",
      [](const PlanItem& it, cudaStream_t s) {
        return run_cub_topk(it, s) || run_cub_batched_topk(it, s) || run_cub_segsort(it, s) ||
               run_cub_radix_sort(it, s) || run_thrust_setops(it, s) || run_cub_merge(it, s) ||
               run_thrust_batched_setops(it, s);
      },
      [](const PlanItem& it) {
        return it.kind.rfind("route_", 0) == 0 ? std::string("CUB and thrust have no MoE router")
                                               : "no CUB/thrust peer for kind " + it.kind;
      });
}
