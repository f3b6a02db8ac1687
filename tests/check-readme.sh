#!/bin/sh
# check-readme.sh -- the README's program compiles and runs.
#
# Run by `make check` in the build directory: takes the first ```c block after
# "## Using the library" in README.md, compiles it with the warnings on
# (-Wall -Wextra -Werror) against include/uvmrt.h and the just-built
# src/libuvmrt.la (through ./libtool, so a shared or a static build both
# link), runs it on the sim backend and checks that it exits 0 and prints its
# report. The build's own CFLAGS/LDFLAGS ($UVMRT_BUILD_CFLAGS/_LDFLAGS) are added
# so that a sanitizer build links too.
#
#   check-readme.sh --extract README.md   prints the program (the Makefile
#                                         installs it as $(docdir)/examples/app.c)

extract() {
    awk '/^## Using the library/ { sec = 1; next }
         sec && /^## / { exit }
         sec && !inblk && /^```c$/ { inblk = 1; next }
         inblk && /^```$/ { exit }
         inblk { print }' "$1"
}
if [ "${1-}" = --extract ]; then
    extract "$2"
    exit $?
fi

: "${top_srcdir:=.}" "${CC:=cc}" "${LIBTOOL:=./libtool}"
[ -f src/libuvmrt.la ] || { echo "SKIP: src/libuvmrt.la not built (run from the build directory)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-readme.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

extract "$top_srcdir/README.md" >"$tmp/app.c"
lines=$(wc -l <"$tmp/app.c")
if [ "$lines" -lt 10 ] || ! grep -q 'int main' "$tmp/app.c"; then
    echo "FAIL: README.md: no complete program in the first \`\`\`c block of \"## Using the library\" ($lines lines)"
    exit 1
fi
# shellcheck disable=SC2086 # flags are words
if ! $LIBTOOL --quiet --mode=link $CC -std=c11 -Wall -Wextra -Werror ${UVMRT_BUILD_CFLAGS-} \
        -I"$top_srcdir/include" -o "$tmp/app" "$tmp/app.c" src/libuvmrt.la ${UVMRT_BUILD_LDFLAGS-} \
        >"$tmp/build.log" 2>&1; then
    cat "$tmp/build.log"
    echo "FAIL: the README's program does not compile or link ($lines lines, README.md's \"Using the library\")"
    exit 1
fi
# the program's own settings only (a UVMRT_* of the caller's shell would change it)
for v in $(env | sed -n 's/^\(UVMRT_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
if ! UVMRT_BACKEND=sim "$tmp/app" >"$tmp/out" 2>"$tmp/err"; then
    cat "$tmp/out" "$tmp/err"
    echo "FAIL: the README's program failed on sim"
    exit 1
fi
if ! grep -q '^uvmrt .* report: policy prefetch, backend sim' "$tmp/out"; then
    cat "$tmp/out" "$tmp/err"
    echo "FAIL: the README's program printed no report"
    exit 1
fi
echo "PASS: the README's program ($lines lines) compiles with -Wall -Wextra -Werror and runs on sim"
