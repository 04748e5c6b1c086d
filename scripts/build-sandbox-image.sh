#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Builds the local sandbox image acs-sandbox:bookworm (Debian bookworm with bash, git, python3 and
# python-is-python3 (`python`, as OpenHands' own images answer), ca-certificates, procps; working
# directory /workspace). Skipped when the image exists, unless this script built it with an older
# content version (its label io.acs.sandbox-image.version): such an image is built again.
#
# Two ways, chosen automatically:
#   dockerfile   docker build -f scripts/sandbox-image/Dockerfile, FROM debian:bookworm-slim; used when
#                that base image is on the engine or `docker pull` gets it within a time limit.
#   debootstrap  a minimal rootfs from the machine's Debian mirror, then `docker import`; for
#                machines that reach no container registry. Needs root.
# The Debian mirror is the machine's own: the first one in its apt sources serving the main
# archive (not security). Nothing in this script or in the image's labels names a host.
#
# Output: one line per step on stdout, each starting with "build-sandbox-image: ". On failure
# the details (e.g. the end of a build log) and then a last line "build-sandbox-image: error: …"
# go to stderr, and the exit status is non-zero. Safe to run twice at once: a second run waits
# for the first (flock) and then finds the image.
#
# Usage: bash scripts/build-sandbox-image.sh [--force] [--tag IMAGE] [--method METHOD]
#   --force, ACS_SANDBOX_IMAGE_FORCE=1   rebuild even if the image is current (the old image is
#                                        removed once the new one answers, if nothing uses it)
#   --tag, ACS_SANDBOX_IMAGE             the image to build (default acs-sandbox:bookworm)
#   --method, ACS_SANDBOX_IMAGE_METHOD   auto (default), dockerfile or debootstrap
#   ACS_SANDBOX_BASE_IMAGE               base of the dockerfile way (default debian:bookworm-slim)
#   ACS_SANDBOX_PULL_TIMEOUT             seconds `docker pull` of the base may take (default 60)
#   ACS_DEBIAN_MIRROR                    the Debian mirror URL (default: from the apt sources)
#   ACS_DEBIAN_SECURITY_MIRROR           the security mirror the dockerfile way also uses
#                                        (default: from the apt sources, if any)
#   ACS_SANDBOX_LOCK_TIMEOUT             seconds to wait for another build (default 900)
set -Eeuo pipefail

NAME="build-sandbox-image"
SUITE="bookworm"
PACKAGES=(bash git python3 python-is-python3 ca-certificates procps)
# Bump when what the image contains or how it is configured changes (label io.acs.sandbox-image.version):
# an image of this script with an older one is then built again.
CONTENT_VERSION="3"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DOCKERFILE="$HERE/sandbox-image/Dockerfile"

# log, details, die, usage, run, cleanup on exit, and the docker helpers: lib/script-base.sh.
# shellcheck source=lib/script-base.sh
source "$HERE/lib/script-base.sh"
# shellcheck source=lib/debootstrap.sh
source "$HERE/lib/debootstrap.sh"

image="${ACS_SANDBOX_IMAGE:-acs-sandbox:$SUITE}"
method="${ACS_SANDBOX_IMAGE_METHOD:-auto}"
base_image="${ACS_SANDBOX_BASE_IMAGE:-debian:$SUITE-slim}"
pull_timeout="${ACS_SANDBOX_PULL_TIMEOUT:-60}"
lock_timeout="${ACS_SANDBOX_LOCK_TIMEOUT:-900}"
force=0
truthy "${ACS_SANDBOX_IMAGE_FORCE:-0}" && force=1
# SANDBOX_MIRROR: the name ACS_DEBIAN_MIRROR had before.
ACS_DEBIAN_MIRROR="${ACS_DEBIAN_MIRROR:-${SANDBOX_MIRROR:-}}"

while [ "$#" -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --tag|--method)
      [ "$#" -ge 2 ] || die "$1 needs a value (see --help)"
      if [ "$1" = --tag ]; then image="$2"; else method="$2"; fi
      shift ;;
    --tag=*) image="${1#--tag=}" ;;
    --method=*) method="${1#--method=}" ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument: $1 (usage: $0 [--force] [--tag IMAGE] [--method auto|dockerfile|debootstrap])" ;;
  esac
  shift
done

case "$method" in auto|dockerfile|debootstrap) ;; *) die "unknown method '$method': use auto, dockerfile or debootstrap" ;; esac
[ -n "$image" ] || die "the image name (--tag / ACS_SANDBOX_IMAGE) is empty"
[[ "$pull_timeout" =~ ^[0-9]+$ ]] || die "ACS_SANDBOX_PULL_TIMEOUT must be a number of seconds, not '$pull_timeout'"
[[ "$lock_timeout" =~ ^[0-9]+$ ]] || die "ACS_SANDBOX_LOCK_TIMEOUT must be a number of seconds, not '$lock_timeout'"

# --- the engine, and the image already there ---------------------------------------------
require_docker

# Whether the image exists and needs no new build: not one of this script's (no io.acs.sandbox-image
# label: someone's own image, kept), or one of its current content version. Sets found and outdated.
current() {
  local labels ours has
  outdated=""
  found=$(image_id "$1") || return 1
  labels=$(docker image inspect --format '{{index .Config.Labels "io.acs.sandbox-image"}}|{{index .Config.Labels "io.acs.sandbox-image.version"}}' "$1" 2>/dev/null) || return 0
  ours="${labels%%|*}"
  has="${labels#*|}"
  [ "$has" != "<no value>" ] || has=""
  if [ -n "$ours" ] && [ "$ours" != "<no value>" ] && { ! [[ "$has" =~ ^[0-9]+$ ]] || [ "$has" -lt "$CONTENT_VERSION" ]; }; then
    outdated="${has:-none}"
    return 1
  fi
}

if [ "$force" = 0 ] && current "$image"; then
  log "$image already exists (${found:0:19}, $(megabytes "$image")); nothing to do (--force rebuilds it)"
  exit 0
fi
if [ "$force" = 0 ] && [ -n "$outdated" ]; then
  log "$image exists (${found:0:19}) but has content version $outdated, older than this script's $CONTENT_VERSION (packages: ${PACKAGES[*]}); building it again"
fi

# One build at a time on this machine: a second run waits here, then finds the image.
build_lock "$NAME" "sandbox image" "$lock_timeout"
if [ "$lock_waited" = 1 ] && [ "$force" = 0 ] && current "$image"; then
  log "$image was built meanwhile (${found:0:19}, $(megabytes "$image")); nothing to do"
  exit 0
fi

SECONDS=0
workdir=$(mktemp -d /var/tmp/acs-sandbox-build.XXXXXX)

# --- step 1: the method ------------------------------------------------------------------
log "step 1/4: choosing the build method…"
find_debian_mirrors
why=""
if [ "$method" = auto ]; then
  if found=$(image_id "$base_image"); then
    method=dockerfile; why="the base image $base_image is on this engine"
  else
    log "trying docker pull $base_image (at most $pull_timeout s)"
    if pull_within "$base_image" "$pull_timeout"; then
      method=dockerfile; why="pulled $base_image"
    else
      method=debootstrap; why="cannot pull $base_image: $pull_reason"
      if [ "$(id -u)" != 0 ]; then
        die "cannot pull $base_image ($pull_reason), and the debootstrap way needs root: run this script with sudo, or make a Debian $SUITE image available to docker (docker pull/load it, or set ACS_SANDBOX_BASE_IMAGE to one you have) and it builds from the Dockerfile"
      fi
    fi
  fi
else
  why="forced by ACS_SANDBOX_IMAGE_METHOD or --method"
fi
if [ "$method" = debootstrap ]; then
  [ "$(id -u)" = 0 ] || die "debootstrap needs root: run this script with sudo, or build from the Dockerfile (ACS_SANDBOX_IMAGE_METHOD=dockerfile) on a machine that can pull $base_image"
  need_debian_mirror
fi
if [ -n "$mirror" ]; then mirror_note="Debian mirror $(redact "$mirror") from $mirror_from"; else mirror_note="no Debian mirror in the apt sources: the base image's own"; fi
if [ "$method" = dockerfile ] && [ -n "$mirror" ] && [ -n "$security_mirror" ]; then
  mirror_note="$mirror_note, security mirror $(redact "$security_mirror") from $security_from"
fi
log "method: $method ($why); $mirror_note"

labels=(
  "io.acs.sandbox-image=$SUITE"
  "io.acs.sandbox-image.method=$method"
  "io.acs.sandbox-image.version=$CONTENT_VERSION"
  "io.acs.sandbox-image.packages=$(IFS=,; echo "${PACKAGES[*]}")"
  "org.opencontainers.image.title=acs-sandbox"
  "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
)
http_proxy_apt=$(apt_proxy http)
https_proxy_apt=$(apt_proxy https)

# --- steps 2 and 3: build ----------------------------------------------------------------
build_debootstrap() {
  local root="$workdir/rootfs"
  log "step 2/4: debootstrap $SUITE from $(redact "$mirror") (a minute or two)"
  debootstrap_root "$root" "${PACKAGES[@]}"
  mkdir -p "$root/workspace"
  chmod 0777 "$root/workspace"
  strip_rootfs "$root"

  log "step 3/4: importing into docker"
  local changes=(
    --change 'WORKDIR /workspace'
    --change 'ENV LANG=C.UTF-8'
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    --change 'CMD ["sleep","infinity"]'
    --change "LABEL ${labels[*]}"
    --message "acs sandbox image: debootstrap --variant=minbase $SUITE, by scripts/build-sandbox-image.sh"
  )
  # Imported without a tag: the image gets its name only once it answers (step 4).
  import_rootfs "$root" "${changes[@]}"
  built_id="$imported_id"
  rm -rf --one-file-system "$root"
}

build_dockerfile() {
  [ -f "$DOCKERFILE" ] || die "$DOCKERFILE is missing"
  if found=$(image_id "$base_image"); then
    log "step 2/4: base image $base_image: on this engine (${found:0:19})"
  else
    log "step 2/4: pulling the base image $base_image (at most $pull_timeout s)"
    if ! pull_within "$base_image" "$pull_timeout"; then
      die "cannot pull $base_image ($pull_reason): load it (docker load), set ACS_SANDBOX_BASE_IMAGE to a Debian $SUITE image you have, or use ACS_SANDBOX_IMAGE_METHOD=debootstrap (as root)"
    fi
  fi

  local args=(--iidfile "$workdir/build.id" --force-rm --build-arg "BASE_IMAGE=$base_image" --build-arg "PACKAGES=${PACKAGES[*]}")
  local l
  for l in "${labels[@]}"; do args+=(--label "$l"); done
  if [ -n "$mirror" ]; then
    args+=(--build-arg "DEBIAN_MIRROR=$mirror")
    [ -z "$security_mirror" ] || args+=(--build-arg "DEBIAN_SECURITY_MIRROR=$security_mirror")
    # A mirror on the build host's loopback (a local proxy) is reachable from the build only
    # on the host's network.
    if [[ "$mirror" =~ ^https?://([^/@]*@)?(localhost|127\.[0-9.]+|\[::1\])(:[0-9]+)?(/|$) ]]; then args+=(--network host); fi
  fi
  # apt's proxy: proxy build arguments are not recorded in the image's history.
  if [ -n "${http_proxy:-$http_proxy_apt}" ]; then args+=(--build-arg "http_proxy=${http_proxy:-$http_proxy_apt}"); fi
  if [ -n "${https_proxy:-$https_proxy_apt}" ]; then args+=(--build-arg "https_proxy=${https_proxy:-$https_proxy_apt}"); fi

  if [ -n "$mirror" ]; then from="packages from $(redact "$mirror")"; else from="packages from the base image's apt sources"; fi
  log "step 3/4: docker build from $base_image ($from; a minute or two)"
  rc=0
  # The Dockerfile needs no build context: an empty directory is sent.
  mkdir "$workdir/context"
  run docker build "${args[@]}" -f "$DOCKERFILE" "$workdir/context" >"$workdir/build.log" 2>&1 || rc=$?
  # The build stage's untagged image (marked by a label in the Dockerfile) is of no further use.
  docker image prune -f --filter "label=io.acs.sandbox-image.stage=build" >/dev/null 2>&1 || true
  if [ "$rc" != 0 ] || [ ! -s "$workdir/build.id" ]; then
    tail -n 25 "$workdir/build.log" | details
    die "docker build failed (the end of its output is above); another mirror: ACS_DEBIAN_MIRROR=…; or ACS_SANDBOX_IMAGE_METHOD=debootstrap (as root)"
  fi
  built_id=$(cat "$workdir/build.id")
}

if [ "$method" = debootstrap ]; then build_debootstrap; else build_dockerfile; fi

# --- step 4: check, then tag -------------------------------------------------------------
log "step 4/4: checking the image answers (bash, git, python3, python)"
check_name="acs-sandbox-check-$$-$RANDOM"
# shellcheck disable=SC2016
if ! run timeout -k 5 120 docker run --rm --name "$check_name" --network none "$built_id" \
    bash -lc 'git --version && python3 --version && [ "$(python --version 2>&1)" = "$(python3 --version 2>&1)" ] && command -v ps >/dev/null && [ "$PWD" = /workspace ]' \
    >"$workdir/check.log" 2>&1; then
  details <"$workdir/check.log"
  die "the new image does not answer (bash -lc 'git --version && python3 --version && python --version' in /workspace; its output is above); $image is unchanged"
fi
check_name=""
versions=$(sed -E -e 's/^git version /git /' "$workdir/check.log" | paste -sd, - | sed 's/,/, /g')

tag_built "$image"
log "done: $image ($(megabytes "$image"), $method; $versions) in $SECONDS s"
