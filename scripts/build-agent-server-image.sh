#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Builds the local image of an OpenHands agent-server sandbox spec,
# acs-openhands-agent-server:<version>, for any version pinned in scripts/agent-server-image/:
# Debian trixie (Python 3.13; the agent-server needs Python >= 3.12, which bookworm lacks) with
# bash, git, tmux, procps and python-is-python3 (`python`, as OpenHands' own images answer), and
# the agent-server, the SDK and its tools from PyPI in /opt/openhands, every package pinned by
# scripts/agent-server-image/requirements-<version>.txt. Skipped when the image exists.
#
# The version: --version, else the tag's (--tag acs-openhands-agent-server:1.34.0 builds
# 1.34.0), else DEFAULT_VERSION below, the newest pin (scripts/openhands-pins.sh moves it). A
# version without a requirements file fails, naming the versions there are.
#
# How: debootstrap --variant=minbase trixie from the machine's own Debian mirror (the first one
# in its apt sources serving the main archive), then pip installs the pinned packages in a chroot
# on this machine (so pip reaches PyPI, through whatever index, proxy and certificate authority
# the machine's own pip uses, and none of those stay in the image), then `docker import`. No
# registry is pulled from. Needs root (debootstrap, chroot).
#
# --resolve VERSION pins a version instead of building: in the same chroot, pip installs
# openhands-agent-server, openhands-sdk and openhands-tools VERSION and whatever they pull,
# `pip check`s them and writes their `pip freeze` to requirements-VERSION.txt.
#
# The container's command is /usr/local/bin/acs-agent-server: it starts the agent-server on
# $ACS_BIND_HOST (default 0.0.0.0) and $ACS_PORT_AGENT_SERVER (default 8000); the session key
# comes from OH_SESSION_API_KEYS_0, which the sandbox runtime sets for each sandbox (1.34 and
# 1.58 read it alike, and also SESSION_API_KEY).
#
# Output: one line per step on stdout, each starting with "build-agent-server-image: ". On
# failure the details (the end of a log) and a last line "build-agent-server-image: error: …" go
# to stderr, and the exit status is non-zero. A second run at the same time waits for the first.
#
# Usage: bash scripts/build-agent-server-image.sh [--force] [--tag IMAGE] [--version VERSION]
#        bash scripts/build-agent-server-image.sh --resolve VERSION [--force]
#   --force, ACS_AGENT_SERVER_IMAGE_FORCE=1   rebuild even if the image exists (with --resolve:
#                                             write the requirements file even if there is one)
#   --tag, ACS_AGENT_SERVER_IMAGE             the image to build (default acs-openhands-agent-server:VERSION)
#   --version VERSION                         the agent-server version (default: the tag's, else the newest pin)
#   --resolve VERSION                         write requirements-VERSION.txt; builds no image
#   ACS_DEBIAN_MIRROR                         the Debian mirror URL (default: from the apt sources)
#   ACS_SANDBOX_LOCK_TIMEOUT                  seconds to wait for another build (default 900)
set -Eeuo pipefail

NAME="build-agent-server-image"
SUITE="trixie"
# The newest pinned agent-server: the version built when neither --version nor a tag names one.
DEFAULT_VERSION="1.58.2"
PACKAGES=(bash git tmux procps ca-certificates python3 python3-venv python-is-python3)
# The PyPI packages a requirements file pins, all at the same version.
PINNED=(openhands-agent-server openhands-sdk openhands-tools)
# Bump when what the image contains or how it is configured changes (label io.acs.agent-server-image.version).
CONTENT_VERSION="2"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PINS_DIR="$HERE/agent-server-image"
# log, details, die, usage, run, cleanup on exit, and the docker helpers: lib/script-base.sh.
# shellcheck source=lib/script-base.sh
source "$HERE/lib/script-base.sh"
# shellcheck source=lib/debootstrap.sh
source "$HERE/lib/debootstrap.sh"

image="${ACS_AGENT_SERVER_IMAGE:-}"
version=""
resolve=""
lock_timeout="${ACS_SANDBOX_LOCK_TIMEOUT:-900}"
force=0
truthy "${ACS_AGENT_SERVER_IMAGE_FORCE:-0}" && force=1
usage_line="usage: $0 [--force] [--tag IMAGE] [--version VERSION] | --resolve VERSION [--force]"
while [ "$#" -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --tag|--version|--resolve)
      if [ "$#" -lt 2 ] || [ -z "$2" ]; then die "$1 needs a value ($usage_line)"; fi
      case "$1" in --tag) image="$2" ;; --version) version="$2" ;; --resolve) resolve="$2" ;; esac
      shift ;;
    --tag=*) image="${1#--tag=}" ;;
    --version=*) version="${1#--version=}" ;;
    --resolve=*) resolve="${1#--resolve=}" ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument: $1 ($usage_line)" ;;
  esac
  shift
done
[[ "$lock_timeout" =~ ^[0-9]+$ ]] || die "ACS_SANDBOX_LOCK_TIMEOUT must be a number of seconds, not '$lock_timeout'"

valid_version() { [[ "$1" =~ ^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$ ]]; }
requirements_of() { printf '%s/requirements-%s.txt' "$PINS_DIR" "$1"; }
# The pinned versions, oldest first, comma-separated.
pinned_versions() {
  local f out=()
  for f in "$PINS_DIR"/requirements-*.txt; do
    [ -f "$f" ] || continue
    f="${f##*/requirements-}"
    out+=("${f%.txt}")
  done
  [ "${#out[@]}" -gt 0 ] || { echo "none"; return; }
  printf '%s\n' "${out[@]}" | sort -V | paste -sd, - | sed 's/,/, /g'
}
# The tag of an image name (after the last ':' of its last path component), or nothing.
tag_of() {
  local last="${1##*/}"
  last="${last%%@*}"
  case "$last" in *:*) printf '%s' "${last##*:}" ;; esac
}

if [ -n "$resolve" ]; then
  if [ -n "$image" ] || [ -n "$version" ]; then die "--resolve writes a requirements file and builds no image: drop --tag and --version"; fi
  valid_version "$resolve" || die "'$resolve' is not a version (e.g. $DEFAULT_VERSION)"
  version="$resolve"
  REQUIREMENTS=$(requirements_of "$version")
else
  if [ -n "$version" ] && [ -n "$image" ]; then
    tagged=$(tag_of "$image")
    # A tag naming another pinned version would label one version's image as another's.
    if [ -n "$tagged" ] && [ "$tagged" != "$version" ] && [ -f "$(requirements_of "$tagged")" ]; then
      die "the tag $image names the pinned version $tagged, but --version says $version: give one of them"
    fi
  fi
  if [ -z "$version" ]; then
    if [ -n "$image" ]; then
      version=$(tag_of "$image")
      [ -n "$version" ] || die "the image $image has no tag to take the agent-server version from: give --version (pinned: $(pinned_versions))"
    else
      version="$DEFAULT_VERSION"
    fi
  fi
  valid_version "$version" || die "'$version' is not an agent-server version (pinned: $(pinned_versions))"
  [ -n "$image" ] || image="acs-openhands-agent-server:$version"
  REQUIREMENTS=$(requirements_of "$version")
fi

if [ -n "$resolve" ]; then
  if [ "$force" = 0 ] && [ -f "$REQUIREMENTS" ]; then
    log "openhands-agent-server $version is already pinned (scripts/agent-server-image/${REQUIREMENTS##*/}, $(grep -c '==' "$REQUIREMENTS") packages); nothing to do (--force resolves it again)"
    exit 0
  fi
  [ "$(id -u)" = 0 ] || die "resolving $version needs root (debootstrap and chroot): run this script with sudo"
else
  require_docker
  if [ "$force" = 0 ] && found=$(image_id "$image"); then
    log "$image already exists (${found:0:19}, $(megabytes "$image")); nothing to do (--force rebuilds it)"
    exit 0
  fi
  [ -f "$REQUIREMENTS" ] ||
    die "openhands-agent-server $version is not pinned: there is no ${REQUIREMENTS##*/} in scripts/agent-server-image/ (pinned: $(pinned_versions)); pin it with: bash scripts/build-agent-server-image.sh --resolve $version"
  [ "$(id -u)" = 0 ] || die "building $image needs root (debootstrap and chroot): run this script with sudo"
fi

build_lock "$NAME" "agent-server image" "$lock_timeout"
if [ "$lock_waited" = 1 ] && [ -z "$resolve" ] && [ "$force" = 0 ] && found=$(image_id "$image"); then
  log "$image was built meanwhile (${found:0:19}, $(megabytes "$image")); nothing to do"
  exit 0
fi

SECONDS=0
workdir=$(mktemp -d /var/tmp/acs-agent-server-build.XXXXXX)
root="$workdir/rootfs"
if [ -n "$resolve" ]; then steps=2; else steps=5; fi

# --- step 1: the mirror and debootstrap ------------------------------------------------------
find_debian_mirrors
need_debian_mirror
log "step 1/$steps: debootstrap $SUITE from $(redact "$mirror") ($mirror_from; a minute or two)"
debootstrap_root "$root" "${PACKAGES[@]}"

# --- step 2: the agent-server from PyPI, in a chroot ------------------------------------------
# The machine's resolver and certificate authorities, for pip only; both are removed below.
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
ca_bundle="${PIP_CERT:-${REQUESTS_CA_BUNDLE:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}}"
[ -f "$ca_bundle" ] && cp -L "$ca_bundle" "$root/tmp/host-ca.crt"
pip_env=(PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_DEFAULT_TIMEOUT="${PIP_DEFAULT_TIMEOUT:-180}" HOME=/root LANG=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin)
[ -f "$root/tmp/host-ca.crt" ] && pip_env+=(PIP_CERT=/tmp/host-ca.crt)
# The index the machine's pip uses (its environment, else its pip config files), and its proxies.
pip_setting() {
  local env_name="$1" key="$2" value="${!1:-}"
  if [ -z "$value" ] && command -v pip3 >/dev/null 2>&1; then
    value=$(pip3 config list 2>/dev/null | sed -n -E "s/^[a-z]+\\.$key='(.*)'\$/\\1/p" | head -n 1)
  fi
  if [ -n "$value" ]; then pip_env+=("$env_name=$value"); fi
}
pip_setting PIP_INDEX_URL index-url
pip_setting PIP_EXTRA_INDEX_URL extra-index-url
pip_setting PIP_TRUSTED_HOST trusted-host
for v in http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY; do
  [ -n "${!v:-}" ] && pip_env+=("$v=${!v}")
done
mount -t proc proc "$root/proc"
# Runs a shell script in the chroot with pip's settings; its output goes to $workdir/pip.log.
in_chroot() { run env -i "${pip_env[@]}" chroot "$root" /bin/sh -ec "$1" >"$workdir/pip.log" 2>&1; }

if [ -n "$resolve" ]; then
  specs=("${PINNED[@]/%/==$version}")
  log "step 2/2: resolving ${specs[*]} on the image's Python, from PyPI (a minute or two)"
  if ! in_chroot "
      python3 -m venv /opt/openhands
      /opt/openhands/bin/pip install --quiet ${specs[*]}
      /opt/openhands/bin/pip check
      /opt/openhands/bin/pip freeze >/tmp/freeze.txt
      python3 -c 'import platform; print(platform.python_version())' >/tmp/python-version.txt"; then
    tail -n 25 "$workdir/pip.log" | details
    die "pip could not install ${specs[*]} together on Python 3 of Debian $SUITE (the end of its output is above); nothing was written"
  fi
  python_version=$(cat "$root/tmp/python-version.txt")
  count=$(grep -c '==' "$root/tmp/freeze.txt")
  for p in "${PINNED[@]}"; do
    grep -qix "$p==$version" "$root/tmp/freeze.txt" || die "pip freeze lacks $p==$version; nothing was written"
  done
  {
    printf '%s\n' \
      "# The OpenHands agent-server image's Python packages, every one pinned (pip freeze of" \
      "# openhands-agent-server, openhands-sdk and openhands-tools $version resolved on Python $python_version" \
      "# in Debian $SUITE, as the image has it, by build-agent-server-image.sh --resolve on $(date -u +%Y-%m-%d))." \
      "# scripts/build-agent-server-image.sh installs exactly these into /opt/openhands."
    cat "$root/tmp/freeze.txt"
  } >"$REQUIREMENTS.tmp"
  mv -f "$REQUIREMENTS.tmp" "$REQUIREMENTS"
  umount -l "$root/proc"
  log "done: scripts/agent-server-image/${REQUIREMENTS##*/} pins openhands-agent-server $version and $count packages in all (Python $python_version) in $SECONDS s"
  exit 0
fi

log "step 2/5: installing openhands-agent-server $version and its $(grep -c '==' "$REQUIREMENTS") pinned packages from PyPI (a minute or two)"
cp "$REQUIREMENTS" "$root/tmp/requirements.txt"
if ! in_chroot '
    python3 -m venv /opt/openhands
    /opt/openhands/bin/pip install --quiet -r /tmp/requirements.txt
    /opt/openhands/bin/pip check'; then
  tail -n 25 "$workdir/pip.log" | details
  die "pip install of the pinned agent-server packages failed (the end of its output is above)"
fi
umount -l "$root/proc"

# --- step 3: configure -------------------------------------------------------------------------
log "step 3/5: configuring the image"
cat >"$root/usr/local/bin/acs-agent-server" <<'SH'
#!/bin/sh
# Starts the OpenHands agent-server of this sandbox. The sandbox runtime sets
# OH_SESSION_API_KEYS_0 (the sandbox's session key), ACS_PORT_AGENT_SERVER and ACS_BIND_HOST.
set -e
# Secrets the agent-server keeps on disk are sealed with this (so a restarted container can
# read its conversations again); the session key is as secret and already per sandbox.
if [ -z "${OH_SECRET_KEY:-}" ] && [ -n "${OH_SESSION_API_KEYS_0:-}" ]; then export OH_SECRET_KEY="$OH_SESSION_API_KEYS_0"; fi
mkdir -p "${OH_WORKSPACE_PATH:-/workspace/project}" "${OH_CONVERSATIONS_PATH:-/workspace/conversations}" "${OH_BASH_EVENTS_DIR:-/workspace/bash_events}"
cd /workspace
exec /opt/openhands/bin/python -m openhands.agent_server --host "${ACS_BIND_HOST:-0.0.0.0}" --port "${ACS_PORT_AGENT_SERVER:-8000}"
SH
chmod 0755 "$root/usr/local/bin/acs-agent-server"
mkdir -p "$root/workspace"
chmod 0777 "$root/workspace"
# The machine's resolver and certificate authorities go too.
strip_rootfs "$root"

log "step 4/5: importing into docker"
labels=(
  "io.acs.sandbox-image=openhands-agent-server"
  "io.acs.agent-server-image.version=$CONTENT_VERSION"
  "io.acs.agent-server-image.openhands=$version"
  "io.acs.agent-server-image.suite=$SUITE"
  "org.opencontainers.image.title=acs-openhands-agent-server"
  "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
)
changes=(
  --change 'WORKDIR /workspace'
  --change 'ENV LANG=C.UTF-8'
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
  --change 'ENV OH_CONVERSATIONS_PATH=/workspace/conversations OH_WORKSPACE_PATH=/workspace/project OH_BASH_EVENTS_DIR=/workspace/bash_events'
  # No VS Code, VNC or chromium here: their services stay off (the tool preload only starts chromium).
  --change 'ENV OH_ENABLE_VSCODE=false OH_ENABLE_VNC=false OH_PRELOAD_TOOLS=false OPENHANDS_SUPPRESS_BANNER=1 LITELLM_LOCAL_MODEL_COST_MAP=True'
  --change 'EXPOSE 8000'
  --change 'CMD ["/usr/local/bin/acs-agent-server"]'
  --change "LABEL ${labels[*]}"
  --message "acs OpenHands agent-server image: debootstrap $SUITE + openhands-agent-server $version, by scripts/build-agent-server-image.sh"
)
import_rootfs "$root" "${changes[@]}"
built_id="$imported_id"
rm -rf --one-file-system "$root"

# --- step 5: the agent-server answers ---------------------------------------------------------
log "step 5/5: checking that the agent-server starts and answers /health and /ready"
check_name="acs-agent-server-check-$$-$RANDOM"
docker run -d --init --name "$check_name" --network none -e OH_SESSION_API_KEYS_0=check "$built_id" >/dev/null
# /health answers once the server listens, /ready once it has started its services (the
# sandbox spec's health path); `python` is what an agent types.
# shellcheck disable=SC2016
if ! run timeout -k 5 180 docker exec "$check_name" sh -c 'python --version >&2 && exec python -c "$1"' _ '
import sys, time, urllib.request
deadline = time.monotonic() + 170
for path in ("/health", "/ready"):
    while True:
        try:
            with urllib.request.urlopen("http://127.0.0.1:8000" + path, timeout=2) as r:
                print(path, r.status, r.read().decode())
                break
        except Exception as error:
            if time.monotonic() > deadline:
                print(path, "did not answer:", error); sys.exit(1)
            time.sleep(1)' >"$workdir/check.log" 2>&1; then
  details <"$workdir/check.log"
  docker logs --tail 30 "$check_name" 2>&1 | details
  die "the agent-server in the new image did not answer /health and /ready (the check's output and the server's log are above); $image is unchanged"
fi
docker rm -f "$check_name" >/dev/null 2>&1 || true
check_name=""
tag_built "$image"
log "done: $image ($(megabytes "$image"), Debian $SUITE, Python $(docker run --rm --network none "$image" python3 -c 'import platform; print(platform.python_version())' 2>/dev/null || echo '?'), openhands-agent-server $version) in $SECONDS s"
