#!/usr/bin/env bash
# Builds the local sandbox image acs-sandbox:bookworm without pulling from any container
# registry: debootstrap a minimal Debian 12 rootfs from the machine's own apt mirror, then
# `docker import` it. Idempotent: exits at once when the image already exists.
#
# Usage: bash scripts/build-sandbox-image.sh [--force]
#   --force           rebuild even if the image exists (the old image is removed if unused)
#   SANDBOX_MIRROR=…  override the Debian mirror URL (default: taken from the apt sources)
set -euo pipefail

IMAGE="acs-sandbox:bookworm"
SUITE="bookworm"
PACKAGES="bash,git,python3,ca-certificates,procps"
FALLBACK_MIRROR="http://deb.debian.org/debian"

die() { printf 'build-sandbox-image: error: %s\n' "$*" >&2; exit 1; }
log() { printf 'build-sandbox-image: %s\n' "$*"; }

force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument: $arg (usage: $0 [--force])" ;;
  esac
done

command -v docker >/dev/null 2>&1 || die "the docker CLI is not installed (apt-get install docker.io)"
if ! docker_err=$(docker info 2>&1 >/dev/null); then
  die "the Docker engine is not reachable (is dockerd running? see the 'docker engine' step in .ci/run):
$docker_err"
fi

if [ "$force" = 0 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  log "$IMAGE already exists ($(docker image inspect --format '{{.Id}}' "$IMAGE")); nothing to do (use --force to rebuild)"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "debootstrap needs root; run this script as root"
SECONDS=0

# --- debootstrap -------------------------------------------------------------------------
if ! command -v debootstrap >/dev/null 2>&1; then
  log "installing debootstrap"
  apt_updated=0
  # Refresh the package lists first only when apt does not know debootstrap at all.
  if ! apt-cache policy debootstrap 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    apt-get update -qq; apt_updated=1
  fi
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; then
    # Stale lists can name versions the mirror no longer has: refresh once and retry.
    [ "$apt_updated" = 0 ] || die "apt-get install debootstrap failed"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
      || die "apt-get install debootstrap failed"
  fi
fi

# --- mirror ------------------------------------------------------------------------------
# The first enabled "deb" source whose suite is exactly $SUITE (so not bookworm-security,
# nor third-party suites such as cloud-sdk-bookworm), from deb822 *.sources files or the
# one-line format of sources.list / *.list.
find_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$SUITE" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && enabled != "no" && (" " suites " ") ~ (" " suite " ") && uri != "") { print uri; found = 1; exit }
        types = ""; suites = ""; uri = ""; enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      { key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^[ \t]+/, "") }
      key == "types"   { types = $0 }
      key == "suites"  { suites = $0 }
      key == "uris"    { split($0, u, /[ \t]+/); uri = u[1] }
      key == "enabled" { enabled = tolower($0) }
      END { if (!found) flush() }
    ' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [options] URI suite components...
    sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk -v suite="$SUITE" '$1 == "deb" && $3 == suite { print $2 }'
  done
}
if [ -n "${SANDBOX_MIRROR:-}" ]; then
  mirror="$SANDBOX_MIRROR"
else
  mirror=$(find_mirror | grep -E '^https?://' | head -n1 || true)
  if [ -z "$mirror" ]; then
    mirror="$FALLBACK_MIRROR"
    log "no '$SUITE' source found in /etc/apt; falling back to $mirror"
  fi
fi
mirror="${mirror%/}"

# --- build the rootfs --------------------------------------------------------------------
root=$(mktemp -d /var/tmp/acs-sandbox-rootfs.XXXXXX)
cleanup() {
  # debootstrap mounts proc/sys inside the target; never rm -rf through a live mount.
  local m
  for m in $(awk -v r="$root/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf --one-file-system "$root"
  rm -f "$root.log"
}
trap cleanup EXIT

log "debootstrap $SUITE from $mirror into $root (minbase + $PACKAGES)"
if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$mirror" >"$root.log" 2>&1; then
  tail -n 30 "$root.log" >&2
  [ -f "$root/debootstrap/debootstrap.log" ] && tail -n 30 "$root/debootstrap/debootstrap.log" >&2
  die "debootstrap failed (mirror $mirror); the output above is the end of its log"
fi
rm -f "$root.log"
log "debootstrap done (${SECONDS}s)"

mkdir -p "$root/workspace"
chmod 0777 "$root/workspace"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/var/cache/apt/archives/partial/* "$root"/var/cache/debconf/*-old "$root"/var/log/apt/* \
  "$root"/var/log/dpkg.log "$root"/var/log/bootstrap.log "$root"/tmp/* "$root"/debootstrap
# Docker bind-mounts its own resolv.conf here at run time; it must be a plain file (not a
# symlink), and the build host's resolvers should not be baked into the image.
rm -f "$root/etc/resolv.conf"
: >"$root/etc/resolv.conf"

# --- import ------------------------------------------------------------------------------
old_id=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
log "importing as $IMAGE"
tar --numeric-owner -C "$root" -c . | docker import \
  --change 'WORKDIR /workspace' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["sleep","infinity"]' \
  --change "LABEL org.opencontainers.image.title=acs-sandbox org.opencontainers.image.base.name=debian:$SUITE acs.sandbox.packages=$PACKAGES acs.sandbox.mirror=$mirror acs.sandbox.built=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --message "debootstrap --variant=minbase $SUITE from $mirror by scripts/build-sandbox-image.sh" \
  - "$IMAGE" >/dev/null || die "docker import failed"

new_id=$(docker image inspect --format '{{.Id}}' "$IMAGE")
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
  docker image rm "$old_id" >/dev/null 2>&1 && log "removed the previous image $old_id" || true
fi
size=$(docker image inspect --format '{{.Size}}' "$IMAGE")
log "built $IMAGE: id $new_id, size $(( size / 1024 / 1024 )) MiB ($size bytes), in ${SECONDS}s"
