#!/usr/bin/env bash
# Builds the `candle-cuda` test and example (tests/candle_gpu.rs, examples/moe_candle.rs) for a
# GPU machine, on a machine with no CUDA toolkit and no GPU, and adds them to .device/bin (run
# ../shared/tools/gpu-pack first, or alone: it makes .device/bin).
#
#   bash .ci/candle-cuda.sh
#
# candle's `cuda` feature compiles candle's kernels with nvcc and has cudarc link the CUDA
# libraries (`dynamic-linking`, the version read from `nvcc --version`). Both come from here:
# * nvcc 13.0 from NVIDIA's wheels (nvcc, crt, nvvm, the runtime headers, CCCL's headers),
#   installed into .candle-cuda/ (git-ignored);
# * link stubs: a shared library per CUDA library cudarc links (driver, NVRTC, cuRAND, cuBLAS,
#   cuBLASLt), each defining every function cudarc's bindings declare, with the real library's
#   soname, so the binaries load the GPU machine's libraries at run time; the CUDA runtime
#   (which candle's MoE kernels link) is the wheel's.
# The binaries need those libraries where they run (/usr/local/cuda/lib64 on the GPU machine):
# CI, which has none, builds only the `candle` feature.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
. .ci/nvcc-wheel.sh
stubs="$home/stubs/lib64"
mkdir -p "$stubs"
cudarc=$(cargo metadata --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "cudarc":
        print(p["manifest_path"].rsplit("/", 1)[0])')
stub() { # module, library, soname
  grep -oE 'pub (unsafe )?fn (cu|nvrtc|curand|cublas)[A-Za-z0-9_]+' "$cudarc/src/$1/sys/mod.rs" |
    awk '{print $NF}' | sort -u | sed 's/.*/void &(void) {}/' > "$stubs/$1.c"
  cc -shared -fPIC -o "$stubs/$3" "$stubs/$1.c" -Wl,-soname,"$3"
  ln -sf "$3" "$stubs/$2.so"
}
stub driver libcuda libcuda.so.1
stub nvrtc libnvrtc libnvrtc.so.13
stub curand libcurand libcurand.so.10
stub cublas libcublas libcublas.so.13
stub cublaslt libcublasLt libcublasLt.so.13
# candle's MoE kernels (a static library) link the CUDA runtime: the wheel's, libcudart.so.13.
ln -sf "$cuda/lib/libcudart.so.13" "$stubs/libcudart.so"
export PATH="$cuda/bin:$PATH" CUDA_HOME="$home/stubs" CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/candle-cuda}"
json=$(mktemp)
features=(--no-default-features --features candle-cuda)
cargo test "${features[@]}" --test candle_gpu --no-run --message-format=json > "$json"
cargo build "${features[@]}" --example moe_candle --message-format=json >> "$json"
mkdir -p .device/bin
python3 - "$json" <<'PY'
import json, os, shutil, sys
for line in open(sys.argv[1]):
    if not line.startswith('{'):
        continue
    m = json.loads(line)
    if m.get('reason') != 'compiler-artifact' or not m.get('executable'):
        continue
    name = m['target']['name']
    if name not in ('candle_gpu', 'moe_candle'):
        continue
    kind = 'test' if m['profile'].get('test') else 'example'
    dst = f".device/bin/{kind}-{name}"
    shutil.copy2(m['executable'], dst)
    os.system(f"strip '{dst}'")
    print(dst)
PY
rm -f "$json"
