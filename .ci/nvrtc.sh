#!/usr/bin/env bash
# Provides NVRTC (CUDA 13.0) for the kernel compile check on a machine without the CUDA toolkit.
#
#   source .ci/nvrtc.sh     installs if needed and exports LD_LIBRARY_PATH in the calling shell
#   bash .ci/nvrtc.sh       installs if needed and prints the export line to use
#
# The wheel `nvidia-cuda-nvrtc` ships libnvrtc.so.13 (the name cudarc's loader tries for CUDA
# 13: libnvrtc.so.13) and libnvrtc-builtins.so.13.0, which libnvrtc dlopens from the same
# directory. It is installed with `pip install --target` into .nvrtc/ (git-ignored) and reused
# when already there. Nothing here needs a GPU or a driver.
_oxicub_nvrtc_main() {
  local version=13.0.88
  local root
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  local target="$root/.nvrtc/site"
  local lib="$target/nvidia/cu13/lib"
  local stamp="$root/.nvrtc/installed-$version"
  if [ -f "$stamp" ] && [ -e "$lib/libnvrtc.so.13" ] && [ -e "$lib/libnvrtc-builtins.so.13.0" ]; then
    echo "nvrtc: reusing $lib" >&2
  else
    echo "nvrtc: installing nvidia-cuda-nvrtc==$version into $target" >&2
    rm -rf "$target" "$root"/.nvrtc/installed-*
    mkdir -p "$target"
    python3 -m pip install --quiet --disable-pip-version-check --no-deps \
      --target "$target" "nvidia-cuda-nvrtc==$version" >&2 || return 1
    [ -e "$lib/libnvrtc.so.13" ] || { echo "nvrtc: libnvrtc.so.13 not found under $lib" >&2; return 1; }
    touch "$stamp"
  fi
  case ":${LD_LIBRARY_PATH:-}:" in
    *":$lib:"*) ;;
    *) export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
  esac
  echo "export LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
}
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  _oxicub_nvrtc_main
else
  _oxicub_nvrtc_main
fi
