#!/bin/bash
# KAFKA_FOO_BAR=v → foo.bar=v, as the official image maps its environment; storage formatted once.
set -euo pipefail
props=/tmp/server.properties
: >"$props"
while IFS='=' read -r name value; do
  [[ $name == KAFKA_* ]] || continue
  key="$(tr '[:upper:]' '[:lower:]' <<<"${name#KAFKA_}" | tr _ .)"
  echo "$key=$value" >>"$props"
done < <(env)
grep -q '^log.dirs=' "$props" || echo "log.dirs=/var/lib/kafka/data" >>"$props"
cp=/opt/kafka/libs/*
log=(-Dlog4j2.configurationFile=/opt/kafka/config/log4j2.yaml)
dir="$(sed -n 's/^log.dirs=//p' "$props")"
if [[ ! -f $dir/meta.properties ]]; then
  java "${log[@]}" -cp "$cp" kafka.tools.StorageTool format -t "${CLUSTER_ID:-$(java -cp "$cp" kafka.tools.StorageTool random-uuid)}" -c "$props"
fi
exec java -Xms256m -Xmx512m -XX:+UseG1GC "${log[@]}" -cp "$cp" kafka.Kafka "$props"
