#!/bin/sh
# collect_libs.sh DEST BINARY...
# Copies every shared library the binaries load (as ldd resolves them) into DEST and
# prints one line per library, so the runtime image needs nothing but DEST on the
# loader path. Left out: the C library's own (libc, libm, libdl, libpthread, librt,
# ld-linux: the runtime image has the same Debian glibc) and the NVIDIA driver (libcuda,
# libnvidia-*: the container toolkit mounts the host's). Fails when a library is not
# found or a binary is not dynamically linked.
set -eu
if [ $# -lt 2 ]; then
  echo "usage: collect_libs.sh DEST BINARY..." >&2
  exit 2
fi
dest=$1
shift
mkdir -p "$dest"
skip='^(linux-vdso\.so|ld-linux[-a-z0-9_]*\.so|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so|libnvidia-)'
list=$(mktemp)
trap 'rm -f "$list"' EXIT
for binary in "$@"; do
  if ! out=$(ldd "$binary" 2>&1); then
    echo "collect_libs.sh: ldd $binary failed: $out" >&2
    exit 1
  fi
  if printf '%s\n' "$out" | grep -q 'not found'; then
    echo "collect_libs.sh: $binary needs libraries that are not installed:" >&2
    printf '%s\n' "$out" | grep 'not found' >&2
    exit 1
  fi
  # "libfoo.so.1 => /path/libfoo.so.1 (0x...)"; lines without "=>" are the vdso and
  # the loader.
  printf '%s\n' "$out" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' >>"$list"
done
sort -u "$list" | while read -r soname path; do
  if printf '%s\n' "$soname" | grep -Eq "$skip"; then
    continue
  fi
  cp -L "$path" "$dest/$soname"
  echo "$soname <- $path"
done
