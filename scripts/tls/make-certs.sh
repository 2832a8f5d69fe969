#!/usr/bin/env bash
# A local CA and the certificates the TLS tests need, under <out> (default .local/tls):
#   ca.crt            the CA the worker is told to trust (KAFKA_PROP_SSL_CA_LOCATION, CLICKHOUSE_CA_CERT)
#   server.{key,crt}  127.0.0.1 / localhost, signed by the CA: the broker's SSL and SASL_SSL listeners, ClickHouse https
#   server.pem        key + certificate in one file, as Kafka's PEM keystore reads them
#   expired.pem       the same names, signed by the CA, valid only in 2020: an expired certificate
#   mismatch.pem      signed by the CA for wrong.example.invalid only: a host-name mismatch
#   other-ca.crt      a CA that signed none of them: a wrong CA
# Idempotent: when every file exists and was made by this script as it is, it prints "ok:".
set -euo pipefail
out="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.local/tls}"
self_sha="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
say() { printf '[tls] %s\n' "$*" >&2; }
if [[ -f $out/.made-by && "$(cat "$out/.made-by")" == "$self_sha" ]]; then say "ok: local CA and certificates in $out"; exit 0; fi
rm -rf "$out" && mkdir -p "$out" && cd "$out"
key() { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=cdr-worker local CA" -out ca.crt
key other-ca.key
openssl req -x509 -new -key other-ca.key -sha256 -days 3650 -subj "/CN=some other CA" -out other-ca.crt
# sign <name> <subjectAltName> [start end]: a CSR signed by ca.key; dates need `openssl ca`.
cat >ca.cnf <<CNF
[ca]
default_ca = local
[local]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
copy_extensions = copy
[any]
commonName = supplied
CNF
: >index.txt; echo 1000 >serial
sign() {
  local name=$1 san=$2
  key "$name.key"
  openssl req -new -key "$name.key" -subj "/CN=$name" -addext "subjectAltName=$san" -addext "extendedKeyUsage=serverAuth" -out "$name.csr"
  if [[ $# -gt 2 ]]; then
    openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -startdate "$3" -enddate "$4" -in "$name.csr" -out "$name.crt" 2>/dev/null
  else
    openssl ca -batch -config ca.cnf -cert ca.crt -keyfile ca.key -days 825 -in "$name.csr" -out "$name.crt" 2>/dev/null
  fi
  cat "$name.key" "$name.crt" >"$name.pem"
}
sign server "IP:127.0.0.1,DNS:localhost"
sign mismatch "DNS:wrong.example.invalid"
sign expired "IP:127.0.0.1,DNS:localhost" 20200101000000Z 20200102000000Z
rm -f ./*.csr ./*.pem.old index.txt* serial* ./1*.pem
chmod 644 ./*.key # read by the local ClickHouse and Kafka, which run as this user too
echo "$self_sha" >.made-by
say "made a local CA and certificates in $out"
