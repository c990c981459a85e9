#!/usr/bin/env bash
# Packs what the FlashInfer peers (flashinfer_routing.cu and flashinfer_topk.cu, built by
# build-flashinfer.sh) need, since the GPU machine has no network and no FlashInfer: the source of
# FlashInfer's DeepSeek-V3 router, its top-k headers and the headers they include, from three
# wheels on PyPI. Run on a machine with network, from anywhere in the repository:
#
#   bash benches/peers/get-flashinfer.sh
#
# Leaves .flashinfer/flashinfer-routing.tar.gz (git-ignored, a few MB; the name predates the top-k
# peer): what to carry to the GPU machine, where run.sh unpacks it to /tmp. It holds
#   flashinfer/data/...   from flashinfer-python: the module's sources that the router needs
#                         (jit/dsv3_optimizations.py, gen_dsv3_fused_routing_module:
#                         fused_moe/noAuxTcKernels.cu and four nv_internal/cpp/common files; its
#                         fifth, memoryUtils.cu, holds nothing the router calls and includes
#                         cuRAND), the FlashInfer headers that the peers include themselves
#                         (include/flashinfer/topk.cuh and math.cuh for flashinfer_topk.cu), and
#                         every file they include, found by following #include lines
#                         through the JIT's include path (all branches of an #if, so a few more
#                         than one build reads); and the whole vendored CCCL 3.6 (cub, libcudacxx,
#                         thrust headers), which the JIT puts ahead of the toolkit's: the
#                         toolkit's own headers (cooperative_groups) include it too
#   tvm_ffi/include, tvm_ffi/lib/libtvm_ffi.so
#                         from apache-tvm-ffi (noAuxTcKernels.cu holds the tvm-ffi binding too,
#                         so the program links the library, as FlashInfer's module does)
#   cublas/include        the cuBLAS headers that tensorrt_llm's cudaUtils.h includes, from
#                         nvidia-cublas (the toolkit may have none; build-flashinfer.sh searches
#                         them last)
#   VERSIONS, LICENSE-*   the wheels' versions and licences
# The nvidia-cublas wheel is about 400 MB for two headers: pip's cache keeps it for a rerun.
set -euo pipefail
flashinfer=0.7.2.post1
tvm_ffi=0.1.15.post2   # FlashInfer 0.7.2.post1 requires apache-tvm-ffi >=0.1.11,<0.2
cublas=13.0.2.14       # CUDA 13.0, the GPU machine's toolkit
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pip_get() { python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "$@"; }
pip_get "flashinfer-python==$flashinfer"
# Binary wheels: the Linux x86-64 build (the C library and headers are the same for every Python).
pip_get --platform manylinux_2_28_x86_64 --python-version 3.11 "apache-tvm-ffi==$tvm_ffi"
pip_get --platform manylinux_2_27_x86_64 --python-version 3.11 "nvidia-cublas==$cublas"
mkdir -p "$tmp/pack"
python3 - "$tmp" "$tmp/pack" "$flashinfer" "$tvm_ffi" "$cublas" "$root" <<'PY'
import glob, os, re, sys, zipfile

tmp, out, v_fi, v_tvm, v_cublas, root = sys.argv[1:7]
wheel = lambda pattern: zipfile.ZipFile(glob.glob(os.path.join(tmp, pattern))[0])
fi, tvm, cub = wheel("flashinfer_python-*.whl"), wheel("apache_tvm_ffi-*.whl"), wheel("nvidia_cublas-*.whl")

# Every file of the wheels, by its path in the pack.
files = {}
for name in fi.namelist():
    if name.startswith("flashinfer/data/") and not name.endswith("/"):
        files[name] = (fi, name)
for name in tvm.namelist():
    if name.startswith("tvm_ffi/include/") and not name.endswith("/"):
        files[name] = (tvm, name)
for name in cub.namelist():
    if name.startswith("nvidia/cu13/include/") and name.endswith(".h"):
        files["cublas/include/" + name.rsplit("/", 1)[1]] = (cub, name)

d = "flashinfer/data/"
cs = d + "csrc/"
# The JIT's include path for this module, in order (jit/cpp_ext.py build_common_cflags: the
# module's extra paths, the vendored CCCL, then the system paths).
path = [cs + "nv_internal", cs + "nv_internal/include",
        cs + "nv_internal/tensorrt_llm/cutlass_extensions/include",
        cs + "nv_internal/tensorrt_llm/kernels/cutlass_kernels/include",
        cs + "nv_internal/tensorrt_llm/kernels/cutlass_kernels",
        d + "cccl/cub", d + "cccl/libcudacxx/include", d + "cccl/thrust",
        "tvm_ffi/include", d + "include", cs[:-1],
        d + "cutlass/include", d + "cutlass/tools/util/include", d + "spdlog/include",
        "cublas/include"]
sources = [cs + "fused_moe/noAuxTcKernels.cu"] + [
    cs + "nv_internal/cpp/common/" + f
    for f in ("envUtils.cpp", "logger.cpp", "stringUtils.cpp", "tllmException.cpp")]
cccl = (d + "cccl/cub/cub/", d + "cccl/libcudacxx/include/", d + "cccl/thrust/thrust/")
include = re.compile(rb'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def resolve(name, quoted, here):
    for base in ([here] if quoted and here else []) + path:
        p = os.path.normpath(os.path.join(base, name))
        if p in files:
            return p
    return None  # the toolkit's or the C++ library's


need, todo = set(), list(sources) + [f for f in files if f.startswith(cccl)]
# What the peers include from FlashInfer (their own quoted headers are the repository's).
for peer in ("flashinfer_routing.cu", "flashinfer_topk.cu"):
    with open(os.path.join(root, "benches/peers", peer), "rb") as src:
        for quote, inc in include.findall(src.read()):
            p = resolve(inc.decode(), quote == b'"', None)
            if p:
                todo.append(p)
while todo:
    f = todo.pop()
    if f in need:
        continue
    need.add(f)
    z, name = files[f]
    for quote, inc in include.findall(z.read(name)):
        inc = inc.decode()
        # The "cake" backend (-DFLASHINFER_CAKE_BACKEND, SM100 only) is not built.
        if "cake_" in inc:
            continue
        p = resolve(inc, quote == b'"', os.path.dirname(f))
        if p:
            todo.append(p)

for f in sorted(need):
    z, name = files[f]
    os.makedirs(os.path.join(out, os.path.dirname(f)), exist_ok=True)
    with open(os.path.join(out, f), "wb") as o:
        o.write(z.read(name))
lib = "tvm_ffi/lib/libtvm_ffi.so"
os.makedirs(os.path.join(out, "tvm_ffi/lib"), exist_ok=True)
with open(os.path.join(out, lib), "wb") as o:
    o.write(tvm.read(lib))
for z, tag in ((fi, "flashinfer"), (tvm, "tvm-ffi")):
    for name in z.namelist():
        if name.endswith("/LICENSE") and ".dist-info/" in name:
            with open(os.path.join(out, "LICENSE-" + tag), "wb") as o:
                o.write(z.read(name))
with open(os.path.join(out, "VERSIONS"), "w") as o:
    o.write("flashinfer-python %s\napache-tvm-ffi %s\nnvidia-cublas %s\n" % (v_fi, v_tvm, v_cublas))
print("get-flashinfer.sh: %d files" % (len(need) + 1))
PY
grep -q 'template void invokeNoAuxTc' "$tmp/pack/flashinfer/data/csrc/fused_moe/noAuxTcKernels.cu" ||
  { echo "get-flashinfer.sh: noAuxTcKernels.cu has no invokeNoAuxTc instantiations" >&2; exit 1; }
grep -q 'cudaError_t TopKDispatch' "$tmp/pack/flashinfer/data/include/flashinfer/topk.cuh" ||
  { echo "get-flashinfer.sh: the pack has no topk.cuh with TopKDispatch" >&2; exit 1; }
mkdir -p "$root/.flashinfer"
tar -C "$tmp/pack" -czf "$root/.flashinfer/flashinfer-routing.tar.gz" .
echo "FlashInfer $flashinfer routing pack: $root/.flashinfer/flashinfer-routing.tar.gz ($(du -h "$root/.flashinfer/flashinfer-routing.tar.gz" | cut -f1))"
