#!/usr/bin/env bash
# Two ClickHouse 18.16 replicas of one shard, coordinated by ZooKeeper (Debian's 3.8), on loopback:
# the replicated half of the scale-out topology, for `migrate --cluster` and its test.
#   scripts/cluster/clickhouse-replicas.sh start        ZooKeeper and every replica not answering
#   scripts/cluster/clickhouse-replicas.sh stop [NAME]  everything, or replica NAME (r1, r2) alone
#   scripts/cluster/clickhouse-replicas.sh status       ZooKeeper and each replica
# ZooKeeper 127.0.0.1:12181; replica r1 http 8124 / native 9011, replica r2 http 8125 / native 9012;
# cluster name `cdr_cluster`. State lives in .local/cluster/.
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
HOME_DIR="$LOCAL/cluster"
ZK_PORT=12181
replicas=("r1 8124 9011 9021" "r2 8125 9012 9022")

# Serving, not only running: `ruok` says imok before the database is loaded, and a replica that
# starts then fails its ZooKeeper handshake and exits (18.16 loads replicated tables at start).
# Each probe is bounded: a connection ZooKeeper accepts while it is still starting can go unanswered,
# and an unbounded read there outlasted the whole wait (the cluster test's 240 s).
zk_answers() {
  local out
  out="$(timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf srvr >&3 && cat <&3' _ "$ZK_PORT" 2>/dev/null)"
  [[ $out == *"Mode: standalone"* ]]
}
ch_answers() { [[ "$(curl -fsS -m 2 "http://127.0.0.1:$1/ping" 2>/dev/null)" == "Ok." ]]; }

start() {
  mkdir -p "$HOME_DIR/zk/data"
  if ! zk_answers; then
    cat >"$HOME_DIR/zk/zoo.cfg" <<CFG
tickTime=2000
dataDir=$HOME_DIR/zk/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr
CFG
    spawn_detached "$HOME_DIR/zk/zk.pid" "$HOME_DIR/zk/zk.log" java -Xmx128m -Dzookeeper.log.dir="$HOME_DIR/zk" \
      -cp /usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar \
      -Dorg.slf4j.simpleLogger.showDateTime=true org.apache.zookeeper.server.quorum.QuorumPeerMain "$HOME_DIR/zk/zoo.cfg"
    wait_for 60 "ZooKeeper" zk_answers || die "ZooKeeper did not answer; see $HOME_DIR/zk/zk.log"
  fi
  for r in "${replicas[@]}"; do
    read -r name http tcp inter <<<"$r"
    local dir="$HOME_DIR/$name"
    ch_answers "$http" && continue
    mkdir -p "$dir"/{data,tmp,user_files,format_schemas,log}
    sed -e "s:CH_HOME:$dir:g" -e "s:CH_HTTP_PORT:$http:g" -e "s:CH_TCP_PORT:$tcp:g" -e "s:CH_INTER_PORT:$inter:g" \
      -e "s:REPLICA_NAME:$name:g" -e "s:ZK_PORT:$ZK_PORT:g" "$ROOT/scripts/cluster/replica.xml" >"$dir/config.xml"
    cp "$ROOT/scripts/clickhouse/users.xml" "$dir/users.xml"
    (cd "$dir" && spawn_detached "$dir/clickhouse.pid" "$dir/log/stdout.log" clickhouse-server --config-file="$dir/config.xml")
    wait_for 60 "ClickHouse replica $name" ch_answers "$http" || die "replica $name did not answer; see $dir/log"
  done
}

# Replicas first, then ZooKeeper (replicas that outlive their ZooKeeper session refuse writes).
stop() {
  local pidfiles=("$HOME_DIR"/r*/clickhouse.pid "$HOME_DIR/zk/zk.pid")
  if [[ -n ${1:-} ]]; then
    [[ $1 =~ ^r[12]$ ]] || die "no replica $1 (r1, r2)"
    pidfiles=("$HOME_DIR/$1/clickhouse.pid")
  fi
  # 30 s for a replica's graceful stop: 18.16 serves inserts on open keep-alive connections while
  # it shuts down, and a replica kill -9'd in the middle may never fetch every part again.
  # systemd waits 90 s by default.
  for pidfile in "${pidfiles[@]}"; do stop_pidfile "$pidfile" 30 || true; done
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  status)
    if zk_answers; then echo "zookeeper 127.0.0.1:$ZK_PORT: serving"; else echo "zookeeper 127.0.0.1:$ZK_PORT: not serving"; fi
    for r in "${replicas[@]}"; do
      read -r name http _ _ <<<"$r"
      if ch_answers "$http"; then echo "clickhouse $name 127.0.0.1:$http: answering"; else echo "clickhouse $name 127.0.0.1:$http: stopped"; fi
    done ;;
  *) die "usage: $0 start|stop [r1|r2]|status" ;;
esac
