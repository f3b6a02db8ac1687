#!/bin/sh
# check-layering.sh -- calls between the parts of src/ point one way.
#
# Run by `make check` (after the build). The parts and their order, lowest first,
# are the table in src/README.md between "<!-- layering: begin -->" and
# "<!-- layering: end -->": one line per part, its name then its .c files. A file
# may call its own part and lower parts. From the built objects of src/ (nm:
# which file defines and which uses each global symbol) this derives the
# file-level call graph, prints its two-file cycles, and fails on
#   - a call from a lower part into a higher one that the allowlist below does
#     not name,
#   - an allowlist entry that no longer happens (delete it: the list only shrinks),
#   - an object whose source file the table does not place in a part,
#   - a call cycle of three files or more (a -> b -> c -> a) anywhere in src/,
#     printed file by file.
# Calls to static inline functions of headers and writes through shared structs
# are not seen (tests/check-ownership.sh covers the writes).
#
# Usage: check-layering.sh [--table README] [--edges FILE] [--allow FILE]
#        check-layering.sh --self-test
# --edges reads "from.c to.c symbol" lines instead of running nm; --allow reads
# "from.c to.c" lines instead of the list below. --self-test runs the check on
# the fixtures in tests/data/layering/ and fails unless each verdict is right.

: "${top_srcdir:=.}"
: "${top_builddir:=.}"
: "${NM:=nm}"

# Calls from a lower part into a higher one that are allowed for now, each with
# what removes it: none today, and the list only shrinks. from.c to.c  # reason
ALLOWED=$(sed 's/#.*//' <<'ALLOW'
ALLOW
)

usage() { echo "usage: $0 [--table README] [--edges FILE] [--allow FILE] | --self-test" >&2; exit 2; }

table=$top_srcdir/src/README.md
edges=
allow=
self_test=
while [ $# -gt 0 ]; do
    case $1 in
    --table) [ $# -ge 2 ] || usage; table=$2; shift 2 ;;
    --edges) [ $# -ge 2 ] || usage; edges=$2; shift 2 ;;
    --allow) [ $# -ge 2 ] || usage; allow=$2; shift 2 ;;
    --self-test) self_test=1; shift ;;
    *) usage ;;
    esac
done

# Each fixture run must end as expected: its exit status, and a line it must print.
if [ -n "$self_test" ]; then
    d=$top_srcdir/tests/data/layering
    fail=0
    expect() { # status pattern args...
        want=$1 pat=$2; shift 2
        out=$("$0" "$@" 2>&1); got=$?
        if [ "$got" -ne "$want" ] || ! printf '%s\n' "$out" | grep -q -- "$pat"; then
            printf 'self-test: %s: exit %s (wanted %s), output:\n%s\n' "$*" "$got" "$want" "$out" >&2
            fail=1
        fi
    }
    t="--table $d/table.md --allow $d/allow"
    expect 0 'two-file cycle: a.c <-> b.c' $t --edges "$d/edges-ok"
    expect 1 'a.c -> d.c (low -> high): a_up' $t --edges "$d/edges-up"
    expect 1 'allowlist: b.c -> c.c no longer happens' $t --edges "$d/edges-stale"
    expect 1 'x.c: not in any part' $t --edges "$d/edges-unknown"
    expect 1 'a call cycle of 3 files: a.c -> b.c -> c.c -> a.c' $t --edges "$d/edges-cycle3"
    [ $fail -eq 0 ] && echo "check-layering self-test: 5 fixtures, each verdict right"
    exit $fail
fi

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT

# The table: "part file.c ..." lines between the markers, inside the code fence.
sed -n '/<!-- layering: begin -->/,/<!-- layering: end -->/p' "$table" |
    grep -v -e '^<!--' -e '^```' -e '^[[:space:]]*$' >"$tmp/table"
if [ ! -s "$tmp/table" ]; then
    echo "check-layering: no layering table in $table" >&2
    exit 99
fi
if [ -n "$allow" ]; then sed 's/#.*//' "$allow"; else printf '%s\n' "$ALLOWED"; fi |
    awk 'NF >= 2 { print $1, $2 }' >"$tmp/allow"

# The edges: from nm of each libtool object under src/ of the build.
if [ -z "$edges" ]; then
    los=$(find "$top_builddir/src" -name '*.lo' 2>/dev/null | sort)
    if [ -z "$los" ]; then
        echo "check-layering: no objects under $top_builddir/src (build first)" >&2
        exit 77
    fi
    for lo in $los; do
        o=$(sed -n "s/^non_pic_object='\\(.*\\)'\$/\\1/p" "$lo")
        [ -z "$o" ] || [ "$o" = none ] && o=$(sed -n "s/^pic_object='\\(.*\\)'\$/\\1/p" "$lo")
        src=${lo##*/}
        src=${src##*-}
        src=${src%.lo}.c
        rel=${lo#"$top_builddir"/}
        [ -f "$top_srcdir/${rel%.lo}.cu" ] && src=${src%.c}.cu # a kernel's object
        # $NM may carry options (libtool's "nm -B"): split it on purpose.
        if ! $NM "${lo%/*}/$o" >"$tmp/nm"; then
            echo "check-layering: $NM ${lo%/*}/$o failed" >&2
            exit 99
        fi
        awk -v f="$src" '
            NF == 2 && $1 == "U" { print "U", f, $2 }
            NF == 3 && $2 ~ /^[TDBRCGSVW]$/ { print "D", f, $3 }' "$tmp/nm"
    done >"$tmp/syms" || exit 99
    if ! grep -q '^D' "$tmp/syms"; then
        echo "check-layering: nm found no symbols in the objects under $top_builddir/src" >&2
        exit 99
    fi
    awk '$1 == "D" { def[$3] = $2; next }
         { use[++n] = $2 " " $3 }
         END { for (i = 1; i <= n; i++) {
                 split(use[i], u, " ")
                 if ((u[2] in def) && def[u[2]] != u[1]) print u[1], def[u[2]], u[2] } }' \
        "$tmp/syms" | sort -u >"$tmp/edges"
    edges=$tmp/edges
fi

awk -v tablef="$tmp/table" -v allowf="$tmp/allow" '
function back_path(u, v,   q, head, tail, x, i, w, seen, prev, s) {
    # a shortest path v -> ... -> u of two calls or more (not the call v -> u itself):
    # with u -> v it is a call cycle of three files or more; "u v ..." or ""
    head = 1; tail = 1; q[1] = v; seen[v] = 1
    while (head <= tail) {
        x = q[head++]
        for (i = 1; i <= nout[x]; i++) {
            w = out[x, i]
            if ((x == v && w == u) || (w in seen)) continue
            seen[w] = 1; prev[w] = x
            if (w == u) {
                s = ""
                for (w = prev[u]; w != v; w = prev[w]) s = w " " s
                return u " " v " " s
            }
            q[++tail] = w
        }
    }
    return ""
}
function cycle_of(u, v,   c, n, f, i, j, t, lo, key, out_) { # printed once per set of files
    c = back_path(u, v)
    if (c == "") return
    n = split(c, f, " ")
    lo = 1
    for (i = 2; i <= n; i++) if (f[i] < f[lo]) lo = i
    out_ = ""
    for (i = 0; i < n; i++) out_ = out_ f[(lo - 1 + i) % n + 1] " -> "
    out_ = out_ f[lo]
    for (i = 2; i <= n; i++) for (j = i; j > 1 && f[j] < f[j - 1]; j--) { t = f[j]; f[j] = f[j - 1]; f[j - 1] = t }
    key = ""
    for (i = 1; i <= n; i++) key = key " " f[i]
    if (key in cycle_seen) return
    cycle_seen[key] = 1
    cycles[++ncycles] = n " files: " out_
}
BEGIN {
    while ((getline line < tablef) > 0) {
        n = split(line, f, " ")
        parts[++np] = f[1]
        for (i = 2; i <= n; i++) { part[f[i]] = f[1]; rank[f[i]] = np }
    }
    while ((getline line < allowf) > 0) { split(line, f, " "); allowed[f[1] " " f[2]] = 1 }
}
{
    from = $1; to = $2
    for (i = 1; i <= 2; i++)
        if (!($i in part) && !(($i) in unknown)) {
            unknown[$i] = 1
            printf "check-layering: %s: not in any part of the table (src/README.md)\n", $i
            bad = 1
        }
    key = from " " to
    if (!(key in syms)) {
        elist[++nedges] = key
        syms[key] = $3
        out[from, ++nout[from]] = to
        node[from] = node[to] = 1
    } else syms[key] = syms[key] " " $3
}
END {
    for (key in syms) {
        split(key, e, " ")
        if (!(e[1] in part) || !(e[2] in part)) continue
        if (((e[2] " " e[1]) in syms) && e[1] < e[2]) pairs[++npairs] = e[1] " <-> " e[2]
        if (rank[e[1]] >= rank[e[2]]) continue
        if (key in allowed) { seen[key] = 1; nallowed++; continue }
        printf "check-layering: %s -> %s (%s -> %s): %s\n", e[1], e[2], part[e[1]], part[e[2]], syms[key]
        bad = 1
    }
    for (key in allowed)
        if (!(key in seen)) {
            split(key, e, " ")
            printf "check-layering: allowlist: %s -> %s no longer happens: delete its line\n", e[1], e[2]
            bad = 1
        }
    for (i = 1; i <= nedges; i++) { split(elist[i], e, " "); if (e[1] != e[2]) cycle_of(e[1], e[2]) }
    for (i = 1; i <= npairs; i++) printf "two-file cycle: %s\n", pairs[i]
    for (i = 1; i <= ncycles; i++) printf "check-layering: a call cycle of %s\n", cycles[i]
    if (ncycles > 0) bad = 1
    printf "check-layering: %d parts, %d calls up allowed (to remove), %d call cycles of three files or more\n", np, nallowed, ncycles
    exit bad
}' "$edges"
status=$?
[ $status -eq 0 ] && echo "check-layering: every call goes to its own part or a lower one"
exit $status
