#!/usr/bin/env bash
# Builds the shipped Dockerfile with podman on this host: base images from Debian's packages
# (base-images.sh), the build on the host's network (apt reaches Debian's mirror, npm and bun reach
# the npm registry) with the host's extra CA certificates mounted read-only where Debian's
# ca-certificates takes local ones (an intercepting egress proxy signs with its own CA), and no
# pulls. The Dockerfile is used as shipped; only its base-image arguments and the commit are set.
# The image is tagged as asked and with the version (package.json): localhost/cdr-worker:<version>.
# Usage: scripts/image/build.sh [tag=localhost/cdr-worker:latest]
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
export CONTAINERS_CONF="$ROOT/scripts/image/containers.conf"
TAG="${1:-localhost/cdr-worker:latest}"
bases="$("$ROOT/scripts/image/base-images.sh")"
SLIM="$(sed -n 's/^SLIM=//p' <<<"$bases")"
DISTROLESS="$(sed -n 's/^DISTROLESS=//p' <<<"$bases")"
mounts=()
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mounts+=(--volume /usr/local/share/ca-certificates:/usr/local/share/ca-certificates:ro)
fi
log "podman build $TAG on $SLIM and $DISTROLESS"
start=$(date +%s)
version="$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$ROOT/package.json")"
commit="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
podman build --network host --pull=never "${mounts[@]}" \
  --build-arg "BUILD_BASE=$SLIM" --build-arg "RUNTIME_BASE=$DISTROLESS" --build-arg "CDR_COMMIT=$commit" \
  --tag "$TAG" --tag "${TAG%:*}:$version" --file "$ROOT/Dockerfile" "$ROOT" >&2
log "built $TAG in $(($(date +%s) - start)) s: $(podman image inspect --format '{{.Size}}' "$TAG") bytes"
echo "$TAG"
