#!/usr/bin/env bash
# Packs Tandem's GPU tests and bench/gpu_bench for a GPU machine that has no Bazel and
# no Debian packages (only the NVIDIA driver and a CUDA toolkit), to be run there with
# `tools/gpu_check.sh --bundle FILE` from a checkout of the same commit:
#   1. builds the GPU test binaries and gpu_bench here with --config=cuda (needs nvcc)
#      and --dynamic_mode=off, so Tandem's own code is linked in statically;
#   2. strips them and copies the shared libraries they need that a CUDA machine may
#      lack (absl, glog, gflags, libunwind, ...) into lib/; glibc, libstdc++, libgcc
#      and the CUDA libraries (cudart, cuBLAS, NCCL) are left to the machine;
#   3. writes FILE (default ./gpu_bundle.tar.xz, git-ignored): bin/, lib/, TESTS (one
#      Bazel label per line) and COMMIT (the commit it was built from).
# The binaries read the bundled models by paths relative to the repository root, so
# gpu_check.sh runs them from there.
#
# Usage: tools/gpu_bundle.sh [--out FILE]
# Exit status: 0 when FILE was written; 1 when the build or packing failed; 2 for bad
# usage or a machine without nvcc.
set -euo pipefail

cd "$(dirname "$0")/.." || exit 2
OUT_FILE=$PWD/gpu_bundle.tar.xz
while [ $# -gt 0 ]; do
  case "$1" in
    --out) shift; OUT_FILE=${1:?--out needs a file} ;;
    --out=*) OUT_FILE=${1#--out=} ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_bundle: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -x "${CUDA_PATH:-/usr/local/cuda}/bin/nvcc" ] ||
  { echo "gpu_bundle: nvcc not found (set CUDA_PATH); a bundle needs a CUDA build" >&2; exit 2; }

# The GPU tests gpu_check.sh runs, and the benchmark.
TESTS=(//kernels/cuda/... //kernels:backend_factory_test //comm:nccl_communicator_test)
BUILD_FLAGS=(--config=cuda --dynamic_mode=off)

labels=$(bazel query --noshow_progress --ui_event_filters=-info \
  "tests($(IFS=+; echo "${TESTS[*]}"))")
echo "gpu_bundle: building $(echo "$labels" | wc -l) tests and //bench:gpu_bench" >&2
# shellcheck disable=SC2086
bazel build "${BUILD_FLAGS[@]}" //bench:gpu_bench $labels >&2 || exit 1
bin_dir=$(bazel info "${BUILD_FLAGS[@]}" bazel-bin 2>/dev/null)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/gpu_bundle/bin" "$stage/gpu_bundle/lib"
binary_path() { local p=${1#//}; echo "$bin_dir/${p/://}"; }
for label in $labels //bench:gpu_bench; do
  strip -o "$stage/gpu_bundle/bin/$(basename "$(binary_path "$label")")" "$(binary_path "$label")"
done
echo "$labels" >"$stage/gpu_bundle/TESTS"
git rev-parse HEAD >"$stage/gpu_bundle/COMMIT"

# Shared libraries left to the machine: the C/C++ runtime and CUDA's own.
machine_lib='^(ld-linux|linux-vdso|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s'
machine_lib+='|libcudart|libcublas|libcublasLt|libnccl|libcuda)\.so'
for b in "$stage"/gpu_bundle/bin/*; do
  ldd "$b" | awk '$3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  [[ $name =~ $machine_lib ]] || cp -L "$path" "$stage/gpu_bundle/lib/$name"
done

tar -C "$stage" -cJf "$OUT_FILE" gpu_bundle
echo "gpu_bundle: wrote $OUT_FILE ($(du -h "$OUT_FILE" | cut -f1)," \
  "$(ls "$stage/gpu_bundle/lib" | wc -l) shared libraries)" >&2
