#!/usr/bin/env bash
# Builds the cub-main peer program (cub_main_batched.cu against CCCL main's headers):
#
#   bash benches/peers/build-cub-main.sh BUILD_DIR CCCL_MAIN_INCLUDE
#
# CCCL_MAIN_INCLUDE: the include tree from get-cccl-main.sh (.cccl-main/include, or its pack
# unpacked). Output: BUILD_DIR/cub_main_peers. cub_main_batched.cu is compiled once per part
# (-DOXB_CM_PART=0..4, each instantiating its share of the kernels), JOBS at a time (default: the
# number of cores), then linked with the CUDA runtime linked statically (nvcc's default).
# Overrides: NVCC, JOBS. Each part's log is BUILD_DIR/part<n>.build.log.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR CCCL_MAIN_INCLUDE" >&2; exit 2; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$1"
cccl="$(cd "$2" && pwd)"
nvcc="${NVCC:-nvcc}"
jobs="${JOBS:-$(nproc)}"
[ -f "$cccl/cub/agent/agent_batched_topk_cluster.cuh" ] ||
  { echo "build-cub-main.sh: $cccl is not a CCCL main include tree (get-cccl-main.sh)" >&2; exit 2; }
mkdir -p "$build"
# sm_90 (not sm_90a) suffices: the cluster backend needs only SM 9.0 features.
flags=(-O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -I "$cccl" -Xcompiler -Wall)
src="$root/benches/peers/cub_main_batched.cu"
parts=(1 2 3 4 0)   # the heaviest first
. "$root/benches/peers/nvcc-build.sh"
compile_one() {
  "$nvcc" "${flags[@]}" -DOXB_CM_PART="${1#part}" -c "$src" -o "$build/$1.o"
}
t0=$SECONDS
nvcc_compile_all build-cub-main.sh "${parts[@]/#/part}"
nvcc_link "$build/cub_main_peers" "$build"/part{0,1,2,3,4}.o
echo "built $build/cub_main_peers in $((SECONDS - t0)) s ($(head -n 1 "$cccl/VERSION" 2>/dev/null || echo 'CCCL main'))"
