#!/usr/bin/env bash
# Local stand-ins for the Dockerfile's two base images, built from Debian's packages with
# mmdebstrap and imported into podman, for a host that reaches Debian's packages but no image
# registry. Each carries its own tag; the Dockerfile takes the base images as build arguments.
#   localhost/cdr-worker-base/debian:bookworm-slim       ← debian:bookworm-slim (minbase)
#   localhost/cdr-worker-base/distroless-cc:nonroot       ← gcr.io/distroless/cc-debian12:nonroot
# The distroless stand-in holds what distroless/cc holds, unpacked the way distroless unpacks it
# (package contents, no maintainer scripts, no shell, no package manager): libc6, libgcc-s1,
# libgomp1, libstdc++6, libssl3, ca-certificates (its bundle made from the package's certificates),
# tzdata, base-files, netbase, and the users root and nonroot (65532) with /home/nonroot and /tmp.
# Its shared libraries are checked against distroless-cc-debian12.txt, so the image's copy list
# stays honest. Idempotent: an image whose recipe (this file) has not changed is kept.
# Usage: scripts/image/base-images.sh [--force]
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
export CONTAINERS_CONF="$ROOT/scripts/image/containers.conf"

SUITE=bookworm
MIRROR=http://deb.debian.org/debian
SLIM=localhost/cdr-worker-base/debian:bookworm-slim
DISTROLESS=localhost/cdr-worker-base/distroless-cc:nonroot
RECIPE="$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
DISTROLESS_PACKAGES=libc6,libgcc-s1,libgomp1,libstdc++6,libssl3,ca-certificates,tzdata,base-files,netbase
WORK="$ROOT/.local/image-base"
FORCE=0
[[ ${1:-} == --force ]] && FORCE=1


current() { # image → true when it exists and was made by this recipe
  [[ $FORCE == 0 ]] && [[ "$(podman image inspect --format '{{index .Labels "cdr-worker.recipe"}}' "$1" 2>/dev/null)" == "$RECIPE" ]]
}

import() { # tarball image [podman import --change …]
  local tar=$1 image=$2
  shift 2
  podman import --quiet --change "LABEL cdr-worker.recipe=$RECIPE" "$@" "$tar" "$image" >/dev/null
  rm -f "$tar"
  log "built $image ($(podman image inspect --format '{{.Size}}' "$image") bytes)"
}

mkdir -p "$WORK"

if current "$SLIM"; then
  log "ok: $SLIM"
else
  log "building $SLIM (mmdebstrap --variant=minbase $SUITE)"
  mmdebstrap --quiet --variant=minbase "$SUITE" "$WORK/slim.tar" "$MIRROR"
  import "$WORK/slim.tar" "$SLIM" --change 'CMD ["bash"]'
fi

if current "$DISTROLESS"; then
  log "ok: $DISTROLESS"
else
  log "building $DISTROLESS (mmdebstrap --variant=extract $DISTROLESS_PACKAGES)"
  # extract: the packages' files only, as distroless lays them out; then what its build adds.
  root="$WORK/distroless"
  rm -rf "$root"
  mmdebstrap --quiet --variant=extract --include="$DISTROLESS_PACKAGES" "$SUITE" "$root" "$MIRROR"
  mkdir -p "$root/tmp" "$root/home/nonroot" "$root/root" "$root/etc/ssl/certs"
  chmod 1777 "$root/tmp"
  chmod 700 "$root/root"
  chown 65532:65532 "$root/home/nonroot"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n' >"$root/etc/group"
  cat "$root"/usr/share/ca-certificates/mozilla/*.crt >"$root/etc/ssl/certs/ca-certificates.crt"
  # What the packages' dependencies (openssl, debconf, mawk) and package management left: distroless
  # has no programs at all, no perl, no dpkg state.
  rm -rf "$root"/usr/bin/* "$root"/usr/sbin/* "$root/usr/share/perl5" "$root/usr/share/debconf" "$root/usr/share/lintian" \
    "$root/etc/apt" "$root/etc/dpkg" "$root/etc/debconf.conf" "$root/var/lib/dpkg" "$root/var/cache" "$root/usr/share/doc" \
    "$root/usr/share/man" "$root/usr/share/bash-completion" "$root/usr/share/gdb"
  tar -C "$root" --numeric-owner -cf "$WORK/distroless.tar" .
  rm -rf "$root"
  # The libraries it holds, against the list the copy list is proved with.
  libs="$(tar -tf "$WORK/distroless.tar" | grep -E '^\./(usr/)?lib(64)?/(x86_64-linux-gnu/)?[^/]+\.so(\.[0-9]+)*$' | xargs -n1 basename | sort -u)"
  want="$(grep -v '^#' "$ROOT/scripts/image/distroless-cc-debian12.txt" | sed '/^$/d' | sort -u)"
  missing="$(comm -13 <(echo "$libs") <(echo "$want"))"
  [[ -z $missing ]] || die "the distroless stand-in lacks libraries distroless-cc-debian12.txt lists: $missing"
  import "$WORK/distroless.tar" "$DISTROLESS" \
    --change 'USER 65532' --change 'WORKDIR /home/nonroot' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt'
fi
echo "SLIM=$SLIM"
echo "DISTROLESS=$DISTROLESS"
