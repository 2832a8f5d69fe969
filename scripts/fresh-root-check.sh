#!/usr/bin/env bash
# Provisioning on a machine that has nothing: builds a bare Debian 12 root (mmdebstrap minbase),
# copies the project's tracked files and this host's registry client settings into it, runs
# scripts/provision.sh there, then lists what a test would still miss (the provisioning test, run
# inside the root). A package installed by hand on this machine hides from every other check; here
# it cannot. Exit 0 when provisioning succeeded and nothing is missing.
#   bash scripts/fresh-root-check.sh [--keep]     (--keep leaves the root in .local/fresh-root)
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

SUITE=bookworm
MIRROR=http://deb.debian.org/debian
FRESH="$LOCAL/fresh-root"
KEEP=0
[[ ${1:-} == --keep ]] && KEEP=1
mounted=()

cleanup() {
  local m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  ((KEEP)) || rm -rf "$FRESH"
}
trap cleanup EXIT

start=$SECONDS
for ((i = 0; i < 3; i++)); do umount -l "$FRESH"/{proc,sys,dev} 2>/dev/null || true; done
rm -rf "$FRESH"
log "building a bare Debian 12 root (mmdebstrap --variant=minbase $SUITE)"
# ca-certificates: what a machine needs to trust the certificate authorities it was given (below).
mmdebstrap --quiet --variant=minbase --include=ca-certificates "$SUITE" "$FRESH" "$MIRROR"
log "root built in $((SECONDS - start)) s"

# The registries are reached the way this host reaches them: its clients' settings and the local
# certificate authorities it trusts (a TLS-inspecting egress proxy signs with one), nothing else.
for f in /etc/resolv.conf /etc/npmrc /etc/pip.conf /root/.npmrc /etc/apt/apt.conf.d/99artifact-registry \
  /usr/local/share/ca-certificates/*.crt; do
  [[ -f $f ]] && install -D -m "$(stat -c %a "$f")" "$f" "$FRESH$f"
done
chroot "$FRESH" update-ca-certificates >/dev/null
# The host's variables that name those authorities to clients (Node, Python, curl), passed as they are.
pass=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
for v in SSL_CERT_FILE SSL_CERT_DIR NODE_EXTRA_CA_CERTS REQUESTS_CA_BUNDLE CURL_CA_BUNDLE; do
  [[ -n ${!v:-} ]] && pass+=("$v=${!v}")
done
# The project as a clone has it: tracked files only, nothing from .local/ or node_modules/.
mkdir -p "$FRESH/work/cdr-worker"
git -C "$ROOT" ls-files -z | (cd "$ROOT" && tar --null -T - -cf -) | tar -C "$FRESH/work/cdr-worker" -xf -
for d in proc sys dev; do
  mount --rbind "/$d" "$FRESH/$d"
  mounted+=("$FRESH/$d")
done

t=$SECONDS
log "running scripts/provision.sh inside the root"
if ! chroot "$FRESH" /usr/bin/env -i "${pass[@]}" \
  bash -c 'cd /work/cdr-worker && bash scripts/provision.sh' >"$LOCAL/fresh-root-provision.log" 2>&1; then
  tail -20 "$LOCAL/fresh-root-provision.log" >&2
  die "provisioning a bare root failed after $((SECONDS - t)) s; see $LOCAL/fresh-root-provision.log"
fi
log "provisioned in $((SECONDS - t)) s"

# What a test would still miss: every command the scripts call, and the packages no script names.
log "checking what the tests need inside the root (test/infra/provisioning.test.ts)"
if ! chroot "$FRESH" /usr/bin/env -i "${pass[@]}" CDR_TEST_SERVICES_UP=1 bash -c 'cd /work/cdr-worker && bun test test/infra/provisioning.test.ts' 2>&1 | tee "$LOCAL/fresh-root-check.log" | grep -E '^\(fail\)|not installed|comes from|Expected|Received' >&2; then
  :
fi
grep -qE '^ *[0-9]+ fail' "$LOCAL/fresh-root-check.log" && ! grep -qE '^ *0 fail' "$LOCAL/fresh-root-check.log" \
  && die "a bare root lacks what the tests need after provisioning ($((SECONDS - start)) s); see $LOCAL/fresh-root-check.log"
grep -qE '^ *0 fail' "$LOCAL/fresh-root-check.log" || die "the check inside the root did not run; see $LOCAL/fresh-root-check.log"
log "a bare Debian 12 root has everything the tests need after provisioning: $((SECONDS - start)) s in all"
