#!/usr/bin/env bash
# Makes a Python 3.12 venv of pinned packages the tests drive, kept in a stable directory and
# made again only when it is missing or its requirements changed (a hash of them is kept beside
# it). One script for every such venv; each is named by its requirements in scripts/venvs/:
#   openhands-sdk              the OpenHands CLI 1.16.0, SDK 1.21.0, openhands-workspace 1.11.1
#                              (examples/standalone-server/test/openhands-sdk-docker.test.ts, the
#                              uvicorn of packages/adapter-openai/test/servers.test.ts);
#                              tests find its python as ACS_OPENHANDS_PYTHON
#   openhands-sdk-latest       the SDK, tools and workspace pinned with the agent-server image
#                              (1.58.2; openhands-sdk-docker.test.ts, openhands-sdk-deltas-docker.test.ts);
#                              ACS_OPENHANDS_LATEST_PYTHON
#   litellm                    the LiteLLM proxy 1.106.12, a streaming OpenAI-compatible server we
#                              did not write (packages/adapter-openai/test/litellm.test.ts);
#                              ACS_LITELLM_PYTHON
#
# Usage: bash scripts/python-venv.sh NAME [DIR]      (DIR default /var/cache/acs/NAME-venv)
#   ACS_PYTHON312   the Python 3.12 to make it with (default: python3.12 on PATH, else the newest
#                   pyenv 3.12; the OpenHands CLI requires exactly 3.12)
set -Eeuo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
name="${1:?usage: python-venv.sh NAME [DIR] (NAME: one of scripts/venvs/*.txt)}"
REQUIREMENTS="$HERE/venvs/$name.txt"
[ -f "$REQUIREMENTS" ] || { echo "python-venv: error: no $REQUIREMENTS" >&2; exit 1; }
dir="${2:-/var/cache/acs/$name-venv}"
log() { printf 'python-venv %s: %s\n' "$name" "$*"; }

want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.requirements-sha256" 2>/dev/null)" = "$want" ]; then
  log "$dir is up to date ($("$dir/bin/python" --version 2>&1))"
  exit 0
fi

# Python 3.12 (Debian 12 has 3.11): python3.12 on PATH or pyenv's.
python_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 12) else 1)' >/dev/null 2>&1; }
python="${ACS_PYTHON312:-}"
if [ -z "$python" ]; then
  candidates=(python3.12)
  root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
  for v in $(ls -d "$root"/versions/3.12* 2>/dev/null | sort -rV); do candidates+=("$v/bin/python3"); done
  for c in "${candidates[@]}"; do
    if command -v "$c" >/dev/null 2>&1 && python_ok "$c"; then python=$(command -v "$c"); break; fi
  done
fi
if [ -z "$python" ] || ! python_ok "$python"; then
  echo "python-venv: error: no Python 3.12 found (python3.12 on PATH, pyenv); set ACS_PYTHON312 to one" >&2
  exit 1
fi

log "making $dir with $("$python" --version 2>&1) ($python) and $(grep -c '==' "$REQUIREMENTS") pinned packages (a minute or two)"
SECONDS=0
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
# Made in place (a venv's scripts name its path); a failed install leaves no venv behind.
trap 'rm -rf "$dir"' ERR
"$python" -m venv "$dir"
"$dir/bin/pip" install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
echo "$want" >"$dir/.requirements-sha256"
trap - ERR
log "done: $dir in $SECONDS s"
