# Sourced by build-cub.sh and build-cub-main.sh: their parallel compiles and their link. The
# sourcing script sets `nvcc`, `jobs` and `build`, and defines `compile_one TAG`, which compiles
# one object, $build/TAG.o.

# Runs `compile_one TAG` for every TAG, $jobs at a time, each one's output in
# $build/TAG.build.log and its time on stdout; when any fails, prints the failures' logs (as
# WHO) after every compile has ended, and exits 1.
nvcc_compile_all() {
  local who=$1
  shift
  local tags=("$@") pids=() fail=0 i=0 tag pid
  for tag in "${tags[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do sleep 1; done
    ( ts=$SECONDS
      rc=0
      compile_one "$tag" > "$build/$tag.build.log" 2>&1 || rc=$?
      echo "$tag: $((SECONDS - ts)) s"
      exit $rc ) &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do
    if ! wait "$pid"; then
      fail=1
      echo "$who: nvcc failed on ${tags[$i]}:" >&2
      cat "$build/${tags[$i]}.build.log" >&2
    fi
    i=$((i + 1))
  done
  [ $fail = 0 ] || exit 1
}

# Links OBJ... into OUT for sm_90, the CUDA runtime linked statically (nvcc's default). The pip
# wheels of nvcc keep that runtime in lib/, where nvcc.profile does not look (lib64).
nvcc_link() {
  local out=$1
  shift
  local ldflags=() lib
  lib="$(dirname "$(command -v "$nvcc")")/../lib"
  [ -f "$lib/libcudart_static.a" ] && ldflags=(-L "$lib")
  "$nvcc" -gencode=arch=compute_90,code=sm_90 "${ldflags[@]}" -o "$out" "$@"
}
