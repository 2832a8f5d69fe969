#!/usr/bin/env bash
# The test command: provisions what is missing, starts local Kafka + ClickHouse, runs the whole suite.
# Extra arguments go to `bun test` (e.g. a path filter, or a reporter).
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
"$ROOT/scripts/provision.sh"
"$ROOT/scripts/services.sh" start
cd "$ROOT"
export KAFKA_BROKERS="127.0.0.1:$KAFKA_PORT" KAFKA_SASL_BROKERS="127.0.0.1:$KAFKA_SASL_PORT" CLICKHOUSE_URL="http://127.0.0.1:$CH_HTTP_PORT" \
  CLICKHOUSE_CURRENT_URL="http://127.0.0.1:$CHDB_HTTP_PORT"
# Integration tests wait on real services; bun's 5 s default is too short for some.
exec bun test --timeout 60000 "$@"
