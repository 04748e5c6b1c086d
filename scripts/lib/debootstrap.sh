# shellcheck shell=bash disable=SC2034
# The image build scripts' way to an image without a container registry (sourced, not run, after
# script-base.sh; the script sets SUITE and HERE): a minimal Debian root from the machine's own
# mirror (debootstrap), stripped of what an image does not keep, then `docker import`. Each of the
# three build scripts had its own copy of these steps.
#
# shellcheck source=lib/debian-sources.sh
source "$HERE/lib/debian-sources.sh"

mirror_help="set ACS_DEBIAN_MIRROR to the URL of a Debian mirror (the directory holding dists/$SUITE)"

# Sets mirror / mirror_from and security_mirror / security_from: the first of each in the apt
# sources (apt_debian_sources), unless ACS_DEBIAN_MIRROR / ACS_DEBIAN_SECURITY_MIRROR name one.
# Either may stay empty; need_debian_mirror fails without the first.
find_debian_mirrors() {
  local kind uri suite file u
  mirror="" mirror_from="" security_mirror="" security_from=""
  while IFS=$'\t' read -r kind uri suite file; do
    if [ "$kind" = main ] && [ -z "$mirror" ]; then mirror="$uri"; mirror_from="$file ($suite)"; fi
    if [ "$kind" = security ] && [ -z "$security_mirror" ]; then security_mirror="$uri"; security_from="$file ($suite)"; fi
  done < <(apt_debian_sources 2>/dev/null || true)
  if [ -n "${ACS_DEBIAN_MIRROR:-}" ]; then mirror="${ACS_DEBIAN_MIRROR%/}"; mirror_from="ACS_DEBIAN_MIRROR"; fi
  if [ -n "${ACS_DEBIAN_SECURITY_MIRROR:-}" ]; then
    security_mirror="${ACS_DEBIAN_SECURITY_MIRROR%/}"; security_from="ACS_DEBIAN_SECURITY_MIRROR"
  fi
  for u in "$mirror" "$security_mirror"; do
    [ -z "$u" ] || [[ "$u" =~ ^https?://[^[:space:]]+$ ]] || die "the Debian mirror must be an http:// or https:// URL without spaces, not '$(redact "$u")'"
  done
}
need_debian_mirror() {
  [ -n "$mirror" ] || die "no Debian mirror found in /etc/apt/sources.list, /etc/apt/sources.list.d/*.list or *.sources: $mirror_help, or add one to the apt sources"
}

# apt's own proxy (Acquire::http::Proxy), for debootstrap and builds, unless one is set.
apt_proxy() {
  local proto="$1" value=""
  command -v apt-config >/dev/null 2>&1 || return 0
  eval "$(apt-config shell value "Acquire::$proto::Proxy" 2>/dev/null)" || true
  case "$value" in ""|DIRECT|false) ;; *) printf '%s' "$value" ;; esac
}

install_debootstrap() {
  command -v debootstrap >/dev/null 2>&1 && return 0
  log "installing debootstrap"
  # Refresh the package lists first only when apt does not know debootstrap at all; stale lists
  # can name versions the mirror no longer has, so refresh once and retry on failure.
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
}

# debootstrap_root ROOT PACKAGE…: debootstrap --variant=minbase SUITE with the packages into
# ROOT (made here), from $mirror, through apt's proxy unless http_proxy/https_proxy are set.
debootstrap_root() {
  local root="$1" include
  shift
  need_debian_mirror
  install_debootstrap
  include=$(IFS=,; echo "$*")
  mkdir "$root"
  if ! http_proxy="${http_proxy:-$(apt_proxy http)}" https_proxy="${https_proxy:-$(apt_proxy https)}" \
      run debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$mirror" >"$workdir/debootstrap.log" 2>&1; then
    tail -n 20 "$workdir/debootstrap.log" | details
    if [ -f "$root/debootstrap/debootstrap.log" ]; then tail -n 20 "$root/debootstrap/debootstrap.log" | details; fi
    die "debootstrap $SUITE failed (mirror $(redact "$mirror") from $mirror_from; the end of its log is above); to use another mirror, $mirror_help"
  fi
}

# Removes from a root what an image does not keep: apt's lists and caches, logs, debootstrap's
# own files, caches in /root, /tmp's contents; and leaves /etc/resolv.conf a plain empty file
# (Docker bind-mounts its own there; the build host's resolvers stay out of the image).
strip_rootfs() {
  local root="$1"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/var/cache/apt/archives/partial/* "$root"/var/cache/debconf/*-old "$root"/var/log/apt/* \
    "$root"/var/log/dpkg.log "$root"/var/log/bootstrap.log "$root"/debootstrap "$root"/root/.cache
  find "$root/tmp" -mindepth 1 -delete 2>/dev/null || true
  rm -f "$root/etc/resolv.conf"
  : >"$root/etc/resolv.conf"
}

# import_rootfs ROOT [docker import option…]: the root as a new untagged image; sets imported_id.
import_rootfs() {
  local root="$1"
  shift
  # shellcheck disable=SC2016
  if ! run bash -c 'set -o pipefail; tar --numeric-owner -C "$1" -c . | docker import "${@:3}" - >"$2"' \
      _ "$root" "$workdir/import.id" "$@" 2>"$workdir/import.log"; then
    details <"$workdir/import.log"
    die "docker import failed (its output is above)"
  fi
  imported_id=$(cat "$workdir/import.id")
}
