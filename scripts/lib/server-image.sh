# shellcheck shell=bash disable=SC2153,SC2154
# Parts of scripts/build-server-image.sh (sourced, not run): the debootstrap bases, the check of
# a built image, and the pruning of earlier builds' stages. They use that script's globals (ROOT,
# NODE, SUITE, NPM_VERSION, BASE_PACKAGES, BASE_CONTENT_VERSION) and the helpers of
# script-base.sh and debootstrap.sh.

# Whether IMAGE is one of this script's bases at its current content version.
base_current() {
  local has
  has=$(docker image inspect --format '{{index .Config.Labels "io.acs.base-image.version"}}' "$1" 2>/dev/null) || return 1
  [[ "$has" =~ ^[0-9]+$ ]] && [ "$has" -ge "$BASE_CONTENT_VERSION" ]
}

# Slims a debootstrap root as Debian's own slim images are: no documentation, manual pages or
# translations (now, and for packages installed later), apt caches cleaned after each install.
slim_rootfs() {
  local root="$1" keyring=""
  mkdir -p "$root/etc/dpkg/dpkg.cfg.d" "$root/etc/apt/apt.conf.d"
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF
  cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
EOF
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
  find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/groff/* "$root"/usr/share/info/* \
    "$root"/usr/share/lintian/* "$root"/usr/share/linda/* "$root"/usr/share/locale/*
  strip_rootfs "$root"
  # The image's apt sources: the mirror it was made from, with the updates and security suites.
  if [ -f "$root/usr/share/keyrings/debian-archive-keyring.gpg" ]; then keyring=" [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]"; fi
  {
    echo "deb$keyring $mirror $SUITE main"
    echo "deb$keyring $mirror $SUITE-updates main"
    if [ -n "$security_mirror" ]; then echo "deb$keyring $security_mirror $SUITE-security main"; fi
  } >"$root/etc/apt/sources.list"
}

# A root directory as the base image IMAGE (docker import with the given options, then tagged).
import_base() {
  local root="$1" image="$2"
  shift 2
  import_rootfs "$root" "$@"
  docker tag "$imported_id" "$image" || die "docker tag $image failed"
}

# Makes (once) acs-debian:bookworm-slim and acs-node:<node>-bookworm-slim; sets base_image.
ensure_node_base() {
  local node_bin="$ROOT/node_modules/node/bin/node" node_version root
  [ -x "$node_bin" ] || die "no Node binary at node_modules/node/bin/node (the repository's pinned node devDependency): run npm install first"
  node_version=$("$node_bin" -p 'process.versions.node') || die "$node_bin does not run"
  [[ "$node_version" == 22.* ]] || die "node_modules/node is Node $node_version, not 22"
  local debian_image="acs-debian:$SUITE-slim"
  base_image="acs-node:$node_version-$SUITE-slim"
  if base_current "$debian_image" && base_current "$base_image"; then
    log "step 2/4: base images $debian_image ($(megabytes "$debian_image")) and $base_image ($(megabytes "$base_image")) are there"
    return 0
  fi
  find_debian_mirrors
  need_debian_mirror
  command -v npm >/dev/null 2>&1 || die "npm is needed to fetch npm $NPM_VERSION for the base image"
  root="$workdir/rootfs"
  log "step 2/4: debootstrap $SUITE (minbase, ${BASE_PACKAGES[*]}) from $(redact "$mirror") ($mirror_from), then Node $node_version from node_modules/node and npm $NPM_VERSION (a minute or two, once per machine)"
  debootstrap_root "$root" "${BASE_PACKAGES[@]}"
  slim_rootfs "$root"
  local common=(--change 'ENV LANG=C.UTF-8' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin')
  import_base "$root" "$debian_image" "${common[@]}" --change 'CMD ["bash"]' \
    --change "LABEL io.acs.base-image=debian io.acs.base-image.version=$BASE_CONTENT_VERSION" \
    --message "debootstrap --variant=minbase $SUITE (slim, ${BASE_PACKAGES[*]}), by scripts/build-server-image.sh"

  # Node and npm where the official image has them.
  install -D -m 0755 "$node_bin" "$root/usr/local/bin/node"
  if ! (cd "$workdir" && run npm pack --silent "npm@$NPM_VERSION" >"$workdir/npm-pack.log" 2>&1); then
    details <"$workdir/npm-pack.log"
    die "npm pack npm@$NPM_VERSION failed (its output is above)"
  fi
  mkdir -p "$root/usr/local/lib/node_modules/npm"
  tar -xzf "$workdir/npm-$NPM_VERSION.tgz" -C "$root/usr/local/lib/node_modules/npm" --strip-components=1 --no-same-owner
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
  import_base "$root" "$base_image" "${common[@]}" --change 'ENV NODE_VERSION='"$node_version" --change 'CMD ["node"]' \
    --change "LABEL io.acs.base-image=node io.acs.base-image.version=$BASE_CONTENT_VERSION io.acs.base-image.node=$node_version" \
    --message "$debian_image with Node $node_version (the node npm package) and npm $NPM_VERSION, by scripts/build-server-image.sh"
  rm -rf --one-file-system "$root"
  local answer
  if ! answer=$(run timeout -k 5 120 docker run --rm --network none "$base_image" sh -c 'node --version && npm --version && tini --version' 2>&1); then
    printf '%s\n' "$answer" | details
    die "the new base image $base_image does not answer (node, npm, tini; its output is above)"
  fi
  log "made $debian_image ($(megabytes "$debian_image")) and $base_image ($(megabytes "$base_image"); $(printf '%s' "$answer" | paste -sd' ' -))"
}

# Removes the build stages of earlier builds on the same base (the stage images this build did
# not use): the layer cache stays one build deep.
prune_build_stages() {
  local used id short removed=0
  used=$(grep -oE '^ ---> [0-9a-f]{12}' "$1" | awk '{print $2}' | sort -u)
  while IFS= read -r id; do
    [ -n "$id" ] || continue
    short="${id#sha256:}"
    short="${short:0:12}"
    if ! grep -qx "$short" <<<"$used" && docker image rm "$id" >/dev/null 2>&1; then removed=$((removed + 1)); fi
  done < <(docker images -q --no-trunc --filter dangling=true --filter label=io.acs.server-image.stage=build \
    --filter "label=io.acs.server-image.base=$base_image")
  if [ "$removed" -gt 0 ]; then log "removed $removed build stage image(s) of earlier builds"; fi
}

# Starts the image as a server with fake sandboxes and memory storage on no network, waits for
# its listening line, and runs its health check; fails with the container's output.
check_server_image() {
  local id="$1" i state out health=()
  # The image's own HEALTHCHECK command (["CMD", …]), run as the engine runs it.
  mapfile -d '' health < <(docker image inspect --format '{{json .Config.Healthcheck.Test}}' "$id" |
    "$NODE" -e 'for (const a of JSON.parse(require("node:fs").readFileSync(0, "utf8")).slice(1)) process.stdout.write(a + "\0")')
  [ "${#health[@]}" -gt 0 ] || die "the new image has no HEALTHCHECK command"
  check_name="acs-server-check-$$-$RANDOM"
  if ! out=$(docker run -d --name "$check_name" --network none -e ACS_SANDBOXES=fake -e ACS_STORAGE=memory \
      -e ACS_SANDBOX_POOL=none "$id" 2>&1); then
    printf '%s\n' "$out" | details
    die "docker run of the new image failed (its output is above)"
  fi
  for ((i = 0; i < 600; i++)); do
    if docker logs "$check_name" 2>&1 | grep -q '"agent conversation service listening"'; then break; fi
    state=$(docker inspect --format '{{.State.Status}}' "$check_name" 2>/dev/null || echo gone)
    if [ "$state" != running ]; then
      docker logs "$check_name" 2>&1 | tail -n 30 | details
      die "the new image's server stopped ($state) before listening (its output is above)"
    fi
    sleep 0.2
  done
  if [ "$i" -ge 600 ]; then
    docker logs "$check_name" 2>&1 | tail -n 30 | details
    die "the new image's server did not listen within 120 s (its output is above)"
  fi
  if ! out=$(docker exec "$check_name" "${health[@]}" 2>&1); then
    printf '%s\n' "$out" | details
    die "the new image's health check failed (its output is above)"
  fi
  out=$(docker exec "$check_name" sh -c 'echo "pid 1: $(cat /proc/1/comm), user: $(id -un)"' 2>&1) || true
  [ "$out" = "pid 1: tini, user: acs" ] || die "the new image runs as '$out', not 'pid 1: tini, user: acs'"
  docker rm -f -v "$check_name" >/dev/null 2>&1 || true
  check_name=""
}
