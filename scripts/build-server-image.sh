#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Builds the image of the example server, acs-server:<version> and acs-server:latest (<version>:
# examples/standalone-server/package.json), from the Dockerfile at the repository root: npm ci
# and npm run build in a build stage, then a runtime stage with the server's production
# dependencies only, the web console, tini as PID 1, the non-root user acs and the /data volume.
#
# The Dockerfile starts FROM a Debian bookworm image with Node 22 and npm. Two ways to have one,
# chosen automatically:
#   registry     node:22-bookworm-slim (ACS_SERVER_BASE_IMAGE), when it is on the engine or
#                `docker pull` gets it within a time limit.
#   debootstrap  for machines that reach no container registry: acs-debian:bookworm-slim, a
#                minimal bookworm from the machine's Debian mirror (debootstrap, slimmed as
#                Debian's own slim image is) with tini and ca-certificates, then
#                acs-node:<node>-bookworm-slim, the same plus the Node binary of the repository's pinned `node` devDependency
#                (node_modules/node/bin/node) and npm from the npm registry. Made once per machine
#                (rebuilt when this script's BASE_CONTENT_VERSION grows). Needs root.
# acs-debian:bookworm-slim is also a base for the compose file's PostgreSQL image
# (ACS_DEBIAN_IMAGE=acs-debian:bookworm-slim, deploy/compose/README.md).
#
# npm in the build reaches the npm registry as this machine does: the CA certificates added to
# this machine (of NODE_EXTRA_CA_CERTS and /usr/local/share/ca-certificates, less Node's roots
# and the distribution's) are given to the build stages (build argument EXTRA_CA_CERTS; not in
# the final image), and http_proxy/https_proxy are passed on if set. The Docker layer cache is kept between builds
# (the install layers are reused while package-lock.json and the manifests do not change); the
# build stages of earlier builds are removed.
#
# Output: one line per step on stdout, each starting with "build-server-image: ". On failure the
# details (the end of a log) and a last line "build-server-image: error: …" go to stderr, and
# the exit status is non-zero. A second run at the same time waits for the first.
#
# Usage: bash scripts/build-server-image.sh [--base auto|registry|debootstrap] [--tag NAME]
#   --base, ACS_SERVER_IMAGE_BASE      auto (default), registry or debootstrap
#   --tag, ACS_SERVER_IMAGE            the image's name, tagged :<version> and :latest (default acs-server)
#   ACS_SERVER_BASE_IMAGE              the registry way's base (default node:22-bookworm-slim)
#   ACS_SERVER_PULL_TIMEOUT            seconds `docker pull` of that base may take (default 60)
#   ACS_DEBIAN_MIRROR                  the Debian mirror URL (default: from the apt sources)
#   ACS_SERVER_IMAGE_LOCK_TIMEOUT      seconds to wait for another build (default 1800)
set -Eeuo pipefail

NAME="build-server-image"
SUITE="bookworm"
# Bump when what the debootstrap bases contain changes (label io.acs.base-image.version).
BASE_CONTENT_VERSION="1"
# npm in the debootstrap base (the build stage runs it; the official image carries its own).
NPM_VERSION="10.9.9"
BASE_PACKAGES=(tini ca-certificates)
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"

# log, details, die, usage, run, cleanup on exit, and the docker helpers: lib/script-base.sh.
# shellcheck source=lib/script-base.sh
source "$HERE/lib/script-base.sh"

# --- arguments -----------------------------------------------------------------------------
base="${ACS_SERVER_IMAGE_BASE:-auto}"
name="${ACS_SERVER_IMAGE:-acs-server}"
registry_base="${ACS_SERVER_BASE_IMAGE:-node:22-$SUITE-slim}"
pull_timeout="${ACS_SERVER_PULL_TIMEOUT:-60}"
lock_timeout="${ACS_SERVER_IMAGE_LOCK_TIMEOUT:-1800}"
while [ "$#" -gt 0 ]; do
  case "$1" in
    --base|--tag)
      [ "$#" -ge 2 ] || die "$1 needs a value (see --help)"
      if [ "$1" = --base ]; then base="$2"; else name="$2"; fi
      shift ;;
    --base=*) base="${1#--base=}" ;;
    --tag=*) name="${1#--tag=}" ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument: $1 (usage: $0 [--base auto|registry|debootstrap] [--tag NAME])" ;;
  esac
  shift
done
case "$base" in auto|registry|debootstrap) ;; *) die "unknown base '$base': use auto, registry or debootstrap" ;; esac
name="${name%:latest}"
if ! [[ "$name" =~ ^[a-z0-9][a-z0-9._/:-]*$ ]] || [[ "$name" =~ :[^/]*$ ]]; then
  die "the image name must be a repository without a tag (it is tagged :<version> and :latest), not '$name'"
fi
[[ "$pull_timeout" =~ ^[0-9]+$ ]] || die "ACS_SERVER_PULL_TIMEOUT must be a number of seconds, not '$pull_timeout'"
[[ "$lock_timeout" =~ ^[0-9]+$ ]] || die "ACS_SERVER_IMAGE_LOCK_TIMEOUT must be a number of seconds, not '$lock_timeout'"

version=$(sed -nE 's/^  "version": "([^"]+)".*/\1/p' "$ROOT/examples/standalone-server/package.json" | head -n 1)
[ -n "$version" ] || die "no version in examples/standalone-server/package.json"
image="$name:$version"
[ -f "$ROOT/Dockerfile" ] || die "$ROOT/Dockerfile is missing"

require_docker
# Node, for small JSON and certificate work: the one on PATH, else the repository's pinned one.
if command -v node >/dev/null 2>&1; then NODE=node
elif [ -x "$ROOT/node_modules/node/bin/node" ]; then NODE="$ROOT/node_modules/node/bin/node"
else die "node is not on PATH and node_modules/node is missing: run npm install first"
fi

# One build at a time on this machine: a second run waits here.
build_lock "$NAME" "server image" "$lock_timeout"

SECONDS=0
workdir=$(mktemp -d /var/tmp/acs-server-image.XXXXXX)

# --- step 1: the base ----------------------------------------------------------------------
log "step 1/4: choosing the base image…"
why=""
if [ "$base" = auto ]; then
  if image_id "$registry_base" >/dev/null; then
    base=registry; why="$registry_base is on this engine"
  else
    log "trying docker pull $registry_base (at most $pull_timeout s)"
    if pull_within "$registry_base" "$pull_timeout"; then
      base=registry; why="pulled $registry_base"
    else
      base=debootstrap; why="cannot pull $registry_base: $pull_reason"
    fi
  fi
elif [ "$base" = registry ]; then
  why="forced by --base or ACS_SERVER_IMAGE_BASE"
  if ! image_id "$registry_base" >/dev/null; then
    log "pulling $registry_base (at most $pull_timeout s)"
    if ! pull_within "$registry_base" "$pull_timeout"; then
      die "cannot pull $registry_base ($pull_reason): load it (docker load), set ACS_SERVER_BASE_IMAGE to a Debian $SUITE image with Node 22 and npm, or use --base debootstrap (as root)"
    fi
  fi
else
  why="forced by --base or ACS_SERVER_IMAGE_BASE"
fi
log "base: $base ($why)"

# --- step 2: the debootstrap bases ---------------------------------------------------------
# shellcheck source=lib/debootstrap.sh
source "$HERE/lib/debootstrap.sh"
# shellcheck source=lib/server-image.sh
source "$HERE/lib/server-image.sh"

if [ "$base" = registry ]; then
  base_image="$registry_base"
  log "step 2/4: base image $base_image ($(megabytes "$base_image"))"
else
  [ "$(id -u)" = 0 ] || die "the debootstrap base needs root: run this script with sudo, or make $registry_base available to docker (docker pull/load it) and use --base registry"
  ensure_node_base # sets base_image
fi

# --- step 3: docker build -------------------------------------------------------------------
# The Dockerfile copies each workspace's package.json by name (the classic builder has no
# COPY --parents): a workspace it lacks would fail npm ci obscurely.
# shellcheck disable=SC2016
missing=$("$NODE" -e '
  const { readFileSync } = require("node:fs");
  const dockerfile = readFileSync(`${process.argv[1]}/Dockerfile`, "utf8");
  const { workspaces } = JSON.parse(readFileSync(`${process.argv[1]}/package.json`, "utf8"));
  console.log(workspaces.filter((w) => !dockerfile.includes(`COPY ${w}/package.json ${w}/`)).join(" "));
' "$ROOT") || die "cannot read the workspaces of package.json"
[ -z "$missing" ] || die "the Dockerfile's manifests stage does not copy the package.json of the workspace(s) $missing: add a COPY line for each"

# The CA certificates added to this machine (those of NODE_EXTRA_CA_CERTS and
# /usr/local/share/ca-certificates that are neither Node's own roots nor the distribution's in
# /usr/share/ca-certificates), for npm in the build stages.
ca_files=()
if [ -n "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$NODE_EXTRA_CA_CERTS" ]; then ca_files+=("$NODE_EXTRA_CA_CERTS"); fi
while IFS= read -r -d '' f; do ca_files+=("$f"); done < <(find /usr/local/share/ca-certificates -type f -name '*.crt' -print0 2>/dev/null | sort -z)
extra_ca=""
if [ "${#ca_files[@]}" -gt 0 ]; then
  # The distribution's own certificates (Debian: /usr/share/ca-certificates) are no additions.
  # shellcheck disable=SC2016
  extra_ca=$("$NODE" -e '
    const { readFileSync, readdirSync } = require("node:fs");
    const { rootCertificates } = require("node:tls");
    const norm = (pem) => pem.replace(/\s+/g, "");
    const pems = (text) => text.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? [];
    const known = new Set(rootCertificates.map(norm));
    const walk = (dir) => {
      let entries = [];
      try { entries = readdirSync(dir, { withFileTypes: true }); } catch {}
      for (const e of entries) {
        const path = `${dir}/${e.name}`;
        if (e.isDirectory()) walk(path);
        else if (e.name.endsWith(".crt")) for (const pem of pems(readFileSync(path, "utf8"))) known.add(norm(pem));
      }
    };
    walk("/usr/share/ca-certificates");
    for (const file of process.argv.slice(1))
      for (const pem of pems(readFileSync(file, "utf8")))
        if (!known.has(norm(pem))) { known.add(norm(pem)); console.log(pem); }
  ' "${ca_files[@]}") || die "cannot read the CA certificates of ${ca_files[*]}"
fi
args=(--iidfile "$workdir/build.id" --force-rm -f "$ROOT/Dockerfile"
  --build-arg "BASE_IMAGE=$base_image" --build-arg "VERSION=$version")
note="no extra CA certificates"
if [ -n "$extra_ca" ]; then
  args+=(--build-arg "EXTRA_CA_CERTS=$extra_ca")
  note="$(grep -c 'BEGIN CERTIFICATE' <<<"$extra_ca") CA certificate(s) added to this machine, for npm"
fi
# Proxy build arguments are not recorded in the image's history.
for p in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  if [ -n "${!p:-}" ]; then args+=(--build-arg "$p=${!p}"); fi
done
log "step 3/4: docker build from $base_image ($note; a few minutes the first time, the install layers are reused after that)"
rc=0
run docker build "${args[@]}" "$ROOT" >"$workdir/build.log" 2>&1 || rc=$?
if [ "$rc" != 0 ] || [ ! -s "$workdir/build.id" ]; then
  tail -n 40 "$workdir/build.log" | details
  die "docker build failed (the end of its output is above)"
fi
built_id=$(cat "$workdir/build.id")
prune_build_stages "$workdir/build.log"

# --- step 4: check, then tag ----------------------------------------------------------------
log "step 4/4: checking that the image starts (fake sandboxes, memory storage, no network) and answers its health check"
check_server_image "$built_id"
tag_built "$image" "$name:latest"
log "done: $image and $name:latest (${new_id:0:19}, $(megabytes "$image"), base $base_image) in $SECONDS s"
