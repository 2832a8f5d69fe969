# Shared helpers for the provisioning and service scripts. Sourced, not run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LOCAL="$ROOT/.local"
BUN_VERSION="1.4.5"
# SHA-256 of that release's Linux x64 executable (@oven/bun-linux-x64 and -baseline ship the same
# one): provisioning refuses a bun of that version whose binary is another.
BUN_SHA256="f05d28a3862f4b84395c7fa32480b835dd47482e80b7e7a49a115227f0c06083"
# The npm registry's integrity of @oven/bun-linux-x64@BUN_VERSION, the package that carries it:
# checked on the tarball before anything in it runs.
BUN_PACKAGE_INTEGRITY="sha512-IWX9BELoGHAUtMonkeSaNaZwXzRk+oDw6Mk+HBFXd3KHYIBNBsIGRupMZPcgNoDbJpLu6gAJjIoIVPZtt1aJ1g=="
# The broker every suite runs on, and the newest 4.x Maven Central serves, on which the Kafka-facing
# suites run a second time (scripts/test.sh; docs/compatibility.md). Each is a set of jars
# resolved from scripts/kafka/pom.xml with -Dkafka.version.
KAFKA_VERSION="4.1.1"
KAFKA_NEWEST_VERSION="4.4.0"
# The newest broker's listeners: the same seven as the main broker's, from this port on.
KAFKA_NEWEST_BASE_PORT="${LOCAL_KAFKA_NEWEST_BASE_PORT:-9192}"
KAFKA_PORT="${LOCAL_KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${LOCAL_KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_SASL_PORT="${LOCAL_KAFKA_SASL_PORT:-9094}"
# TLS listeners (certificates from scripts/tls/make-certs.sh): a good SSL one, SASL_SSL with
# SCRAM-SHA-512, and two whose certificates are expired or name another host, for the failure tests.
KAFKA_SSL_PORT="${LOCAL_KAFKA_SSL_PORT:-9095}"
KAFKA_SASL_SSL_PORT="${LOCAL_KAFKA_SASL_SSL_PORT:-9096}"
KAFKA_EXPIRED_PORT="${LOCAL_KAFKA_EXPIRED_PORT:-9097}"
KAFKA_MISMATCH_PORT="${LOCAL_KAFKA_MISMATCH_PORT:-9098}"
CH_HTTP_PORT="${LOCAL_CLICKHOUSE_HTTP_PORT:-8123}"
CH_HTTPS_PORT="${LOCAL_CLICKHOUSE_HTTPS_PORT:-8443}"
TLS_DIR="$LOCAL/tls"
# The development SCRAM user the broker's SASL_SSL listener knows (created at start).
KAFKA_SCRAM_USER="cdr"
KAFKA_SCRAM_PASSWORD="cdr-scram-secret"
CH_TCP_PORT="${LOCAL_CLICKHOUSE_TCP_PORT:-9000}"
# The test endpoint around ClickHouse 26.9's engine (scripts/clickhouse/chdb-http.py), beside 18.16.
CHDB_HTTP_PORT="${LOCAL_CHDB_HTTP_PORT:-8127}"

log() { printf '[%s] %s\n' "$(basename "$0")" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# True when something accepts TCP connections on 127.0.0.1:$1.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_for <seconds> <description> <command...>: polls the command every 0.2 s.
wait_for() {
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
  log "$what is ready"
}

# pid_alive <pidfile>: the process recorded in the file still runs.
pid_alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# spawn_detached <pidfile> <log> <command...>: runs the command in its own session; the pid file
# holds the server's own pid (the shell records $$ and execs it, whatever setsid does).
spawn_detached() {
  local pidfile=$1 logfile=$2; shift 2
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" >"$logfile" 2>&1 </dev/null &
  local deadline=$((SECONDS + 5))
  until [[ -s $pidfile ]] || ((SECONDS > deadline)); do sleep 0.05; done
}

# stop_pidfile <pidfile> <seconds> [signal]: sends the signal (TERM) to the process the file names,
# waits up to <seconds> for it to exit, then kill -9; removes the file. Returns 1 when it had to kill.
stop_pidfile() {
  local pidfile=$1 limit=$2 sig=${3:-TERM}
  [[ -s $pidfile ]] || { rm -f "$pidfile"; return 0; }
  local pid; pid="$(cat "$pidfile")"
  kill "-$sig" "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + limit)) forced=0
  while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; forced=1; fi
  rm -f "$pidfile"
  return $forced
}
