#!/bin/bash
# The official image's user variables, as a users.d file; then the server as its own user.
set -euo pipefail
user="${CLICKHOUSE_USER:-default}"
mkdir -p /etc/clickhouse-server/users.d
cat >/etc/clickhouse-server/users.d/from-env.xml <<XML
<yandex><users><${user}><password>${CLICKHOUSE_PASSWORD:-}</password><networks><ip>::/0</ip><ip>0.0.0.0/0</ip></networks>
<profile>default</profile><quota>default</quota></${user}></users></yandex>
XML
mkdir -p /var/lib/clickhouse /var/log/clickhouse-server
chown -R clickhouse:clickhouse /var/lib/clickhouse /var/log/clickhouse-server /etc/clickhouse-server
exec su -s /bin/sh clickhouse -c 'exec clickhouse-server --config-file=/etc/clickhouse-server/config.xml'
