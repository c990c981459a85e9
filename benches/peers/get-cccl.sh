#!/usr/bin/env bash
# Fetches the CCCL 3.5 headers that the CUB/thrust peers are built against (the GPU machine has
# no network), from the nvidia-cuda-cccl wheel on PyPI. Run on a machine with network, from
# anywhere in the repository:
#
#   bash benches/peers/get-cccl.sh
#
# Leaves (both git-ignored under .cccl/):
#   .cccl/include                the header tree (25 MiB): for compiling the peers here
#   .cccl/cccl-include.tar.gz    the same tree packed (about 2 MiB): what to carry to the GPU
#                                machine; run.sh unpacks it to /tmp when .cccl/include is absent
set -euo pipefail
version=13.3.5.0.6   # CCCL 3.5.0 (cuda/std/__cccl/version.h: CCCL_VERSION 3005000)
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: "nvidia-cuda-cccl==$version" -d "$tmp"
python3 - "$tmp" <<'PY'
import glob, sys, zipfile
tmp = sys.argv[1]
whl = glob.glob(tmp + "/nvidia_cuda_cccl-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if name.startswith("nvidia/cu13/include/cccl/"):
            z.extract(name, tmp)
PY
rm -rf "$root/.cccl/include"
mkdir -p "$root/.cccl"
mv "$tmp/nvidia/cu13/include/cccl" "$root/.cccl/include"
grep -q '#define CCCL_VERSION 3005000' "$root/.cccl/include/cuda/std/__cccl/version.h" ||
  { echo "get-cccl.sh: unexpected CCCL version" >&2; exit 1; }
tar -C "$root/.cccl" -czf "$root/.cccl/cccl-include.tar.gz" include
echo "CCCL 3.5 headers: $root/.cccl/include ($(du -sh "$root/.cccl/include" | cut -f1)), packed: $(du -h "$root/.cccl/cccl-include.tar.gz" | cut -f1)"
