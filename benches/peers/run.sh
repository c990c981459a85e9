#!/usr/bin/env bash
# oxicub GPU benchmark: builds the peers and runs everything; one command on a GPU machine.
#
#   bash benches/peers/run.sh [OUT_DIR] [-- extra bench-gpu arguments, e.g. --filter topk]
#
# Needs, on that machine: .device/bin/bench-gpu (from ../shared/tools/gpu-pack), nvcc, a python3
# with torch + cupy + numpy, and the peers. Each peer program is taken from .peers/ when
# benches/peers/prebuild.sh built it there on a CPU machine (carry .peers: the builds take
# minutes of device time), else built here:
#   CUB/thrust 3.5   from the CCCL 3.5 headers (benches/peers/get-cccl.sh: .cccl/include, or its
#                    2 MiB pack .cccl/cccl-include.tar.gz, unpacked here to /tmp)
#   CUB main         from CCCL main's headers (get-cccl-main.sh: .cccl-main/cccl-main-include.tar.gz)
#   FlashInfer       routing and top-k, from FlashInfer's pack (get-flashinfer.sh:
#                    .flashinfer/flashinfer-routing.tar.gz; build-flashinfer.sh)
# the last two in parallel with the first. A peer that is missing or does not build has its rows
# say why (no-peer.sh). Writes into OUT_DIR (default $OUT, else /tmp/oxicub-bench):
#   NAME.md    the table (Markdown, with date, device, command), ready to commit as results/NAME.md
#   NAME.json  the same, machine-readable
#   NAME.svg   time / floor per workload and implementation
#   NAME.log   this script's whole output (peer builds and logs included)
# NAME is h100 / h200 from the GPU's name (override with NAME=...), else gpu-bench.
# Overrides: BENCH_GPU, NVCC, CCCL_INCLUDE, FLASHINFER_PACK, CCCL_MAIN_PACK, PEERS_PREBUILT,
# PYTHON, PEER_BUILD_DIR.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
out="${OUT:-/tmp/oxicub-bench}"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then out="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
extra=("$@")
mkdir -p "$out"

bench="${BENCH_GPU:-$root/.device/bin/bench-gpu}"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
[ -x "$nvcc" ] || nvcc="$(command -v nvcc || true)"
cccl="${CCCL_INCLUDE:-$root/.cccl/include}"
if [ ! -d "$cccl" ] && [ -z "${CCCL_INCLUDE:-}" ] && [ -f "$root/.cccl/cccl-include.tar.gz" ]; then
  mkdir -p /tmp/oxicub-cccl
  tar -C /tmp/oxicub-cccl -xzf "$root/.cccl/cccl-include.tar.gz"
  cccl=/tmp/oxicub-cccl/include
fi
fi_pack="${FLASHINFER_PACK:-$root/.flashinfer/flashinfer-routing.tar.gz}"
cm_pack="${CCCL_MAIN_PACK:-$root/.cccl-main/cccl-main-include.tar.gz}"
prebuilt="${PEERS_PREBUILT:-$root/.peers}"
# Prebuilt peers count only when built from these sources (prebuild.sh records their hash).
if [ -d "$prebuilt" ] && [ "$(cat "$prebuilt/SOURCE" 2>/dev/null)" != "$(bash benches/peers/sources-hash.sh)" ]; then
  echo "run.sh: $prebuilt was built from other peer sources (run benches/peers/prebuild.sh again): building here" >&2
  prebuilt=/nonexistent
fi
python="${PYTHON:-python3}"
build="${PEER_BUILD_DIR:-/tmp/oxicub-peers}"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"  # libnvrtc for bench-gpu

fail() { echo "run.sh: $*" >&2; exit 2; }
[ -x "$bench" ] || fail "no $bench: build it on a Rust machine with ../shared/tools/gpu-pack and carry .device"
[ -n "$nvcc" ] && [ -x "$nvcc" ] || fail "no nvcc (set NVCC=...)"
[ -x "$prebuilt/cub_peers" ] || [ -f "$cccl/cub/device/device_batched_topk.cuh" ] ||
  fail "no CCCL 3.5 headers in $cccl: run benches/peers/get-cccl.sh on a machine with network and carry .cccl/cccl-include.tar.gz (or benches/peers/prebuild.sh and carry .peers)"
command -v nvidia-smi >/dev/null || fail "no nvidia-smi: is this a GPU machine?"

gpu_name="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)"
case "$gpu_name" in
  *H100*) name="${NAME:-h100}" ;;
  *H200*) name="${NAME:-h200}" ;;
  *) name="${NAME:-gpu-bench}" ;;
esac
log="$out/$name.log"

main() {
set -e
echo "== oxicub GPU benchmark: $(date -u '+%F %T UTC')"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
"$nvcc" --version | tail -n 2
grep -m1 '#define CCCL_VERSION ' "$cccl/cuda/std/__cccl/version.h" || true
"$python" -c 'import torch, cupy, numpy; print("torch", torch.__version__, "cupy", cupy.__version__, "numpy", numpy.__version__)' ||
  echo "run.sh: python peer prerequisites missing; its rows will say error"

mkdir -p "$build"
t0=$SECONDS
# The FlashInfer and CUB-main peers build in the background while the CUB 3.5 peer builds.
no_peer() { echo "sh $root/benches/peers/no-peer.sh $1 $2 '$3'"; }
fi_pid=""
fi_peers=(--peer "$(no_peer flashinfer route_,batched,topk "no FlashInfer pack (.flashinfer/flashinfer-routing.tar.gz): run benches/peers/get-flashinfer.sh on a machine with network and carry it")")
if [ -x "$prebuilt/flashinfer/flashinfer_routing" ] && [ -x "$prebuilt/flashinfer/flashinfer_topk" ]; then
  echo "== FlashInfer peers: prebuilt in $prebuilt/flashinfer ($(tr '\n' ' ' < "$prebuilt/flashinfer/VERSIONS" 2>/dev/null))"
  fi_peers=(--peer "$prebuilt/flashinfer/flashinfer_routing" --peer "$prebuilt/flashinfer/flashinfer_topk")
elif [ -f "$fi_pack" ]; then
  echo "== building the FlashInfer peers in $build/flashinfer (log: $build/flashinfer.build.log)"
  rm -rf /tmp/oxicub-flashinfer && mkdir -p /tmp/oxicub-flashinfer
  tar -C /tmp/oxicub-flashinfer -xzf "$fi_pack"
  cat /tmp/oxicub-flashinfer/VERSIONS
  NVCC="$nvcc" bash benches/peers/build-flashinfer.sh "$build/flashinfer" /tmp/oxicub-flashinfer \
    > "$build/flashinfer.build.log" 2>&1 &
  fi_pid=$!
fi
cm_pid=""
cm_peer="$(no_peer cub-main batched,topk "no CCCL main headers (.cccl-main/cccl-main-include.tar.gz): run benches/peers/get-cccl-main.sh on a machine with network and carry it")"
if [ -x "$prebuilt/cub_main_peers" ]; then
  echo "== CUB main peer: prebuilt in $prebuilt"
  cm_peer="$prebuilt/cub_main_peers"
elif [ -f "$cm_pack" ]; then
  echo "== building the CUB main peer in $build/cub-main (log: $build/cub-main.build.log)"
  rm -rf /tmp/oxicub-cccl-main && mkdir -p /tmp/oxicub-cccl-main
  tar -C /tmp/oxicub-cccl-main -xzf "$cm_pack"
  NVCC="$nvcc" bash benches/peers/build-cub-main.sh "$build/cub-main" /tmp/oxicub-cccl-main/include \
    > "$build/cub-main.build.log" 2>&1 &
  cm_pid=$!
fi

if [ -x "$prebuilt/cub_peers" ]; then
  echo "== CUB/thrust peer: prebuilt in $prebuilt (sources $(cat "$prebuilt/SOURCE"))"
  cub_peer="$prebuilt/cub_peers"
else
  echo "== building the CUB/thrust peer in $build"
  NVCC="$nvcc" bash benches/peers/build-cub.sh "$build" "$cccl" || { echo "run.sh: peer build failed"; return 2; }
  cub_peer="$build/cub_peers"
fi
if [ -n "$fi_pid" ]; then
  if wait "$fi_pid"; then
    tail -n 1 "$build/flashinfer.build.log"
    fi_peers=(--peer "$build/flashinfer/flashinfer_routing" --peer "$build/flashinfer/flashinfer_topk")
  else
    echo "run.sh: the FlashInfer peers' build failed:"
    cat "$build/flashinfer.build.log"
    fi_peers=(--peer "$(no_peer flashinfer route_,batched,topk "the FlashInfer peers did not build (see the log)")")
  fi
fi
if [ -n "$cm_pid" ]; then
  if wait "$cm_pid"; then
    tail -n 1 "$build/cub-main.build.log"
    cm_peer="$build/cub-main/cub_main_peers"
  else
    echo "run.sh: the CUB main peer's build failed:"
    cat "$build/cub-main.build.log"
    cm_peer="$(no_peer cub-main batched,topk "the CUB main peer did not build (see the log)")"
  fi
fi

echo "== running bench-gpu with its peers"
export OXICUB_BENCH_DEVICE_INFO="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1 | sed 's/^/driver /')"
export OXICUB_BENCH_DATE="$(date -u '+%F %H:%M UTC')"
export PYTHONUNBUFFERED=1
rc=0
"$bench" --out "$out" --name "$name" \
  --peer "$cub_peer" \
  --peer "$cm_peer" \
  --peer "$python $root/benches/peers/torch_peers.py" \
  "${fi_peers[@]}" \
  --command "bash benches/peers/run.sh${extra[*]:+ -- ${extra[*]}}" \
  "${extra[@]}" || rc=$?
echo "== done in $((SECONDS - t0)) s, bench-gpu exit $rc; files in $out:"
ls -l "$out"
return $rc
}

# Everything goes to the terminal and to NAME.log; the exit status is bench-gpu's.
set +e
main 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
