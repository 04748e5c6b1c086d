# The image of the example server (acs-server): `npm run image` builds it (scripts/build-server-image.sh),
# or by hand, from the repository root:   docker build -t acs-server .
# Run it (deploy/docker/README.md has the whole story):
#   docker run -d --name acs --network host \
#     -v /var/run/docker.sock:/var/run/docker.sock --group-add "$(stat -c %g /var/run/docker.sock)" \
#     -v acs-data:/data acs-server
#
# Build arguments (all optional):
#   BASE_IMAGE       Debian bookworm with Node 22 and npm (default node:22-bookworm-slim); the build
#                    script makes one with debootstrap where no registry answers
#   EXTRA_CA_CERTS   PEM certificates npm should trust besides Node's own roots while installing (a
#                    TLS-inspecting proxy's CA); used by the build stages only, never in the image
#   VERSION          the version recorded in the image's labels
#
# Only the classic builder's features are used (docker 20.10 without BuildKit builds it).
ARG BASE_IMAGE=node:22-bookworm-slim

# Every workspace's package.json (npm ci needs them all), apart from the sources: the install
# layers below are reused as long as no manifest and the lock file change.
FROM ${BASE_IMAGE} AS manifests
ARG BASE_IMAGE
# Marks the build stages (their untagged images are the layer cache), so that the build script
# removes those of earlier builds on the same base.
LABEL io.acs.server-image.stage=build io.acs.server-image.base=${BASE_IMAGE}
WORKDIR /src
COPY package.json package-lock.json ./
COPY packages/core/package.json packages/core/
COPY packages/agent/package.json packages/agent/
COPY packages/testing/package.json packages/testing/
COPY packages/adapter-memory/package.json packages/adapter-memory/
COPY packages/adapter-postgres/package.json packages/adapter-postgres/
COPY packages/adapter-sqlite/package.json packages/adapter-sqlite/
COPY packages/adapter-docker/package.json packages/adapter-docker/
COPY packages/adapter-kubernetes/package.json packages/adapter-kubernetes/
COPY packages/adapter-openai/package.json packages/adapter-openai/
COPY packages/adapter-mcp/package.json packages/adapter-mcp/
COPY packages/adapter-git-providers/package.json packages/adapter-git-providers/
COPY packages/adapter-express/package.json packages/adapter-express/
COPY packages/web-console/package.json packages/web-console/
COPY examples/standalone-server/package.json examples/standalone-server/
COPY examples/embedded-express-app/package.json examples/embedded-express-app/

# The production dependencies of the example server, and nothing else: no dev, optional or peer
# dependencies (the test runner core names as an optional peer, esbuild's binaries), no install
# scripts, then without the TypeScript sources, declarations, source maps and docs packages ship.
FROM manifests AS deps
ARG EXTRA_CA_CERTS=
RUN set -eu; \
    if [ -n "$EXTRA_CA_CERTS" ]; then printf '%s\n' "$EXTRA_CA_CERTS" >/tmp/extra-ca.pem; export NODE_EXTRA_CA_CERTS=/tmp/extra-ca.pem; fi; \
    npm ci --omit=dev --omit=optional --omit=peer --ignore-scripts --no-audit --no-fund --loglevel=warn \
      --workspace @acs/example-standalone-server; \
    find node_modules -type f \( -name '*.ts' -o -name '*.mts' -o -name '*.cts' -o -name '*.map' \
      -o -iname '*.md' -o -iname '*.markdown' \) -delete; \
    rm -rf node_modules/.bin node_modules/.package-lock.json /tmp/extra-ca.pem /root/.npm

# Everything, built: the packages' dist/ and the console's browser app.
FROM manifests AS build
ARG EXTRA_CA_CERTS=
RUN set -eu; \
    if [ -n "$EXTRA_CA_CERTS" ]; then printf '%s\n' "$EXTRA_CA_CERTS" >/tmp/extra-ca.pem; export NODE_EXTRA_CA_CERTS=/tmp/extra-ca.pem; fi; \
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=warn; \
    rm -rf /tmp/extra-ca.pem /root/.npm
COPY . .
# The built files the server runs: each package's package.json (its exports) and dist/ (without
# declarations) and the console's app-dist/.
RUN set -eu; \
    npm run build --silent; \
    for dir in packages/* examples/standalone-server; do \
      mkdir -p "/app/$dir"; cp "$dir/package.json" "/app/$dir/"; \
      if [ -d "$dir/dist" ]; then cp -R "$dir/dist" "/app/$dir/"; fi; \
    done; \
    cp -R packages/web-console/app-dist /app/packages/web-console/; \
    [ -f /app/examples/standalone-server/dist/main.js ] && [ -f /app/packages/web-console/app-dist/index.html ]; \
    find /app -name '*.d.ts' -delete

FROM ${BASE_IMAGE}
ARG VERSION=dev
# tini reaps and forwards signals as PID 1; ca-certificates is the system's store, which model
# calls trust besides Node's roots (a base made by the build script has both already). The user
# acs (uid 10001) runs the server; /data is its own.
RUN set -eu; \
    if ! [ -x /usr/bin/tini ] || ! [ -d /etc/ssl/certs ]; then \
      export DEBIAN_FRONTEND=noninteractive; \
      apt-get update; apt-get install -y --no-install-recommends tini ca-certificates; \
      apt-get clean; rm -rf /var/lib/apt/lists/* /var/log/apt/* /var/log/dpkg.log /var/cache/debconf/*-old; \
    fi; \
    groupadd --system --gid 10001 acs; \
    useradd --system --uid 10001 --gid acs --home-dir /data --no-create-home --shell /usr/sbin/nologin acs; \
    mkdir -p /data; chown acs:acs /data; chmod 0700 /data
COPY --from=deps /src/node_modules /app/node_modules
COPY --from=build /app /app
# DATA_DIR: the volume. ACS_SANDBOX_IMAGE_BUILD=off: the image has neither the build scripts nor
# the docker CLI and debootstrap they need; build the sandbox images on the host first, and a
# missing one fails its sandbox saying which and how. Every other variable keeps the default of
# the table of docs/configuration.md: HOST stays 127.0.0.1, which with --network host is the host's loopback.
ENV DATA_DIR=/data \
    ACS_SANDBOX_IMAGE_BUILD=off
LABEL org.opencontainers.image.title="acs-server" \
      org.opencontainers.image.description="Agent Conversation Service: the example server, with its web console" \
      org.opencontainers.image.version="${VERSION}" \
      io.acs.server-image="${VERSION}"
WORKDIR /app/examples/standalone-server
USER acs
VOLUME /data
EXPOSE 3000
# GET /alive where the server listens (HOST and PORT as it reads them; a wildcard HOST on loopback).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 CMD ["node", "-e", "const h = process.env.HOST || '127.0.0.1', t = h === '0.0.0.0' ? '127.0.0.1' : h === '::' ? '::1' : h; const url = `http://${t.includes(':') ? `[${t}]` : t}:${process.env.PORT || 3000}/alive`; fetch(url, { signal: AbortSignal.timeout(4000) }).then((r) => { if (!r.ok) console.error(`${url} answered ${r.status}`); process.exit(r.ok ? 0 : 1); }, (e) => { console.error(`${url}: ${e.cause?.message ?? e.message}`); process.exit(1); });"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/main.js"]
