#!/usr/bin/env bash
# Prints what failed in a `go test` log (not -v): each failed test's
# "--- FAIL" line and the messages its test logged, a message cut to its
# first 12 lines and a line to 240 characters. Log dumps (a message whose
# first line says "last N lines of") are left out: they are in the log
# file, whose path ends the summary.
#
# make test-unit and test-integration run it when go test fails, so that
# the end of their output, all a CI page may show, says what failed rather
# than the last lines of a dump or of a harness's teardown.
#
#   hack/test-summary.sh LOG
set -euo pipefail
log=${1:?usage: test-summary.sh LOG}

echo
echo "=== failures (from ${log})"
awk '
	function flush() { skip = 0; cont = 0 }
	/^[[:space:]]*--- FAIL: / { flush(); print; next }
	/^(FAIL|panic:|fatal error:)/ { flush(); print; next }
	/^[[:space:]]+[A-Za-z0-9_.-]+\.go:[0-9]+: / {
		flush()
		if ($0 ~ /last [0-9]+ lines of /) { skip = 1; next }
		print substr($0, 1, 240); cont = 1; shown = 0; next
	}
	cont && !skip && /^[[:space:]]/ {
		if (++shown <= 12) print substr($0, 1, 240)
		else if (shown == 13) print "            …"
		next
	}
	{ flush() }
' "$log"
echo "=== full output: ${log}"
