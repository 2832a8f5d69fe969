# syntax=docker/dockerfile:1
# Multi-stage: build the single executable on Debian bookworm, ship it on distroless/cc with
# exactly the shared libraries librdkafka needs beyond the base (scripts/image/copy-libs.txt).
# The base images are build arguments, defaulting to the real ones: a host without a registry
# builds on local stand-ins made from Debian's packages (scripts/image/base-images.sh).
ARG BUILD_BASE=debian:bookworm-slim
ARG RUNTIME_BASE=gcr.io/distroless/cc-debian12:nonroot
FROM ${BUILD_BASE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends nodejs npm ca-certificates gcc g++ libc6-dev make patch pkg-config \
      libssl-dev libsasl2-dev liblz4-dev libzstd-dev zlib1g-dev \
 && rm -rf /var/lib/apt/lists/*
# Bun as scripts/provision.sh installs it: the package that carries the binary, fetched without
# running anything of it, its integrity and the binary's SHA-256 checked (scripts/lib/common.sh's
# BUN_PACKAGE_INTEGRITY and BUN_SHA256) before the binary runs.
RUN cd /tmp && npm pack --silent @oven/bun-linux-x64@1.4.5 >/dev/null \
 && test "sha512-$(openssl dgst -sha512 -binary oven-bun-linux-x64-1.4.5.tgz | base64 -w0)" \
      = "sha512-IWX9BELoGHAUtMonkeSaNaZwXzRk+oDw6Mk+HBFXd3KHYIBNBsIGRupMZPcgNoDbJpLu6gAJjIoIVPZtt1aJ1g==" \
 && tar -xzf oven-bun-linux-x64-1.4.5.tgz package/bin/bun \
 && echo "f05d28a3862f4b84395c7fa32480b835dd47482e80b7e7a49a115227f0c06083  package/bin/bun" | sha256sum -c - \
 && install -m 0755 package/bin/bun /usr/local/bin/bun && rm -rf /tmp/package /tmp/oven-bun-linux-x64-1.4.5.tgz
WORKDIR /src
# librdkafka as Confluent's JavaScript client ships it, built from that npm package exactly as
# provisioning builds it (scripts/librdkafka/version.env pins the version).
COPY scripts/librdkafka scripts/librdkafka
RUN bash scripts/librdkafka/build.sh /opt/librdkafka
COPY package.json bun.lock bunfig.toml tsconfig.json ./
# bun install applies the dependency patches listed in package.json (patchedDependencies).
COPY scripts/patches scripts/patches
RUN bun install --frozen-lockfile --production
COPY src src
COPY sql sql
COPY scripts/build.ts scripts/build.ts
COPY scripts/image/copy-libs.txt scripts/image/copy-libs.txt
# The commit `cdr-worker version` names (the context holds no .git): scripts/image/build.sh passes it.
ARG CDR_COMMIT=unknown
RUN CDR_COMMIT=${CDR_COMMIT} LIBRDKAFKA_PATH=/opt/librdkafka/lib/librdkafka.so.1 bun scripts/build.ts --outfile /out/cdr-worker \
 && mkdir -p /out/lib \
 && grep -v '^#' scripts/image/copy-libs.txt | xargs -I{} cp -L /usr/lib/x86_64-linux-gnu/{} /out/lib/

FROM ${RUNTIME_BASE}
COPY --from=build /out/lib/ /usr/lib/x86_64-linux-gnu/
COPY --from=build /out/cdr-worker /usr/local/bin/cdr-worker
# JSC sizes its heap from the machine's RAM; cap what it assumes so RSS stays near 200 MiB.
ENV BUN_JSC_forceRAMSize=1073741824 STATS_HOST=0.0.0.0 STATS_PORT=8081
EXPOSE 8081
USER nonroot
ENTRYPOINT ["/usr/local/bin/cdr-worker"]
CMD ["run"]
