#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the module for a while each.
#
#   deploy/fuzz.sh [fuzztime]      # default 60s per target; `make fuzz`
#
# `make test` runs it with a short time so that every target is exercised
# beyond its seed corpus on every CI run. A failing input is written to the
# package's testdata/fuzz/<target>/ by go test: commit it, it then runs as a
# regression test in every `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-60s}"
go="${GO:-go}"

mapfile -t targets < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' . |
  sed -E 's#^\./(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*)$#\1 \2#' | sort -u)
if [ "${#targets[@]}" -eq 0 ]; then
  echo "fuzz: no fuzz targets found" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${fuzztime} each"
failed=0
for t in "${targets[@]}"; do
  dir="${t% *}" name="${t#* }"
  start=$(date +%s)
  if out=$("$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "./${dir}" 2>&1); then
    echo "fuzz: ok   ${dir} ${name} ($(( $(date +%s) - start ))s)"
  else
    echo "fuzz: FAIL ${dir} ${name}"
    echo "$out" | tail -40
    failed=1
  fi
done
exit "$failed"
