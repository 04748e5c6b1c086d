# shellcheck shell=bash disable=SC2034
# The ground the image build scripts and openhands-pins.sh stand on (sourced, not run, right
# after the script sets NAME and `set -Eeuo pipefail`): how they print, fail, clean up after
# themselves when they fail or are stopped, run a long command so that a signal stops it too,
# and the few docker calls all of them make. Each script had its own copy of these ~80 lines.
#
# What a script gets:
#   log, details, die          a step's line on stdout; the detail of a failure (colour codes and
#                              user:password@ removed) and the last line "NAME: error: …" on stderr
#   usage                      prints the script's "# Usage:" header block
#   run CMD…                   runs CMD in its own process group; stopping the script stops it
#   workdir, built_id,         what `cleanup` removes on exit when set: the temporary directory
#   check_name                 (never through a live mount), an image not yet tagged, a container
#   cleanup_more               a function the script may define: its own cleanup, run first
#   answer_status              an exit status that is an answer, not a failure (no error line)
#   require_docker, image_id, megabytes, pull_within, build_lock, tag_built: see each below.

# The script's own stdout and stderr, also for the last line, which may be printed while a
# step's output goes to a log file.
exec 7>&1 8>&2
log() { printf '%s: %s\n' "$NAME" "$*" >&7; }
# Lines of detail for a failure (e.g. the end of a log), on stderr, each with the prefix and
# without colour codes, any user:password@ in URLs, or the long command of a failed RUN line.
details() {
  LC_ALL=C sed -E -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e 's#(://)[^/@[:space:]]*@#\1***@#g' \
    -e "s#^(The command '/bin/sh -c).{80,}(' returned)#\1 …\2#" -e "s/^/$NAME:   | /" >&8
}
fail_msg=""
die() { fail_msg="$*"; exit 1; }
usage() { sed -n '/^# Usage:/,/^set -Eeuo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
truthy() { case "${1,,}" in 1|true|yes|on) return 0 ;; *) return 1 ;; esac; }
# A URL fit for a log line: without user:password@.
redact() { printf '%s' "$1" | sed -E 's#^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@]*@#\1***@#'; }
# The last non-empty line of a log, for a one-line reason.
last_line() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1 | tr -s '[:space:]' ' ' | sed 's/ $//'; }

# --- cleanup, signals, failures ----------------------------------------------------------
workdir=""        # temporary directory: logs, and a debootstrap root
child=""          # the long-running command now under way (its own process group)
built_id=""       # the new image until it is tagged
check_name=""     # the container of the final check
answer_status=""
err_line=""
err_cmd=""
signal=""
trap 'err_line=$LINENO; err_cmd=$BASH_COMMAND' ERR

# Unmounts what is mounted below a directory (debootstrap and chroots mount proc and sys there):
# never rm -rf through a live mount.
unmount_under() {
  local m
  awk -v r="$1/" 'index($2, r) == 1 { print $2 }' /proc/mounts 2>/dev/null | sort -r |
    while IFS= read -r m; do umount -l "$m" 2>/dev/null || true; done
}
cleanup() {
  if [ -n "$child" ]; then
    kill -TERM -- "-$child" 2>/dev/null || kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
    child=""
  fi
  if declare -F cleanup_more >/dev/null; then cleanup_more || true; fi
  if [ -n "$check_name" ]; then docker rm -f -v "$check_name" >/dev/null 2>&1 || true; fi
  if [ -n "$built_id" ]; then docker image rm "$built_id" >/dev/null 2>&1 || true; fi
  if [ -n "$workdir" ] && [ -d "$workdir" ]; then
    unmount_under "$workdir"
    rm -rf --one-file-system "$workdir" 2>/dev/null || true
  fi
}
on_exit() {
  local rc=$?
  trap - EXIT INT TERM HUP ERR
  set +e
  cleanup
  if [ "$rc" != 0 ] && [ "$rc" != "$answer_status" ]; then
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

# --- docker --------------------------------------------------------------------------------
require_docker() {
  command -v docker >/dev/null 2>&1 || die "the docker CLI is not installed (apt-get install docker.io)"
  local err
  if ! err=$(docker info 2>&1 >/dev/null); then
    printf '%s\n' "$err" | details
    die "the Docker engine is not reachable (is dockerd running, and may this user use it?)"
  fi
}
image_id() { docker image inspect --format '{{.Id}}' "$1" 2>/dev/null; }
megabytes() { echo "$(( ($(docker image inspect --format '{{.Size}}' "$1") + 500000) / 1000000 )) MB"; }

# pull_within IMAGE SECONDS: docker pull with a time limit (its log: $workdir/pull.log). Fails
# with pull_reason set to a one-line reason.
pull_within() {
  local rc=0
  pull_reason=""
  run timeout -k 5 "$2" docker pull "$1" >"$workdir/pull.log" 2>&1 || rc=$?
  if [ "$rc" = 0 ] && image_id "$1" >/dev/null; then return 0; fi
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then pull_reason="no answer within $2 s"; else pull_reason=$(last_line "$workdir/pull.log"); fi
  pull_reason="${pull_reason:-docker pull failed}"
  return 1
}

# build_lock NAME WHAT SECONDS: one build of NAME at a time on this machine (flock on
# /tmp/acs-NAME.lock, held until the script exits); a second run waits here for at most SECONDS
# and then has lock_waited=1, to look again for what the first one built.
build_lock() {
  local lock_file="/tmp/acs-$1.lock"
  lock_waited=0
  command -v flock >/dev/null 2>&1 || return 0
  # Opened read-only (flock does not need more), so another user's lock file works too.
  [ -e "$lock_file" ] || { : >>"$lock_file"; chmod 0666 "$lock_file"; } 2>/dev/null || true
  exec 9<"$lock_file" || die "cannot open the lock file $lock_file"
  flock -n 9 && return 0
  log "another $2 build is under way; waiting for it (at most $3 s)"
  run flock -w "$3" 9 || die "another $2 build still holds $lock_file after $3 s"
  lock_waited=1
}

# tag_built IMAGE [MORE…]: gives the checked image (built_id) its names, then removes the image
# IMAGE named before, unless something still uses it. Sets new_id.
tag_built() {
  local old_id t
  old_id=$(image_id "$1" || true)
  for t in "$@"; do docker tag "$built_id" "$t" || die "docker tag $built_id $t failed"; done
  new_id="$built_id"
  built_id=""
  # Without -f: an image still used by a container, or tagged with another name, stays.
  if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ] && docker image rm "$old_id" >/dev/null 2>&1; then
    log "removed the previous image ${old_id:0:19}"
  fi
}
