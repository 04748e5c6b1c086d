#!/usr/bin/env bash
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

# The script's own stdout and stderr, also for the last line, which may be printed while a
# step's output goes to a log file.
exec 7>&1 8>&2
log() { printf '%s: %s\n' "$NAME" "$*" >&7; }
# Lines of detail for a failure (e.g. the end of a log), on stderr, each with the prefix and
# without colour codes or any user:password@ in URLs.
details() {
  LC_ALL=C sed -E -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e 's#(://)[^/@[:space:]]*@#\1***@#g' \
    -e "s#^(The command '/bin/sh -c).{80,}(' returned)#\1 …\2#" -e "s/^/$NAME:   | /" >&8
}
fail_msg=""
die() { fail_msg="$*"; exit 1; }

usage() {
  sed -n '/^# Usage:/,/^set -Eeuo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

truthy() { case "${1,,}" in 1|true|yes|on) return 0 ;; *) return 1 ;; esac; }

# --- cleanup, signals, failures ----------------------------------------------------------
workdir=""        # temporary directory: logs, and the rootfs of the debootstrap way
child=""          # the long-running command now under way (its own process group)
built_id=""       # the new image until it is tagged
check_name=""     # the container of the final check
err_line=""
err_cmd=""
signal=""
trap 'err_line=$LINENO; err_cmd=$BASH_COMMAND' ERR

cleanup() {
  if [ -n "$child" ]; then
    kill -TERM -- "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
    child=""
  fi
  if [ -n "$check_name" ]; then docker rm -f "$check_name" >/dev/null 2>&1 || true; fi
  if [ -n "$built_id" ]; then docker image rm "$built_id" >/dev/null 2>&1 || true; fi
  if [ -n "$workdir" ] && [ -d "$workdir" ]; then
    # debootstrap mounts proc and sys inside the target: never rm -rf through a live mount.
    local m
    awk -v r="$workdir/" 'index($2, r) == 1 { print $2 }' /proc/mounts 2>/dev/null | sort -r |
      while IFS= read -r m; do umount -l "$m" 2>/dev/null || true; done
    rm -rf --one-file-system "$workdir" 2>/dev/null || true
  fi
}
on_exit() {
  local rc=$?
  trap - EXIT INT TERM HUP ERR
  set +e
  cleanup
  if [ "$rc" != 0 ]; then
    if [ -n "$signal" ]; then
      fail_msg="stopped by SIG$signal; temporary files and images removed"
    elif [ -z "$fail_msg" ]; then
      fail_msg="failed (exit status $rc${err_line:+ at line $err_line: $err_cmd})"
    fi
    printf '%s: error: %s\n' "$NAME" "$fail_msg" >&8
  fi
  exit "$rc"
}
trap on_exit EXIT
trap 'signal=INT; exit 130' INT
trap 'signal=TERM; exit 143' TERM
trap 'signal=HUP; exit 129' HUP

image="${ACS_SANDBOX_IMAGE:-acs-sandbox:$SUITE}"
method="${ACS_SANDBOX_IMAGE_METHOD:-auto}"
base_image="${ACS_SANDBOX_BASE_IMAGE:-debian:$SUITE-slim}"
pull_timeout="${ACS_SANDBOX_PULL_TIMEOUT:-60}"
lock_timeout="${ACS_SANDBOX_LOCK_TIMEOUT:-900}"
force=0
truthy "${ACS_SANDBOX_IMAGE_FORCE:-0}" && force=1
# SANDBOX_MIRROR: the name this override had before.
mirror_override="${ACS_DEBIAN_MIRROR:-${SANDBOX_MIRROR:-}}"
security_override="${ACS_DEBIAN_SECURITY_MIRROR:-}"

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

# Runs "$@" in its own process group and waits for it in a way a signal interrupts, so that
# stopping this script stops the command and everything it started, then cleans up.
if command -v setsid >/dev/null 2>&1; then setsid=(setsid); else setsid=(); fi
run() {
  local rc=0
  "${setsid[@]}" "$@" 7>&- 8>&- &
  child=$!
  wait "$child" || rc=$?
  child=""
  return "$rc"
}

# The last non-empty line of a log, for a one-line reason.
last_line() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1 | tr -s '[:space:]' ' ' | sed 's/ $//'; }

# A URL fit for a log line: without user:password@.
redact() { printf '%s' "$1" | sed -E 's#^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@#\1***@#'; }

image_id() { docker image inspect --format '{{.Id}}' "$1" 2>/dev/null; }
megabytes() { echo "$(( ($(docker image inspect --format '{{.Size}}' "$1") + 500000) / 1000000 )) MB"; }

# --- the engine, and the image already there ---------------------------------------------
command -v docker >/dev/null 2>&1 || die "the docker CLI is not installed (apt-get install docker.io)"
if ! docker_err=$(docker info 2>&1 >/dev/null); then
  printf '%s\n' "$docker_err" | details
  die "the Docker engine is not reachable (is dockerd running, and may this user use it?)"
fi

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
if command -v flock >/dev/null 2>&1; then
  lock_file="/tmp/acs-build-sandbox-image.lock"
  # Opened read-only (flock does not need more), so another user's lock file works too.
  [ -e "$lock_file" ] || { : >>"$lock_file"; chmod 0666 "$lock_file"; } 2>/dev/null || true
  exec 9<"$lock_file" || die "cannot open the lock file $lock_file"
  if ! flock -n 9; then
    log "another sandbox image build is under way; waiting for it (at most $lock_timeout s)"
    run flock -w "$lock_timeout" 9 || die "another sandbox image build still holds $lock_file after $lock_timeout s"
    if [ "$force" = 0 ] && current "$image"; then
      log "$image was built meanwhile (${found:0:19}, $(megabytes "$image")); nothing to do"
      exit 0
    fi
  fi
fi

SECONDS=0
workdir=$(mktemp -d /var/tmp/acs-sandbox-build.XXXXXX)

# --- the Debian mirror, from the apt sources ---------------------------------------------
# apt_debian_sources: see lib/debian-sources.sh.
# shellcheck source=lib/debian-sources.sh
source "$HERE/lib/debian-sources.sh"

# Sets mirror / mirror_from and security_mirror / security_from.
find_mirrors() {
  local sources kind uri suite file
  sources=$(apt_debian_sources 2>/dev/null || true)
  mirror="" mirror_from="" security_mirror="" security_from=""
  while IFS=$'\t' read -r kind uri suite file; do
    if [ "$kind" = main ] && [ -z "$mirror" ]; then mirror="$uri"; mirror_from="$file ($suite)"; fi
    if [ "$kind" = security ] && [ -z "$security_mirror" ]; then security_mirror="$uri"; security_from="$file ($suite)"; fi
  done <<<"$sources"
  if [ -n "$mirror_override" ]; then mirror="${mirror_override%/}"; mirror_from="ACS_DEBIAN_MIRROR"; fi
  if [ -n "$security_override" ]; then security_mirror="${security_override%/}"; security_from="ACS_DEBIAN_SECURITY_MIRROR"; fi
  local u
  for u in "$mirror" "$security_mirror"; do
    [ -z "$u" ] || [[ "$u" =~ ^https?://[^[:space:]]+$ ]] || die "the Debian mirror must be an http:// or https:// URL without spaces, not '$(redact "$u")'"
  done
}
mirror_help="set ACS_DEBIAN_MIRROR to the URL of a Debian mirror (the directory holding dists/$SUITE)"

# apt's own proxy (Acquire::http::Proxy), for debootstrap and the build, unless one is set.
apt_proxy() {
  local proto="$1" value=""
  command -v apt-config >/dev/null 2>&1 || return 0
  eval "$(apt-config shell value "Acquire::$proto::Proxy" 2>/dev/null)" || true
  case "$value" in ""|DIRECT|false) ;; *) printf '%s' "$value" ;; esac
}

# --- step 1: the method ------------------------------------------------------------------
log "step 1/4: choosing the build method…"
find_mirrors
why=""
if [ "$method" = auto ]; then
  if found=$(image_id "$base_image"); then
    method=dockerfile; why="the base image $base_image is on this engine"
  else
    log "trying docker pull $base_image (at most $pull_timeout s)"
    rc=0
    run timeout -k 5 "$pull_timeout" docker pull "$base_image" >"$workdir/pull.log" 2>&1 || rc=$?
    if [ "$rc" = 0 ] && image_id "$base_image" >/dev/null; then
      method=dockerfile; why="pulled $base_image"
    else
      if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then reason="no answer within $pull_timeout s"; else reason=$(last_line "$workdir/pull.log"); fi
      method=debootstrap; why="cannot pull $base_image: ${reason:-docker pull failed}"
      if [ "$(id -u)" != 0 ]; then
        die "cannot pull $base_image (${reason:-docker pull failed}), and the debootstrap way needs root: run this script with sudo, or make a Debian $SUITE image available to docker (docker pull/load it, or set ACS_SANDBOX_BASE_IMAGE to one you have) and it builds from the Dockerfile"
      fi
    fi
  fi
else
  why="forced by ACS_SANDBOX_IMAGE_METHOD or --method"
fi
if [ "$method" = debootstrap ]; then
  [ "$(id -u)" = 0 ] || die "debootstrap needs root: run this script with sudo, or build from the Dockerfile (ACS_SANDBOX_IMAGE_METHOD=dockerfile) on a machine that can pull $base_image"
  [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list, /etc/apt/sources.list.d/*.list or *.sources: $mirror_help, or add one to the apt sources"
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
  if ! command -v debootstrap >/dev/null 2>&1; then
    log "installing debootstrap"
    # Refresh the package lists first only when apt does not know debootstrap at all; stale
    # lists can name versions the mirror no longer has, so refresh once and retry on failure.
    if ! apt-cache policy debootstrap 2>/dev/null | grep -q 'Candidate: [0-9]'; then
      run apt-get update -qq >"$workdir/apt.log" 2>&1 || true
    fi
    if ! DEBIAN_FRONTEND=noninteractive run apt-get install -y -qq debootstrap >>"$workdir/apt.log" 2>&1; then
      run apt-get update -qq >>"$workdir/apt.log" 2>&1 || true
      if ! DEBIAN_FRONTEND=noninteractive run apt-get install -y -qq debootstrap >>"$workdir/apt.log" 2>&1; then
        tail -n 20 "$workdir/apt.log" | details
        die "apt-get install debootstrap failed (the end of its output is above)"
      fi
    fi
  fi
  mkdir "$root"
  local include
  include=$(IFS=,; echo "${PACKAGES[*]}")
  if ! http_proxy="${http_proxy:-$http_proxy_apt}" https_proxy="${https_proxy:-$https_proxy_apt}" \
      run debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$mirror" >"$workdir/debootstrap.log" 2>&1; then
    tail -n 20 "$workdir/debootstrap.log" | details
    if [ -f "$root/debootstrap/debootstrap.log" ]; then tail -n 20 "$root/debootstrap/debootstrap.log" | details; fi
    die "debootstrap failed (mirror $(redact "$mirror") from $mirror_from; the end of its log is above); to use another mirror, $mirror_help"
  fi

  mkdir -p "$root/workspace"
  chmod 0777 "$root/workspace"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/var/cache/apt/archives/partial/* "$root"/var/cache/debconf/*-old "$root"/var/log/apt/* \
    "$root"/var/log/dpkg.log "$root"/var/log/bootstrap.log "$root"/tmp/* "$root"/debootstrap
  # Docker bind-mounts its own resolv.conf here at run time; it must be a plain file (not a
  # symlink), and the build host's resolvers should not be baked into the image.
  rm -f "$root/etc/resolv.conf"
  : >"$root/etc/resolv.conf"

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
  # shellcheck disable=SC2016
  if ! run bash -c 'set -o pipefail; tar --numeric-owner -C "$1" -c . | docker import "${@:3}" - >"$2"' \
      _ "$root" "$workdir/import.id" "${changes[@]}" 2>"$workdir/import.log"; then
    details <"$workdir/import.log"
    die "docker import failed (its output is above)"
  fi
  built_id=$(cat "$workdir/import.id")
  rm -rf --one-file-system "$root"
}

build_dockerfile() {
  [ -f "$DOCKERFILE" ] || die "$DOCKERFILE is missing"
  if found=$(image_id "$base_image"); then
    log "step 2/4: base image $base_image: on this engine (${found:0:19})"
  else
    log "step 2/4: pulling the base image $base_image (at most $pull_timeout s)"
    rc=0
    run timeout -k 5 "$pull_timeout" docker pull "$base_image" >"$workdir/pull.log" 2>&1 || rc=$?
    if [ "$rc" != 0 ] || ! image_id "$base_image" >/dev/null; then
      if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then reason="no answer within $pull_timeout s"; else reason=$(last_line "$workdir/pull.log"); fi
      die "cannot pull $base_image (${reason:-docker pull failed}): load it (docker load), set ACS_SANDBOX_BASE_IMAGE to a Debian $SUITE image you have, or use ACS_SANDBOX_IMAGE_METHOD=debootstrap (as root)"
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

old_id=$(image_id "$image" || true)
docker tag "$built_id" "$image" || die "docker tag $built_id $image failed"
new_id="$built_id"
built_id=""
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
  # Without -f: an image still used by a container, or tagged with another name, stays.
  if docker image rm "$old_id" >/dev/null 2>&1; then log "removed the previous image ${old_id:0:19}"; fi
fi
log "done: $image ($(megabytes "$image"), $method; $versions) in $SECONDS s"
