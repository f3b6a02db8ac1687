#!/bin/sh
# check-exports.sh -- libuvmrt.so exports the public API and nothing else.
#
# Run by `make check` (builddir as the working directory). The dynamic
# symbols libuvmrt.so defines must be exactly the functions include/uvmrt.h
# declares: none missing, and nothing else (no uvmrt__* internals, no
# uvmrt_config_*/uvmrt_plan_*/... of the private headers, no be_* helpers).
# The declared list is read with grep over the raw header, independently of
# the preprocessor pass that makes src/uvmrt.sym. Exit 77 (skip) without a
# shared library (--disable-shared) or without nm.

srcdir=${srcdir:-.}
so=src/.libs/libuvmrt.so
if [ ! -f "$so" ]; then
    echo "SKIP: $so not built (--disable-shared?)"
    exit 77
fi
NM=${NM:-nm}
command -v "${NM%% *}" >/dev/null 2>&1 || { echo "SKIP: no nm"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-exports.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# Defined dynamic symbols; the linker's own (_init, _fini, _edata, __bss_start,
# _end) are absent from a libtool -export-symbols-regex build, so none are allowed.
$NM -D --defined-only "$so" | awk 'NF >= 3 {print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"
if [ ! -s "$tmp/exported" ]; then
    echo "FAIL: $NM -D lists no defined symbols in $so"
    exit 1
fi
status=0
# Public functions: identifiers followed by "(" at the start of a declaration
# in include/uvmrt.h.
sed -n 's/^[a-z][a-z0-9_ *]*[ *]\(uvmrt_[a-z][a-z0-9_]*\)(.*/\1/p' "$srcdir/include/uvmrt.h" |
    LC_ALL=C sort -u >"$tmp/declared"
LC_ALL=C sort -u "$tmp/exported" -o "$tmp/exported"
bad=$(LC_ALL=C comm -13 "$tmp/declared" "$tmp/exported")
if [ -n "$bad" ]; then
    echo "FAIL: $so exports symbols that include/uvmrt.h does not declare:"
    echo "$bad" | sed 's/^/  /'
    status=1
fi
missing=$(LC_ALL=C comm -23 "$tmp/declared" "$tmp/exported")
if [ -n "$missing" ]; then
    echo "FAIL: declared in include/uvmrt.h but not exported by $so:"
    echo "$missing" | sed 's/^/  /'
    status=1
fi
[ $status -eq 0 ] && echo "PASS: $so exports $(wc -l <"$tmp/exported") symbols, exactly the functions include/uvmrt.h declares"
exit $status
