#!/usr/bin/env bash
# build.sh builds the binaries of the local fleet from the Go module proxy into a
# cache outside the repository, keyed on versions, so a second run rebuilds nothing.
#
#   deploy/tools/local/build.sh            # build what is missing, print the bin dir
#   deploy/tools/local/build.sh etcd kube  # only these components (names: COMPONENTS below)
#   FLOTILLA_CACHE=/path build.sh    # cache root (default ${XDG_CACHE_HOME:-~/.cache}/flotilla)
#
# Why each component is here and how it is patched: the comment above each
# function, and the README's "Pinned components".
set -euo pipefail

ETCD_VERSION=3.6.4
KUBE_VERSION=1.34.4
KWOK_VERSION=0.7.0
FLAGGER_VERSION=1.41.0
TEKTON_VERSION=1.9.0
GITEA_VERSION=1.27.3
PROMETHEUS_OPERATOR_VERSION=0.85.0
GATEWAY_API_VERSION=1.3.0
ISTIO_API_VERSION=1.27.0
PROMETHEUS_VERSION=0.307.0
HEY_VERSION=0.1.4
NATS_VERSION=2.15.2
# cosign, which the test kit (pkg/testkit/cosigntest) and the features sign
# with: key pairs, attached and referrer (bundle) signatures, attestations.
COSIGN_VERSION=3.1.3
# The newest versions of these modules the proxy serves whose CRDs are the
# API versions Flagger 1.41 writes (kuma.io/v1alpha1 TrafficRoute,
# split.smi-spec.io/v1alpha1 TrafficSplit, traefik.containo.us/v1alpha1
# TraefikService, projectcontour.io/v1 HTTPProxy).
KUMA_VERSION=1.8.1
LINKERD2_VERSION=0.0.0-20210617063832-395cc3677e31
CONTOUR_VERSION=1.33.0
TRAEFIK_VERSION=2.11.0

CACHE=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
BIN=$CACHE/bin
SRC=$CACHE/src
mkdir -p "$BIN" "$SRC"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
LDFLAGS_STRIP="-s -w"

log() { LOGGED=1; printf '[fleet-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# have NAME: the binary is already in the cache.
have() { [ -x "$BIN/$1" ]; }

# moddir MODULE@VERSION: download a module and print its directory in the module cache.
moddir() { go mod download -json "$1" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'; }

# patch FILE FROM TO: replace one literal string and fail if it was not there.
patch() {
  local file=$1 from=$2 to=$3
  grep -qF -- "$from" "$file" || die "patch: $file does not contain: $from"
  FROM="$from" TO="$to" perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/g' "$file"
}

# copymod MODULE@VERSION DEST: a writable copy of a module, for patching.
copymod() {
  local dir; dir=$(moddir "$1")
  [ -n "$dir" ] || die "cannot download $1"
  rm -rf "$2"; cp -r "$dir" "$2"; chmod -R u+w "$2"
}

build_etcd() {
  local name=etcd-$ETCD_VERSION
  have "$name" && return
  log "building etcd $ETCD_VERSION (about 1 min cold)"
  local w=$SRC/etcd-wrap-$ETCD_VERSION
  rm -rf "$w"; mkdir -p "$w"
  cat >"$w/go.mod" <<MOD
module flotilla.local/etcdwrap

go 1.24

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION
MOD
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$w/tools.go"
  (cd "$w" && go mod tidy && go build -ldflags "$LDFLAGS_STRIP" -o "$BIN/$name.tmp" go.etcd.io/etcd/server/v3)
  mv "$BIN/$name.tmp" "$BIN/$name"
}

# kubewrap DIR: a throwaway module requiring k8s.io/kubernetes with its replace
# block (each staging module mapped to itself at the matching v0 version), since
# go install refuses a module with replace directives. kube_ldflags stamps the
# version, or kubectl, Flagger and Tekton refuse the server's v0.0.0-master.
kubewrap() {
  local w=$1
  rm -rf "$w"; mkdir -p "$w"
  moddir "k8s.io/kubernetes@v$KUBE_VERSION" >/dev/null
  local gomod; gomod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$KUBE_VERSION.mod
  {
    printf 'module flotilla.local/kubewrap\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$KUBE_VERSION"
    sed -n 's#^\t\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 v0.'"${KUBE_VERSION#*.}"'#p' "$gomod"
    printf ')\n'
  } >"$w/go.mod"
  [ "$(grep -c '=> k8s.io' "$w/go.mod")" -ge 30 ] || die "unexpected replace block in kubernetes go.mod"
}

kube_ldflags() {
  local minor=${KUBE_VERSION#*.}; minor=${minor%%.*}
  local v=v$KUBE_VERSION x="" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x="$x -X $p.gitVersion=$v -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  printf '%s' "$LDFLAGS_STRIP$x"
}

# kube_build WRAPDIR CMD...: build k8s.io/kubernetes/cmd/CMD into $BIN/CMD-$KUBE_VERSION.
kube_build() {
  local w=$1 n; shift
  kubewrap "$w"
  printf '//go:build tools\n\npackage tools\n\nimport (\n' >"$w/tools.go"
  for n in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$n" >>"$w/tools.go"; done
  printf ')\n' >>"$w/tools.go"
  (cd "$w" && go mod tidy && mkdir -p out && \
    go build -ldflags "$(kube_ldflags)" -o out/ $(for n in "$@"; do printf 'k8s.io/kubernetes/cmd/%s ' "$n"; done))
  for n in "$@"; do mv "$w/out/$n" "$BIN/$n-$KUBE_VERSION"; done
}

build_kube() {
  local names=(kube-apiserver kube-controller-manager kube-scheduler) n
  local all=1
  for n in "${names[@]}"; do have "$n-$KUBE_VERSION" || all=0; done
  [ $all = 1 ] && return
  log "building kube-apiserver, kube-controller-manager, kube-scheduler $KUBE_VERSION (about 6 min cold)"
  kube_build "$SRC/kube-wrap-$KUBE_VERSION" "${names[@]}"
}

# The kubelet and kube-proxy of a real node (pkg/testkit/realnode), from the same
# Kubernetes version as the API servers. Both build without cgo, like
# Kubernetes' own release binaries.
build_kubelet() {
  have "kubelet-$KUBE_VERSION" && have "kube-proxy-$KUBE_VERSION" && return
  log "building kubelet, kube-proxy $KUBE_VERSION (about 5 min cold)"
  kube_build "$SRC/kubelet-wrap-$KUBE_VERSION" kubelet kube-proxy
}

# kubectl, which features run as a user would (kubectl get fleetrollouts),
# from the same Kubernetes version as the API servers.
build_kubectl() {
  have "kubectl-$KUBE_VERSION" && return
  log "building kubectl $KUBE_VERSION (about 2 min cold)"
  kube_build "$SRC/kubectl-wrap-$KUBE_VERSION" kubectl
}

build_kwok() {
  have "kwok-$KWOK_VERSION" && return
  log "building kwok v$KWOK_VERSION (about 2 min cold)"
  local tmp=$SRC/kwok-gobin; rm -rf "$tmp"; mkdir -p "$tmp"
  GOBIN=$tmp go install -ldflags "$LDFLAGS_STRIP" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  mv "$tmp/kwok" "$BIN/kwok-$KWOK_VERSION"
}

# Flagger's HTTP server binds every interface; we bind it to 127.0.0.1. The "fast"
# build also lowers Flagger's 10s minimum analysis interval to 1s for quick tests.
build_flagger() {
  have "flagger-$FLAGGER_VERSION" && have "flagger-$FLAGGER_VERSION-fast" && \
    [ -f "$BIN/flagger-$FLAGGER_VERSION-crd.yaml" ] && return
  log "building flagger v$FLAGGER_VERSION, stock and fast (about 2.5 min cold)"
  local w=$SRC/flagger-$FLAGGER_VERSION
  copymod "github.com/fluxcd/flagger@v$FLAGGER_VERSION" "$w"
  patch "$w/pkg/server/server.go" 'Addr:         ":" + port,' 'Addr:         "127.0.0.1:" + port,'
  (cd "$w" && go build -ldflags "$LDFLAGS_STRIP" -o "$BIN/flagger-$FLAGGER_VERSION.tmp" ./cmd/flagger)
  patch "$w/pkg/apis/flagger/v1beta1/canary.go" \
    $'if interval < 10*time.Second {\n\t\treturn time.Second * 10' \
    $'if interval < 1*time.Second {\n\t\treturn time.Second * 1'
  (cd "$w" && go build -ldflags "$LDFLAGS_STRIP" -o "$BIN/flagger-$FLAGGER_VERSION-fast" ./cmd/flagger)
  cp "$w/artifacts/flagger/crd.yaml" "$BIN/flagger-$FLAGGER_VERSION-crd.yaml"
  mv "$BIN/flagger-$FLAGGER_VERSION.tmp" "$BIN/flagger-$FLAGGER_VERSION"
}

# Tekton's controller and knative.dev/pkg start three servers on every interface,
# one on a hard-coded port. We bind them to 127.0.0.1 and make the health port
# configurable (KNATIVE_HEALTH_PROBES_PORT) so several controllers can run at once.
build_tekton() {
  have "tekton-controller-$TEKTON_VERSION" && [ -d "$BIN/tekton-$TEKTON_VERSION-config" ] && [ -d "$BIN/tekton-$TEKTON_VERSION-images" ] && return
  log "building tekton pipelines controller and its images v$TEKTON_VERSION (about 4.5 min cold)"
  local w=$SRC/tekton-$TEKTON_VERSION
  copymod "github.com/tektoncd/pipeline@v$TEKTON_VERSION" "$w"
  local kpv; kpv=$(sed -n 's/^\tknative.dev\/pkg \(v[^ ]*\).*/\1/p' "$w/go.mod" | head -1)
  [ -n "$kpv" ] || die "cannot find knative.dev/pkg in tekton's go.mod"
  local k=$SRC/knative-pkg-$kpv
  copymod "knative.dev/pkg@$kpv" "$k"
  patch "$k/profiling/server.go" 'Addr:              ":" + port,' 'Addr:              "127.0.0.1:" + port,'
  patch "$k/injection/health_check.go" 'Addr: ":" + strconv.Itoa(port)}' 'Addr: "127.0.0.1:" + strconv.Itoa(port)}'
  patch "$k/injection/health_check.go" 'server := http.Server{' \
    $'if p, err := strconv.Atoi(os.Getenv("KNATIVE_HEALTH_PROBES_PORT")); err == nil {\n\t\tport = p\n\t}\n\tserver := http.Server{'
  patch "$k/injection/health_check.go" 'import (' $'import (\n\t"os"'
  patch "$w/cmd/controller/main.go" 'http.ListenAndServe(":"+port, mux)' 'http.ListenAndServe("127.0.0.1:"+port, mux)'
  (cd "$w" && go mod edit -replace "knative.dev/pkg=$k" && \
    go build -ldflags "$LDFLAGS_STRIP" -o "$BIN/tekton-controller-$TEKTON_VERSION.tmp" ./cmd/controller)
  # The binaries of Tekton's own images (its release builds them with ko, at
  # /ko-app/<name>): a real node runs them in the TaskRuns' pods (the
  # entrypoint copied into every step, nop for stopped sidecars, the
  # working-dir initializer). Static: the images hold nothing else.
  local imgs=$BIN/tekton-$TEKTON_VERSION-images
  rm -rf "$imgs.tmp"; mkdir -p "$imgs.tmp"
  (cd "$w" && CGO_ENABLED=0 go build -ldflags "$LDFLAGS_STRIP" -o "$imgs.tmp/" ./cmd/entrypoint ./cmd/nop ./cmd/workingdirinit)
  rm -rf "$imgs"; mv "$imgs.tmp" "$imgs"
  local cfg=$BIN/tekton-$TEKTON_VERSION-config
  rm -rf "$cfg"; mkdir -p "$cfg/crds"
  cp "$w"/config/100-namespace/*.yaml "$cfg/"
  cp "$w"/config/300-crds/*.yaml "$cfg/crds/"
  cp "$w"/config/config-*.yaml "$cfg/"
  mv "$BIN/tekton-controller-$TEKTON_VERSION.tmp" "$BIN/tekton-controller-$TEKTON_VERSION"
}

# Gitea, the git host pull-request mode is tested against. Its module path is
# gitea.dev since 1.27 and two of its requirements are not served under that path:
# actions-proto-go is served as code.gitea.io/actions-proto-go (which declares the
# gitea.dev path, so the replace is valid), and gitea.dev/sdk is used only by the
# migration from another Gitea, which we drop. SQLite is modernc's (no cgo) by
# default. No npm here: the web UI's assets are missing; the API and git over
# HTTP do not need them. Its GitLab migrator's client-go v2.42.0 is not served;
# v2.43.0 is, and builds.
build_gitea() {
  have "gitea-$GITEA_VERSION" && return
  log "building gitea v$GITEA_VERSION (about 8 min cold)"
  local w=$SRC/gitea-$GITEA_VERSION
  copymod "code.gitea.io/gitea@v$GITEA_VERSION" "$w"
  (
    cd "$w"
    go mod edit -replace gitea.dev/actions-proto-go=code.gitea.io/actions-proto-go@v0.6.0 \
      -replace gitlab.com/gitlab-org/api/client-go/v2=gitlab.com/gitlab-org/api/client-go/v2@v2.43.0 \
      -droprequire gitea.dev/sdk
    rm -f services/migrations/gitea_downloader.go services/migrations/gitea_downloader_test.go
    if grep -rl --include='*.go' '"gitea.dev/sdk' . ; then die "gitea.dev/sdk is still imported"; fi
    go generate -tags bindata ./modules/options ./modules/public ./modules/templates ./modules/migration
    go build -tags bindata -trimpath -ldflags "$LDFLAGS_STRIP -X main.Version=$GITEA_VERSION" -o "$BIN/gitea-$GITEA_VERSION.tmp" .
  )
  mv "$BIN/gitea-$GITEA_VERSION.tmp" "$BIN/gitea-$GITEA_VERSION"
}

# The CRDs of the optional objects of flotilla's chart (ServiceMonitor,
# PrometheusRule, HTTPRoute), which its tests apply to a real API server before
# the chart's renderings.
fetch_crds() {
  local d=$BIN/crds
  [ -f "$d/servicemonitors-$PROMETHEUS_OPERATOR_VERSION.yaml" ] && [ -f "$d/prometheusrules-$PROMETHEUS_OPERATOR_VERSION.yaml" ] &&
    [ -f "$d/httproutes-$GATEWAY_API_VERSION.yaml" ] && return
  log "fetching the ServiceMonitor, PrometheusRule and HTTPRoute CRDs"
  mkdir -p "$d"
  local po gw
  po=$(moddir "github.com/prometheus-operator/prometheus-operator@v$PROMETHEUS_OPERATOR_VERSION")
  gw=$(moddir "sigs.k8s.io/gateway-api@v$GATEWAY_API_VERSION")
  [ -n "$po" ] && [ -n "$gw" ] || die "cannot download the CRDs' modules"
  cp "$po/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml" "$d/servicemonitors-$PROMETHEUS_OPERATOR_VERSION.yaml"
  cp "$po/example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml" "$d/prometheusrules-$PROMETHEUS_OPERATOR_VERSION.yaml"
  cp "$gw/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml" "$d/httproutes-$GATEWAY_API_VERSION.yaml"
  chmod 644 "$d"/*.yaml
}

# The CRDs of the mesh and ingress providers Flagger routes through, which the
# fleet installs in a cluster on demand (localfleet.Fleet.InstallCRDs): the
# Gateway API's standard channel, Istio's (from istio.io/api), Kuma's
# TrafficRoute, the SMI TrafficSplit of Linkerd (from a rendered install of
# linkerd2, its last one with the CRD), Contour's and Traefik's. nginx
# routes through the built-in Ingress.
fetch_provider_crds() {
  local d=$BIN/crds
  [ -f "$d/gateway-api-$GATEWAY_API_VERSION.yaml" ] && [ -f "$d/istio-$ISTIO_API_VERSION.yaml" ] && \
    [ -f "$d/kuma-$KUMA_VERSION.yaml" ] && [ -f "$d/linkerd-smi-$LINKERD2_VERSION.yaml" ] && \
    [ -f "$d/contour-$CONTOUR_VERSION.yaml" ] && [ -f "$d/traefik-$TRAEFIK_VERSION.yaml" ] && return
  log "fetching the CRDs of the traffic providers"
  mkdir -p "$d"
  local gw is f
  gw=$(moddir "sigs.k8s.io/gateway-api@v$GATEWAY_API_VERSION")
  is=$(moddir "istio.io/api@v$ISTIO_API_VERSION")
  [ -n "$gw" ] && [ -n "$is" ] || die "cannot download the provider CRDs' modules"
  : >"$d/gateway-api-$GATEWAY_API_VERSION.yaml.tmp"
  for f in "$gw"/config/crd/standard/*.yaml; do
    { printf -- '---\n'; cat "$f"; } >>"$d/gateway-api-$GATEWAY_API_VERSION.yaml.tmp"
  done
  mv "$d/gateway-api-$GATEWAY_API_VERSION.yaml.tmp" "$d/gateway-api-$GATEWAY_API_VERSION.yaml"
  cp "$is/kubernetes/customresourcedefinitions.gen.yaml" "$d/istio-$ISTIO_API_VERSION.yaml"
  local ku li co tr
  ku=$(moddir "github.com/kumahq/kuma@v$KUMA_VERSION")
  li=$(moddir "github.com/linkerd/linkerd2@v$LINKERD2_VERSION")
  co=$(moddir "github.com/projectcontour/contour@v$CONTOUR_VERSION")
  tr=$(moddir "github.com/traefik/traefik/v2@v$TRAEFIK_VERSION")
  [ -n "$ku" ] && [ -n "$li" ] && [ -n "$co" ] && [ -n "$tr" ] || die "cannot download the provider CRDs' modules"
  cp "$ku/deployments/charts/kuma/crds/kuma.io_trafficroutes.yaml" "$d/kuma-$KUMA_VERSION.yaml"
  # The one document of the rendered install that defines the TrafficSplit.
  awk 'BEGIN { RS = "\n---\n" } /\n  name: trafficsplits\.split\.smi-spec\.io\n/ { print; found = 1 } END { exit !found }' \
    "$li/cli/cmd/testdata/install_default.golden" >"$d/linkerd-smi-$LINKERD2_VERSION.yaml" || die "no TrafficSplit CRD in linkerd2's install"
  cp "$co/examples/contour/01-crds.yaml" "$d/contour-$CONTOUR_VERSION.yaml"
  cp "$tr/docs/content/reference/dynamic-configuration/traefik.containo.us_traefikservices.yaml" "$d/traefik-$TRAEFIK_VERSION.yaml"
  chmod 644 "$d"/*.yaml
}

# nats-server, the JetStream cluster of flotilla's scale-out mode (the bus and
# the state of several replicas); the test kit (pkg/testkit/natstest) starts
# three of them on loopback ports. Stock: nothing to patch.
build_nats() {
  have "nats-server-$NATS_VERSION" && return
  log "building nats-server v$NATS_VERSION (about 1 min cold)"
  local tmp=$SRC/nats-gobin; rm -rf "$tmp"; mkdir -p "$tmp"
  GOBIN=$tmp go install -ldflags "$LDFLAGS_STRIP" "github.com/nats-io/nats-server/v2@v$NATS_VERSION"
  mv "$tmp/nats-server" "$BIN/nats-server-$NATS_VERSION"
}

# Prometheus, which Flagger's analysis queries. Only the file and http service
# discoveries (plugins/minimum.go) are compiled in, and no web UI assets (no
# builtinassets tag): the build takes a third of the full one.
build_prometheus() {
  have "prometheus-$PROMETHEUS_VERSION" && return
  log "building prometheus v$PROMETHEUS_VERSION (about 5 min cold)"
  local w=$SRC/prometheus-$PROMETHEUS_VERSION
  copymod "github.com/prometheus/prometheus@v$PROMETHEUS_VERSION" "$w"
  rm "$w/plugins/plugins.go"
  (cd "$w" && go build -ldflags "$LDFLAGS_STRIP" -o "$BIN/prometheus-$PROMETHEUS_VERSION.tmp" ./cmd/prometheus)
  mv "$BIN/prometheus-$PROMETHEUS_VERSION.tmp" "$BIN/prometheus-$PROMETHEUS_VERSION"
}

# Flagger's load tester (same module and version as Flagger), bound to
# 127.0.0.1 like Flagger, and hey, the load generator its commands run,
# which it finds on its PATH.
build_loadtester() {
  have "flagger-loadtester-$FLAGGER_VERSION" && have "hey-$HEY_VERSION/hey" && return
  log "building flagger's load tester v$FLAGGER_VERSION and hey v$HEY_VERSION (about 2 min cold)"
  local w=$SRC/flagger-loadtester-$FLAGGER_VERSION
  copymod "github.com/fluxcd/flagger@v$FLAGGER_VERSION" "$w"
  patch "$w/pkg/loadtester/server.go" 'Addr:    ":" + port,' 'Addr:    "127.0.0.1:" + port,'
  (cd "$w" && go build -ldflags "$LDFLAGS_STRIP" -o "$BIN/flagger-loadtester-$FLAGGER_VERSION.tmp" ./cmd/loadtester)
  local tmp=$SRC/hey-gobin; rm -rf "$tmp"; mkdir -p "$tmp"
  GOBIN=$tmp go install -ldflags "$LDFLAGS_STRIP" "github.com/rakyll/hey@v$HEY_VERSION"
  mkdir -p "$BIN/hey-$HEY_VERSION"
  mv "$tmp/hey" "$BIN/hey-$HEY_VERSION/hey"
  mv "$BIN/flagger-loadtester-$FLAGGER_VERSION.tmp" "$BIN/flagger-loadtester-$FLAGGER_VERSION"
}

# cosign, the signer of the features and the test kit (pkg/testkit/cosigntest),
# built in its own wrapper module so its requirements stay out of flotilla's
# go.mod (the module has replace-free requirements: go install would do, but
# a wrapper pins what go mod tidy resolved under the local toolchain).
# Stock: nothing to patch.
build_cosign() {
  have "cosign-$COSIGN_VERSION" && return
  log "building cosign v$COSIGN_VERSION (about 3 min cold)"
  local w=$SRC/cosign-wrap-$COSIGN_VERSION
  rm -rf "$w"; mkdir -p "$w"
  cat >"$w/go.mod" <<MOD
module flotilla.local/cosignwrap

go 1.26.0

require github.com/sigstore/cosign/v3 v$COSIGN_VERSION
MOD
  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/sigstore/cosign/v3/cmd/cosign"\n' >"$w/tools.go"
  (cd "$w" && go mod tidy && go build -ldflags "$LDFLAGS_STRIP" -o "$BIN/cosign-$COSIGN_VERSION.tmp" github.com/sigstore/cosign/v3/cmd/cosign)
  mv "$BIN/cosign-$COSIGN_VERSION.tmp" "$BIN/cosign-$COSIGN_VERSION"
}

# The components, by the names build.sh takes, in the order it builds them.
COMPONENTS=(crds provider-crds etcd kwok flagger kube kubelet kubectl tekton gitea prometheus loadtester nats cosign)

# component_fn NAME: the function that builds or fetches a component.
component_fn() {
  case $1 in
    crds) echo fetch_crds ;;
    provider-crds) echo fetch_provider_crds ;;
    *) echo "build_$1" ;;
  esac
}

[ $# -gt 0 ] || set -- "${COMPONENTS[@]}"
for c in "$@"; do
  [[ " ${COMPONENTS[*]} " == *" $c "* ]] || die "unknown component $c (known: ${COMPONENTS[*]})"
done

# One component at a time: on 2 cores one Go build alone keeps both busy (1.9
# cores on average over make demo's components and the demo's compile, cold,
# measured 2026-11-28), so builds side by side could only fill the last tenth,
# and in a trial did worse (three side by side: 1,171 s; one after the other: 889 s).
start=$(date +%s)
for c in "${COMPONENTS[@]}"; do
  [[ " $* " == *" $c "* ]] || continue
  LOGGED=0 t=$(date +%s)
  "$(component_fn "$c")"
  if [ "$LOGGED" = 1 ]; then log "$c done ($(( $(date +%s) - t ))s)"; fi
done
if [ $# = ${#COMPONENTS[@]} ]; then what="all fleet binaries"; else what="$*"; fi
log "$what ready in $BIN ($(( $(date +%s) - start ))s)"
echo "$BIN"
