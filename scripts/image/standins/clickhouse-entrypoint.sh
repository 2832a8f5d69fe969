#!/bin/bash
# The official image's user variables, as a users.d file; then the server as its own user.
set -euo pipefail
user="${CLICKHOUSE_USER:-default}"
mkdir -p /etc/clickhouse-server/users.d
cat >/etc/clickhouse-server/users.d/from-env.xml <<XML
<yandex><users><${user}><password>${CLICKHOUSE_PASSWORD:-}</password><networks><ip>::/0</ip><ip>0.0.0.0/0</ip></networks>
<profile>default</profile><quota>default</quota></${user}></users></yandex>
XML
# The worker's own user, from compose's secret: 18.16 has no SQL users or grants, so `migrate --role`
# cannot make it here. users.xml's closest: its own password (as a hash) and the worker's database only
# (CLICKHOUSE_DATABASE's default, telecom, unless CLICKHOUSE_WORKER_DATABASE says otherwise).
# The DLQ table's user (dlq fill, replay, audit) the same way from its own secret.
user_from_secret() { # <user> <secret file>
  [[ -r $2 ]] || return 0
  local hash
  hash=$(sed -z 's/\r\?\n$//' "$2" | sha256sum | cut -d' ' -f1)
  cat >"/etc/clickhouse-server/users.d/$1.xml" <<XML
<yandex><users><$1><password_sha256_hex>${hash}</password_sha256_hex><networks><ip>::/0</ip><ip>0.0.0.0/0</ip></networks>
<profile>default</profile><quota>default</quota><allow_databases><database>${CLICKHOUSE_WORKER_DATABASE:-telecom}</database></allow_databases></$1></users></yandex>
XML
}
user_from_secret cdr_worker /run/secrets/clickhouse-worker-password
user_from_secret cdr_dlq /run/secrets/clickhouse-dlq-password
mkdir -p /var/lib/clickhouse /var/log/clickhouse-server
chown -R clickhouse:clickhouse /var/lib/clickhouse /var/log/clickhouse-server /etc/clickhouse-server
exec su -s /bin/sh clickhouse -c 'exec clickhouse-server --config-file=/etc/clickhouse-server/config.xml'
