#!/usr/bin/env bash
# The test command: provisions what is missing, starts local Kafka + ClickHouse, runs the whole suite
# on Kafka $KAFKA_VERSION, then the Kafka-facing suites again on the newest Kafka 4.x served
# ($KAFKA_NEWEST_VERSION; docs/compatibility.md). Every ClickHouse-facing suite runs on both
# ClickHouse 18.16 and the 26.9 engine's test endpoint within the first pass.
# Extra arguments go to `bun test` in both passes (e.g. a reporter); a path filter runs the first
# pass only. A --reporter-outfile=F.xml of the second pass is written to F.kafka-<version>.xml.
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
"$ROOT/scripts/provision.sh"
"$ROOT/scripts/services.sh" start
cd "$ROOT"
# Provisioned and started: the test preload (bunfig.toml) need not do it again.
export CDR_TEST_SERVICES_UP=1
export KAFKA_BROKERS="127.0.0.1:$KAFKA_PORT" KAFKA_SASL_BROKERS="127.0.0.1:$KAFKA_SASL_PORT" CLICKHOUSE_URL="http://127.0.0.1:$CH_HTTP_PORT" \
  CLICKHOUSE_CURRENT_URL="http://127.0.0.1:$CHDB_HTTP_PORT"
# The suites that speak to the broker: the binding, topics, the worker end to end, group protocols, DLQ tools.
KAFKA_FACING=(test/kafka/ test/topics/ test/e2e/worker.test.ts test/e2e/group-protocol.test.ts test/e2e/commit-refused.test.ts
  test/e2e/dlq-tools.test.ts)

# Integration tests wait on real services; bun's 5 s default is too short for some.
# Both passes run whatever the first's outcome (common.sh sets -e): the exit status is the worse.
rc=0
bun test --timeout 60000 "$@" || rc=$?
for a in "$@"; do [[ $a == -* ]] || exit $rc; done
args=()
for a in "$@"; do
  [[ $a == --reporter-outfile=* ]] && a="${a%.xml}.kafka-$KAFKA_NEWEST_VERSION.xml"
  args+=("$a")
done
echo "== the Kafka-facing suites on Kafka $KAFKA_NEWEST_VERSION (127.0.0.1:$KAFKA_NEWEST_BASE_PORT)"
KAFKA_BROKERS="127.0.0.1:$KAFKA_NEWEST_BASE_PORT" KAFKA_SASL_BROKERS="127.0.0.1:$((KAFKA_NEWEST_BASE_PORT + 2))" \
  bun test --timeout 60000 "${args[@]}" "${KAFKA_FACING[@]}" || rc=1
exit $rc
