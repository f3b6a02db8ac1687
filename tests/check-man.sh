#!/bin/sh
# check-man.sh -- every public function has a man page, `man FUNCTION` finds
# it once installed, and the pages format cleanly.
#
# Run by `make check`. For each function include/uvmrt.h declares: some
# doc/uvmrt_*.3 lists it in its SYNOPSIS (the install hook makes the
# FUNCTION.3 link from there). Every page in doc/ must pass `mandoc -Tlint
# -W warning` (Debian's mandoc; quickstart.sh installs it) and format with
# `groff -man -ww` without a warning; no alternating-font macro (.BR, .IR, ...)
# may run two plain words together (its arguments are joined without a space,
# so ".BR name ). More text" prints "name).Moretext"); and `make install-man`
# into a temporary DESTDIR must give FUNCTION.3 files that man -l renders
# (skipped without groff / man; the lint without mandoc says so).

: "${top_srcdir:=.}" "${MAKE:=make}"
status=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-man.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

sed -n 's/^[a-z][a-z0-9_ *]*[ *]\(uvmrt_[a-z][a-z0-9_]*\)(.*/\1/p' "$top_srcdir/include/uvmrt.h" |
    LC_ALL=C sort -u >"$tmp/declared"
for page in "$top_srcdir"/doc/uvmrt_*.3; do
    sed -n '/^\.SH SYNOPSIS/,/^\.SH DESCRIPTION/s/^\.BI "[^"]*[ *]\(uvmrt_[a-z0-9_]*\)(.*/\1/p' "$page"
    grep -q '^\.SH EXAMPLES' "$page" || { echo "FAIL: $page has no EXAMPLES section"; status=1; }
done | LC_ALL=C sort -u >"$tmp/documented"
missing=$(LC_ALL=C comm -23 "$tmp/declared" "$tmp/documented")
if [ -n "$missing" ]; then
    echo "FAIL: public functions in no doc/uvmrt_*.3 SYNOPSIS:"
    echo "$missing" | sed 's/^/  /'
    status=1
fi
extra=$(LC_ALL=C comm -13 "$tmp/declared" "$tmp/documented")
if [ -n "$extra" ]; then
    echo "FAIL: man pages document functions include/uvmrt.h does not declare:"
    echo "$extra" | sed 's/^/  /'
    status=1
fi

# Alternating-font macros: two unquoted plain words in a row run together.
runon=$(awk '
/^\.(BR|RB|IR|RI|BI|IB)( |$)/ {
    line = substr($0, 5); L = length(line); i = 1; prev = 0
    while (i <= L) {
        c = substr(line, i, 1)
        if (c == " ") { i++; continue }
        if (c == "\"") {
            j = i + 1
            while (j <= L && substr(line, j, 1) != "\"") j++
            i = j + 1; prev = 0; continue
        }
        j = i
        while (j <= L && substr(line, j, 1) != " ") j++
        tok = substr(line, i, j - i); i = j
        word = (tok ~ /^[A-Za-z][A-Za-z0-9_\047-]*[,.:;]?$/)
        if (word && prev) { print FILENAME ":" FNR ": \"" ptok " " tok "\" run together: " $0; break }
        prev = word; ptok = tok
    }
}' "$top_srcdir"/doc/*.[135])
if [ -n "$runon" ]; then
    echo "FAIL: alternating-font macros join their arguments without a space (quote the text, or end the macro line):"
    echo "$runon" | sed 's/^/  /'
    status=1
fi

if command -v mandoc >/dev/null 2>&1; then
    for page in "$top_srcdir"/doc/*.[135]; do
        warn=$(mandoc -Tlint -W warning "$page" 2>&1)
        if [ -n "$warn" ]; then
            echo "FAIL: mandoc -Tlint warns on $page:"
            echo "$warn" | sed 's/^/  /'
            status=1
        fi
    done
else
    echo "mandoc not found: pages not linted (apt-get install mandoc)"
fi

if command -v groff >/dev/null 2>&1; then
    for page in "$top_srcdir"/doc/*.[135]; do
        warn=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
        if [ -n "$warn" ]; then
            echo "FAIL: groff warns on $page:"
            echo "$warn" | sed 's/^/  /'
            status=1
        fi
    done
else
    echo "groff not found: formatting not checked"
fi

# The installed links resolve: each FUNCTION.3 is ".so man3/PAGE.3" to a page
# that exists, and man renders it.
if $MAKE -s install-man install-man-links DESTDIR="$tmp/dest" mandir=/man >"$tmp/install.log" 2>&1; then
    n=0
    while read -r f; do
        link=$tmp/dest/man/man3/$f.3
        if [ ! -f "$link" ]; then
            echo "FAIL: make install-man made no $f.3"
            status=1
            continue
        fi
        target=$(sed -n 's/^\.so //p' "$link")
        if [ -n "$target" ] && [ ! -f "$tmp/dest/man/$target" ]; then
            echo "FAIL: $f.3 points to $target, which is not installed"
            status=1
        fi
        n=$((n + 1))
    done <"$tmp/declared"
    if command -v man >/dev/null 2>&1 && command -v groff >/dev/null 2>&1; then
        out=$(cd "$tmp/dest/man" && MANWIDTH=80 man -l man3/uvmrt_tensor_alloc.3 2>&1 | grep -c uvmrt_tensors_alloc)
        [ "${out:-0}" -gt 0 ] || { echo "FAIL: man -l uvmrt_tensor_alloc.3 does not show uvmrt_tensor(3)"; status=1; }
    fi
    echo "installed: $n function pages resolve"
else
    cat "$tmp/install.log"
    echo "FAIL: make install-man DESTDIR=$tmp/dest"
    status=1
fi
[ $status -eq 0 ] && echo "PASS: $(wc -l <"$tmp/declared") public functions documented, pages lint and format cleanly"
exit $status
