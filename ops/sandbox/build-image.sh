#!/usr/bin/env bash
# Build the Docker sandbox image locally, with no registry reachable:
#   debootstrap --variant=minbase bookworm (from a Debian mirror) -> tar | docker import (the base)
#   -> docker build FROM that base with ops/sandbox/Dockerfile.
# Idempotent: the image is tagged by a hash of this script, the Dockerfile and the package list;
# when that tag exists nothing is built (a second run takes about a second). Always (re)points
# `evoharness-sandbox:latest` -- the tag the Docker backend runs by default -- at the current build.
#
#   bash ops/sandbox/build-image.sh            # build if needed
#   EVOHARNESS_DEBIAN_MIRROR=http://... bash ops/sandbox/build-image.sh
#   bash ops/sandbox/build-image.sh --force    # rebuild even if the tag exists
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
IMAGE=${EVOHARNESS_SANDBOX_IMAGE:-evoharness-sandbox}
MIRROR=${EVOHARNESS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
# The C libraries the host's Python (stdlib extension modules) and common manylinux wheels link
# against, plus tini (PID 1: reaps orphans, forwards signals). Debian package names.
PACKAGES=(tini ca-certificates libbz2-1.0 libcrypt1 libexpat1 libffi8 libgcc-s1 libgssapi-krb5-2 liblzma5
          libncursesw6 libnsl2 libreadline8 libsqlite3-0 libssl3 libstdc++6 libtinfo6 libtirpc3 libuuid1 zlib1g)
FORCE=0
[ "${1:-}" = "--force" ] && FORCE=1

log() { echo "build-image: $*"; }
started=$(date +%s)

hash=$( { cat "$0" "$here/Dockerfile"; echo "$SUITE ${PACKAGES[*]}"; } | sha256sum | cut -c1-12)
tag="$IMAGE:$hash"
base="$IMAGE-base:$hash"

if ! docker info >/dev/null 2>&1; then
  echo "build-image: error: the Docker engine is not reachable (is dockerd running?)" >&2
  exit 1
fi

if [ "$FORCE" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  docker tag "$tag" "$IMAGE:latest"
  log "$tag is up to date (tagged $IMAGE:latest)"
  exit 0
fi

if [ "$FORCE" = 1 ] || ! docker image inspect "$base" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { echo "build-image: error: debootstrap not found (apt-get install debootstrap)" >&2; exit 1; }
  root=$(mktemp -d /var/tmp/evoharness-rootfs.XXXXXX)
  trap 'rm -rf "$root"' EXIT
  log "debootstrap --variant=minbase $SUITE from $MIRROR into $root (a few minutes) ..."
  include=$(IFS=,; echo "${PACKAGES[*]}")
  debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$MIRROR" \
    > "$root.log" 2>&1 || { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
  rm -f "$root.log"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  log "debootstrap done after $(( $(date +%s) - started ))s; importing as $base"
  tar --numeric-owner -C "$root" -c . | docker import - "$base" >/dev/null
  rm -rf "$root"
  trap - EXIT
fi

log "docker build $tag"
ctx=$(mktemp -d)
cp "$here/Dockerfile" "$ctx/"
DOCKER_BUILDKIT=0 docker build -q --build-arg "BASE=$base" --build-arg "CONTENT_HASH=$hash" \
  -t "$tag" -t "$IMAGE:latest" "$ctx" >/dev/null 2>"$ctx/err" || { cat "$ctx/err" >&2; rm -rf "$ctx"; exit 1; }
rm -rf "$ctx"

# Smoke test: the host's interpreter, venv and evoharness source, mounted read-only as the Docker
# backend mounts them, import the worker and the stdlib's C extension modules inside the image.
py="$repo/.venv/bin/python"
if [ -x "$py" ]; then
  mounts=$("$py" - <<'PY'
from evoharness.sandbox.bwrap import python_paths
print(" ".join(f"-v {p}:{p}:ro" for p in python_paths()))
PY
  )
  # shellcheck disable=SC2086
  if ! docker run --rm --network none --read-only $mounts "$tag" "$py" -c \
      "import ssl, sqlite3, ctypes, lzma, bz2, zlib, uuid, readline, decimal, evoharness.agent.worker" ; then
    echo "build-image: error: the host's Python does not run in $tag (a system library missing?)" >&2
    exit 1
  fi
  log "smoke test passed: the host's Python and evoharness run in $tag"
fi
log "built $tag (tagged $IMAGE:latest) in $(( $(date +%s) - started ))s"
