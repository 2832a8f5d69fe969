#!/usr/bin/env bash
# Starts, stops and reports the local Kafka (KRaft, one node) and ClickHouse that development and
# tests use: ClickHouse 18.16 (Debian's server) on 8123, and the test endpoint around ClickHouse
# 26.9's own engine (chdb-http.py, not a server) on 8127. State lives in .local/; `stop` only stops
# processes whose pid files this script wrote.
#   scripts/services.sh start|stop|status|restart [kafka|kafka-newest|clickhouse|chdb]
# kafka-newest is a second broker of the newest Kafka 4.x served (KAFKA_NEWEST_VERSION, listeners
# from 9192 on) for the second pass of the Kafka-facing suites (scripts/test.sh).
#   scripts/services.sh start|stop|status cluster   the scale-out profile instead: 3 KRaft brokers
#     (127.0.0.1:19092-19094), 2 ClickHouse replicas of one shard (8124, 8125) and ZooKeeper (12181);
#     see scripts/cluster/. The single-node services above stay the default.
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

KAFKA_HOME="$LOCAL/kafka"
KAFKA_NEWEST_HOME="$LOCAL/kafka-newest"
CH_HOME="$LOCAL/clickhouse"
CHDB_HOME="$LOCAL/chdb-http"

kafka_answers() { kcat -b "127.0.0.1:$KAFKA_PORT" -L -m 2 >/dev/null 2>&1; }
kafka_newest_answers() { kcat -b "127.0.0.1:$KAFKA_NEWEST_BASE_PORT" -L -m 2 >/dev/null 2>&1; }
clickhouse_answers() { [[ "$(curl -fsS -m 2 "http://127.0.0.1:$CH_HTTP_PORT/ping" 2>/dev/null)" == "Ok." ]]; }
chdb_answers() { [[ "$(curl -fsS -m 2 "http://127.0.0.1:$CHDB_HTTP_PORT/?query=SELECT%20version()" 2>/dev/null)" == 26.9.* ]]; }

render() { # render <template> <output> <sed expressions...>
  local src=$1 dst=$2; shift 2
  local args=(); for e in "$@"; do args+=(-e "$e"); done
  sed "${args[@]}" "$src" >"$dst.tmp" && mv "$dst.tmp" "$dst"
}

# already_up <name> <pidfile> <port> <probe> <port variable> <log>: true when the service is
# already there — ours (waits until it answers) or someone else's that answers the probe; dies
# when the port is held by something else, so a second copy is never started blindly.
already_up() {
  local name=$1 pidfile=$2 port=$3 probe=$4 var=$5 logs=$6
  if pid_alive "$pidfile"; then
    wait_for 60 "$name (pid $(cat "$pidfile"))" "$probe" || die "$name pid $(cat "$pidfile") runs but does not answer; see $logs"
    return 0
  fi
  if port_open "$port"; then
    "$probe" || die "127.0.0.1:$port is taken by something that is not $name; stop it or set $var"
    log "a $name not started by this project already answers on 127.0.0.1:$port; using it"
    return 0
  fi
  return 1
}

# start_broker <name> <home> <plain port> <controller> <sasl> <ssl> <sasl_ssl> <expired> <mismatch>:
# one KRaft broker+controller from the jars in <home>/libs, with every listener the tests use.
start_broker() {
  local name=$1 home=$2 port=$3 controller=$4 sasl=$5 ssl=$6 sasl_ssl=$7 expired=$8 mismatch=$9
  local pidfile="$home/kafka.pid"
  # already_up and wait_for call the probe by name; it reads the port through this global.
  BROKER_PROBE_PORT=$port
  answers() { kcat -b "127.0.0.1:$BROKER_PROBE_PORT" -L -m 2 >/dev/null 2>&1; }
  already_up "$name" "$pidfile" "$port" answers LOCAL_KAFKA_PORT "$home/kafka.log" && return
  [[ -f "$home/libs/.pom-sha" ]] || die "$name jars missing; run scripts/provision.sh first"
  mkdir -p "$home/data"
  render "$ROOT/scripts/kafka/server.properties" "$home/server.properties" \
    "s:KAFKA_HOME:$home:g" "s:KAFKA_CONTROLLER_PORT:$controller:g" "s:KAFKA_SASL_PORT:$sasl:g" \
    "s:KAFKA_SASL_SSL_PORT:$sasl_ssl:g" "s:KAFKA_SSL_PORT:$ssl:g" "s:KAFKA_EXPIRED_PORT:$expired:g" \
    "s:KAFKA_MISMATCH_PORT:$mismatch:g" "s:KAFKA_PORT:$port:g" "s:TLS_DIR:$TLS_DIR:g"
  [[ -f $TLS_DIR/server.pem ]] || die "TLS certificates missing; run scripts/provision.sh first"
  local cp="$home/libs/*"
  if [[ ! -f "$home/data/meta.properties" ]]; then
    log "formatting $name storage in $home/data"
    java -cp "$cp" -Dlog4j2.configurationFile="$ROOT/scripts/kafka/log4j2.yaml" kafka.tools.StorageTool format \
      -t "$(java -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null)" \
      -c "$home/server.properties" >"$home/format.log" 2>&1 \
      || die "$name storage format failed; see $home/format.log"
  fi
  log "starting $name on 127.0.0.1:$port"
  # Heap capped: a single development broker needs little, and the machine also runs ClickHouse.
  spawn_detached "$pidfile" "$home/kafka.log" java -Xms256m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -Djava.awt.headless=true -Dlog4j2.configurationFile="$ROOT/scripts/kafka/log4j2.yaml" \
    -cp "$cp" kafka.Kafka "$home/server.properties"
  wait_for 90 "$name" answers || die "$name did not answer within 90 s; see $home/kafka.log"
  # The SCRAM user of the SASL_SSL listener, with the broker's own tool (idempotent: it sets the
  # credential); the tool moved from kafka.admin to org.apache.kafka.tools in 4.2.
  local config_command=kafka.admin.ConfigCommand
  compgen -G "$home/libs/kafka_2.13-4.[01].*.jar" >/dev/null || config_command=org.apache.kafka.tools.ConfigCommand
  java -Xmx256m -cp "$cp" -Dlog4j2.configurationFile="$ROOT/scripts/kafka/log4j2.yaml" "$config_command" \
    --bootstrap-server "127.0.0.1:$port" --alter --entity-type users --entity-name "$KAFKA_SCRAM_USER" \
    --add-config "SCRAM-SHA-512=[password=$KAFKA_SCRAM_PASSWORD]" >"$home/scram.log" 2>&1 \
    || die "creating the SCRAM user failed; see $home/scram.log"
}

start_kafka() {
  start_broker "Kafka $KAFKA_VERSION" "$KAFKA_HOME" "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$KAFKA_SASL_PORT" \
    "$KAFKA_SSL_PORT" "$KAFKA_SASL_SSL_PORT" "$KAFKA_EXPIRED_PORT" "$KAFKA_MISMATCH_PORT"
}

start_kafka_newest() {
  local b=$KAFKA_NEWEST_BASE_PORT
  start_broker "Kafka $KAFKA_NEWEST_VERSION" "$KAFKA_NEWEST_HOME" "$b" $((b + 1)) $((b + 2)) $((b + 3)) $((b + 4)) $((b + 5)) $((b + 6))
}

start_clickhouse() {
  local pidfile="$CH_HOME/clickhouse.pid"
  # Users first, even for a server already up: it reloads users.xml when the file changes.
  mkdir -p "$CH_HOME"
  cp "$ROOT/scripts/clickhouse/users.xml" "$CH_HOME/users.xml"
  already_up ClickHouse "$pidfile" "$CH_HTTP_PORT" clickhouse_answers LOCAL_CLICKHOUSE_HTTP_PORT "$CH_HOME/log" && return
  port_open "$CH_TCP_PORT" && die "127.0.0.1:$CH_TCP_PORT (ClickHouse native port) is taken; set LOCAL_CLICKHOUSE_TCP_PORT"
  mkdir -p "$CH_HOME"/{data,tmp,user_files,format_schemas,log}
  render "$ROOT/scripts/clickhouse/config.xml" "$CH_HOME/config.xml" \
    "s:CH_HOME:$CH_HOME:g" "s:CH_HTTPS_PORT:$CH_HTTPS_PORT:g" "s:CH_HTTP_PORT:$CH_HTTP_PORT:g" "s:CH_TCP_PORT:$CH_TCP_PORT:g" "s:TLS_DIR:$TLS_DIR:g"
  log "starting ClickHouse on 127.0.0.1:$CH_HTTP_PORT"
  (cd "$CH_HOME" && spawn_detached "$pidfile" "$CH_HOME/log/stdout.log" clickhouse-server --config-file="$CH_HOME/config.xml")
  wait_for 60 "ClickHouse" clickhouse_answers || die "ClickHouse did not answer /ping within 60 s; see $CH_HOME/log"
}

start_chdb() {
  local pidfile="$CHDB_HOME/chdb-http.pid"
  already_up "ClickHouse 26.9 test endpoint" "$pidfile" "$CHDB_HTTP_PORT" chdb_answers LOCAL_CHDB_HTTP_PORT "$CHDB_HOME/chdb-http.log" && return
  [[ -x $LOCAL/chdb/bin/python ]] || die "chdb-core missing; run scripts/provision.sh first"
  mkdir -p "$CHDB_HOME"
  log "starting the ClickHouse 26.9 test endpoint (chdb-http.py) on 127.0.0.1:$CHDB_HTTP_PORT"
  spawn_detached "$pidfile" "$CHDB_HOME/chdb-http.log" "$LOCAL/chdb/bin/python" "$ROOT/scripts/clickhouse/chdb-http.py" \
    --port "$CHDB_HTTP_PORT" --path "$CHDB_HOME/data"
  wait_for 60 "ClickHouse 26.9 test endpoint" chdb_answers || die "the 26.9 test endpoint did not answer within 60 s; see $CHDB_HOME/chdb-http.log"
}

stop_one() { # stop_one <name> <pidfile>
  local name=$1 pidfile=$2
  if ! pid_alive "$pidfile"; then log "$name: not running (started by this project)"; rm -f "$pidfile"; return; fi
  local pid; pid="$(cat "$pidfile")"
  log "stopping $name (pid $pid)"
  stop_pidfile "$pidfile" 30 || log "$name did not stop in 30 s; killed"
}

status_one() { # status_one <name> <pidfile> <probe>
  if pid_alive "$2"; then
    if $3; then echo "$1: running (pid $(cat "$2")), answering"; else echo "$1: running (pid $(cat "$2")), not answering"; fi
  elif $3; then echo "$1: answering, not started by this project"
  else echo "$1: stopped"; fi
}

cmd=${1:-status}; which=${2:-all}
if [[ $which == cluster ]]; then
  case "$cmd" in
    start) bash "$ROOT/scripts/cluster/kafka-brokers.sh" start && bash "$ROOT/scripts/cluster/clickhouse-replicas.sh" start
      log "cluster: KAFKA_BROKERS=$(bash "$ROOT/scripts/cluster/kafka-brokers.sh" bootstrap)" \
        "CLICKHOUSE_URL=http://127.0.0.1:8124,http://127.0.0.1:8125" ;;
    stop) bash "$ROOT/scripts/cluster/clickhouse-replicas.sh" stop; bash "$ROOT/scripts/cluster/kafka-brokers.sh" stop ;;
    status) bash "$ROOT/scripts/cluster/kafka-brokers.sh" status; bash "$ROOT/scripts/cluster/clickhouse-replicas.sh" status ;;
    *) die "usage: scripts/services.sh start|stop|status cluster" ;;
  esac
  exit 0
fi
case "$cmd" in
  start)
    [[ $which == all || $which == kafka ]] && start_kafka
    [[ $which == all || $which == kafka-newest ]] && start_kafka_newest
    [[ $which == all || $which == clickhouse ]] && start_clickhouse
    [[ $which == all || $which == chdb ]] && start_chdb
    status_one "kafka $KAFKA_VERSION" "$KAFKA_HOME/kafka.pid" kafka_answers >&2
    status_one "kafka $KAFKA_NEWEST_VERSION" "$KAFKA_NEWEST_HOME/kafka.pid" kafka_newest_answers >&2
    status_one clickhouse "$CH_HOME/clickhouse.pid" clickhouse_answers >&2
    status_one "clickhouse 26.9 test endpoint" "$CHDB_HOME/chdb-http.pid" chdb_answers >&2 ;;
  stop)
    [[ $which == all || $which == kafka ]] && stop_one kafka "$KAFKA_HOME/kafka.pid"
    [[ $which == all || $which == kafka-newest ]] && stop_one "kafka $KAFKA_NEWEST_VERSION" "$KAFKA_NEWEST_HOME/kafka.pid"
    [[ $which == all || $which == clickhouse ]] && stop_one clickhouse "$CH_HOME/clickhouse.pid"
    [[ $which == all || $which == chdb ]] && stop_one "ClickHouse 26.9 test endpoint" "$CHDB_HOME/chdb-http.pid"
    true ;;
  restart) "$0" stop "$which"; "$0" start "$which" ;;
  status)
    status_one "kafka $KAFKA_VERSION 127.0.0.1:$KAFKA_PORT" "$KAFKA_HOME/kafka.pid" kafka_answers
    status_one "kafka $KAFKA_NEWEST_VERSION 127.0.0.1:$KAFKA_NEWEST_BASE_PORT" "$KAFKA_NEWEST_HOME/kafka.pid" kafka_newest_answers
    status_one "clickhouse 127.0.0.1:$CH_HTTP_PORT" "$CH_HOME/clickhouse.pid" clickhouse_answers
    status_one "clickhouse 26.9 test endpoint 127.0.0.1:$CHDB_HTTP_PORT" "$CHDB_HOME/chdb-http.pid" chdb_answers ;;
  *) die "usage: scripts/services.sh start|stop|status|restart [kafka|kafka-newest|clickhouse|chdb]" ;;
esac
