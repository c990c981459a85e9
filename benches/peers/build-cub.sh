#!/usr/bin/env bash
# Builds the CUB/thrust peer program (cub_peers.cu and the units it calls, against CCCL 3.5):
#
#   bash benches/peers/build-cub.sh BUILD_DIR CCCL_INCLUDE
#
# CCCL_INCLUDE: the header tree from get-cccl.sh (.cccl/include, or its pack unpacked). Output:
# BUILD_DIR/cub_peers, the CUDA runtime linked statically (nvcc's default). The units compile
# JOBS at a time (default: the number of cores). Overrides: NVCC, JOBS. Each unit's log is
# BUILD_DIR/<unit>.build.log. Used by run.sh (on the GPU machine) and prebuild.sh (anywhere).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR CCCL_INCLUDE" >&2; exit 2; }
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$1"
cccl="$(cd "$2" && pwd)"
nvcc="${NVCC:-nvcc}"
jobs="${JOBS:-$(nproc)}"
[ -f "$cccl/cub/device/device_batched_topk.cuh" ] ||
  { echo "build-cub.sh: $cccl is not a CCCL 3.5 include tree (get-cccl.sh)" >&2; exit 2; }
mkdir -p "$build"
flags=(-O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -I "$cccl" -Xcompiler -Wall)
units=(cub_peers cub_topk cub_batched cub_segsort cub_radix thrust_setops cub_merge thrust_batched_setops)
. "$root/benches/peers/nvcc-build.sh"
compile_one() {
  "$nvcc" "${flags[@]}" -c "$root/benches/peers/$1.cu" -o "$build/$1.o"
}
t0=$SECONDS
nvcc_compile_all build-cub.sh "${units[@]}"
objs=()
for unit in "${units[@]}"; do objs+=("$build/$unit.o"); done
nvcc_link "$build/cub_peers" "${objs[@]}"
echo "built $build/cub_peers in $((SECONDS - t0)) s"
