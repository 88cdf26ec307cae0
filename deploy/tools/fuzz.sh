#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the module for a while each.
#
#   deploy/tools/fuzz.sh [fuzztime]      # default 60s per target; `make fuzz`
#
# fuzztime is go test's -fuzztime: a duration, or a count of executions
# (`3000x`). `make test` runs a count so that every target is exercised
# beyond its seed corpus on every CI run, with no deadline to race. A failing input is written to the
# package's testdata/fuzz/<target>/ by go test: commit it, it then runs as a
# regression test in every `go test`.
set -euo pipefail
cd "$(dirname "$0")/../.."
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
# fuzz_once runs one target; its output is in $out.
fuzz_once() {
  out=$("$go" test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" "./$1" 2>&1)
}

# deadline_race says whether a failure is Go's fuzz coordinator racing its
# own -fuzztime deadline (golang/go#75804, fixed in Go 1.27): a bare
# "context deadline exceeded" with no failing input written. A count budget
# (`Nx`, as `make test` uses) cannot hit it; a duration can, on a busy
# machine.
deadline_race() {
  grep -q 'context deadline exceeded' <<<"$out" && ! grep -q 'Failing input written' <<<"$out"
}

for t in "${targets[@]}"; do
  dir="${t% *}" name="${t#* }"
  start=$(date +%s)
  if fuzz_once "$dir" "$name"; then
    echo "fuzz: ok   ${dir} ${name} ($(( $(date +%s) - start ))s)"
    continue
  fi
  if deadline_race; then
    echo "fuzz: ${dir} ${name} hit Go's fuzztime deadline race (golang/go#75804); running it again"
    if fuzz_once "$dir" "$name"; then
      echo "fuzz: ok   ${dir} ${name} ($(( $(date +%s) - start ))s)"
      continue
    fi
  fi
  echo "fuzz: FAIL ${dir} ${name}"
  echo "$out" | tail -40
  failed=1
done
exit "$failed"
