#!/bin/sh
# check-ownership.sh -- each part of the context is changed only by the module
# that owns it (src/exec/internal.h: struct uvmrt_context; STYLE.md: "each file
# changes only its own struct").
#
# Run by `make check`. Three rules, each hit reported with its file and line:
#   - the context's parts: a write to ctx-><part>. (an assignment, a compound
#     assignment, ++ or --) in a src/<part>/*.c file that does not own it;
#   - the tensor and layer fields that src/exec/tensor.h documents as exceptions
#     to "tensor.c owns the table": a tensor's residency fields are the
#     executor's, its disk-tier fields tier.c's, a layer's stats stats.c's (and
#     everything else of a tensor or layer tensor.c's, for the fields listed
#     below): a write through a pointer (t->resident = ...) or a layer
#     (ctx->tensors.layers[l].stats[p] = ...) in a file that may not, among the
#     files that handle tensors (they name uvmrt_tensor_t or ctx->tensors);
#   - the backends: an implementation (every file of src/backends/ but the front
#     end, backend.c) is given its own state only, never the context: it may not
#     include internal.h nor name ctx-> or struct uvmrt_context.
# Reads are free, and so are writes through the owner's functions. Writes
# through a pointer taken from the part (p = &ctx->part.x; p->y = 1) are not
# seen: review catches those.
#
# Usage: check-ownership.sh [--self-test]
# --self-test runs the check on a tree of small files made for it, one with each
# kind of violation, and fails unless each is reported (and a clean tree passes).

: "${top_srcdir:=.}"

if [ "$1" = --self-test ]; then
    tmp=$(mktemp -d) || exit 99
    trap 'rm -rf "$tmp"' EXIT
    mkdir -p "$tmp/src/exec" "$tmp/src/observe" "$tmp/src/backends"
    printf 'void f(uvmrt_tensor_t *t) { t->dead = 1; t->resident = 0; }\n' >"$tmp/src/exec/tensor.c"
    printf 'void g(uvmrt_tensor_t *t) { t->dead = 0; }\n' >"$tmp/src/exec/migrate.c"
    printf 'void h(void) {}\n' >"$tmp/src/backends/sim.c"
    out=$(top_srcdir=$tmp sh "$0" 2>&1) || { printf 'self-test: a clean tree failed:\n%s\n' "$out" >&2; exit 1; }
    fail=0
    expect() { # file line-in-output
        out=$(top_srcdir=$tmp sh "$0" 2>&1) && { echo "self-test: $1 passed" >&2; fail=1; }
        printf '%s\n' "$out" | grep -q -- "$2" || { printf 'self-test: %s: wanted "%s", got:\n%s\n' "$1" "$2" "$out" >&2; fail=1; }
    }
    printf 'void h(uvmrt_context_t *ctx) { ctx->hist.n_steps = 0; }\n' >"$tmp/src/observe/monitor.c"
    expect "a part written outside its owner" 'monitor.c:1:.*<- ctx->hist belongs to: history.c'
    printf 'void h(uvmrt_tensor_t *t) { t->on_disk = 1; }\n' >"$tmp/src/observe/monitor.c"
    expect "a disk-tier field written outside tier.c" 'monitor.c:1:.*<- a tensor'"'"'s on_disk belongs to: tier.c'
    printf 'void h(uvmrt_context_t *ctx) { ctx->tensors.layers[0].stats[1].calls++; }\n' >"$tmp/src/observe/monitor.c"
    expect "a layer's stats written outside stats.c" 'monitor.c:1:.*<- a layer'"'"'s stats belongs to: stats.c'
    printf 'void h(uvmrt_tensor_t *t) { t->resident = 1; }\n' >"$tmp/src/observe/monitor.c"
    expect "residency written outside tensor.c" "monitor.c:1:.*<- a tensor's resident belongs to: tensor.c"
    rm "$tmp/src/observe/monitor.c"
    printf '#include "internal.h"\n' >"$tmp/src/backends/sim.c"
    expect "a backend that includes internal.h" 'sim.c:1:.*<- a backend is given its own state only'
    printf 'static int n(struct uvmrt_context *c) { return c != 0; }\n' >"$tmp/src/backends/sim.c"
    expect "a backend that names the context" 'sim.c:1:.*<- a backend is given its own state only'
    [ $fail -eq 0 ] && echo "check-ownership self-test: 6 violations, each reported; a clean tree passes"
    exit $fail
fi

status=0
# writes OWNERS REGEX WHAT FILE...: reports each line of a FILE not among OWNERS (basenames,
# space separated) that matches REGEX (a write), as "WHAT belongs to: OWNERS"
writes() {
    local owners=$1 re=$2 what=$3 f b hits
    shift 3
    for f in "$@"; do
        [ -e "$f" ] || continue
        b=${f##*/}
        case " $owners " in *" $b "*) continue ;; esac
        hits=$(grep -nE "$re" "$f")
        if [ -n "$hits" ]; then
            printf '%s\n' "$hits" | sed "s|^|$b:|; s|\$|   <- $what belongs to: $owners|" >&2
            status=1
        fi
    done
}
# part: owning files (basename, space separated)
while read -r part owners; do
    writes "$owners" "(\\+\\+|--)[[:space:]]*ctx->$part\\.|ctx->$part\\.[][A-Za-z0-9_.>-]*[[:space:]]*(\\+\\+|--|[-+|&*/]?=([^=]|\$))" \
        "ctx->$part" "$top_srcdir"/src/*/*.c
done <<'PARTS'
be backend.c
tensors tensor.c
res stats.c
ev events.c
sched step.c policy.c schedule.c
stats stats.c
hist history.c
faults faults.c
choice choose.c
tier tier.c
PARTS

# The tensor fields (src/exec/tensor.h): resident only through uvmrt__tensor_set_resident
# (tensor.c, which keeps its bit); the other residency fields the executor's; the disk
# tier's tier.c's. kind: tensor (written through a pointer) or layer (ctx->tensors.layers[l]).
tensor_files=$(grep -lE "uvmrt_tensor_t|ctx->tensors" "$top_srcdir"/src/*/*.c 2>/dev/null)
while read -r kind field owners; do
    [ -n "$kind" ] || continue
    if [ "$kind" = tensor ]; then
        write="(\\+\\+|--)[[:space:]]*[A-Za-z_][][A-Za-z0-9_.>-]*->$field\\b|->$field(\\[[^]]*\\])*[[:space:]]*(\\+\\+|--|[-+|&*/]?=([^=]|\$))"
    else
        write="(\\+\\+|--)[[:space:]]*[A-Za-z_][][A-Za-z0-9_.>-]*layers\\[[^]]*\\]\\.$field\\b|layers\\[[^]]*\\]\\.$field(\\[[^]]*\\])*(\\.[A-Za-z0-9_]+)*[[:space:]]*(\\+\\+|--|[-+|&*/]?=([^=]|\$))"
    fi
    # shellcheck disable=SC2086 # the file list: words on purpose
    writes "$owners" "$write" "a $kind's $field" $tensor_files
done <<'FIELDS'
tensor resident tensor.c
tensor pinned tensor.c
tensor dead tensor.c migrate.c policy.c step.c
tensor host_homed tensor.c migrate.c policy.c step.c
tensor placed_host tensor.c migrate.c policy.c step.c
tensor advised_remote tensor.c migrate.c policy.c step.c
tensor ready tensor.c migrate.c policy.c step.c
tensor leaving tensor.c migrate.c policy.c step.c
tensor last_use tensor.c migrate.c policy.c step.c
tensor recompute_flops tensor.c
tensor on_disk tier.c
tensor spill_file tier.c
tensor host_valid tier.c
tensor file_valid tier.c
tensor wb tier.c
tensor rd tier.c
layer stats stats.c
layer host_measured_ns tensor.c
layer host_done tensor.c
layer host_done_stream tensor.c
FIELDS

# The backends: each sees its own state (void *state of the ops table), never the context.
for f in "$top_srcdir"/src/backends/*.c; do
    [ -e "$f" ] || continue
    b=${f##*/}
    [ "$b" = backend.c ] && continue
    hits=$(grep -nE '#include[[:space:]]*"internal\.h"|ctx->|struct[[:space:]]+uvmrt_context\b|uvmrt_context_t' "$f")
    if [ -n "$hits" ]; then
        printf '%s\n' "$hits" | sed "s|^|$b:|; s|\$|   <- a backend is given its own state only (the front end, backend.c, holds the context)|" >&2
        status=1
    fi
done

[ $status -eq 0 ] && echo "check-ownership: every context part, tensor field and backend state is changed by its owner only"
exit $status
