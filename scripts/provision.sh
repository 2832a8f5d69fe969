#!/usr/bin/env bash
# Installs what cdr-worker needs on a fresh Debian machine of this kind, and nothing twice:
# Debian packages, Bun (from the npm registry), the Kafka broker jars (Maven Central), librdkafka
# (built from Confluent's npm package), node_modules, the current ClickHouse engine (PyPI).
# Every step checks first and says "ok" when there is nothing to do.
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

# kcat (a benchmark peer) brings Debian's own librdkafka1; the worker loads the project's build.
# librdkafka1 is named too: tests load it through LIBRDKAFKA_PATH as an older library (test/infra/).
# prometheus brings promtool too: the rule tests and the scrape test (test/prometheus/) run both.
# zookeeper coordinates the two local ClickHouse replicas of scripts/cluster/ (migrate --cluster).
# Every program the scripts call comes from one of these or from an essential package
# (test/infra/provisioning.test.ts checks each command word of every script against this list).
# No script calls the CNI dnsname plugin by name, yet podman needs it: without it, containers on a
# compose network cannot resolve each other's service names (kafka, clickhouse).
# iptables: test/support/cut.ts cuts one worker off from the broker (test/e2e/kafka-cut.test.ts).
# prometheus-alertmanager: test/alertmanager/ fires the rules' alerts at a real Alertmanager to test its inhibit rules.
# iproute2: test/e2e/sasl-rotation.test.ts ends one worker's broker connections (ss -K) so that it authenticates anew.
# gdb: a failed cluster fault scenario writes each worker's thread stacks beside its log (scripts/cluster/faults.ts).
APT_PACKAGES=(kcat librdkafka1 clickhouse-server clickhouse-client prometheus zookeeper gcc g++ make patch pkg-config libssl-dev libsasl2-dev liblz4-dev libzstd-dev zlib1g-dev
  podman runc mmdebstrap golang-github-containernetworking-plugin-dnsname git maven openjdk-17-jre-headless python3 python3-venv curl openssl
  iptables iproute2 prometheus-alertmanager gdb catatonit)
# The jar set is keyed by the pom's hash, so editing the pom re-resolves it.
KAFKA_POM_SHA="$(sha256sum "$ROOT/scripts/kafka/pom.xml" | cut -c1-16)"

provision_apt() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  # npm installs Bun: Debian's package, unless the machine's Node.js brings its own npm (NodeSource's
  # nodejs does, and Debian's npm would conflict with it).
  command -v npm >/dev/null || missing+=(npm)
  if ((${#missing[@]} == 0)); then log "ok: Debian packages"; return; fi
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The clickhouse-server package tries to start a system service; policy-rc.d on these machines
  # refuses, which is what we want: services.sh runs a project-local server instead.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

bun_sha256() { sha256sum "$(readlink -f "$(command -v bun)")" | cut -c1-64; }

provision_bun() {
  if command -v bun >/dev/null && [[ "$(bun --version)" == "$BUN_VERSION" && "$(bun_sha256)" == "$BUN_SHA256" ]]; then
    log "ok: bun $BUN_VERSION"; return
  fi
  # The package that carries the binary, fetched without running anything of it (npm pack runs no
  # install script), checked against the pinned integrity, then the binary against its SHA-256.
  log "installing bun $BUN_VERSION from the npm registry (@oven/bun-linux-x64, checked before it runs)"
  local work; work="$(mktemp -d)"
  (cd "$work" && npm pack --silent "@oven/bun-linux-x64@$BUN_VERSION" >/dev/null)
  local got; got="sha512-$(openssl dgst -sha512 -binary "$work"/*.tgz | base64 -w0)"
  [[ $got == "$BUN_PACKAGE_INTEGRITY" ]] \
    || { rm -rf "$work"; die "@oven/bun-linux-x64@$BUN_VERSION has integrity $got, not the pinned $BUN_PACKAGE_INTEGRITY"; }
  tar -xzf "$work"/*.tgz -C "$work" package/bin/bun
  local sha; sha="$(sha256sum "$work/package/bin/bun" | cut -c1-64)"
  [[ $sha == "$BUN_SHA256" ]] || { rm -rf "$work"; die "bun $BUN_VERSION's binary has SHA-256 $sha, not the pinned $BUN_SHA256"; }
  install -m 0755 "$work/package/bin/bun" /usr/local/bin/bun
  rm -rf "$work"
  hash -r
  [[ "$(bun --version)" == "$BUN_VERSION" ]] || die "bun $BUN_VERSION did not install (found $(bun --version 2>&1))"
}

# provision_kafka <version> <home>: the broker jars of that version into <home>/libs.
provision_kafka() {
  local version=$1 home=$2
  local dir="$home/libs" stamp="$home/libs/.pom-sha" want="$KAFKA_POM_SHA-$version"
  if [[ -f $stamp && "$(cat "$stamp")" == "$want" ]]; then log "ok: Kafka $version jars"; return; fi
  log "resolving the Apache Kafka $version broker jars from Maven Central (scripts/kafka/pom.xml)"
  rm -rf "$dir"; mkdir -p "$dir"
  mvn -q -B -f "$ROOT/scripts/kafka/pom.xml" dependency:copy-dependencies -Dkafka.version="$version" \
    -DoutputDirectory="$dir" -DincludeScope=runtime -Dstyle.color=never >"$home/mvn.log" 2>&1 \
    || die "mvn failed; see $home/mvn.log"
  ls "$dir/kafka_2.13-$version.jar" >/dev/null || die "kafka_2.13-$version jar missing after mvn"
  echo "$want" >"$stamp"
}

# The current ClickHouse engine, in-process (chdb-core on PyPI), for the compatibility suite
# (test/clickhouse/compat.test.ts). Only the engine: the suite drives it through
# scripts/clickhouse/chdb-run.py, which needs neither pandas nor pyarrow.
CHDB_VERSION="26.9.0"
provision_chdb() {
  local venv="$LOCAL/chdb" stamp="$LOCAL/chdb/.version"
  if [[ -f $stamp && "$(cat "$stamp")" == "$CHDB_VERSION" ]] && "$venv/bin/python" -c 'import chdb' 2>/dev/null; then
    log "ok: chdb-core $CHDB_VERSION"; return
  fi
  log "installing chdb-core $CHDB_VERSION (ClickHouse's engine, from PyPI) into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "chdb-core==$CHDB_VERSION" >"$LOCAL/chdb-pip.log" 2>&1 \
    || die "pip install chdb-core failed; see $LOCAL/chdb-pip.log"
  echo "$CHDB_VERSION" >"$stamp"
}

# podman-compose from PyPI, pinned, for running compose.yml under podman (scripts/image/compose.sh).
PODMAN_COMPOSE_VERSION="1.6.0"
provision_podman_compose() {
  local venv="$LOCAL/podman-compose" stamp="$LOCAL/podman-compose/.version"
  if [[ -f $stamp && "$(cat "$stamp")" == "$PODMAN_COMPOSE_VERSION" ]] && [[ -x $venv/bin/podman-compose ]]; then
    log "ok: podman-compose $PODMAN_COMPOSE_VERSION"; return
  fi
  log "installing podman-compose $PODMAN_COMPOSE_VERSION (PyPI) into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "podman-compose==$PODMAN_COMPOSE_VERSION" >"$LOCAL/podman-compose-pip.log" 2>&1 \
    || die "pip install podman-compose failed; see $LOCAL/podman-compose-pip.log"
  echo "$PODMAN_COMPOSE_VERSION" >"$stamp"
}

# kubernetes-validate from PyPI, pinned: it carries Kubernetes' own JSON schemas, so the suite checks
# deploy/kubernetes/ offline (test/deploy/kubernetes.test.ts).
KUBERNETES_VALIDATE_VERSION="1.37.0"
provision_kubernetes_validate() {
  local venv="$LOCAL/kubernetes-validate" stamp="$LOCAL/kubernetes-validate/.version"
  if [[ -f $stamp && "$(cat "$stamp")" == "$KUBERNETES_VALIDATE_VERSION" ]] && [[ -x $venv/bin/kubernetes-validate ]]; then
    log "ok: kubernetes-validate $KUBERNETES_VALIDATE_VERSION"; return
  fi
  log "installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION (PyPI) into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION" \
    >"$LOCAL/kubernetes-validate-pip.log" 2>&1 \
    || die "pip install kubernetes-validate failed; see $LOCAL/kubernetes-validate-pip.log"
  echo "$KUBERNETES_VALIDATE_VERSION" >"$stamp"
}

# kustomize, pinned, built from the Go module proxy: the suite renders deploy/kubernetes/'s base and
# overlays as `kubectl apply -k` does (test/deploy/). With Go's own toolchain, pinned, from the same
# proxy (a zip checked against its SHA-256): whatever Go the host has, or none.
KUSTOMIZE_VERSION="v5.5.0"
GO_TOOLCHAIN="go1.26.8"
GO_TOOLCHAIN_SHA256="30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7"
go_for_kustomize() {
  local dir="$LOCAL/go-toolchain" zip="$LOCAL/go-toolchain.zip"
  if [[ ! -x $dir/bin/go ]]; then
    log "fetching Go $GO_TOOLCHAIN from the Go module proxy (to build kustomize)"
    curl -fsS -o "$zip" "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-$GO_TOOLCHAIN.linux-amd64.zip" \
      || die "could not fetch Go $GO_TOOLCHAIN from proxy.golang.org"
    [[ "$(sha256sum "$zip" | cut -c1-64)" == "$GO_TOOLCHAIN_SHA256" ]] || die "Go $GO_TOOLCHAIN's zip does not match its SHA-256"
    rm -rf "$dir" "$LOCAL/go-toolchain.tmp" && mkdir -p "$LOCAL/go-toolchain.tmp"
    python3 -m zipfile -e "$zip" "$LOCAL/go-toolchain.tmp"
    mv "$LOCAL/go-toolchain.tmp/golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-amd64" "$dir"
    rm -rf "$LOCAL/go-toolchain.tmp" "$zip"
    # A zip keeps no modes: the toolchain's programs made executable again.
    chmod -R u+x "$dir/bin" "$dir/pkg/tool"
  fi
  echo "$dir/bin/go"
}
provision_kustomize() {
  local dir="$LOCAL/kustomize" stamp="$LOCAL/kustomize/.version"
  if [[ -f $stamp && "$(cat "$stamp")" == "$KUSTOMIZE_VERSION" ]] && [[ -x $dir/bin/kustomize ]]; then
    log "ok: kustomize $KUSTOMIZE_VERSION"; return
  fi
  local go; go="$(go_for_kustomize)"
  log "building kustomize $KUSTOMIZE_VERSION (Go module proxy) into $dir"
  rm -rf "$dir"
  GOBIN="$dir/bin" GOPATH="$LOCAL/go-path" GOCACHE="$LOCAL/go-cache" GOTOOLCHAIN=local GOFLAGS=-mod=mod \
    "$go" install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION" >"$LOCAL/kustomize-go.log" 2>&1 \
    || die "go install kustomize failed; see $LOCAL/kustomize-go.log"
  echo "$KUSTOMIZE_VERSION" >"$stamp"
}

# librdkafka at the version Confluent's JavaScript client ships, built from that npm package
# (scripts/librdkafka/version.env pins it; build.sh is idempotent and says "ok:" when built).
provision_librdkafka() {
  "$ROOT/scripts/librdkafka/build.sh" "$LOCAL/librdkafka"
}

provision_node_modules() {
  local stamp="$ROOT/node_modules/.bun.lock.sha"
  # The dependency patches count too: bun install applies them, and editing one changes no lockfile.
  local want; want="$(sha256sum "$ROOT/bun.lock" "$ROOT/package.json" "$ROOT"/scripts/patches/*.patch | sha256sum | cut -c1-64)"
  if [[ -f $stamp && "$(cat "$stamp")" == "$want" ]]; then log "ok: node_modules"; return; fi
  log "installing node_modules (frozen lockfile)"
  (cd "$ROOT" && bun install --frozen-lockfile >/dev/null)
  echo "$want" >"$stamp"
}

provision_apt
provision_bun
provision_kafka "$KAFKA_VERSION" "$LOCAL/kafka"
provision_kafka "$KAFKA_NEWEST_VERSION" "$LOCAL/kafka-newest"
provision_librdkafka
"$ROOT/scripts/tls/make-certs.sh" "$LOCAL/tls"
provision_node_modules
provision_chdb
provision_podman_compose
provision_kubernetes_validate
provision_kustomize
log "provisioned"
