#!/usr/bin/env bash
# build.sh builds the peers flotilla is benchmarked against (issue #34: Keel,
# Flux's image automation, Kargo) into the local fleet's cache, pinned and
# keyed on versions like deploy/tools/local/build.sh, so a second run
# rebuilds nothing.
#
#   deploy/tools/peers/build.sh               # build what is missing, print the bin dir
#   deploy/tools/peers/build.sh keel          # only these peers (names: PEERS below)
#   PEERS_DIR=/path build.sh                  # the source archives (default ../shared/peers)
#   FLOTILLA_CACHE=/path build.sh             # cache root (default ${XDG_CACHE_HOME:-~/.cache}/flotilla)
#
# Keel, Flux's image-reflector, image-automation and notification controllers
# and Kargo are not Go modules on the proxy: they are built from the release
# archives in PEERS_DIR (README there), extracted to $SRC. Their dependencies,
# and Flux's source- and kustomize-controller (which are modules), come from
# the module proxy. Every binary is built at nice 19, one at a time (on 2
# cores one Go build keeps both busy), its output in $CACHE/peers-build/PEER.log.
# A peer that does not build is reported with the last lines of the
# compiler's error and its log, the others are built anyway, and the script
# fails at the end naming every peer it could not build.
#
# What is patched, and why: the comment above each function.
set -euo pipefail

KEEL_VERSION=0.22.1
IMAGE_REFLECTOR_VERSION=1.2.0
IMAGE_AUTOMATION_VERSION=1.2.1
NOTIFICATION_VERSION=1.9.3
# Flux 2.9's source- and kustomize-controller of the archives' era, requiring
# the fluxcd/pkg/runtime (v0.110.1) the notification-controller v1.9.3 and
# image-automation-controller v1.2.1 archives require (image-automation
# needs source-controller/api v1.9.x). source-controller is v1.9.3, not
# v1.9.4: v1.9.4 requires github.com/fluxcd/pkg/artifact v0.18.2, which the
# module proxy refuses ("403 Forbidden: This module version is not
# available", 2026-12-02; v1.9.5 and v1.9.6 require v0.18.3, refused too);
# v1.9.3 requires v0.18.1, which it serves.
SOURCE_VERSION=1.9.3
KUSTOMIZE_VERSION=1.9.4
KARGO_VERSION=1.11.2

HERE=$(cd "$(dirname "$0")" && pwd)
PEERS_DIR=${PEERS_DIR:-$(cd "$HERE/../../.." && pwd)/../shared/peers}
CACHE=${FLOTILLA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla}
BIN=$CACHE/bin
SRC=$CACHE/src
LOGS=$CACHE/peers-build
mkdir -p "$BIN" "$SRC" "$LOGS"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
LDFLAGS_STRIP="-s -w"

log() { printf '[peers-build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# have NAME: the binary is already in the cache.
have() { [ -x "$BIN/$1" ]; }

# gob ARGS...: go build at the lowest priority, its output in the peer's log
# (and its last lines on stderr when it fails).
gob() {
  if ! nice -n 19 go build "$@" >>"$PEER_LOG" 2>&1; then
    log "go build $* failed in $(pwd); the last lines of $PEER_LOG:"
    tail -n 25 "$PEER_LOG" >&2
    return 1
  fi
}

# extract ARCHIVE DEST: a fresh, writable copy of a release archive.
extract() {
  local archive=$PEERS_DIR/$1 dest=$2
  [ -f "$archive" ] || die "missing $archive (the peers' archives: ../shared/peers/README.md)"
  rm -rf "$dest" "$dest.tmp"; mkdir -p "$dest.tmp"
  tar -xzf "$archive" -C "$dest.tmp" --strip-components=1
  chmod -R u+w "$dest.tmp"
  mv "$dest.tmp" "$dest"
}

# moddir MODULE@VERSION: download a module and print its directory in the module cache
# (from $SRC, outside any module: the caller's go.mod and go.sum are not touched).
moddir() { (cd "$SRC" && go mod download -json "$1") | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'; }

# copymod MODULE@VERSION DEST: a writable copy of a module, for patching.
copymod() {
  local dir; dir=$(moddir "$1")
  [ -n "$dir" ] || die "cannot download $1"
  rm -rf "$2"; cp -r "$dir" "$2"; chmod -R u+w "$2"
}

# patch FILE FROM TO: replace one literal string and fail if it was not there.
patch() {
  local file=$1 from=$2 to=$3
  grep -qF -- "$from" "$file" || die "patch: $file does not contain: $from"
  FROM="$from" TO="$to" perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/g' "$file"
}

# crds DIR NAME: copy a controller's CRDs (config/crd/bases) to $BIN/NAME-crds.
crds() {
  local d=$BIN/$2-crds
  rm -rf "$d.tmp"; mkdir -p "$d.tmp"
  cp "$1"/*.yaml "$d.tmp/"
  chmod 644 "$d.tmp"/*.yaml
  rm -rf "$d"; mv "$d.tmp" "$d"
}

# Keel, one binary (cmd/keel). Its SQLite store is mattn/go-sqlite3, so it is
# built with cgo, as its Dockerfile does. Its HTTP server (webhooks, /healthz)
# listens on :9300 on every interface, a constant: one Keel per cluster on one
# machine needs a port each, so the port comes from KEEL_HTTP_PORT (default
# 9300, Keel's) and the server binds 127.0.0.1 like the fleet's processes.
build_keel() {
  have "keel-$KEEL_VERSION" && return
  log "building keel $KEEL_VERSION (cgo: its SQLite store)"
  local w=$SRC/keel-$KEEL_VERSION
  extract "keel-$KEEL_VERSION.tar.gz" "$w"
  patch "$w/cmd/keel/main.go" $'\t\tPort:                  types.KeelDefaultPort,' $'\t\tPort:                  keelHTTPPort(),'
  cat >>"$w/cmd/keel/main.go" <<'GO'

// keelHTTPPort is the trigger server's port: KEEL_HTTP_PORT, else Keel's
// default. Patched in by flotilla's deploy/tools/peers/build.sh so that one
// Keel per cluster can run on one machine.
func keelHTTPPort() int {
	if p, err := strconv.Atoi(os.Getenv("KEEL_HTTP_PORT")); err == nil && p > 0 {
		return p
	}
	return types.KeelDefaultPort
}
GO
  patch "$w/cmd/keel/main.go" $'import (\n\t"os"' $'import (\n\t"os"\n\t"strconv"'
  patch "$w/pkg/http/http.go" 'address := fmt.Sprintf(":%d", s.port)' 'address := fmt.Sprintf("127.0.0.1:%d", s.port)'
  (cd "$w" && export CGO_ENABLED=1 && gob -ldflags "$LDFLAGS_STRIP -X github.com/keel-hq/keel/version.Version=$KEEL_VERSION -X github.com/keel-hq/keel/version.Revision=release-archive" \
    -o "$BIN/keel-$KEEL_VERSION.tmp" ./cmd/keel) || return 1
  mv "$BIN/keel-$KEEL_VERSION.tmp" "$BIN/keel-$KEEL_VERSION"
}

# flux_archive NAME VERSION: a Flux controller from its release archive
# (main.go at the root, its api module beside it through the go.mod's
# replace => ./api), stock, and its CRDs. Every listener of Flux's
# controllers is a flag (--metrics-addr, --health-addr, the notification
# controller's --receiverAddr and --events-addr): nothing to patch.
flux_archive() {
  local name=$1 version=$2
  have "$name-$version" && [ -d "$BIN/$name-$version-crds" ] && return
  log "building $name v$version"
  local w=$SRC/$name-$version
  extract "$name-v$version.tar.gz" "$w"
  (cd "$w" && gob -ldflags "$LDFLAGS_STRIP" -o "$BIN/$name-$version.tmp" .) || return 1
  crds "$w/config/crd/bases" "$name-$version"
  mv "$BIN/$name-$version.tmp" "$BIN/$name-$version"
}

build_image-reflector() { flux_archive image-reflector-controller "$IMAGE_REFLECTOR_VERSION"; }
build_image-automation() { flux_archive image-automation-controller "$IMAGE_AUTOMATION_VERSION"; }
build_notification() { flux_archive notification-controller "$NOTIFICATION_VERSION"; }

# flux_module NAME VERSION: a Flux controller from the module proxy. Its
# go.mod replaces its api module with ./api, a nested module the proxy's zip
# leaves out: the replace is dropped so the api comes from the proxy at the
# version the go.mod requires (the same release).
flux_module() {
  local name=$1 version=$2
  have "$name-$version" && [ -d "$BIN/$name-$version-crds" ] && return
  log "building $name v$version (from the module proxy)"
  local w=$SRC/$name-$version
  copymod "github.com/fluxcd/$name@v$version" "$w"
  grep -q "^	github.com/fluxcd/$name/api v" "$w/go.mod" || die "$name's go.mod requires no version of its api"
  (cd "$w" && go mod edit -dropreplace "github.com/fluxcd/$name/api" && gob -ldflags "$LDFLAGS_STRIP" -o "$BIN/$name-$version.tmp" .) || return 1
  crds "$w/config/crd/bases" "$name-$version"
  mv "$BIN/$name-$version.tmp" "$BIN/$name-$version"
}

build_source() { flux_module source-controller "$SOURCE_VERSION"; }
build_kustomize() { flux_module kustomize-controller "$KUSTOMIZE_VERSION"; }

# Kargo's control plane: one binary (cmd/controlplane) whose subcommands are
# the api server, the controller, the management controller, the admission
# and external (registry, git host) webhook servers and the garbage
# collector, as its chart runs them. The archive has no UI (pkg/server/ui
# holds only a .keep): the api server embeds pkg/server/ui (the UI's build,
# which its Dockerfile copies there),
# so an empty page stands in for it. Its CRDs are the chart's.
build_kargo() {
  have "kargo-$KARGO_VERSION" && [ -d "$BIN/kargo-$KARGO_VERSION-crds" ] && return
  log "building kargo v$KARGO_VERSION (control plane)"
  local w=$SRC/kargo-$KARGO_VERSION
  extract "kargo-v$KARGO_VERSION.tar.gz" "$w"
  [ -e "$w/pkg/server/ui/index.html" ] && die "the kargo archive has a UI now: drop the stand-in"
  mkdir -p "$w/pkg/server/ui"
  printf '<!doctype html><title>Kargo</title><p>Built without its UI (flotilla deploy/tools/peers/build.sh).\n' >"$w/pkg/server/ui/index.html"
  local v=github.com/akuity/kargo/pkg/x/version
  (cd "$w" && gob -ldflags "$LDFLAGS_STRIP -X $v.version=v$KARGO_VERSION -X $v.gitCommit=release-archive -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z" \
    -o "$BIN/kargo-$KARGO_VERSION.tmp" ./cmd/controlplane) || return 1
  crds "$w/charts/kargo/resources/crds" "kargo-$KARGO_VERSION"
  mv "$BIN/kargo-$KARGO_VERSION.tmp" "$BIN/kargo-$KARGO_VERSION"
}

# The peers, by the names build.sh takes, in the order it builds them:
# Keel first (the first side by side), Kargo last (the largest build). Flux's
# controllers that require the same Kubernetes and fluxcd/pkg versions go one
# after the other, so that each finds most of its packages in the build
# cache (image-reflector-controller v1.2.0 alone requires client-go v0.36.1
# and fluxcd/pkg/runtime v0.110.0; the others v0.36.2 and v0.110.1).
PEERS=(keel source kustomize notification image-automation image-reflector kargo)

[ $# -gt 0 ] || set -- "${PEERS[@]}"
for p in "$@"; do
  [[ " ${PEERS[*]} " == *" $p "* ]] || die "unknown peer $p (known: ${PEERS[*]})"
done

# Every requested peer is tried, one at a time; a peer that fails does not
# stop the others, and the script fails at the end naming each with its log.
start=$(date +%s)
failed=()
for p in "${PEERS[@]}"; do
  [[ " $* " == *" $p "* ]] || continue
  t=$(date +%s)
  PEER_LOG=$LOGS/$p.log
  : >"$PEER_LOG"
  # In a subshell: a die inside stops this peer only. (set -e does not apply
# inside an if's condition: each build_ function returns on a failed build.)
  if ( "build_$p" ); then
    log "$p ready ($(( $(date +%s) - t ))s)"
  else
    log "$p FAILED after $(( $(date +%s) - t ))s (log: $PEER_LOG)"
    failed+=("$p")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  log "not built: ${failed[*]} (their logs: $LOGS)"
  exit 1
fi
log "$* ready in $BIN ($(( $(date +%s) - start ))s)"
echo "$BIN"
