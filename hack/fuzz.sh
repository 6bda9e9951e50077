#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (make fuzz; make
# test-unit runs it with a short FUZZTIME). `go test -fuzz` takes one
# target per package per invocation, so targets run one after another.
# A failure leaves its input under the package's testdata/fuzz/<target>/,
# where it stays as a seed once the bug is fixed.
#
#   FUZZTIME      how long each target runs (go test -fuzztime), default 60s
#   FUZZ_TARGETS  a regular expression selecting targets by name, default all
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-60s}
select=${FUZZ_TARGETS:-.}
go=${GO:-go}

# Every "func FuzzXxx(f *testing.F)" of a _test.go file, as "<dir> <name>".
mapfile -t targets < <(
	find . -name '*_test.go' -not -path './.git/*' -not -path './.tmp/*' -print0 |
		xargs -0 grep -H -o '^func Fuzz[A-Za-z0-9_]*(f \*testing\.F)' |
		sed -E 's|^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*$|\1 \2|' |
		sort -u | awk -v re="${select}" '$2 ~ re'
)
if ((${#targets[@]} == 0)); then
	echo "fuzz: no fuzz target matches ${select}" >&2
	exit 1
fi
start=$(date +%s)
for t in "${targets[@]}"; do
	read -r dir name <<<"$t"
	echo "fuzz: ${dir#./} ${name} for ${fuzztime}"
	"$go" test -run='^$' -fuzz="^${name}\$" -fuzztime="${fuzztime}" "${dir}"
done
echo "fuzz: ${#targets[@]} targets in $(($(date +%s) - start))s"
