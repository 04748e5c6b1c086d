#!/usr/bin/env bash
# A real single-node Kubernetes (v1.34.4) on this machine, for the Kubernetes sandbox tests and
# benchmarks: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a kubelet on a
# containerd of its own (its own config, socket, root and state; Docker's containerd is left
# alone), kube-proxy (iptables) and CoreDNS as kube-dns, so applications run in it too.
# Everything listens on 127.0.0.1, but for the pods' bridge (acsk8s0, 10.89.0.1/24): the API
# server is relayed there (socat) for pods, whose traffic out of the bridge is masqueraded. Tests
# reach pods through the API (exec, port-forward), never by their IP.
#
# Usage: bash scripts/k8s-cluster.sh build|up|down|status|import-image [IMAGE…]|env
#   build          builds the binaries once per machine into the cache (kube-apiserver,
#                  kube-controller-manager, kube-scheduler, kubelet, kubectl, kube-proxy from the
#                  Go module proxy through a wrapper module; crictl; CoreDNS; the pause and CoreDNS
#                  images). About 10 minutes on 2 cores from empty Go caches; a no-op when the
#                  cache has them (only what an older cache lacks is built).
#   up             build (if needed), start the cluster, wait for a Ready node and the default
#                  ServiceAccount, make the default StorageClass, add the node's rules for the
#                  pods' traffic (masquerade, forward), wait for kube-proxy and a ready CoreDNS
#                  (cluster.local, at 10.96.0.10), import the sandbox image from
#                  Docker (if Docker has it) and write the kubeconfig. Fails with the log of the
#                  part that did not come up (and tears down what it started).
#   down           ends only the processes `up` started (by their recorded PIDs), removes the pods'
#                  containers, mounts, cgroups, network bridge, kube-proxy's chains (KUBE-*), its
#                  own iptables rules and the files `up` made. Keeps the
#                  cached binaries and the containerd image store.
#   status         says whether the cluster is up (exit 0) or not (exit 1).
#   import-image   copies images from Docker into the cluster's containerd (default
#                  acs-sandbox:bookworm); skipped when the same image id is already there.
#   env            prints `export KUBECONFIG=…` for a shell.
#
# Environment:
#   ACS_K8S_CACHE   where binaries are cached (default /var/cache/acs/kubernetes)
#   ACS_K8S_STATE   the cluster's state: certificates, etcd, kubelet, containerd, logs
#                   (default /var/lib/acs-k8s); the kubeconfig is $ACS_K8S_STATE/admin.kubeconfig
#   ACS_K8S_RUN     sockets and PID files (default /run/acs-k8s)
#   ACS_K8S_PORT    the API server's port on 127.0.0.1 (default 16443)
set -Eeuo pipefail

NAME="k8s-cluster"
K8S_VERSION="v1.34.4"
STAGING_VERSION="v0.34.4"
CRICTL_VERSION="v1.34.0"
COREDNS_VERSION="v1.14.7"
PAUSE_IMAGE="acs.local/pause:3.10"
COREDNS_IMAGE="acs.local/coredns:$COREDNS_VERSION"
CACHE="${ACS_K8S_CACHE:-/var/cache/acs/kubernetes}"
BIN="$CACHE/$K8S_VERSION/bin"
STATE="${ACS_K8S_STATE:-/var/lib/acs-k8s}"
RUN="${ACS_K8S_RUN:-/run/acs-k8s}"
API_PORT="${ACS_K8S_PORT:-16443}"
# The processes `up` starts; each one's binary has its name.
PARTS=(etcd kube-apiserver socat kube-controller-manager kube-scheduler containerd kubelet kube-proxy)
ETCD_PORT=23790
ETCD_PEER_PORT=23800
KUBELET_PORT=10250
STREAM_PORT=10011
BRIDGE="acsk8s0"
POD_SUBNET="10.89.0.0/24"
# The bridge's own address: the pods' gateway, and where pods reach the API server (through socat).
BRIDGE_ADDRESS="10.89.0.1"
SERVICE_SUBNET="10.96.0.0/24"
DNS_ADDRESS="10.96.0.10"
CNI_NET="acs-k8s"
HOSTPATH_PV="/tmp/hostpath_pv"
KUBECONFIG_FILE="$STATE/admin.kubeconfig"
CONTAINERD_SOCK="$RUN/containerd.sock"
# Kept across up/down: the images already imported (so an up takes seconds, not an import).
CONTAINERD_ROOT="$STATE/containerd-root"

log() { printf '%s: %s\n' "$NAME" "$*"; }
die() { printf '%s: error: %s\n' "$NAME" "$*" >&2; exit 1; }
elapsed() { echo $(( $(date +%s) - $1 )); }

# --- build ---------------------------------------------------------------------------------

STAGING_MODULES=(api apimachinery client-go apiserver apiextensions-apiserver component-base component-helpers
  controller-manager cloud-provider cluster-bootstrap code-generator cri-api cri-client csi-translation-lib
  dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator kube-controller-manager kube-proxy
  kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission sample-apiserver cli-runtime)
KUBE_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl kube-proxy)

built() {
  local b
  for b in "${KUBE_BINARIES[@]}" crictl pause coredns; do [ -x "$BIN/$b" ] || return 1; done
  [ -s "$BIN/pause.oci.tar" ] && [ -s "$BIN/coredns.oci.tar" ]
}

cmd_build() {
  command -v go >/dev/null || die "go is not installed (the binaries are built from the Go module proxy)"
  mkdir -p "$CACHE"
  # One build at a time per machine.
  exec 9>"$CACHE/.build.lock"
  flock -w 3600 9 || die "another build holds $CACHE/.build.lock"
  # The lock is let go when the build is done, before `up` starts the cluster's parts: a part that
  # inherited it would hold it as long as the cluster runs, and the next build would wait an hour.
  if built; then
    log "binaries of $K8S_VERSION are in $BIN"
    exec 9>&-
    return 0
  fi
  local started work
  started=$(date +%s)
  work="$CACHE/build"
  mkdir -p "$work/wrapper/empty/sample-controller" "$work/wrapper/empty/sample-cli-plugin" "$work/crictl" "$work/pause" "$work/coredns" "$BIN.tmp"
  # A cache from an earlier version of this script: only what it lacks is built.
  [ -d "$BIN" ] && cp -al "$BIN/." "$BIN.tmp/"
  # The go caches of the build are its own, removed when it succeeds (about 4.5 GB).
  export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOMODCACHE="$work/gomod" GOCACHE="$work/gocache" CGO_ENABLED=0
  # k8s.io/kubernetes' module zip has no staging/ directory while its go.mod replaces every
  # staging module with ./staging/...: a wrapper module replaces each with its published version.
  {
    echo "module acs.local/kubernetes-build"
    echo
    echo "go 1.24.0"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    local m
    for m in "${STAGING_MODULES[@]}"; do echo "replace k8s.io/$m => k8s.io/$m $STAGING_VERSION"; done
    # Not served by the proxy; no binary needs them.
    echo "replace k8s.io/sample-controller => ./empty/sample-controller"
    echo "replace k8s.io/sample-cli-plugin => ./empty/sample-cli-plugin"
  } >"$work/wrapper/go.mod"
  echo "module k8s.io/sample-controller" >"$work/wrapper/empty/sample-controller/go.mod"
  echo "module k8s.io/sample-cli-plugin" >"$work/wrapper/empty/sample-cli-plugin/go.mod"
  log "resolving k8s.io/kubernetes $K8S_VERSION (Go module proxy)"
  local packages=() missing=() b
  for b in "${KUBE_BINARIES[@]}"; do
    [ -x "$BIN.tmp/$b" ] || { missing+=("$b"); packages+=("k8s.io/kubernetes/cmd/$b@$K8S_VERSION"); }
  done
  # go get of the commands records every module (and checksum) they need.
  if [ ${#missing[@]} -gt 0 ]; then
    (cd "$work/wrapper" && go get "${packages[@]}" >"$work/get.log" 2>&1) || { tail -30 "$work/get.log" >&2; die "resolving the modules failed (log above)"; }
  fi
  for b in "${missing[@]}"; do
    log "building $b ($(elapsed "$started")s)"
    (cd "$work/wrapper" && nice -n 10 go build -mod=mod -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34" -o "$BIN.tmp/$b" "k8s.io/kubernetes/cmd/$b" >"$work/$b.log" 2>&1) ||
      { tail -30 "$work/$b.log" >&2; die "building $b failed (log above)"; }
  done
  if [ ! -x "$BIN.tmp/crictl" ]; then
    log "building crictl $CRICTL_VERSION ($(elapsed "$started")s)"
    (cd "$work/crictl" && { [ -f go.mod ] || go mod init acs.local/crictl-build >/dev/null 2>&1; } &&
      printf 'package build\n\nimport _ "sigs.k8s.io/cri-tools/cmd/crictl"\n' >build.go &&
      go get "sigs.k8s.io/cri-tools@$CRICTL_VERSION" >"$work/crictl.log" 2>&1 &&
      go mod tidy >>"$work/crictl.log" 2>&1 &&
      nice -n 10 go build -mod=mod -trimpath -ldflags "-s -w" -o "$BIN.tmp/crictl" sigs.k8s.io/cri-tools/cmd/crictl >>"$work/crictl.log" 2>&1) ||
      { tail -30 "$work/crictl.log" >&2; die "building crictl failed (log above)"; }
  fi
  if [ ! -x "$BIN.tmp/coredns" ]; then
    log "building coredns $COREDNS_VERSION ($(elapsed "$started")s)"
    build_coredns "$work/coredns" "$BIN.tmp" >"$work/coredns.log" 2>&1 || { tail -30 "$work/coredns.log" >&2; die "building coredns failed (log above)"; }
  fi
  if [ ! -s "$BIN.tmp/pause.oci.tar" ]; then
    log "building the pause image $PAUSE_IMAGE"
    build_pause "$work/pause" "$BIN.tmp"
  fi
  rm -rf "$BIN" && mv "$BIN.tmp" "$BIN"
  chmod -R go-w "$BIN"
  rm -rf "$work"
  log "built in $(elapsed "$started")s: $(du -sh "$BIN" | cut -f1) in $BIN"
  exec 9>&-
}

# A static program that waits for SIGINT/SIGTERM (and reaps children), packed as an OCI image
# archive that `ctr images import` loads: there is no registry to pull registry.k8s.io/pause from.
build_pause() {
  local dir="$1" out="$2"
  mkdir -p "$dir/src" "$dir/rootfs"
  cat >"$dir/src/main.go" <<'GO'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var status syscall.WaitStatus
			if pid, _ := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
	}
}
GO
  echo "module acs.local/pause" >"$dir/src/go.mod"
  (cd "$dir/src" && go build -trimpath -ldflags "-s -w" -o "$dir/rootfs/pause" .) || die "building the pause binary failed"
  cp "$dir/rootfs/pause" "$out/pause"
  oci_image "$dir" "$PAUSE_IMAGE" '{"Entrypoint":["/pause"],"User":"65535:65535"}' "$out/pause.oci.tar"
}

# CoreDNS with only the plugins the cluster's Corefile uses (no forward: names outside the
# cluster are not resolved, so no query leaves the node), packed as an image like pause.
build_coredns() {
  local dir="$1" out="$2"
  mkdir -p "$dir/src" "$dir/rootfs"
  cat >"$dir/src/main.go" <<'GO'
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
GO
  (cd "$dir/src" && { [ -f go.mod ] || go mod init acs.local/coredns-build; } &&
    go get "github.com/coredns/coredns@$COREDNS_VERSION" && go mod tidy &&
    nice -n 10 go build -mod=mod -trimpath -ldflags "-s -w" -o "$dir/rootfs/coredns" .) || return 1
  cp "$dir/rootfs/coredns" "$out/coredns"
  oci_image "$dir" "$COREDNS_IMAGE" '{"Entrypoint":["/coredns"]}' "$out/coredns.oci.tar"
}

# oci_image DIR NAME CONFIG ARCHIVE: DIR/rootfs as a one-layer OCI image archive named NAME.
oci_image() {
  local dir="$1" name="$2" image_config="$3" archive="$4"
  mkdir -p "$dir/oci/blobs/sha256"
  # The root's entries by name, not `.`: the layer holds `pause`, not `./pause` (names of our own, no spaces).
  # shellcheck disable=SC2046
  tar --numeric-owner --owner=0 --group=0 --mtime='2000-01-01' -C "$dir/rootfs" -cf "$dir/layer.tar" $(ls "$dir/rootfs")
  local layer_digest layer_size config config_digest manifest manifest_digest
  layer_digest=$(sha256sum "$dir/layer.tar" | cut -d' ' -f1)
  layer_size=$(stat -c %s "$dir/layer.tar")
  cp "$dir/layer.tar" "$dir/oci/blobs/sha256/$layer_digest"
  config="{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":$image_config,\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$layer_digest\"]}}"
  printf '%s' "$config" >"$dir/config.json"
  config_digest=$(sha256sum "$dir/config.json" | cut -d' ' -f1)
  cp "$dir/config.json" "$dir/oci/blobs/sha256/$config_digest"
  manifest="{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"sha256:$config_digest\",\"size\":${#config}},\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"sha256:$layer_digest\",\"size\":$layer_size}]}"
  printf '%s' "$manifest" >"$dir/manifest.json"
  manifest_digest=$(sha256sum "$dir/manifest.json" | cut -d' ' -f1)
  cp "$dir/manifest.json" "$dir/oci/blobs/sha256/$manifest_digest"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$dir/oci/oci-layout"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest_digest" "${#manifest}" "$name" "${name##*:}" >"$dir/oci/index.json"
  tar --numeric-owner --owner=0 --group=0 -C "$dir/oci" -cf "$archive" oci-layout index.json blobs
}

# --- up ------------------------------------------------------------------------------------

pid_file() { echo "$RUN/pids/$1.pid"; }

# The PID recorded for a part, if that process is still the one we started (same binary).
our_pid() {
  local file pid exe
  file=$(pid_file "$1")
  [ -f "$file" ] || return 1
  pid=$(cat "$file")
  [ -d "/proc/$pid" ] || return 1
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  case "$exe" in *"/$2"|*"/$2 (deleted)") echo "$pid" ;; *) return 1 ;; esac
}

start_part() {
  local name="$1" binary="$2"
  shift 2
  log "starting $name"
  setsid "$binary" "$@" >"$STATE/logs/$name.log" 2>&1 </dev/null 9>&- &
  echo $! >"$(pid_file "$name")"
}

fail_up() {
  local part="$1" why="$2"
  echo "--- the last lines of $part's log ($STATE/logs/$part.log) ---" >&2
  tail -40 "$STATE/logs/$part.log" >&2 2>/dev/null || true
  echo "--- tearing down what was started ---" >&2
  cmd_down >&2 || true
  die "$part did not come up: $why"
}

# wait_for PART SECONDS COMMAND…: until COMMAND succeeds; fails with PART's log.
wait_for() {
  local part="$1" seconds="$2"
  shift 2
  local deadline=$(( $(date +%s) + seconds ))
  # Each part's binary has the part's name. (It used to be read from /proc right after the start,
  # where it could still be setsid's before its exec: the part then looked exited, and was torn down.)
  until "$@" >/dev/null 2>&1; do
    our_pid "$part" "$part" >/dev/null || fail_up "$part" "it exited"
    [ "$(date +%s)" -lt "$deadline" ] || fail_up "$part" "not ready after ${seconds}s"
    sleep 0.3
  done
}

kubectl_() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

make_certs() {
  local pki="$STATE/pki"
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -key ca.key -days 30 -sha256 -subj /CN=acs-k8s-ca -out ca.crt 2>/dev/null
    # name CN O SAN-or-empty USAGE
    cert() {
      openssl genrsa -out "$1.key" 2048 2>/dev/null
      openssl req -new -key "$1.key" -subj "/CN=$2${3:+/O=$3}" -out "$1.csr" 2>/dev/null
      { [ -n "$4" ] && echo "subjectAltName = $4"; echo "extendedKeyUsage = $5"; } >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -sha256 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    }
    cert apiserver kube-apiserver "" "IP:127.0.0.1,IP:$BRIDGE_ADDRESS,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.96.0.1" serverAuth
    cert admin acs-admin system:masters "" clientAuth
    cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" clientAuth
    cert kubelet system:node:localhost system:nodes "" clientAuth
    cert kube-proxy system:kube-proxy "" "" clientAuth
    cert kubelet-serving localhost "" "IP:127.0.0.1,DNS:localhost" serverAuth
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

kubeconfig() {
  local file="$1" user="$2"
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: acs-k8s
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $STATE/pki/ca.crt
users:
- name: $user
  user:
    client-certificate: $STATE/pki/$user.crt
    client-key: $STATE/pki/$user.key
contexts:
- name: acs-k8s
  context: {cluster: acs-k8s, user: $user}
current-context: acs-k8s
EOF
}

write_configs() {
  mkdir -p "$STATE/cni/net.d" "$STATE/kubelet" "$RUN/containerd-state"
  cat >"$STATE/containerd.toml" <<EOF
version = 2
root = "$CONTAINERD_ROOT"
state = "$RUN/containerd-state"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$RUN/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "$STREAM_PORT"
  # Root here cannot lower oom_score_adj (the pause container asks for -998): without this runc
  # fails every pod with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$STATE/cni/net.d"
EOF
  # A bridge with addresses from host-local, the bridge's address as the pods' gateway; the one
  # masquerade rule for the pod subnet is up's own (node_rules), not one per pod.
  cat >"$STATE/cni/net.d/10-acs-k8s.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$CNI_NET",
  "plugins": [
    { "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "isDefaultGateway": true, "ipMasq": false, "hairpinMode": false,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$POD_SUBNET" }]] } },
    { "type": "loopback" }
  ]
}
EOF
  cat >"$STATE/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $STATE/pki/kubelet-serving.crt
tlsPrivateKeyFile: $STATE/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $STATE/pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
resolvConf: ""
clusterDNS: [$DNS_ADDRESS]
clusterDomain: cluster.local
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
# The shared disk of a development machine is often fuller than the defaults allow.
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
EOF
  kubeconfig "$STATE/admin.kubeconfig" admin
  kubeconfig "$STATE/kubelet.kubeconfig" kubelet
  kubeconfig "$STATE/kube-proxy.kubeconfig" kube-proxy
}

cmd_up() {
  [ "$(id -u)" = 0 ] || die "needs root (containerd, the kubelet, cgroups, mounts)"
  local part
  for part in "${PARTS[@]}"; do
    if our_pid "$part" "$part" >/dev/null; then
      cmd_status >/dev/null && { log "already up: export KUBECONFIG=$KUBECONFIG_FILE"; return 0; }
      die "$part is running (PID $(our_pid "$part" "$part")) but the cluster is not ready: run \`bash scripts/k8s-cluster.sh down\` first"
    fi
  done
  local tool
  for tool in etcd containerd runc conntrack socat iptables openssl; do
    command -v "$tool" >/dev/null || die "$tool is missing: apt-get install etcd-server containerd runc containernetworking-plugins conntrack socat iptables openssl"
  done
  [ -x /usr/lib/cni/bridge ] || die "the CNI plugins are missing: apt-get install containernetworking-plugins"
  cmd_build
  local started
  started=$(date +%s)
  rm -rf "$STATE/pki" "$STATE/etcd" "$STATE/logs" "$STATE/kubelet" "$STATE/cni"
  mkdir -p "$STATE/logs" "$RUN/pids"
  # What existed before, so down removes only what up made.
  : >"$RUN/made"
  local path
  for path in /var/lib/kubelet /var/log/pods /var/log/containers "$HOSTPATH_PV" /var/lib/cni; do
    [ -e "$path" ] || echo "$path" >>"$RUN/made"
  done
  make_certs
  write_configs
  # The bridge is made before its first pod: socat listens on its address.
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr replace "$BRIDGE_ADDRESS/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  node_rules add

  start_part etcd etcd --name acs-k8s --data-dir "$STATE/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "acs-k8s=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" --log-level warn
  start_part containerd containerd --config "$STATE/containerd.toml"
  wait_for etcd 60 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"

  start_part kube-apiserver "$BIN/kube-apiserver" \
    --bind-address=127.0.0.1 --secure-port="$API_PORT" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --advertise-address="$BRIDGE_ADDRESS" \
    --service-cluster-ip-range="$SERVICE_SUBNET" \
    --client-ca-file="$STATE/pki/ca.crt" \
    --tls-cert-file="$STATE/pki/apiserver.crt" --tls-private-key-file="$STATE/pki/apiserver.key" \
    --kubelet-client-certificate="$STATE/pki/apiserver-kubelet-client.crt" --kubelet-client-key="$STATE/pki/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$STATE/pki/ca.crt" \
    --kubelet-preferred-address-types=Hostname \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$STATE/pki/sa.pub" --service-account-signing-key-file="$STATE/pki/sa.key" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=false --profiling=false --v=1
  wait_for kube-apiserver 90 kubectl_ get --raw /readyz
  log "API server ready ($(elapsed "$started")s)"
  # The API server listens on 127.0.0.1 only; pods reach it at the address it advertises (the
  # endpoint of the `kubernetes` Service) through this relay, which listens on the bridge only.
  start_part socat socat "TCP-LISTEN:$API_PORT,bind=$BRIDGE_ADDRESS,reuseaddr,fork" "TCP:127.0.0.1:$API_PORT"

  start_part kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$STATE/admin.kubeconfig" --authentication-kubeconfig="$STATE/admin.kubeconfig" --authorization-kubeconfig="$STATE/admin.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false \
    --service-account-private-key-file="$STATE/pki/sa.key" --root-ca-file="$STATE/pki/ca.crt" \
    --use-service-account-credentials=true \
    --enable-hostpath-provisioner=true --pvclaimbinder-sync-period=2s \
    --controllers='*,-nodeipam,-service-lb-controller,-route,-cloud-node-lifecycle' \
    --profiling=false --v=1
  start_part kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig="$STATE/admin.kubeconfig" --authentication-kubeconfig="$STATE/admin.kubeconfig" --authorization-kubeconfig="$STATE/admin.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --profiling=false --v=1
  wait_for containerd 60 "$BIN/crictl" --runtime-endpoint "unix://$CONTAINERD_SOCK" info
  if ! ctr_ images ls -q | grep -qx "$PAUSE_IMAGE"; then
    ctr_ images import "$BIN/pause.oci.tar" >/dev/null || fail_up containerd "importing the pause image failed"
  fi
  if ! ctr_ images ls -q | grep -qx "$COREDNS_IMAGE"; then
    ctr_ images import "$BIN/coredns.oci.tar" >/dev/null || fail_up containerd "importing the CoreDNS image failed"
  fi
  # Pods a crashed earlier run left in this containerd.
  "$BIN/crictl" --runtime-endpoint "unix://$CONTAINERD_SOCK" rmp -fa >/dev/null 2>&1 || true

  start_part kubelet "$BIN/kubelet" --config="$STATE/kubelet/config.yaml" --kubeconfig="$STATE/kubelet.kubeconfig" \
    --root-dir="$STATE/kubelet" --hostname-override=localhost --v=1
  wait_for kubelet 90 node_ready
  log "node Ready ($(elapsed "$started")s)"
  # NodePorts only on the bridge, and the node's conntrack settings left as they are.
  start_part kube-proxy "$BIN/kube-proxy" --kubeconfig="$STATE/kube-proxy.kubeconfig" --hostname-override=localhost \
    --proxy-mode=iptables --cluster-cidr="$POD_SUBNET" --nodeport-addresses="$BRIDGE_ADDRESS/32" --iptables-localhost-nodeports=false \
    --healthz-bind-address=127.0.0.1:10256 --metrics-bind-address=127.0.0.1:10249 \
    --conntrack-max-per-core=0 --conntrack-tcp-timeout-established=0 --conntrack-tcp-timeout-close-wait=0 --v=1
  wait_for kube-controller-manager 60 kubectl_ -n default get serviceaccount default
  kubectl_ apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: hostpath
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: kubernetes.io/host-path
reclaimPolicy: Delete
volumeBindingMode: Immediate
EOF
  wait_for kube-proxy 60 curl -fsS http://127.0.0.1:10256/healthz
  sed -e "s|@DNS_ADDRESS@|$DNS_ADDRESS|" -e "s|@COREDNS_IMAGE@|$COREDNS_IMAGE|" "$(dirname "${BASH_SOURCE[0]}")/k8s-cluster-dns.yaml" | kubectl_ apply -f - >/dev/null
  # Ready means it has read the Services through the `kubernetes` Service: kube-proxy, the relay
  # and the pods' routes work.
  kubectl_ -n kube-system rollout status deployment/coredns --timeout=90s >/dev/null ||
    { kubectl_ -n kube-system logs deployment/coredns --tail=20 >>"$STATE/logs/kube-proxy.log" 2>&1 || true; fail_up kube-proxy "CoreDNS is not ready after 90s (its log is at the end)"; }
  log "cluster DNS ready ($(elapsed "$started")s)"
  if command -v docker >/dev/null && docker image inspect acs-sandbox:bookworm >/dev/null 2>&1; then
    cmd_import_image acs-sandbox:bookworm
  else
    log "Docker has no acs-sandbox:bookworm (yet): import it later with \`bash scripts/k8s-cluster.sh import-image\`"
  fi
  log "up in $(elapsed "$started")s: export KUBECONFIG=$KUBECONFIG_FILE"
}

node_ready() {
  [ "$(kubectl_ get node localhost -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

ctr_() { ctr --address "$CONTAINERD_SOCK" -n k8s.io "$@"; }

cmd_import_image() {
  [ $# -gt 0 ] || set -- acs-sandbox:bookworm
  our_pid containerd containerd >/dev/null || die "the cluster's containerd is not running: bash scripts/k8s-cluster.sh up"
  local image id ref started
  for image in "$@"; do
    started=$(date +%s)
    id=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null) || die "Docker has no image $image (build it first, e.g. bash scripts/build-sandbox-image.sh)"
    # docker save names it docker.io/library/<name> for a short name; the CRI resolves a pod's
    # short image name the same way.
    ref="$image"
    case "$image" in */*) ;; *) ref="docker.io/library/$image" ;; esac
    if [ "$(ctr_ images ls "name==$ref" 2>/dev/null | awk 'NR==2 {print $3}')" != "" ] &&
      [ "$(ctr_ images ls "name==$ref" -q 2>/dev/null)" = "$ref" ] &&
      [ -f "$STATE/imported/$ref" ] && [ "$(cat "$STATE/imported/$ref")" = "$id" ]; then
      log "$image is already in the cluster"
      continue
    fi
    log "importing $image from Docker"
    docker save "$image" | ctr_ images import - >/dev/null || die "importing $image failed"
    mkdir -p "$(dirname "$STATE/imported/$ref")"
    echo "$id" >"$STATE/imported/$ref"
    log "imported $image in $(elapsed "$started")s"
  done
}

# node_rules add|delete: the node's rules for the pods' traffic out through the node (masqueraded)
# and back, past Docker's FORWARD policy DROP; each is marked, so only these are deleted.
node_rules() {
  local table chain spec
  while read -r table chain spec; do
    # shellcheck disable=SC2086 # spec is several words
    if [ "$1" = add ]; then
      iptables -w -t "$table" -C "$chain" $spec -m comment --comment acs-k8s 2>/dev/null ||
        iptables -w -t "$table" -A "$chain" $spec -m comment --comment acs-k8s
    else
      while iptables -w -t "$table" -D "$chain" $spec -m comment --comment acs-k8s 2>/dev/null; do :; done
    fi
  done <<RULES
nat POSTROUTING -s $POD_SUBNET ! -o $BRIDGE -j MASQUERADE
filter FORWARD -i $BRIDGE -j ACCEPT
filter FORWARD -o $BRIDGE -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
RULES
  if [ "$1" = add ] && [ "$(cat /proc/sys/net/ipv4/ip_forward)" != 1 ]; then
    echo 1 >/proc/sys/net/ipv4/ip_forward
    touch "$RUN/ip_forward"
  elif [ "$1" = delete ] && [ -f "$RUN/ip_forward" ]; then
    echo 0 >/proc/sys/net/ipv4/ip_forward
  fi
}

# kube-proxy's chains (KUBE-*) and the jumps to them, in both families: what `kube-proxy --cleanup`
# does, without its flushing every IPVS rule of the node.
remove_kube_chains() {
  local cmd table rule chain
  for cmd in iptables ip6tables; do
    command -v "$cmd" >/dev/null || continue
    for table in nat filter mangle; do
      { "$cmd" -w -t "$table" -S 2>/dev/null || true; } | { grep -E '^-A (PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING) .*-j KUBE-' || true; } |
        sed 's/^-A /-D /' | while read -r rule; do eval "$cmd -w -t $table $rule" 2>/dev/null || true; done
      for chain in $("$cmd" -w -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
        "$cmd" -w -t "$table" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$cmd" -w -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^KUBE-/ {print $2}'); do
        "$cmd" -w -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
}

# --- down ----------------------------------------------------------------------------------

stop_part() {
  local name="$1" binary="$2" pid i
  pid=$(our_pid "$name" "$binary") || { rm -f "$(pid_file "$name")"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
  if [ -d "/proc/$pid" ]; then
    log "$name (PID $pid) did not end in 20 s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$(pid_file "$name")"
}

cmd_down() {
  local started
  started=$(date +%s)
  [ -d "$RUN" ] || { log "nothing to tear down"; return 0; }
  # The kubelet first (so it restarts nothing), then the pods' containers through the CRI.
  stop_part kubelet kubelet
  if our_pid containerd containerd >/dev/null; then
    "$BIN/crictl" --runtime-endpoint "unix://$CONTAINERD_SOCK" rmp -fa >/dev/null 2>&1 || true
  fi
  local proxied=""
  [ -f "$(pid_file kube-proxy)" ] && proxied=1
  stop_part kube-proxy kube-proxy
  [ -z "$proxied" ] || remove_kube_chains
  node_rules delete
  stop_part kube-scheduler kube-scheduler
  stop_part kube-controller-manager kube-controller-manager
  stop_part kube-apiserver kube-apiserver
  # socat's children (one per connection) are in its process group.
  local relay
  if relay=$(our_pid socat socat); then kill -TERM -- "-$relay" 2>/dev/null || true; fi
  stop_part socat socat
  stop_part etcd etcd
  stop_part containerd containerd
  # Shims of our containerd that outlived it (they name its socket on their command line).
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" || true); do
    kill -KILL "$pid" 2>/dev/null || true
  done
  # Mounts under our directories (pods' volumes, containerd's snapshots and sandboxes), deepest first.
  local mount
  for mount in $(awk -v s="$STATE" -v r="$RUN" '$2 ~ "^"s"/" || $2 ~ "^"r"/" {print $2}' /proc/self/mounts | sort -r); do
    umount -l "$mount" 2>/dev/null || true
  done
  # The kubelet's pod cgroups (kubepods), deepest first, in every v1 hierarchy.
  local cg
  for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  rm -rf "/var/lib/cni/networks/$CNI_NET" /var/lib/cni/results/"$CNI_NET"-* 2>/dev/null || true
  if [ -f "$RUN/made" ]; then
    while read -r path; do rm -rf "$path"; done <"$RUN/made"
  fi
  rm -rf "$STATE/etcd" "$STATE/kubelet" "$STATE/pki" "$STATE/cni" "$STATE/admin.kubeconfig" "$STATE/kubelet.kubeconfig" "$STATE/kube-proxy.kubeconfig" "$RUN"
  log "down in $(elapsed "$started")s (logs of the last run in $STATE/logs)"
}

cmd_status() {
  local part up=0
  for part in "${PARTS[@]}"; do
    if pid=$(our_pid "$part" "$part"); then echo "$part: running (PID $pid)"; else echo "$part: not running"; up=1; fi
  done
  if [ "$up" = 0 ] && node_ready; then
    echo "node localhost: Ready; KUBECONFIG=$KUBECONFIG_FILE"
    return 0
  fi
  echo "the cluster is not up: bash scripts/k8s-cluster.sh up"
  return 1
}

case "${1:-}" in
  build) cmd_build ;;
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  import-image) shift; cmd_import_image "$@" ;;
  env) echo "export KUBECONFIG=$KUBECONFIG_FILE" ;;
  *) sed -n '/^# Usage:/,/^set -Eeuo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
