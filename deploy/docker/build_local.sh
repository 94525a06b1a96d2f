#!/usr/bin/env bash
# build_local.sh [--prebuilt] [--tag TAG] [--profile cpu|cuda]
# Builds the Tandem image on this machine with no registry: makes the Debian 12 base
# image when it is missing (debootstrap --variant=minbase from the Debian mirror in this
# machine's apt configuration, then `docker import`), then builds deploy/docker/Dockerfile
# with it as BUILD_IMAGE and RUNTIME_IMAGE (classic builder, --network host for apt).
# Prints how long each step took and the image's size.
#   --prebuilt      build the three programs here with Bazel (--config=nocuda, in their
#                   own output base so bazel-bin is left alone) and bake those in;
#                   default: the image's build stage compiles them from source.
#   --tag TAG       image name (default tandem:cpu, or tandem:cuda for --profile cuda)
#   --profile P     cpu (default) or cuda; cuda needs NVIDIA's CUDA repository.
#   --cuda-arch A   GPU architecture of the cuda profile (sm_90 default, sm_80 for A100).
# Environment: TANDEM_BASE_IMAGE (default tandem-base:bookworm), TANDEM_SUITE (bookworm).
# Needs: docker (client and a running daemon); to make the base image, root and
# debootstrap. Exits 1 with what is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

base_image=${TANDEM_BASE_IMAGE:-tandem-base:bookworm}
suite=${TANDEM_SUITE:-bookworm}
prebuilt=0 profile=cpu tag="" cuda_arch=sm_90
prebuilt_dir=.image-prebuilt
nocuda_output_base=${TANDEM_IMAGE_OUTPUT_BASE:-$HOME/.cache/tandem-image-nocuda}

log() { printf '[build_local] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=1 ;;
    --tag) tag=${2:?--tag needs a value}; shift ;;
    --profile) profile=${2:?--profile needs a value}; shift ;;
    --cuda-arch) cuda_arch=${2:?--cuda-arch needs a value}; shift ;;
    -h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
case "$profile" in cpu | cuda) ;; *) die "--profile must be cpu or cuda, not '$profile'" ;; esac
tag=${tag:-tandem:$profile}
if [ "$profile" = cuda ] && [ $prebuilt -eq 1 ]; then
  die "--prebuilt builds CPU programs (--config=nocuda); the cuda profile builds from source"
fi

# Runs "$@" and logs how long it took, as step "$1" (a label).
timed() {
  local label=$1 started=$SECONDS
  shift
  "$@"
  log "$label: $((SECONDS - started)) s"
}

check_docker() {
  command -v docker >/dev/null ||
    die "no docker client on PATH (Debian: apt-get install docker.io)"
  docker info >/dev/null 2>&1 ||
    die "no Docker daemon answers (install Debian's docker.io and start it: dockerd &)"
}

# "ORIGIN URI SUITE" of every Packages index in this machine's apt configuration.
apt_repositories() {
  # shellcheck disable=SC2016  # apt's own $(FIELD) placeholders
  apt-get indextargets --format '$(ORIGIN) $(REPO_URI) $(RELEASE)' 'Identifier: Packages' \
    2>/dev/null
}

# The Debian mirror (URI) of $suite in this machine's apt configuration.
debian_mirror() {
  apt_repositories | awk -v s="$suite" '$1 == "Debian" && $3 == s {print $2; exit}'
}

# sources.list lines for the image: every Debian suite of this machine's apt
# configuration that belongs to $suite (main, -updates, -security), main component.
image_sources() {
  apt_repositories | awk -v s="$suite" '($1 == "Debian" || $1 == "Debian-Security") &&
    ($3 == s || index($3, s "-") == 1) {print "deb " $2 " " $3 " main"}' | sort -u
}

make_base_image() {
  [ "$(id -u)" -eq 0 ] || die "making $base_image needs root (debootstrap); run as root"
  command -v debootstrap >/dev/null ||
    die "$base_image is missing and debootstrap is not installed (apt-get install debootstrap)"
  local mirror sources root
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || die "no Debian '$suite' repository in this machine's apt configuration"
  sources=$(image_sources)
  root=$(mktemp -d /tmp/tandem-rootfs-XXXXXX)
  # shellcheck disable=SC2064
  trap "rm -rf '$root'" EXIT
  log "making $base_image: debootstrap --variant=minbase $suite from $mirror"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$root.log" 2>&1 ||
    { tail -20 "$root.log" >&2; die "debootstrap failed (log: $root.log)"; }
  printf '%s\n' "$sources" >"$root/etc/apt/sources.list"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import - "$base_image" >/dev/null
  rm -rf "$root" "$root.log"
  trap - EXIT
}

# Builds the CPU programs with Bazel in their own output base, copies them to
# $prebuilt_dir and prints the Debian packages that own the libraries they load.
build_prebuilt() {
  grep -q 'VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null ||
    die "--prebuilt needs a Debian 12 host (the image's libraries come from Debian 12)"
  local labels=(//coordinator:tandem-coordinator //worker:tandem-worker //client:tandem)
  # --symlink_prefix=/: no bazel-* links, so the workspace's links keep pointing at the
  # normal build (links into this output base would make the next `bazel build //...`
  # descend into it).
  bazel --output_base="$nocuda_output_base" build --config=nocuda --symlink_prefix=/ \
    --noshow_progress --ui_event_filters=-info "${labels[@]}" >&2
  local bin
  bin=$(bazel --output_base="$nocuda_output_base" info --config=nocuda bazel-bin 2>/dev/null)
  bazel --output_base="$nocuda_output_base" shutdown 2>/dev/null || true
  rm -rf "$prebuilt_dir" && mkdir -p "$prebuilt_dir"
  cp "$bin/coordinator/tandem-coordinator" "$bin/worker/tandem-worker" "$bin/client/tandem" \
    "$prebuilt_dir/"
  chmod u+w "$prebuilt_dir"/*
}

# The Debian packages owning the shared libraries the prebuilt programs load.
prebuilt_packages() {
  local path
  for b in "$prebuilt_dir"/*; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
    sort -u | while read -r path; do
      dpkg -S "$path" 2>/dev/null || dpkg -S "/usr$path" 2>/dev/null ||
        die "no Debian package owns $path"
    done | cut -d: -f1 | sort -u | tr '\n' ' '
}

build_image() {
  local args=(--build-arg PROFILE="$profile" --build-arg CUDA_ARCH="$cuda_arch"
              --build-arg BUILD_IMAGE="$base_image" --build-arg RUNTIME_IMAGE="$base_image")
  if [ $prebuilt -eq 1 ]; then
    local packages
    packages=$(prebuilt_packages)
    args+=(--build-arg PREBUILT_BIN="$prebuilt_dir" --build-arg PREBUILT_PACKAGES="$packages")
  fi
  log "docker build ${args[*]} -t $tag"
  DOCKER_BUILDKIT=0 docker build --force-rm --network host -f deploy/docker/Dockerfile "${args[@]}" \
    -t "$tag" . >"${TANDEM_IMAGE_BUILD_LOG:-/tmp/tandem-image-build.log}" 2>&1 || {
    tail -30 "${TANDEM_IMAGE_BUILD_LOG:-/tmp/tandem-image-build.log}" >&2
    die "docker build failed (log: ${TANDEM_IMAGE_BUILD_LOG:-/tmp/tandem-image-build.log})"
  }
}

started=$SECONDS
check_docker
if docker image inspect "$base_image" >/dev/null 2>&1; then
  log "base image $base_image: present"
else
  timed "base image $base_image (debootstrap + import)" make_base_image
fi
if [ $prebuilt -eq 1 ]; then
  timed "programs (bazel build --config=nocuda, prebuilt)" build_prebuilt
else
  rm -rf "$prebuilt_dir"
fi
timed "image $tag (docker build, $([ $prebuilt -eq 1 ] && echo prebuilt || echo from source))" \
  build_image
size=$(docker image inspect --format '{{.Size}}' "$tag")
log "image $tag: $((size / 1000000)) MB; total $((SECONDS - started)) s"
