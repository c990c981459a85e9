#!/usr/bin/env bash
# Packs the headers of a pinned CCCL main commit (github NVIDIA/cccl) for the cub-main peer
# (cub_main_batched.cu): cub/cub, libcudacxx/include and thrust/thrust, as one include tree.
# Main's cub::DeviceBatchedTopK has the thread-block-cluster backend; no released wheel has it.
#
#   bash benches/peers/get-cccl-main.sh [CCCL_GIT_DIR]
#
# CCCL_GIT_DIR: a clone (bare or not) of NVIDIA/cccl that holds the pinned commit; without it the
# commit is cloned from GitHub (needs network). Leaves (git-ignored through .git/info/exclude):
#   .cccl-main/include                   the header tree, for compiling here
#   .cccl-main/cccl-main-include.tar.gz  the same, packed (a few MB): what to carry to the GPU machine
# Both hold a VERSION file naming the commit.
set -euo pipefail
commit=571f2fc3bc53cd710e306ad43d58995c1fe4219f   # main, 2026-08-22 (CCCL_VERSION 3006000)
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git_dir="${1:-}"
if [ -z "$git_dir" ]; then
  git init -q --bare "$tmp/cccl.git"
  git --git-dir="$tmp/cccl.git" fetch -q --depth 1 https://github.com/NVIDIA/cccl.git "$commit"
  git_dir="$tmp/cccl.git"
fi
mkdir -p "$tmp/src" "$tmp/include"
git --git-dir="$git_dir" archive "$commit" cub/cub libcudacxx/include thrust/thrust | tar -x -C "$tmp/src"
mv "$tmp/src/cub/cub" "$tmp/include/cub"
mv "$tmp/src/thrust/thrust" "$tmp/include/thrust"
mv "$tmp/src/libcudacxx/include/"* "$tmp/include/"
[ -f "$tmp/include/cub/agent/agent_batched_topk_cluster.cuh" ] ||
  { echo "get-cccl-main.sh: no cluster top-k agent at $commit" >&2; exit 1; }
{
  echo "NVIDIA/cccl $commit"
  git --git-dir="$git_dir" log -1 --format='%ci %s' "$commit"
  grep -m1 '#define CCCL_VERSION ' "$tmp/include/cuda/std/__cccl/version.h"
} > "$tmp/include/VERSION"
rm -rf "$root/.cccl-main/include"
mkdir -p "$root/.cccl-main"
mv "$tmp/include" "$root/.cccl-main/include"
tar -C "$root/.cccl-main" -czf "$root/.cccl-main/cccl-main-include.tar.gz" include
cat "$root/.cccl-main/include/VERSION"
echo "headers: $root/.cccl-main/include ($(du -sh "$root/.cccl-main/include" | cut -f1)), packed: $(du -h "$root/.cccl-main/cccl-main-include.tar.gz" | cut -f1)"
