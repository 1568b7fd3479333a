#!/usr/bin/env bash
# The container image (deploy/image/Containerfile), built without a daemon or a registry:
#
#   scripts/image.sh base     a Debian 12 (bookworm) minbase made with debootstrap, with
#                             Debian's python3 (3.11) and python3-venv, committed as the local
#                             image localhost/krm-base:bookworm; cached (a second run is quick)
#   scripts/image.sh build    the Containerfile on that base (buildah bud, chroot isolation,
#                             vfs storage) -> localhost/kafka-replication-monitor:<version>
#                             and :latest; makes the base first when needed. One build at a
#                             time on the storage (a lock); an image already built from the
#                             same inputs (the files the build context lets in, the
#                             Containerfile, the base) is kept: "up to date", in seconds
#   scripts/image.sh run [--] CMD...
#                             CMD in a throw-away container of the image (buildah from + run;
#                             the image's user, environment and working folder; vfs copies
#                             the image for each container: some 20 s)
#   scripts/image.sh buildah ARGS...
#                             buildah on this script's storage (images, containers, inspect)
#   scripts/image.sh clean [--all]
#                             remove the containers left in the storage (--all: the whole cache)
#
# Everything lives under $IMAGE_CACHE (default .cache/image): the base's root file system as a
# tar keyed by its recipe (krm-base-<key>.tar), the downloaded .debs, and buildah's own storage
# (storage/, run/) -- apart from the host's /var/lib/containers. Needs root, buildah and
# debootstrap (scripts/bootstrap.sh installs both), and Debian's mirror and PyPI / Maven Central
# from the build.
#
# Environment:
#   IMAGE_CACHE        the cache folder (default <repo>/.cache/image)
#   IMAGE_BASE         the build's base (default localhost/krm-base:bookworm, made by `base`;
#                      another base is pulled: docker.io/library/python:3.11-slim-bookworm@...)
#   IMAGE_NAME         the image's name (default localhost/kafka-replication-monitor)
#   IMAGE_PIP_CACHE    a pip cache mounted into the build's steps (default: the host's,
#                      $PIP_CACHE_DIR or ~/.cache/pip, when it exists)
#   IMAGE_CA_BUNDLE    PEM certificates of a TLS-intercepting proxy for the build's downloads
#                      (default: the host's /usr/local/share/ca-certificates/*.crt, if any);
#                      a build secret, trusted by the build stage only
#   DEBIAN_MIRROR      (default http://deb.debian.org/debian; security: ...-security)
#   IMAGE_REBUILD=1    build even when the image is up to date (Debian's or PyPI's side moved)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${IMAGE_CACHE:-$ROOT/.cache/image}
BASE_IMAGE=localhost/krm-base:bookworm
IMAGE_BASE=${IMAGE_BASE:-$BASE_IMAGE}
IMAGE_NAME=${IMAGE_NAME:-localhost/kafka-replication-monitor}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-${MIRROR}-security}
SUITE=bookworm
# What the base holds besides minbase: what python:3.11-slim-bookworm has (python 3.11 with
# venv, CA certificates, netbase, tzdata). Changing the recipe changes the key: a new base.
BASE_PACKAGES=python3,python3-venv,ca-certificates,netbase,tzdata
BASE_RECIPE=1
BASE_KEY=$(printf '%s\n' "$SUITE" "$MIRROR" "$SECURITY_MIRROR" "$BASE_PACKAGES" "$BASE_RECIPE" \
  | sha256sum | cut -c1-16)
KEY_LABEL=org.kafka-replication-monitor.base-key
INPUTS_LABEL=org.kafka-replication-monitor.inputs-key
IGNOREFILE=$ROOT/deploy/image/Containerfile.dockerignore

BUILDAH=(buildah --root "$CACHE/storage" --runroot "$CACHE/run" --storage-driver vfs)

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'image.sh: %s\n' "$*" >&2; exit 1; }
now() { date +%s; }

need() {
  [ "$(id -u)" = 0 ] || die "needs root (debootstrap, buildah's chroot isolation)"
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null \
      || die "$tool not found (scripts/bootstrap.sh installs it: apt-get install $tool)"
  done
  mkdir -p "$CACHE"
  [ -f "$CACHE/.gitignore" ] || printf '*\n' >"$CACHE/.gitignore"
}

image_label() {  # label $2 of image $1 in the storage, or nothing
  "${BUILDAH[@]}" inspect --type image --format "{{index .OCIv1.Config.Labels \"$2\"}}" \
    "$1" 2>/dev/null || true
}

image_key() {  # the base-key label of an image in the storage, or nothing
  image_label "$1" "$KEY_LABEL"
}

# What the image is built from: every file the build context lets in (the ignore file is an
# allow list: its `!` lines; caches left out as it leaves them out), the Containerfile, the
# ignore file, the base (its recipe's key, or the reference pulled) and the version. A
# superset of what the build reads is safe (a needless rebuild at worst).
inputs_key() {
  local paths=() line
  while IFS= read -r line; do
    case "$line" in '!'*) paths+=("${line#!}") ;; esac
  done <"$IGNOREFILE"
  {
    printf '%s\n' "$IMAGE_BASE" "$BASE_KEY" "$(version)"
    sha256sum "$ROOT/deploy/image/Containerfile" "$IGNOREFILE" | cut -d' ' -f1
    (cd "$ROOT" && find "${paths[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' \
      -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
  } | sha256sum | cut -c1-16
}

# The base's root file system: debootstrap, then the apt sources of a Debian image (with
# bookworm-security), the security updates, and no caches or machine identity.
make_rootfs() {
  local tar=$1 rootfs="$CACHE/rootfs.partial"
  rm -rf "$rootfs"
  mkdir -p "$CACHE/debs"
  say "debootstrap --variant=minbase $SUITE ($MIRROR) + $BASE_PACKAGES"
  debootstrap --variant=minbase --include="$BASE_PACKAGES" --cache-dir="$CACHE/debs" \
    "$SUITE" "$rootfs" "$MIRROR"
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $SECURITY_MIRROR
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  # No service may start in the chroot while packages are upgraded.
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
  chmod 755 "$rootfs/usr/sbin/policy-rc.d"
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  say "security updates"
  chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    sh -euc 'apt-get update -q; apt-get upgrade -y -q; apt-get clean'
  rm -f "$rootfs/usr/sbin/policy-rc.d"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/apt \
    "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old "$rootfs"/tmp/* \
    "$rootfs"/var/cache/ldconfig/aux-cache
  : >"$rootfs/etc/resolv.conf"
  : >"$rootfs/etc/machine-id"
  rm -f "$rootfs/etc/hostname"
  tar --numeric-owner --xattrs -C "$rootfs" -cf "$tar.partial" .
  mv "$tar.partial" "$tar"
  rm -rf "$rootfs"
}

cmd_base() {
  need buildah debootstrap
  local start tar ctr mnt
  start=$(now)
  if [ "$(image_key "$BASE_IMAGE")" = "$BASE_KEY" ]; then
    say "base $BASE_IMAGE up to date (key $BASE_KEY)"
    return 0
  fi
  tar="$CACHE/krm-base-$BASE_KEY.tar"
  if [ ! -f "$tar" ]; then
    make_rootfs "$tar"
  fi
  say "importing $tar as $BASE_IMAGE"
  ctr=$("${BUILDAH[@]}" from --quiet scratch)
  mnt=$("${BUILDAH[@]}" mount "$ctr")
  tar --numeric-owner --xattrs -C "$mnt" -xpf "$tar"
  "${BUILDAH[@]}" umount "$ctr" >/dev/null
  "${BUILDAH[@]}" config \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd /bin/bash --label "$KEY_LABEL=$BASE_KEY" \
    --label org.opencontainers.image.description="Debian $SUITE minbase + $BASE_PACKAGES (scripts/image.sh)" \
    "$ctr"
  "${BUILDAH[@]}" commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
  # Older recipes' tars are of no further use.
  find "$CACHE" -maxdepth 1 -name 'krm-base-*.tar' ! -name "krm-base-$BASE_KEY.tar" -delete
  say "base $BASE_IMAGE ready ($(($(now) - start)) s)"
}

version() {
  sed -n 's/^version *= *"\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -n1
}

cmd_build() {
  need buildah
  local start ver key secret=() pull=() bundle=$CACHE/build-ca.pem
  start=$(now)
  # One build at a time on this storage (the suite's two lanes may both ask for the image):
  # the second waits, then finds it up to date. The lock goes with the process.
  exec 9>"$CACHE/build.lock"
  if ! flock -n 9; then
    say "waiting for the build running on $CACHE"
    flock 9
  fi
  if [ "$IMAGE_BASE" = "$BASE_IMAGE" ]; then
    cmd_base
  fi
  ver=$(version)
  key=$(inputs_key)
  if [ -z "${IMAGE_REBUILD:-}" ] && [ "$(image_label "$IMAGE_NAME:latest" "$INPUTS_LABEL")" = "$key" ] \
    && [ "$(image_label "$IMAGE_NAME:$ver" "$INPUTS_LABEL")" = "$key" ]; then
    say "image $IMAGE_NAME:$ver up to date (inputs $key; IMAGE_REBUILD=1 builds anyway)"
    return 0
  fi
  case "$IMAGE_BASE" in
    localhost/*) pull=(--pull=never) ;;  # made here: there is no registry to ask
    *) pull=(--pull=false) ;;            # pulled once (a digest names one image)
  esac
  if [ -n "${IMAGE_CA_BUNDLE:-}" ]; then
    bundle=$IMAGE_CA_BUNDLE
  elif compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    (umask 077 && cat /usr/local/share/ca-certificates/*.crt >"$bundle")
  else
    bundle=""
  fi
  [ -z "$bundle" ] || secret=(--secret "id=ca-bundle,src=$bundle")
  # The host's pip cache, mounted into the build's RUN steps (not into the image): a wheel
  # pip built once (pyspark's sdist) or downloaded is not fetched and built again.
  local pip_cache=${IMAGE_PIP_CACHE:-${PIP_CACHE_DIR:-$HOME/.cache/pip}} volume=()
  [ ! -d "$pip_cache" ] || volume=(--volume "$pip_cache:/root/.cache/pip")
  say "building $IMAGE_NAME:$ver on $IMAGE_BASE (inputs $key)"
  "${BUILDAH[@]}" bud --isolation chroot "${pull[@]}" "${secret[@]}" "${volume[@]}" \
    --build-arg "BASE=$IMAGE_BASE" \
    --file "$ROOT/deploy/image/Containerfile" \
    --ignorefile "$IGNOREFILE" \
    --label "org.opencontainers.image.version=$ver" --label "$INPUTS_LABEL=$key" \
    --tag "$IMAGE_NAME:$ver" --tag "$IMAGE_NAME:latest" \
    "$ROOT"
  # The build's working containers and its unnamed intermediate images are not kept.
  "${BUILDAH[@]}" rmi --prune >/dev/null 2>&1 || true
  say "built $IMAGE_NAME:$ver ($(($(now) - start)) s)"
}

cmd_run() {
  need buildah
  [ "${1:-}" != "--" ] || shift
  [ $# -gt 0 ] || die "run: no command"
  local ctr rc=0
  ctr=$("${BUILDAH[@]}" from --quiet --pull=never "$IMAGE_NAME:latest")
  "${BUILDAH[@]}" run --isolation chroot "$ctr" -- "$@" || rc=$?
  "${BUILDAH[@]}" rm "$ctr" >/dev/null
  return "$rc"
}

cmd_clean() {
  need buildah
  "${BUILDAH[@]}" rm --all >/dev/null || true
  if [ "${1:-}" = --all ]; then
    "${BUILDAH[@]}" rmi --all --force >/dev/null 2>&1 || true
    rm -rf "$CACHE"
  fi
}

# In braces, with its exit: bash parses the whole group before running it, so a build that
# runs for minutes is not derailed by an edit of this file meanwhile.
{
case "${1:-}" in
  base) shift; cmd_base "$@" ;;
  build) shift; cmd_build "$@" ;;
  run) shift; cmd_run "$@" ;;
  buildah) shift; need buildah; exec "${BUILDAH[@]}" "$@" ;;
  clean) shift; cmd_clean "$@" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
esac
exit
}
