#!/usr/bin/env bash
# The run command: provisions what is missing, starts local Kafka + ClickHouse, ensures topics and
# schema, starts the worker, feeds it generated traffic and shows rows arriving. The worker keeps
# running in the foreground until Ctrl-C (SIGINT: it flushes, commits and exits 0).
#   DEMO_RECORDS=N   records the demo generator sends (default 20000; 0 = none)
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
"$ROOT/scripts/provision.sh"
# Only what the worker talks to: the second Kafka and the 26.9 test endpoint serve the test suites.
"$ROOT/scripts/services.sh" start kafka
"$ROOT/scripts/services.sh" start clickhouse
cd "$ROOT"
export KAFKA_BROKERS="${KAFKA_BROKERS:-127.0.0.1:$KAFKA_PORT}" CLICKHOUSE_URL="${CLICKHOUSE_URL:-http://127.0.0.1:$CH_HTTP_PORT}"
export STATS_HOST="${STATS_HOST:-127.0.0.1}" STATS_PORT="${STATS_PORT:-8081}"
# JSC sizes its heap from the RAM it sees; 1 GiB keeps the worker near 200 MiB RSS (as in the Dockerfile).
export BUN_JSC_forceRAMSize="${BUN_JSC_forceRAMSize:-1073741824}"
# The key that signs the DLQ's envelopes (exactly-once needs one): made once, kept with the local state.
if [[ -z "${DLQ_PROVENANCE_KEY:-}${DLQ_PROVENANCE_KEY_FILE:-}" ]]; then
  key="$ROOT/.local/secrets/dlq-key"
  [[ -s $key ]] || (umask 077 && mkdir -p "$(dirname "$key")" && openssl rand -hex 32 >"$key")
  export DLQ_PROVENANCE_KEY_FILE="$key"
fi
WORKER=(bun src/main.ts)
[[ -x "$ROOT/cdr-worker" ]] && WORKER=("$ROOT/cdr-worker")

"${WORKER[@]}" topics ensure
"${WORKER[@]}" migrate
# In a process group of its own: Ctrl-C at a terminal signals the whole foreground group, and the
# worker must get one SIGINT (forwarded below), not two (a second means: exit at once, commit nothing more).
setsid "${WORKER[@]}" run &
worker=$!
trap 'kill -INT $worker 2>/dev/null; wait $worker' INT TERM
until curl -fsS "http://127.0.0.1:$STATS_PORT/readyz" >/dev/null 2>&1; do
  kill -0 $worker 2>/dev/null || { log "the worker exited; see its log above"; exit 1; }
  sleep 0.5
done
log "worker ready; stats at http://127.0.0.1:$STATS_PORT/internal/stats"

records="${DEMO_RECORDS:-20000}"
if ((records > 0)); then
  log "sending $records synthetic CDRs (3 % with defects) to ${KAFKA_TOPIC_RAW:-cdr.raw}"
  "${WORKER[@]}" generate --count "$records" --rate 20000
  sleep 3
  log "ClickHouse now holds:"
  curl -fsS "$CLICKHOUSE_URL/" --data-binary "SELECT radio_access_type, service_type, count() AS rows, formatReadableSize(sum(total_bytes)) AS traffic FROM ${CLICKHOUSE_DATABASE:-telecom}.${CLICKHOUSE_TABLE:-cdr} GROUP BY radio_access_type, service_type ORDER BY radio_access_type, service_type FORMAT PrettyCompact"
  log "worker stats:"
  curl -fsS "http://127.0.0.1:$STATS_PORT/internal/stats" | python3 -c 'import json,sys; s=json.load(sys.stdin); print(json.dumps({k: s[k] for k in ("total_processed","total_dlq","in_flight_buffer","last_flush_at","by_rat","by_dlq_reason")}, indent=1))'
fi
log "the worker keeps running; Ctrl-C stops it cleanly (scripts/services.sh stop stops Kafka and ClickHouse)"
wait $worker
