#!/usr/bin/env bash
# The test command: provisions what is missing, starts local Kafka + ClickHouse, and runs the suite
# in two lanes at once. Lane A: every suite on Kafka $KAFKA_VERSION, but those of lane B. Lane B: the
# Kafka-facing suites again on the newest Kafka 4.x served ($KAFKA_NEWEST_VERSION;
# docs/compatibility.md), then the suites that mostly wait on other processes (a fresh root's
# provisioning, the image and compose, which start their own services). Every ClickHouse-facing
# suite runs on both ClickHouse 18.16 and the 26.9 engine's test endpoint within lane A. Each test
# names its own topics, groups and tables, so the lanes share the services.
# Extra arguments go to `bun test` in both lanes (e.g. a reporter); a path filter runs lane A alone
# on those paths. A --reporter-outfile=F.xml of lane B is written to F.kafka-<version>.xml, and lane
# B's output is printed after lane A's.
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
# Suites that wait on processes of their own more than they work: run beside lane A, not in it.
WAITING=(test/infra/fresh-root.test.ts test/image/)

# Integration tests wait on real services; bun's 5 s default is too short for some.
# Both lanes run whatever the other's outcome (common.sh sets -e): the exit status is the worse.
for a in "$@"; do
  [[ $a == -* ]] && continue
  rc=0
  bun test --timeout 60000 "$@" || rc=$?
  exit $rc
done
args=()
for a in "$@"; do
  [[ $a == --reporter-outfile=* ]] && a="${a%.xml}.kafka-$KAFKA_NEWEST_VERSION.xml"
  args+=("$a")
done
lane_b_log="$ROOT/.local/test-lane-b.log"
mkdir -p "$ROOT/.local"
(
  echo "== the Kafka-facing suites on Kafka $KAFKA_NEWEST_VERSION (127.0.0.1:$KAFKA_NEWEST_BASE_PORT), then ${WAITING[*]}"
  KAFKA_BROKERS="127.0.0.1:$KAFKA_NEWEST_BASE_PORT" KAFKA_SASL_BROKERS="127.0.0.1:$((KAFKA_NEWEST_BASE_PORT + 2))" \
    bun test --timeout 60000 "${args[@]}" "${KAFKA_FACING[@]}" "${WAITING[@]}"
) >"$lane_b_log" 2>&1 &
lane_b=$!
# Lane A: every test file but lane B's waiting ones, named one by one (bun test has no exclusion).
mapfile -t lane_a < <(find test -name '*.test.ts' | sort | grep -v -e '^test/infra/fresh-root\.test\.ts$' -e '^test/image/')
rc=0
bun test --timeout 60000 "$@" "${lane_a[@]}" || rc=$?
wait "$lane_b" || rc=1
cat "$lane_b_log"
exit $rc
