#!/usr/bin/env bash
# Builds the benchmark's peer programs on a machine with no GPU, into .peers/ (git-ignored),
# which run.sh uses instead of building them: the GPU machine's device time is short, and these
# builds take minutes (CUB's cluster DeviceBatchedTopK alone ~2 min on 2 cores, FlashInfer's
# top-k ~1 min). Carry .peers (about 15 MB) with .device.
#
#   bash benches/peers/prebuild.sh
#
# Builds what its sources are there for (run the get-*.sh scripts first, on a machine with
# network):
#   .peers/cub_peers          CUB/thrust 3.5 (.cccl/include, from get-cccl.sh)
#   .peers/cub_main_peers     CUB from CCCL main (.cccl-main/include, from get-cccl-main.sh)
#   .peers/flashinfer/        flashinfer_routing (+ libtvm_ffi.so) and flashinfer_topk
#                             (.flashinfer/flashinfer-routing.tar.gz, from get-flashinfer.sh)
# with nvcc 13.0 from NVIDIA's wheels (.ci/nvcc-wheel.sh), the GPU machine's toolkit version;
# the CUDA runtime is linked statically, so the programs need only the driver there. The
# builds are the ones run.sh makes (build-cub.sh, build-cub-main.sh, build-flashinfer.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
. .ci/nvcc-wheel.sh
nvcc="$cuda/bin/nvcc"
out="$root/.peers"
grep -qx '/.peers/' .git/info/exclude 2>/dev/null || echo '/.peers/' >> .git/info/exclude
# Every program is rebuilt (or removed, when its sources are missing): .peers/SOURCE vouches for
# all of them, and run.sh refuses them when the peer sources changed since.
rm -rf "$out"
mkdir -p "$out"
log="$out/prebuild.log"
: > "$log"
t0=$SECONDS
built=()

if [ -f .cccl/include/cub/device/device_batched_topk.cuh ]; then
  NVCC="$nvcc" bash benches/peers/build-cub.sh "$out/cub-build" .cccl/include >> "$log" 2>&1
  mv "$out/cub-build/cub_peers" "$out/cub_peers"
  rm -rf "$out/cub-build"
  built+=(cub_peers)
else
  echo "prebuild.sh: no .cccl/include (benches/peers/get-cccl.sh): cub_peers not built"
fi

if [ -f .cccl-main/include/cub/agent/agent_batched_topk_cluster.cuh ]; then
  NVCC="$nvcc" bash benches/peers/build-cub-main.sh "$out/cub-main" .cccl-main/include >> "$log" 2>&1
  mv "$out/cub-main/cub_main_peers" "$out/cub_main_peers"
  rm -rf "$out/cub-main"
  built+=(cub_main_peers)
else
  echo "prebuild.sh: no .cccl-main/include (benches/peers/get-cccl-main.sh): cub_main_peers not built"
fi

if [ -f .flashinfer/flashinfer-routing.tar.gz ]; then
  pack="$(mktemp -d)"
  tar -C "$pack" -xzf .flashinfer/flashinfer-routing.tar.gz
  NVCC="$nvcc" bash benches/peers/build-flashinfer.sh "$out/flashinfer-build" "$pack" >> "$log" 2>&1
  mkdir -p "$out/flashinfer"
  for f in flashinfer_routing flashinfer_topk libtvm_ffi.so; do
    mv "$out/flashinfer-build/$f" "$out/flashinfer/$f"
  done
  cp "$pack/VERSIONS" "$out/flashinfer/VERSIONS"
  rm -rf "$out/flashinfer-build" "$pack"
  built+=(flashinfer)
else
  echo "prebuild.sh: no FlashInfer pack (benches/peers/get-flashinfer.sh): flashinfer peers not built"
fi
bash benches/peers/sources-hash.sh > "$out/SOURCE"
echo "prebuild.sh: built ${built[*]:-nothing} in $((SECONDS - t0)) s into $out (log: $log)"
