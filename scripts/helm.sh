#!/usr/bin/env bash
# Helm v3, built from the Go module proxy once per machine and cached beside the Kubernetes
# binaries of scripts/k8s-cluster.sh (same layout: <cache>/<version>/bin, a build lock, Go caches
# of its own that are removed when the build succeeds). There is no download of a prebuilt helm.
#
# Usage: bash scripts/helm.sh [build|path]
#   build (default)  builds helm (about 3–5 minutes on 2 cores from empty Go caches; a no-op when
#                    the cache has it) and prints the binary's path on stdout, the only line there.
#   path             prints the binary's path if it is built (exit 0), or says how to build it (exit 1).
#
# Environment:
#   ACS_HELM_CACHE   where helm is cached (default /var/cache/acs/helm)
set -Eeuo pipefail

NAME="helm"
HELM_VERSION="v3.22.0"
CACHE="${ACS_HELM_CACHE:-/var/cache/acs/helm}"
BIN="$CACHE/$HELM_VERSION/bin"
# The Kubernetes version helm reports as its default capabilities (`helm template`, `helm lint`):
# the one its client-go (v0.37) speaks, as helm's own Makefile sets it.
K8S_MAJOR=1
K8S_MINOR=37

log() { printf '%s: %s\n' "$NAME" "$*" >&2; }
die() { printf '%s: error: %s\n' "$NAME" "$*" >&2; exit 1; }

cmd_build() {
  command -v go >/dev/null || die "go is not installed (helm is built from the Go module proxy)"
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.build.lock"
  flock -w 1800 9 || die "another build holds $CACHE/.build.lock"
  if [ ! -x "$BIN/helm" ]; then
    local started work ldflags
    started=$(date +%s)
    work="$CACHE/build"
    rm -rf "$work" "$BIN.tmp"
    mkdir -p "$work" "$BIN.tmp"
    export GOTOOLCHAIN=local GOFLAGS="-buildvcs=false -modcacherw" GOMODCACHE="$work/gomod" GOCACHE="$work/gocache" CGO_ENABLED=0
    ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.metadata="
    ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$K8S_MAJOR -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$K8S_MINOR"
    ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$K8S_MAJOR -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$K8S_MINOR"
    log "building helm $HELM_VERSION (Go module proxy)"
    # helm's go.mod has no replace directive, so `go install pkg@version` builds it as released.
    (cd "$work" && GOBIN="$BIN.tmp" nice -n 10 go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >"$work/build.log" 2>&1) ||
      { tail -30 "$work/build.log" >&2; die "building helm failed (log above)"; }
    "$BIN.tmp/helm" version --short >/dev/null || die "the built helm does not run"
    rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
    chmod -R go-w "$BIN"
    rm -rf "$work"
    log "built in $(( $(date +%s) - started ))s: $(du -sh "$BIN/helm" | cut -f1) in $BIN"
  fi
  exec 9>&-
  echo "$BIN/helm"
}

cmd_path() {
  [ -x "$BIN/helm" ] || die "helm $HELM_VERSION is not built: bash scripts/helm.sh build"
  echo "$BIN/helm"
}

case "${1:-build}" in
  build) cmd_build ;;
  path) cmd_path ;;
  *) sed -n '/^# Usage:/,/^set -Eeuo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
