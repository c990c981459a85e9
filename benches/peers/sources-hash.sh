#!/usr/bin/env bash
# Prints one hash of the peer programs' sources (benches/peers: the .cu and .cuh files and the
# build scripts), which prebuild.sh records in .peers/SOURCE and run.sh compares before it uses
# .peers: a prebuilt peer from other sources would time other code under this run's name.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
cat $(ls ./*.cu ./*.cuh build-cub.sh build-cub-main.sh build-flashinfer.sh nvcc-build.sh | LC_ALL=C sort) | sha256sum | cut -d' ' -f1
