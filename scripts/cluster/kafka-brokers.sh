#!/usr/bin/env bash
# Three Kafka brokers in KRaft mode on loopback (each broker and controller; the three controllers
# are the quorum): the Kafka half of the scale-out topology, for the fault tests.
#   scripts/cluster/kafka-brokers.sh start [N]    all three, or node N (1-3), waiting until it serves
#   scripts/cluster/kafka-brokers.sh kill N       kill -9 node N (a crash, not a shutdown)
#   scripts/cluster/kafka-brokers.sh stop         all three
#   scripts/cluster/kafka-brokers.sh status       each node: running, answering
#   scripts/cluster/kafka-brokers.sh bootstrap    prints the bootstrap list
# Node N: client 127.0.0.1:1909(1+N), controller 127.0.0.1:1919(1+N). State lives in .local/cluster/.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
HOME_DIR="$LOCAL/cluster"
NODES=(1 2 3)
client_port() { echo $((19091 + $1)); }
controller_port() { echo $((19191 + $1)); }
node_home() { echo "$HOME_DIR/kafka-$1"; }
CP="$LOCAL/kafka/libs/*"
VOTERS="$(for n in "${NODES[@]}"; do printf '%s@127.0.0.1:%s,' "$n" "$(controller_port "$n")"; done)"
VOTERS="${VOTERS%,}"
BOOTSTRAP="$(for n in "${NODES[@]}"; do printf '127.0.0.1:%s,' "$(client_port "$n")"; done)"
BOOTSTRAP="${BOOTSTRAP%,}"

node_answers() { kcat -b "127.0.0.1:$(client_port "$1")" -L -m 2 >/dev/null 2>&1; }
# The whole cluster serves when a metadata answer lists all three brokers.
cluster_answers() { [[ "$(kcat -b "$BOOTSTRAP" -L -m 2 2>/dev/null | grep -c '^  broker ')" == 3 ]]; }

spawn_node() {
  local n=$1 home; home="$(node_home "$n")"
  pid_alive "$home/kafka.pid" && return 0
  port_open "$(client_port "$n")" && die "127.0.0.1:$(client_port "$n") is taken by something that is not node $n"
  mkdir -p "$home/data"
  sed -e "s:NODE_ID:$n:g" -e "s:NODE_PORT:$(client_port "$n"):g" -e "s:NODE_CONTROLLER_PORT:$(controller_port "$n"):g" \
    -e "s|VOTERS|$VOTERS|g" -e "s:NODE_HOME:$home:g" "$ROOT/scripts/cluster/broker.properties" >"$home/server.properties"
  if [[ ! -f $home/data/meta.properties ]]; then
    java -cp "$CP" -Dlog4j2.configurationFile="$ROOT/scripts/kafka/log4j2.yaml" kafka.tools.StorageTool format \
      -t "$(cat "$HOME_DIR/kafka.cluster-id")" -c "$home/server.properties" >"$home/format.log" 2>&1 \
      || die "formatting node $n failed; see $home/format.log"
  fi
  # Small heaps: three brokers share two cores and the machine with ClickHouse and the workers.
  spawn_detached "$home/kafka.pid" "$home/kafka.log" java -Xms128m -Xmx384m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:TieredStopAtLevel=1 -Djava.awt.headless=true -Dlog4j2.configurationFile="$ROOT/scripts/kafka/log4j2.yaml" \
    -cp "$CP" kafka.Kafka "$home/server.properties"
}

start() {
  [[ -f "$LOCAL/kafka/libs/.pom-sha" ]] || die "Kafka jars missing; run scripts/provision.sh first"
  mkdir -p "$HOME_DIR"
  # One cluster id for all three nodes, kept so restarts reuse the formatted storage.
  [[ -s $HOME_DIR/kafka.cluster-id ]] \
    || java -cp "$CP" kafka.tools.StorageTool random-uuid 2>/dev/null >"$HOME_DIR/kafka.cluster-id"
  local which=("${NODES[@]}"); [[ -n ${1:-} ]] && which=("$1")
  for n in "${which[@]}"; do spawn_node "$n"; done
  for n in "${which[@]}"; do
    wait_for 120 "Kafka node $n on 127.0.0.1:$(client_port "$n")" node_answers "$n" \
      || die "node $n did not answer within 120 s; see $(node_home "$n")/kafka.log"
  done
  wait_for 60 "Kafka cluster ($BOOTSTRAP)" cluster_answers || die "the cluster does not list three brokers"
}

signal_node() { stop_pidfile "$(node_home "$2")/kafka.pid" 30 "$1" || true; } # signal_node <signal> <n>

case "${1:-}" in
  start) start "${2:-}" ;;
  kill) [[ ${2:-} =~ ^[123]$ ]] || die "usage: $0 kill 1|2|3"; signal_node KILL "$2"; log "node $2 killed" ;;
  stop) for n in "${NODES[@]}"; do signal_node TERM "$n"; done ;;
  bootstrap) echo "$BOOTSTRAP" ;;
  status)
    for n in "${NODES[@]}"; do
      state=stopped; pid_alive "$(node_home "$n")/kafka.pid" && state="running (pid $(cat "$(node_home "$n")/kafka.pid"))"
      node_answers "$n" && state="$state, answering"
      echo "kafka node $n 127.0.0.1:$(client_port "$n"): $state"
    done ;;
  *) die "usage: $0 start [N]|kill N|stop|status|bootstrap" ;;
esac
