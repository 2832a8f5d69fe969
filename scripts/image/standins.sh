#!/usr/bin/env bash
# Stand-ins for the images compose.yml pulls, for a host without an image registry, built on the
# Debian stand-in (base-images.sh) from what provisioning already has:
#   localhost/cdr-worker-standin/kafka:4.1.1               the Kafka jars on Debian's Java 17 runtime
#   localhost/cdr-worker-standin/clickhouse-server:18.16    Debian's ClickHouse (18.16, not compose's 26.9)
#   localhost/cdr-worker-standin/prometheus:2.42            Debian's Prometheus (2.42, not compose's 2.55)
# Grafana has no Debian package and no other registry serves it here: the observability profile
# runs without it.
# compose.podman.yml swaps them in. Idempotent through podman's layer cache.
# Usage: scripts/image/standins.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
export CONTAINERS_CONF="$ROOT/scripts/image/containers.conf"
bases="$("$ROOT/scripts/image/base-images.sh")"
SLIM="$(sed -n 's/^SLIM=//p' <<<"$bases")"
HERE="$ROOT/scripts/image/standins"
CTX="$LOCAL/image-standins"
[[ -f "$LOCAL/kafka/libs/.pom-sha" ]] || die "Kafka jars missing; run scripts/provision.sh first"

build() { # name tag context
  log "building $2"
  local start=$SECONDS
  podman build --network host --pull=never --build-arg "BASE=$SLIM" --tag "$2" --file "$3/Containerfile" "$3" >&2
  log "built $2 in $((SECONDS - start)) s"
}

rm -rf "$CTX/kafka" && mkdir -p "$CTX/kafka/libs"
cp "$LOCAL/kafka/libs/"*.jar "$CTX/kafka/libs/"
cp "$HERE/kafka.Containerfile" "$CTX/kafka/Containerfile"
cp "$HERE/kafka-entrypoint.sh" "$HERE/kafka-broker-api-versions.sh" "$ROOT/scripts/kafka/log4j2.yaml" "$CTX/kafka/"
build kafka localhost/cdr-worker-standin/kafka:4.1.1 "$CTX/kafka"

rm -rf "$CTX/clickhouse" && mkdir -p "$CTX/clickhouse"
cp "$HERE/clickhouse.Containerfile" "$CTX/clickhouse/Containerfile"
cp "$HERE/clickhouse-entrypoint.sh" "$CTX/clickhouse/"
build clickhouse localhost/cdr-worker-standin/clickhouse-server:18.16 "$CTX/clickhouse"

rm -rf "$CTX/prometheus" && mkdir -p "$CTX/prometheus"
cp "$HERE/prometheus.Containerfile" "$CTX/prometheus/Containerfile"
build prometheus localhost/cdr-worker-standin/prometheus:2.42 "$CTX/prometheus"
