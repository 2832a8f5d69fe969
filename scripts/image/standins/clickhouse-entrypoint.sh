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
secret=/run/secrets/clickhouse-worker-password
if [[ -r $secret ]]; then
  hash=$(sed -z 's/\r\?\n$//' "$secret" | sha256sum | cut -d' ' -f1)
  cat >/etc/clickhouse-server/users.d/cdr-worker.xml <<XML
<yandex><users><cdr_worker><password_sha256_hex>${hash}</password_sha256_hex><networks><ip>::/0</ip><ip>0.0.0.0/0</ip></networks>
<profile>default</profile><quota>default</quota><allow_databases><database>${CLICKHOUSE_WORKER_DATABASE:-telecom}</database></allow_databases></cdr_worker></users></yandex>
XML
fi
mkdir -p /var/lib/clickhouse /var/log/clickhouse-server
chown -R clickhouse:clickhouse /var/lib/clickhouse /var/log/clickhouse-server /etc/clickhouse-server
exec su -s /bin/sh clickhouse -c 'exec clickhouse-server --config-file=/etc/clickhouse-server/config.xml'
