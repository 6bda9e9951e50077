#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (make fuzz; make
# test-unit runs it with a short FUZZTIME). `go test -fuzz` takes one
# target per package per invocation, so targets run one after another.
# A failure leaves its input under the package's testdata/fuzz/<target>/,
# where it stays as a seed once the bug is fixed.
#
#   FUZZTIME      how long each target runs, or how many inputs it tries
#                 (go test -fuzztime: 60s, 3000x), default 60s
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
	corpus="${dir}/testdata/fuzz/${name}"
	before=$(ls "${corpus}" 2>/dev/null | sort || true)
	out=$(mktemp)
	if "$go" test -run='^$' -fuzz="^${name}\$" -fuzztime="${fuzztime}" "${dir}" 2>&1 | tee "${out}"; then
		rm -f "${out}"
		continue
	fi
	after=$(ls "${corpus}" 2>/dev/null | sort || true)
	# Go's fuzzing coordinator can report its own -fuzztime deadline as
	# a failure (golang/go#75804, fixed in Go 1.27): a bare "context
	# deadline exceeded" with no failing input written is not a finding.
	if [[ "${before}" == "${after}" ]] && grep -q '^    context deadline exceeded$' "${out}" &&
		! grep -q -E -e 'Failing input written|^panic:|^[[:space:]]+[A-Za-z0-9_.-]+\.go:[0-9]+: ' "${out}"; then
		echo "fuzz: ${name}: the fuzzing coordinator's deadline race (golang/go#75804), no failing input: not a finding"
		rm -f "${out}"
		continue
	fi
	rm -f "${out}"
	exit 1
done
echo "fuzz: ${#targets[@]} targets in $(($(date +%s) - start))s"
