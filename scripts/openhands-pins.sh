#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Moves the OpenHands pins to the newest release on PyPI, in one go: the agent-server image
# (openhands-agent-server, openhands-sdk and openhands-tools, resolved on the image's Python 3.13:
# scripts/agent-server-image/requirements-<version>.txt, written by build-agent-server-image.sh
# --resolve) and the SDK the tests drive against it (openhands-sdk, openhands-workspace and
# openhands-tools on Python 3.12: scripts/venvs/openhands-sdk-latest.txt). Then it points the
# default at the new version (DEFAULT_VERSION in build-agent-server-image.sh, AGENT_SERVER_VERSION
# in examples/standalone-server/src/config.ts, which the SDK tests read too), builds the
# image, remakes the venv, runs the SDK tests and reports what moved and how they went. The
# previous pins stay (their requirements files, their images); nothing is committed.
#
# The newest release is asked of the index the machine's pip uses (`pip index versions`, pip's own
# configuration: PIP_INDEX_URL, pip.conf), not of pypi.org directly. When the pins already name
# the version, it says so and does nothing.
#
# Output: one line per step on stdout, each starting with "openhands-pins: " (the build scripts'
# own lines pass through with theirs). On failure the details and a last line
# "openhands-pins: error: …" go to stderr, and the exit status is non-zero. Moving needs root (the
# image build's debootstrap and chroot).
#
# Usage: bash scripts/openhands-pins.sh [--check] [--version VERSION] [--skip-tests]
#   --check             only say whether PyPI has a release newer than the newest pin: exit
#                       status 0 when it has not, 3 when it has (1 when PyPI cannot be asked)
#   --version VERSION   move the pins to VERSION instead of the newest release (another or an
#                       older one; it must be on PyPI)
#   --skip-tests        move, build and make the venv, but do not run the SDK tests
#   ACS_OPENHANDS_LATEST_PYTHON   the venv's python (default /var/cache/acs/openhands-sdk-latest-venv/bin/python)
#   ACS_PYTHON312                 the Python 3.12 to resolve the SDK with (as scripts/python-venv.sh)
set -Eeuo pipefail

NAME="openhands-pins"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BUILD="$HERE/build-agent-server-image.sh"
PINS_DIR="$HERE/agent-server-image"
VENV_NAME="openhands-sdk-latest"
VENV_PINS="$HERE/venvs/$VENV_NAME.txt"
EXAMPLE="$ROOT/examples/standalone-server"
CONFIG_TS="$EXAMPLE/src/config.ts"
SDK_TESTS=(test/openhands-sdk-docker.test.ts test/openhands-sdk-deltas-docker.test.ts)
# Released together, always at one version: the image pins the first three, the venv all four
# (openhands-workspace requires the agent-server at any version; left open, pip 23 backtracks to
# an old one).
PACKAGES=(openhands-agent-server openhands-sdk openhands-tools openhands-workspace)
SDK_PACKAGES=(openhands-sdk openhands-workspace openhands-tools openhands-agent-server)

# log, details, die, usage, run, and cleanup on exit: lib/script-base.sh.
# shellcheck source=lib/script-base.sh
source "$HERE/lib/script-base.sh"
# --check's "PyPI has a newer release" is an answer, not a failure.
answer_status=3
venv_backup=""
# The venv's pins go back if the move stopped before the sources were pointed at them.
cleanup_more() {
  if [ -n "$venv_backup" ] && [ -f "$venv_backup" ]; then cp -f "$venv_backup" "$VENV_PINS"; fi
}

check=0
skip_tests=0
target=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --check) check=1 ;;
    --skip-tests) skip_tests=1 ;;
    --version)
      if [ "$#" -lt 2 ] || [ -z "$2" ]; then die "--version needs a value (a release on PyPI)"; fi
      target="$2"; shift ;;
    --version=*) target="${1#--version=}" ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument: $1 (usage: $0 [--check] [--version VERSION] [--skip-tests])" ;;
  esac
  shift
done
if [ -n "$target" ] && ! [[ "$target" =~ ^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$ ]]; then die "'$target' is not a version"; fi
if [ "$check" = 1 ] && [ -n "$target" ]; then die "--check says whether PyPI has a newer release; --version moves the pins: give one of them"; fi

newest_of() { sort -V | tail -n 1; }
workdir=$(mktemp -d /var/tmp/acs-openhands-pins.XXXXXX)

# --- what is pinned --------------------------------------------------------------------------
default_version=$(sed -n -E 's/^DEFAULT_VERSION="([^"]+)"$/\1/p' "$BUILD")
[ -n "$default_version" ] || die "no DEFAULT_VERSION=\"…\" line in $BUILD"
pinned=()
for f in "$PINS_DIR"/requirements-*.txt; do
  [ -f "$f" ] || continue
  f="${f##*/requirements-}"
  pinned+=("${f%.txt}")
done
[ "${#pinned[@]}" -gt 0 ] || die "no requirements file in $PINS_DIR"
newest_pinned=$(printf '%s\n' "${pinned[@]}" | newest_of)
pinned_list=$(printf '%s\n' "${pinned[@]}" | sort -V | paste -sd, - | sed 's/,/, /g')

# --- what PyPI has -----------------------------------------------------------------------------
# pip runs under any Python here; --python-version 3.12 asks for the releases that Python (the
# venv's; the image has 3.13) may install.
pip_cmd=()
for p in pip3 pip; do
  if command -v "$p" >/dev/null 2>&1; then pip_cmd=("$p"); break; fi
done
[ "${#pip_cmd[@]}" -gt 0 ] || pip_cmd=(python3 -m pip)
# Writes the released versions of a package on pip's index to a file, newest first, one a line.
released() {
  local out="$workdir/index-$1.txt"
  if ! run "${pip_cmd[@]}" index versions --disable-pip-version-check --python-version 3.12 --only-binary=:all: "$1" >"$out" 2>&1; then
    tail -n 5 "$out" | details
    die "pip index versions $1 failed (its output is above); is pip's index reachable (pip config list)?"
  fi
  sed -n -E 's/^Available versions: //p' "$out" | tr ',' '\n' | tr -d ' ' | grep -v '^$' >"$2" ||
    { details <"$out"; die "pip index versions $1 listed no versions (its output is above)"; }
}
log "asking pip's index for the releases of openhands-agent-server"
released openhands-agent-server "$workdir/released-openhands-agent-server"
newest=$(head -n 1 "$workdir/released-openhands-agent-server")
log "PyPI's newest openhands-agent-server: $newest; pinned: $pinned_list (default $default_version)"

if [ "$check" = 1 ]; then
  if [ "$(printf '%s\n' "$newest" "$newest_pinned" | newest_of)" = "$newest_pinned" ]; then
    if [ "$default_version" != "$newest_pinned" ]; then
      log "no newer release; but the default ($default_version) is not the newest pin ($newest_pinned): bash scripts/openhands-pins.sh --version $newest_pinned"
    else
      log "up to date: $newest is pinned and the default"
    fi
    exit 0
  fi
  log "a newer release exists: $newest (newest pin $newest_pinned); move the pins with: sudo bash scripts/openhands-pins.sh"
  exit 3
fi

version="${target:-$newest}"
for p in "${PACKAGES[@]}"; do
  [ -f "$workdir/released-$p" ] || released "$p" "$workdir/released-$p"
  if ! grep -qxF "$version" "$workdir/released-$p"; then
    die "$p $version is not on PyPI (pip's index), so the pins cannot move to $version (newest openhands-agent-server: $newest)"
  fi
done

# --- already there? ------------------------------------------------------------------------
config_version() { sed -n -E "s/^const AGENT_SERVER_VERSION = '([^']+)';\$/\\1/p" "$CONFIG_TS"; }
# Whether the venv's pins name every one of SDK_PACKAGES at $version.
venv_pinned() {
  local p
  for p in "${SDK_PACKAGES[@]}"; do grep -qxF "$p==$version" "$VENV_PINS" 2>/dev/null || return 1; done
}
[ -f "$CONFIG_TS" ] || die "$CONFIG_TS is missing"
[ -n "$(config_version)" ] || die "no \"const AGENT_SERVER_VERSION = '…';\" line in $CONFIG_TS (the default spec's version)"
requirements="$PINS_DIR/requirements-$version.txt"
if [ "$default_version" = "$version" ] && [ -f "$requirements" ] && venv_pinned &&
   [ "$(config_version)" = "$version" ]; then
  log "nothing to do: $version is already the pin (requirements-$version.txt, ${VENV_PINS#"$ROOT/"}, the build script's and config.ts's default)"
  exit 0
fi
[ "$(id -u)" = 0 ] || die "moving the pins builds the image (debootstrap and chroot): run this script with sudo"
older=""
if [ "$(printf '%s\n' "$version" "$default_version" | newest_of)" != "$version" ]; then older=" (older than the default)"; fi
if [ "$default_version" = "$version" ]; then
  log "completing the pins of $version (some part does not name it yet)"
else
  log "moving the pins from $default_version to $version$older"
fi
SECONDS=0
moved=()

# --- step 1: the image's requirements ----------------------------------------------------------
if [ -f "$requirements" ]; then
  log "step 1/6: ${requirements#"$ROOT/"} is there already"
else
  log "step 1/6: resolving the image's packages (build-agent-server-image.sh --resolve $version; a few minutes)"
  run bash "$BUILD" --resolve "$version" || die "resolving the agent-server's packages for $version failed (above); nothing else changed"
  moved+=("${requirements#"$ROOT/"} (new, $(grep -c '==' "$requirements") packages)")
fi

# --- step 2: the image ---------------------------------------------------------------------------
log "step 2/6: building acs-openhands-agent-server:$version (a few minutes unless it exists)"
run bash "$BUILD" --version "$version" ||
  die "building acs-openhands-agent-server:$version failed (above); the defaults still name $default_version"

# --- step 3: the SDK venv's pins -------------------------------------------------------------------
python_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 12) else 1)' >/dev/null 2>&1; }
find_python312() {
  local c candidates=(python3.12) v pyroot
  [ -z "${ACS_PYTHON312:-}" ] || { printf '%s' "$ACS_PYTHON312"; return; }
  pyroot=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
  while IFS= read -r v; do candidates+=("$v/bin/python3"); done < <(printf '%s\n' "$pyroot"/versions/3.12* | sort -rV)
  for c in "${candidates[@]}"; do
    if command -v "$c" >/dev/null 2>&1 && python_ok "$c"; then command -v "$c"; return; fi
  done
}
if venv_pinned; then
  log "step 3/6: ${VENV_PINS#"$ROOT/"} pins $version already"
else
  python=$(find_python312)
  { [ -n "$python" ] && python_ok "$python"; } || die "no Python 3.12 found (python3.12 on PATH, pyenv); set ACS_PYTHON312 to one"
  py_version=$("$python" -c 'import platform; print(platform.python_version())')
  specs=("${SDK_PACKAGES[@]/%/==$version}")
  log "step 3/6: resolving ${specs[*]} on Python $py_version ($python)"
  pip=("$workdir/venv/bin/pip" --disable-pip-version-check)
  if ! run "$python" -m venv "$workdir/venv" >"$workdir/sdk-pip.log" 2>&1 ||
     ! run "${pip[@]}" install --quiet "${specs[@]}" >>"$workdir/sdk-pip.log" 2>&1 ||
     ! run "${pip[@]}" check >>"$workdir/sdk-pip.log" 2>&1 ||
     ! run "${pip[@]}" freeze >"$workdir/freeze.txt" 2>>"$workdir/sdk-pip.log"; then
    tail -n 25 "$workdir/sdk-pip.log" | details
    die "pip could not install ${specs[*]} together on Python $py_version (the end of its output is above); the defaults still name $default_version"
  fi
  venv_backup="$workdir/venv-pins.backup"
  cp "$VENV_PINS" "$venv_backup" 2>/dev/null || : >"$venv_backup"
  {
    printf '%s\n' \
      "# The Python packages of the OpenHands SDK pinned with the agent-server image, which the SDK tests" \
      "# (examples/standalone-server/test/openhands-sdk-docker.test.ts, openhands-sdk-deltas-docker.test.ts)" \
      "# drive against acs-openhands-agent-server:$version: pip freeze of openhands-sdk, openhands-workspace," \
      "# openhands-tools and openhands-agent-server $version (which openhands-workspace requires) on Python" \
      "# $py_version, written by scripts/openhands-pins.sh on $(date -u +%Y-%m-%d)." \
      "# scripts/python-venv.sh $VENV_NAME installs exactly these."
    cat "$workdir/freeze.txt"
  } >"$VENV_PINS.tmp"
  mv -f "$VENV_PINS.tmp" "$VENV_PINS"
  moved+=("${VENV_PINS#"$ROOT/"} ($(grep -c '==' "$VENV_PINS") packages)")
fi

# --- step 4: the venv ------------------------------------------------------------------------------
venv_python="${ACS_OPENHANDS_LATEST_PYTHON:-/var/cache/acs/$VENV_NAME-venv/bin/python}"
venv_dir=$(dirname "$(dirname "$venv_python")")
cli_python="${ACS_OPENHANDS_PYTHON:-/var/cache/acs/openhands-sdk-venv/bin/python}"
log "step 4/6: making the venv $venv_dir (and the CLI's, which the SDK tests also drive)"
run bash "$HERE/python-venv.sh" "$VENV_NAME" "$venv_dir" ||
  die "making the venv $venv_dir failed (above); ${VENV_PINS#"$ROOT/"} and the defaults still name $default_version (bash scripts/python-venv.sh $VENV_NAME remakes its venv)"
run bash "$HERE/python-venv.sh" openhands-sdk "$(dirname "$(dirname "$cli_python")")" || die "making the CLI's venv failed (above)"
run "$venv_python" -c 'from openhands.workspace import OpenHandsCloudWorkspace' >"$workdir/import.log" 2>&1 ||
  { details <"$workdir/import.log"; die "the venv's openhands.workspace does not import OpenHandsCloudWorkspace (above)"; }
venv_backup=""

# --- step 5: the defaults ----------------------------------------------------------------------------
log "step 5/6: pointing the defaults at $version"
if [ "$default_version" != "$version" ]; then
  sed -i -E "s/^DEFAULT_VERSION=\"[^\"]+\"\$/DEFAULT_VERSION=\"$version\"/" "$BUILD"
  moved+=("${BUILD#"$ROOT/"}: DEFAULT_VERSION $default_version -> $version")
fi
was=$(config_version)
if [ "$was" != "$version" ]; then
  sed -i -E "s/^const AGENT_SERVER_VERSION = '[^']+';\$/const AGENT_SERVER_VERSION = '$version';/" "$CONFIG_TS"
  moved+=("${CONFIG_TS#"$ROOT/"}: AGENT_SERVER_VERSION $was -> $version (the default spec's image)")
fi
if [ "$(sed -n -E 's/^DEFAULT_VERSION="([^"]+)"$/\1/p' "$BUILD")" != "$version" ] || [ "$(config_version)" != "$version" ]; then
  die "the defaults did not move to $version (check $BUILD and $CONFIG_TS by hand)"
fi

# --- step 6: the SDK tests ---------------------------------------------------------------------------
test_result="not run (--skip-tests)"
test_rc=0
if [ "$skip_tests" = 0 ]; then
  test_log="${TMPDIR:-/tmp}/openhands-pins-$version-tests.log"
  log "step 6/6: the SDK tests against $version (cd examples/standalone-server && npx vitest run ${SDK_TESTS[*]}; several minutes; log: $test_log)"
  (cd "$EXAMPLE" && ACS_OPENHANDS_LATEST_PYTHON="$venv_python" ACS_OPENHANDS_PYTHON="$cli_python" run npx vitest run "${SDK_TESTS[@]}") >"$test_log" 2>&1 || test_rc=$?
  summary=$(LC_ALL=C sed -E 's/\x1b\[[0-9;]*[A-Za-z]//g' "$test_log" | grep -E '^ *(Test Files|Tests) ' | sed -E 's/^ +//; s/ +/ /g' | paste -sd';' - | sed 's/;/; /g')
  if [ "$test_rc" = 0 ]; then test_result="passed (${summary:-see $test_log})"; else test_result="FAILED (${summary:-exit status $test_rc}; log: $test_log)"; fi
else
  log "step 6/6: skipped (--skip-tests)"
fi

# --- the report --------------------------------------------------------------------------------
log "moved to $version in $SECONDS s:"
for m in "${moved[@]}"; do log "  $m"; done
log "  image acs-openhands-agent-server:$version ($(( ($(docker image inspect --format '{{.Size}}' "acs-openhands-agent-server:$version") + 500000) / 1000000 )) MB); venv $venv_dir"
log "SDK tests: $test_result"
if [ "$default_version" != "$version" ] && command -v git >/dev/null 2>&1; then
  left=$(git -C "$ROOT" grep -n -F -e "$default_version" -- README.md ARCHITECTURE.md docs .ci scripts examples/standalone-server/src examples/standalone-server/test \
    ':!scripts/agent-server-image/requirements-*' ':!scripts/venvs/*' 2>/dev/null | head -n 20 || true)
  if [ -n "$left" ]; then
    log "these lines still name $default_version (the previous pin?); review them by hand:"
    printf '%s\n' "$left" | sed "s/^/$NAME:   /" >&7
  fi
fi
log "review with git diff, then commit"
if [ "$test_rc" != 0 ]; then
  tail -n 30 "$test_log" | details
  die "the SDK tests failed against $version (the end of their log is above); the pins have moved (git diff shows them)"
fi
