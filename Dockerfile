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
# The binary's SHA-256 is pinned as in scripts/lib/common.sh (BUN_SHA256): another build is refused.
RUN npm install -g --allow-scripts=bun bun@1.4.5 \
 && echo "f05d28a3862f4b84395c7fa32480b835dd47482e80b7e7a49a115227f0c06083  $(readlink -f "$(command -v bun)")" | sha256sum -c -
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
RUN LIBRDKAFKA_PATH=/opt/librdkafka/lib/librdkafka.so.1 bun scripts/build.ts --outfile /out/cdr-worker \
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
