#!/usr/bin/env bash
# compose.yml under podman on this host: builds the stand-in images and the worker's image, then
# runs podman-compose (PyPI, provisioned) with compose.podman.yml over compose.yml.
# CLICKHOUSE_PASSWORD, CLICKHOUSE_WORKER_PASSWORD_FILE, CLICKHOUSE_DLQ_PASSWORD_FILE, DLQ_PROVENANCE_KEY_FILE,
# GRAFANA_ADMIN_PASSWORD and
# CDRWORKER_DOCS_URL must be set, as for any compose run.
# Usage: scripts/image/compose.sh up -d | ps | logs worker | down -v | …  (podman-compose's arguments)
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
export CONTAINERS_CONF="$ROOT/scripts/image/containers.conf"
PC="$LOCAL/podman-compose/bin/podman-compose"
[[ -x $PC ]] || die "podman-compose missing; run scripts/provision.sh first"
if [[ ${1:-} == up ]]; then
  "$ROOT/scripts/image/standins.sh"
  "$ROOT/scripts/image/build.sh" localhost/cdr-worker:latest >/dev/null
fi
cd "$ROOT"
exec "$PC" -f compose.yml -f compose.podman.yml "$@"
