#!/usr/bin/env bash
# Builds the FlashInfer peers, BUILD_DIR/flashinfer_routing and BUILD_DIR/flashinfer_topk, from
# FlashInfer's own source (the pack from get-flashinfer.sh, unpacked) with the nvcc flags
# FlashInfer's JIT uses for the module each one stands for.
#
#   bash benches/peers/build-flashinfer.sh BUILD_DIR PACK_DIR
#
# Overrides: NVCC (default: nvcc on PATH), CXX (default: c++), ARCH (default 90a: the JIT's
# target on an H100/H200, compute capability 9.0 with the "a" suffix), FI_PEERS (default
# "routing topk": which of the two to build).
#
# flashinfer_routing:
#
# The flags (flashinfer/jit: dsv3_optimizations.py gen_dsv3_fused_routing_module, core.py
# gen_jit_spec, cpp_ext.py build_common_cflags / build_cuda_cflags, compilation_context.py),
# without the environment variables that change them:
#   nvcc: -std=c++17 --threads=1 -use_fast_math -Xfatbin=-compress-all --compress-mode=size
#         -DFLASHINFER_ENABLE_F16 -DFLASHINFER_ENABLE_BF16 -DFLASHINFER_ENABLE_FP8_E4M3
#         -DFLASHINFER_ENABLE_FP8_E5M2 -DNDEBUG -O3 --compiler-options=-fPIC
#         --expt-relaxed-constexpr -static-global-template-stub=false (CUDA >= 12.8)
#         -gencode=arch=compute_90a,code=sm_90a -DFLASHINFER_ENABLE_FP8_E8M0
#         -DFLASHINFER_ENABLE_FP4_E2M1
#   c++:  -std=c++17 -Wno-switch-bool -DNDEBUG -O3 -fPIC
#   both: -DPy_LIMITED_API=0x03090000 -D_GLIBCXX_USE_CXX11_ABI=1 (torch's ABI, the usual one), the
#         module's five -I paths, -I the vendored CCCL (cub, libcudacxx, thrust), -isystem the
#         toolkit's include, tvm-ffi (with dlpack), FlashInfer's include and csrc, CUTLASS and
#         spdlog (the JIT's Python include directory is left out: nothing here includes
#         Python.h); last, -isystem the pack's cublasLt.h (CUDA 13.0's; the toolkit may have none)
# Sources: fused_moe/noAuxTcKernels.cu and nv_internal/cpp/common/{envUtils, logger, stringUtils,
# tllmException}.cpp (the module's fifth, memoryUtils.cu, holds nothing the router calls and
# needs cuRAND's headers); linked with libtvm_ffi.so (the binding in noAuxTcKernels.cu refers to
# it), as the JIT links the module; a copy of it goes into BUILD_DIR, beside the program.
#
# Also: noAuxTcKernels.cu again without -use_fast_math, its entry points renamed
# (invokeNoAuxTc -> invokeNoAuxTcPrecise, ...), linked into the same program as a diagnostic:
# -use_fast_math turns the kernel's tanhf into tanh.approx.f32 (flashinfer_routing.cu says why
# that matters). The peer itself (flashinfer_routing.cu) is C++20 like the CUB peer, with
# FlashInfer's include path for noAuxTcKernels.h.
#
# flashinfer_topk: flashinfer_topk.cu twice. With -DOXB_FI_TOPK_KERNELS it is the FlashInfer side
# (the top-k dispatch functions of include/flashinfer/topk.cuh, instantiated for float and bf16
# keys and int32 indices), compiled as the JIT compiles the topk module's topk.cu
# (flashinfer/jit/topk.py gen_topk_module: the nvcc flags above plus -lineinfo; the module has no
# extra include paths, so the path is the vendored CCCL, the toolkit's include and FlashInfer's
# include; tvm-ffi, csrc, CUTLASS and spdlog are left out, as the functions here use none of
# them). Without it, the peer itself, C++20 like the CUB peer. Nothing of tvm-ffi is linked. The
# module's other sources are not built: cub_topk.cu (the CUB backend, CCCL 3.6's cluster
# DeviceBatchedTopK, measured by the project's CUB peer) and the two tvm-ffi bindings.
#
# The programs link the CUDA runtime statically (nvcc's default); -L$CUDA/lib as well as nvcc's
# lib64 for toolkits installed from NVIDIA's wheels, whose libraries are in lib/.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: build-flashinfer.sh BUILD_DIR PACK_DIR" >&2; exit 2; }
build="$1"
pack="$(cd "$2" && pwd)"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
nvcc="${NVCC:-nvcc}"
cxx="${CXX:-c++}"
arch="${ARCH:-90a}"
peers="${FI_PEERS:-routing topk}"
want() { [[ " $peers " == *" $1 "* ]]; }
mkdir -p "$build"
d="$pack/flashinfer/data"
cs="$d/csrc"
want routing && { [ -f "$cs/fused_moe/noAuxTcKernels.cu" ] ||
  { echo "build-flashinfer.sh: no FlashInfer router sources in $pack" >&2; exit 2; }; }
want topk && { [ -f "$d/include/flashinfer/topk.cuh" ] ||
  { echo "build-flashinfer.sh: no FlashInfer top-k headers in $pack (an older pack: rerun get-flashinfer.sh)" >&2; exit 2; }; }
nvcc_path="$(command -v "$nvcc")" || { echo "build-flashinfer.sh: no nvcc ($nvcc)" >&2; exit 2; }
cuda_home="$(cd "$(dirname "$nvcc_path")/.." && pwd)"

common=(-DPy_LIMITED_API=0x03090000 -D_GLIBCXX_USE_CXX11_ABI=1
  -I"$cs/nv_internal" -I"$cs/nv_internal/include"
  -I"$cs/nv_internal/tensorrt_llm/cutlass_extensions/include"
  -I"$cs/nv_internal/tensorrt_llm/kernels/cutlass_kernels/include"
  -I"$cs/nv_internal/tensorrt_llm/kernels/cutlass_kernels"
  -I"$d/cccl/cub" -I"$d/cccl/libcudacxx/include" -I"$d/cccl/thrust"
  -isystem "$cuda_home/include" -isystem "$pack/tvm_ffi/include" -isystem "$d/include" -isystem "$cs"
  -isystem "$d/cutlass/include" -isystem "$d/cutlass/tools/util/include" -isystem "$d/spdlog/include"
  -isystem "$pack/cublas/include")
gencode="-gencode=arch=compute_$arch,code=sm_$arch"
fast=(-use_fast_math)
cuda_flags() { # the JIT's nvcc flags; $1 = "fast" or "precise"
  local math=()
  [ "$1" = fast ] && math=("${fast[@]}")
  echo -std=c++17 --threads=1 "${math[@]}" -Xfatbin=-compress-all --compress-mode=size \
    -DFLASHINFER_ENABLE_F16 -DFLASHINFER_ENABLE_BF16 -DFLASHINFER_ENABLE_FP8_E4M3 \
    -DFLASHINFER_ENABLE_FP8_E5M2 -DNDEBUG -O3 --compiler-options=-fPIC --expt-relaxed-constexpr \
    -static-global-template-stub=false "$gencode" -DFLASHINFER_ENABLE_FP8_E8M0 -DFLASHINFER_ENABLE_FP4_E2M1
}
# The topk module's include path (see the top of this file).
topk_common=(-DPy_LIMITED_API=0x03090000 -D_GLIBCXX_USE_CXX11_ABI=1
  -I"$d/cccl/cub" -I"$d/cccl/libcudacxx/include" -I"$d/cccl/thrust"
  -isystem "$cuda_home/include" -isystem "$d/include")
libs=(-L"$cuda_home/lib64" -L"$cuda_home/lib")
rename=(-DinvokeNoAuxTc=invokeNoAuxTcPrecise -Ddeepseek_v3_topk_kernel=deepseek_v3_topk_kernel_precise
  -DNoAuxTc=NoAuxTcPrecise)

pids=() names=()
job() { # name, command...: runs in the background, output to BUILD_DIR/name.build.log
  local name="$1"; shift
  "$@" > "$build/$name.build.log" 2>&1 &
  pids+=($!) names+=("$name")
}
if want topk; then # first: its FlashInfer unit is the longest compile
  # shellcheck disable=SC2046  # cuda_flags prints one flag per word, none with spaces
  job fi_topk_kernels "$nvcc" $(cuda_flags fast) -lineinfo "${topk_common[@]}" -DOXB_FI_TOPK_KERNELS \
    -c "$root/benches/peers/flashinfer_topk.cu" -o "$build/fi_topk_kernels.o"
  job flashinfer_topk "$nvcc" -O3 -std=c++20 "$gencode" -Xcompiler -Wall \
    -c "$root/benches/peers/flashinfer_topk.cu" -o "$build/flashinfer_topk.o"
fi
if want routing; then
  # shellcheck disable=SC2046
  job fi_noAuxTc "$nvcc" $(cuda_flags fast) "${common[@]}" -c "$cs/fused_moe/noAuxTcKernels.cu" -o "$build/fi_noAuxTc.o"
  # shellcheck disable=SC2046
  job fi_noAuxTc_precise "$nvcc" $(cuda_flags precise) "${common[@]}" "${rename[@]}" \
    -c "$cs/fused_moe/noAuxTcKernels.cu" -o "$build/fi_noAuxTc_precise.o"
  for f in envUtils logger stringUtils tllmException; do
    job "fi_$f" "$cxx" -std=c++17 -Wno-switch-bool -DNDEBUG -O3 -fPIC "${common[@]}" \
      -c "$cs/nv_internal/cpp/common/$f.cpp" -o "$build/fi_$f.o"
  done
  job flashinfer_routing "$nvcc" -O3 -std=c++20 "$gencode" -DOXB_FI_PRECISE -Xcompiler -Wall "${common[@]}" \
    -c "$root/benches/peers/flashinfer_routing.cu" -o "$build/flashinfer_routing.o"
fi
ok=1
for i in "${!pids[@]}"; do
  if ! wait "${pids[$i]}"; then
    ok=0
    echo "build-flashinfer.sh: ${names[$i]} failed:"
    cat "$build/${names[$i]}.build.log"
  fi
done
[ $ok = 1 ] || exit 1
built=()
if want topk; then
  "$nvcc" "$gencode" -o "$build/flashinfer_topk" "$build/flashinfer_topk.o" "$build/fi_topk_kernels.o" "${libs[@]}"
  built+=("$build/flashinfer_topk")
fi
if want routing; then
  # A copy of libtvm_ffi.so beside the program, found through $ORIGIN: the build directory then
  # runs wherever it is carried, without the pack.
  cp "$pack/tvm_ffi/lib/libtvm_ffi.so" "$build/libtvm_ffi.so"
  "$nvcc" "$gencode" -o "$build/flashinfer_routing" "$build/flashinfer_routing.o" "$build/fi_noAuxTc.o" \
    "$build/fi_noAuxTc_precise.o" "$build"/fi_{envUtils,logger,stringUtils,tllmException}.o "${libs[@]}" \
    -L"$build" -ltvm_ffi -Xlinker -rpath='$ORIGIN'
  built+=("$build/flashinfer_routing")
fi
echo "built ${built[*]} ($(tr '\n' ' ' < "$pack/VERSIONS"))"
