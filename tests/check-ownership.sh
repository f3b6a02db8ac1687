#!/bin/sh
# check-ownership.sh -- each part of the context is changed only by the module
# that owns it (src/exec/internal.h: struct uvmrt_context; STYLE.md: "each file
# changes only its own struct").
#
# Run by `make check`. For each part, a write to ctx-><part>. (an assignment,
# a compound assignment, ++ or --) in a src/<part>/*.c file that does not own it is
# reported with its file and line, and the test fails. Reads are free, and so
# are writes through the owner's functions. Writes through a pointer taken
# from the part (p = &ctx->part.x; p->y = 1) are not seen: review catches those.

: "${top_srcdir:=.}"
status=0
# part: owning files (basename, space separated)
while read -r part owners; do
    for f in "$top_srcdir"/src/*/*.c; do
        b=${f##*/}
        case " $owners " in *" $b "*) continue ;; esac
        hits=$(grep -nE "(\\+\\+|--)[[:space:]]*ctx->$part\\.|ctx->$part\\.[][A-Za-z0-9_.>-]*[[:space:]]*(\\+\\+|--|[-+|&*/]?=([^=]|\$))" "$f")
        if [ -n "$hits" ]; then
            printf '%s\n' "$hits" | sed "s|^|$b:|; s|\$|   <- ctx->$part belongs to: $owners|" >&2
            status=1
        fi
    done
done <<'PARTS'
be backend.c
tensors tensor.c
res stats.c
ev events.c
sched step.c policy.c
stats stats.c
hist history.c
faults faults.c
choice choose.c
tier tier.c
PARTS
[ $status -eq 0 ] && echo "check-ownership: every context part is changed by its owner only"
exit $status
