#!/usr/bin/env bash
# Builds librdkafka from the source inside Confluent's npm package (version.env), against Debian's
# -dev packages: ssl, sasl (GSSAPI), lz4, zstd, zlib. Only the shared library and its header, into
#   <out>/lib/librdkafka.so.1  <out>/include/librdkafka/rdkafka.h
# The patches in patches/ are applied in name order:
#   coordinator-timeout.patch  a request waiting for its coordinator fails at its timeout, and asks
#                              again once a second for a coordinator that stays down, so
#                              send_offsets_to_transaction returns when the group coordinator dies;
#   decompression-cap.patch    every codec's output (lz4, gzip, snappy; zstd already) capped at
#                              receive.message.max.bytes;
#   fetch-budget.patch         the prefetch queue counts what a record holds (key, value, headers,
#                              its op, a decompressed batch's buffer), and one fetch stops adding to
#                              it at queued.max.messages.kbytes, inside a batch if need be;
#   heartbeat-facts.patch      the statistics' cgrp says when the heartbeat the coordinator last
#                              accepted was sent, when the last refused one was and its error, and
#                              since when the member is in a rebalance (the membership lease's facts);
#   resume-wakeup.patch        a resumed partition wakes its broker thread, which otherwise idles out
#                              the rest of a second with nothing to fetch before fetching it;
#   unreadable-batches.patch   a key or value length below -1 is null, as Kafka reads it; a batch
#                              received whole that cannot be read is reported offset by offset and
#                              skipped, never fetched again (aborted and control batches passed over).
# Idempotent: a build whose stamp matches the pin, the flags and the patches prints "ok:" and does
# nothing.
# Usage: scripts/librdkafka/build.sh <out dir>
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=version.env
source "$here/version.env"
out="${1:?usage: build.sh <out dir>}"
# libcurl (OAUTHBEARER OIDC) and syslog are not used by the worker: left out, one dependency fewer in the image.
FLAGS=(--enable-ssl --enable-gssapi --enable-zstd --enable-zlib --enable-lz4-ext --disable-curl --disable-syslog --disable-debug-symbols)
patches=("$here"/patches/*.patch)
patch_sha="$(cat "${patches[@]}" | sha256sum | cut -c1-16)"
want="$KAFKA_JS_PACKAGE@$KAFKA_JS_VERSION librdkafka $LIBRDKAFKA_VERSION ${FLAGS[*]} patches $patch_sha"
stamp="$out/.build"
say() { printf '[librdkafka] %s\n' "$*" >&2; }
if [[ -f $stamp && "$(cat "$stamp")" == "$want" && -f $out/lib/librdkafka.so.1 ]]; then
  say "ok: librdkafka $LIBRDKAFKA_VERSION in $out"; exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
say "fetching $KAFKA_JS_PACKAGE@$KAFKA_JS_VERSION from the npm registry"
(cd "$work" && npm pack --silent "$KAFKA_JS_PACKAGE@$KAFKA_JS_VERSION" >/dev/null)
got="sha512-$(openssl dgst -sha512 -binary "$work"/*.tgz | base64 -w0)"
[[ $got == "$KAFKA_JS_INTEGRITY" ]] \
  || { say "error: $KAFKA_JS_PACKAGE@$KAFKA_JS_VERSION has integrity $got; version.env pins $KAFKA_JS_INTEGRITY"; exit 1; }
(cd "$work" && tar xzf ./*.tgz)
src="$work/package/deps/librdkafka"
[[ -x $src/configure ]] || { say "error: no deps/librdkafka/configure in the package"; exit 1; }
hex="$(awk '/^#define RD_KAFKA_VERSION /{print $3}' "$src/src/rdkafka.h")"
IFS=. read -r maj min pat <<<"$LIBRDKAFKA_VERSION"
expect="$(printf '0x%02x%02x%02xff' "$maj" "$min" "$pat")"
[[ $hex == "$expect" ]] || { say "error: the package carries librdkafka $hex, version.env pins $expect"; exit 1; }
for p in "${patches[@]}"; do
  patch -s -p1 -d "$src" <"$p" || { say "error: $(basename "$p") does not apply to librdkafka $LIBRDKAFKA_VERSION"; exit 1; }
done
say "building librdkafka $LIBRDKAFKA_VERSION (${FLAGS[*]}; patches: $(basename -a "${patches[@]}" | tr '\n' ' '))"
(cd "$src" && ./configure --prefix="$out" "${FLAGS[@]}" >"$work/configure.log" 2>&1) \
  || { tail -30 "$work/configure.log" >&2; exit 1; }
(cd "$src/src" && make -j"$(nproc)" librdkafka.so.1 >"$work/make.log" 2>&1) || { tail -30 "$work/make.log" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out/lib" "$out/include/librdkafka"
cp "$src/src/librdkafka.so.1" "$out/lib/"
cp "$src/src/rdkafka.h" "$out/include/librdkafka/"
echo "$want" >"$stamp"
say "built $out/lib/librdkafka.so.1"
