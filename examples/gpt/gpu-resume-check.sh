#!/bin/sh
# gpu-resume-check.sh [OUTDIR] -- uvmrt-gpt's checkpoints and samples on a GPU, from a
# built tree (run from the tree's root), on examples/gpt/corpus.txt at byte level:
#  1. for each optimizer placement: 2N steps uninterrupted with a loss log; the same
#     run stopped after N steps (--stop-at N --checkpoint-every N, with validation
#     passes and samples in between, which must not disturb training), then --resume
#     for the N more; the two loss logs must be bitwise identical;
#  2. 300 steps with --val-every 100 --sample 200: the sample is shown, and the mean
#     loss of the last 10 steps must be well below ln(256) = 5.55 (under 3.5).
# SHAPE (default "--depth 12 --batch 4 --seq 256") and N (default 20) may be set in
# the environment. Results go to OUTDIR (default ./gpt-resume-check); exit 1 when a
# check failed.
set -u
OUT=${1:-gpt-resume-check}
N=${N:-20}
SHAPE=${SHAPE:---depth 12 --batch 4 --seq 256}
mkdir -p "$OUT"
G=examples/gpt/uvmrt-gpt
C=examples/gpt/corpus.txt
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
note() { echo "== $*" | tee -a "$OUT/summary.txt"; }
# shellcheck disable=SC2086 # SHAPE is a list of flags
run() { $G $SHAPE --text $C --steps $((2 * N)) --lr 1e-3 --warmup 2 -q "$@"; }

for opt in gpu cpu; do
    note "1. $opt optimizer: $((2 * N)) steps vs $N + --resume $N"
    run --optimizer-on $opt --loss-log "$OUT/full-$opt.log" >"$OUT/full-$opt.txt" 2>&1 || fail=1
    run --optimizer-on $opt --stop-at "$N" --checkpoint "$T/ck-$opt" --checkpoint-every "$N" \
        --keep 2 --val-every $((N / 2)) --val-batches 2 --sample 16 --sample-every $((N / 2)) \
        --loss-log "$OUT/part1-$opt.log" >"$OUT/part1-$opt.txt" 2>&1 || fail=1
    run --optimizer-on $opt --resume --checkpoint "$T/ck-$opt" --val-every $((N / 2)) \
        --val-batches 2 --loss-log "$OUT/part2-$opt.log" >"$OUT/part2-$opt.txt" 2>&1 || fail=1
    grep -E "^checkpoint|^resume" "$OUT/part1-$opt.txt" "$OUT/part2-$opt.txt" | tee -a "$OUT/summary.txt"
    if cat "$OUT/part1-$opt.log" "$OUT/part2-$opt.log" | cmp -s - "$OUT/full-$opt.log" &&
        [ "$(wc -l <"$OUT/full-$opt.log")" -eq $((2 * N)) ]; then
        note "$opt: resumed loss log bitwise identical ($((2 * N)) steps)"
    else
        note "$opt: loss logs DIFFER (or are incomplete)"
        cat "$OUT/part1-$opt.log" "$OUT/part2-$opt.log" | diff - "$OUT/full-$opt.log" | head -5 |
            tee -a "$OUT/summary.txt"
        fail=1
    fi
done

note "2. 300 steps, validation every 100, --sample 200"
# shellcheck disable=SC2086
$G $SHAPE --text $C --steps 300 --lr 1e-3 --warmup 10 -q --val-every 100 --sample 200 \
    --top-k 5 >"$OUT/train300.txt" 2>&1 || fail=1
grep -E "^val|^summary" "$OUT/train300.txt" | tee -a "$OUT/summary.txt"
sed -n '/^sample after step 300/,/^summary/p' "$OUT/train300.txt" | sed '$d' | tee -a "$OUT/summary.txt"
# the loss is the 4th field of the progress lines ("step 291/300  loss 2.345678 ...")
last=$(grep '^step' "$OUT/train300.txt" | tail -10 | awk '{ s += $4 } END { if (NR) printf "%.4f", s / NR }')
if awk -v l="${last:-99}" 'BEGIN { exit !(l > 0 && l < 3.5) }'; then
    note "mean loss of steps 291-300: $last (ln 256 = 5.55): PASS"
else
    note "mean loss of steps 291-300: ${last:-none}, expected under 3.5: FAIL"; fail=1
fi
note "gpu-resume-check: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
