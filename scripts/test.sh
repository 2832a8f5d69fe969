#!/usr/bin/env bash
# The test command: provisions what is missing, starts local Kafka + ClickHouse, runs the whole suite
# on Kafka $KAFKA_VERSION, then the Kafka-facing suites again on the newest Kafka 4.x served
# ($KAFKA_NEWEST_VERSION; docs/compatibility.md). Every ClickHouse-facing suite runs on both
# ClickHouse 18.16 and the 26.9 engine's test endpoint within the first pass.
# Files run in two processes at once (bun test --parallel=2), slowest first (test/timings.json): most
# tests wait on a broker, a server, a session or a process of their own rather than compute, so two
# share the cores. Each test names its own topics, groups and tables, so both share the services;
# the files that stop or freeze the shared broker (SERIAL) run after the others, alone.
# Each run writes a JUnit report, which CI counts: .local/junit.xml, .local/junit.serial.xml and
# .local/junit.kafka-<version>.xml for the newest Kafka's. Extra arguments go to `bun test` in every
# run (another --reporter-outfile=F.xml is written per run the same way); a path filter runs those
# paths alone, in one process, with no report.
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
source "$(dirname "${BASH_SOURCE[0]}")/lib/test-args.sh"
"$ROOT/scripts/provision.sh"
"$ROOT/scripts/services.sh" start
cd "$ROOT"
# Provisioned and started: the test preload (bunfig.toml) need not do it again.
export CDR_TEST_SERVICES_UP=1
export KAFKA_BROKERS="127.0.0.1:$KAFKA_PORT" KAFKA_SASL_BROKERS="127.0.0.1:$KAFKA_SASL_PORT" CLICKHOUSE_URL="http://127.0.0.1:$CH_HTTP_PORT" \
  CLICKHOUSE_CURRENT_URL="http://127.0.0.1:$CHDB_HTTP_PORT"
# The suites that speak to the broker: the binding, topics, the worker end to end, group protocols, DLQ tools,
# and the simulated broker held to the real one.
KAFKA_FACING=(test/kafka/ test/topics/ test/e2e/worker.test.ts test/e2e/group-protocol.test.ts test/e2e/commit-refused.test.ts
  test/e2e/fenced-revocation.test.ts test/e2e/dlq-tools.test.ts test/sim/fidelity.test.ts)
# The suites that restart or freeze the broker every other test talks to.
SERIAL=(test/chaos/broker-restart.test.ts test/e2e/slow-broker-check.test.ts)
PARALLEL=(--parallel=2 --timings=test/timings.json)

# Integration tests wait on real services; bun's 5 s default is too short for some.
for a in "$@"; do [[ $a == -* ]] || exec bun test --timeout 60000 "$@"; done
# The whole suite: a report per run unless the caller names its own.
[[ " $* " == *" --reporter-outfile="* ]] || set -- --reporter=junit --reporter-outfile=.local/junit.xml "$@"
# A report of an earlier run would be counted with this one's.
for a in "$@"; do
  if [[ $a == --reporter-outfile=* ]]; then f="${a#*=}"; mkdir -p "$(dirname "$f")"; rm -f "$f" "${f%.xml}".*.xml; fi
done
# Each worker a test starts writes its whole log here; a clean stop removes it (test/support/worker.ts).
rm -rf "$ROOT/.local/test-logs"
mapfile -t files < <(find test -name '*.test.ts' | sort | grep -vxF -f <(printf '%s\n' "${SERIAL[@]}"))
# Every run runs whatever the others' outcome (common.sh sets -e): the exit status is the worst.
rc=0
bun test --timeout 60000 "${PARALLEL[@]}" "$@" "${files[@]}" || rc=$?
mapfile -d '' -t serial < <(args_for serial "$@")
echo "== the suites that stop or freeze the broker, alone"
bun test --timeout 60000 "${serial[@]}" "${SERIAL[@]}" || rc=1
mapfile -d '' -t newest < <(args_for "kafka-$KAFKA_NEWEST_VERSION" "$@")
echo "== the Kafka-facing suites on Kafka $KAFKA_NEWEST_VERSION (127.0.0.1:$KAFKA_NEWEST_BASE_PORT)"
KAFKA_BROKERS="127.0.0.1:$KAFKA_NEWEST_BASE_PORT" KAFKA_SASL_BROKERS="127.0.0.1:$((KAFKA_NEWEST_BASE_PORT + 2))" \
  bun test --timeout 60000 "${PARALLEL[@]}" "${newest[@]}" "${KAFKA_FACING[@]}" || rc=1
# The verdict over every pass: the failed tests by name, then `N passed, M failed`.
for a in "$@"; do [[ $a == --reporter-outfile=* ]] && report="${a#*=}"; done
shopt -s nullglob
kept=("$ROOT"/.local/test-logs/*.log)
(( ${#kept[@]} )) && echo "worker logs kept (a worker that did not stop cleanly, or handed out records twice): ${#kept[@]} in .local/test-logs/"
python3 "$ROOT/scripts/lib/junit-summary.py" "$report" "${report%.xml}".*.xml || rc=1
exit $rc
