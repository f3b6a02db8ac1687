#!/bin/sh
# check-exports.sh -- libuvmrt.so exports the public API and nothing else,
# and no internal symbol carries the public prefix.
#
# Run by `make check` (builddir as the working directory). The dynamic
# symbols libuvmrt.so defines must be exactly the functions include/uvmrt.h
# declares: none missing, and nothing else (no uvmrt__* internals, no
# uvmrt_config_*/uvmrt_plan_*/... of the private headers, no be_* helpers).
# The declared list is read with grep over the raw header, independently of
# the preprocessor pass that makes src/uvmrt.sym.
#
# Second, the prefixes say what is public: every global symbol that the
# library's objects define (the static archive src/.libs/libuvmrt.a, or the
# objects in src/.libs and src/backends/.libs without one) and that starts
# with the public prefix "uvmrt_" must be declared in include/uvmrt.h;
# internal functions and variables take "uvmrt__". The version script hides
# internals from the .so, so only the objects show a misnamed one.
#
# Third, the header keeps to its own rule on return values: every function it
# declares that does not return uvmrt_status_t is named in its contract block
# (the comment at the top, "Return values, by kind of function").
#
# Exit 77 (skip) without a shared library (--disable-shared) or without nm.

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
status=0
# Public functions: identifiers followed by "(" at the start of a declaration
# in include/uvmrt.h.
sed -n 's/^[a-z][a-z0-9_ *]*[ *]\(uvmrt_[a-z][a-z0-9_]*\)(.*/\1/p' "$srcdir/include/uvmrt.h" |
    LC_ALL=C sort -u >"$tmp/declared"
sed -n 's/^uvmrt_status_t \(uvmrt_[a-z][a-z0-9_]*\)(.*/^\1$/p' "$srcdir/include/uvmrt.h" >"$tmp/status_fns"
if [ ! -s "$tmp/declared" ]; then
    echo "FAIL: found no function declarations in $srcdir/include/uvmrt.h"
    exit 1
fi

# The contract block at the top of the header says which kind of function
# returns what: each function that does not return uvmrt_status_t (kind 1) must
# be named there, in the kind it belongs to.
sed -n '1,/\*\//p' "$srcdir/include/uvmrt.h" >"$tmp/contract"
sed -n 's/^[a-z][a-z0-9_ *]*[ *]\(uvmrt_[a-z][a-z0-9_]*\)(.*/\1/p' "$srcdir/include/uvmrt.h" |
    grep -v -f "$tmp/status_fns" | LC_ALL=C sort -u >"$tmp/other_fns"
unnamed=""
while read -r fn; do
    grep -q "\b$fn\b" "$tmp/contract" || unnamed="$unnamed $fn"
done <"$tmp/other_fns"
if [ -n "$unnamed" ]; then
    echo "FAIL: include/uvmrt.h declares functions that do not return uvmrt_status_t and that"
    echo "      its contract block (\"Return values, by kind\") does not name:"
    for fn in $unnamed; do echo "  $fn"; done
    status=1
else
    echo "PASS: the $(wc -l <"$tmp/other_fns") functions of include/uvmrt.h that return no status are each named in its contract block"
fi

# Internal symbols with the public prefix.
if [ -f src/.libs/libuvmrt.a ]; then
    objs=src/.libs/libuvmrt.a
else
    objs=$(ls src/.libs/*.o src/backends/.libs/*.o 2>/dev/null)
fi
if [ -z "$objs" ]; then
    echo "FAIL: no src/.libs/libuvmrt.a and no objects in src/.libs to read"
    exit 1
fi
# shellcheck disable=SC2086 # a list of paths without spaces
$NM -g --defined-only $objs | awk 'NF >= 3 {print $3}' | grep '^uvmrt_[a-z]' |
    LC_ALL=C sort -u >"$tmp/defined"
if [ ! -s "$tmp/defined" ]; then
    echo "FAIL: $NM -g lists no uvmrt_ symbols in $objs"
    exit 1
fi
misnamed=$(LC_ALL=C comm -13 "$tmp/declared" "$tmp/defined")
if [ -n "$misnamed" ]; then
    echo "FAIL: defined in src/ with the public prefix uvmrt_ but not declared in include/uvmrt.h"
    echo "      (an internal function or variable takes the prefix uvmrt__):"
    echo "$misnamed" | sed 's/^/  /'
    status=1
else
    echo "PASS: the $(wc -l <"$tmp/defined") global uvmrt_ symbols of the library's objects are all declared in include/uvmrt.h"
fi

# Defined dynamic symbols; the linker's own (_init, _fini, _edata, __bss_start,
# _end) are absent from a libtool -export-symbols-regex build, so none are allowed.
$NM -D --defined-only "$so" | awk 'NF >= 3 {print $3}' | sed 's/@.*//' | sort -u >"$tmp/exported"
if [ ! -s "$tmp/exported" ]; then
    echo "FAIL: $NM -D lists no defined symbols in $so"
    exit 1
fi
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
