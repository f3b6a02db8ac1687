#!/bin/sh
# criterion-tap.sh -- run one Criterion test binary and print its TAP on stdout.
#
# Usage: criterion-tap.sh PROGRAM [CRITERION-ARGS...]
#
# The LOG_COMPILER of `make check` (TAP driver) and the runner of `make
# check-gpu`. Criterion 2.4.1 mixes its own report into stdout when asked for
# `-Otap:-`, so the TAP goes to a temporary file and is printed once the
# program has finished; the program's own output goes to stderr (the test's
# .log under automake). The exit status is the program's, so a crash or a
# failed test is never reported as a pass.

if [ $# -lt 1 ]; then
    echo "usage: $0 PROGRAM [ARGS...]" >&2
    exit 99  # automake: hard error
fi
prog=$1
shift
case $prog in */*) ;; *) prog=./$prog ;; esac

tap=$(mktemp "${TMPDIR:-/tmp}/criterion-tap.XXXXXX") || exit 99
trap 'rm -f "$tap"' EXIT
trap 'exit 130' INT TERM

"$prog" --tap="$tap" "$@" 1>&2
status=$?

cat "$tap"
exit $status
