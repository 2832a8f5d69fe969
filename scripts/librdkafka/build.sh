#!/usr/bin/env bash
# Builds librdkafka from the source inside Confluent's npm package (version.env), against Debian's
# -dev packages: ssl, sasl (GSSAPI), lz4, zstd, zlib. Only the shared library and its header, into
#   <out>/lib/librdkafka.so.1  <out>/include/librdkafka/rdkafka.h
# The patches are applied in the order patches/series names them; patches/README.md gives each
# one's defect, upstream issue, the test that fails without it, and when it can go.
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
mapfile -t patches < <(grep -v '^#' "$here/patches/series" | grep . | sed "s|^|$here/patches/|")
for p in "${patches[@]}"; do [[ -f $p ]] || { printf '[librdkafka] error: series names %s, which is not in patches/\n' "$(basename "$p")" >&2; exit 1; }; done
listed=$(printf '%s\n' "${patches[@]}" | sort)
present=$(printf '%s\n' "$here"/patches/*.patch | sort)
[[ $listed == "$present" ]] || { printf '[librdkafka] error: patches/series must name every patch in patches/, once\n' >&2; exit 1; }
patch_sha="$(cat "$here/patches/series" "${patches[@]}" | sha256sum | cut -c1-16)"
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
