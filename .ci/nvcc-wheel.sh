# Sourced: installs nvcc 13.0 from NVIDIA's wheels (nvcc, crt, nvvm, the runtime headers and
# libraries, CCCL's headers) into .candle-cuda/ (git-ignored) unless it is there, and sets
# `cuda` to its root (bin/nvcc, include, lib). For builds on a machine with no CUDA toolkit:
# .ci/candle-cuda.sh (candle's kernels) and benches/peers/prebuild.sh (the benchmark's peers).
# Needs `root` (the repository) set.
grep -qx '/.candle-cuda/' "$root/.git/info/exclude" 2>/dev/null || echo '/.candle-cuda/' >> "$root/.git/info/exclude"
home="$root/.candle-cuda"
cuda="$home/nvidia/cu13"
if [ ! -x "$cuda/bin/nvcc" ] || [ ! -e "$cuda/include/nv/target" ]; then
  rm -rf "$home" && mkdir -p "$home"
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$home" \
    nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85
  chmod +x "$cuda"/bin/* "$cuda"/nvvm/bin/*
fi
