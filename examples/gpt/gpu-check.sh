#!/bin/sh
# gpu-check.sh [OUTDIR] -- uvmrt-gpt on a GPU, from a built tree (run from the tree's
# root): the kernels against the C reference, the attention kernels at the
# trainer's sizes against the scalar ones (and their times), the whole model's step-1 gradients
# against the reference, a short training run whose loss must fall, loss logs
# bitwise equal resident vs --budget 2G for both optimizer placements, and resident vs
# --budget 1G for a split optimizer (--cpu-layers 3) and for --recompute 2 (and the
# auto choice, and a changed choice applied mid-run), then timings of --depth 12 and --depth 48 (B=8, T=1024) resident and
# at --budget 8G (auto: cpu_layers and recompute chosen by uvmrt), whose loss logs must
# equal the resident ones bitwise too.
# Every result goes to OUTDIR (default ./gpt-gpu-check); exit 1 when a check failed.
set -u
OUT=${1:-gpt-gpu-check}
mkdir -p "$OUT"
G=examples/gpt
T=$(mktemp -d)
fail=0
note() { echo "== $*" | tee -a "$OUT/summary.txt"; }
nvidia-smi --query-gpu=name,memory.free,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
free_mib=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits | head -1)

note "1. kernels against the C reference"
if $G/gpt-gpu-check >"$OUT/kernels.txt" 2>&1; then note "kernels: PASS"; else note "kernels: FAIL"; fail=1; fi
grep -E "FAIL|PASS" "$OUT/kernels.txt" | tail -5 | tee -a "$OUT/summary.txt"

note "1b. attention at the trainer's sizes: mma kernels against the fp32 ones, and timings"
if $G/gpt-gpu-check --attn >"$OUT/attention.txt" 2>&1; then note "attention: PASS"; else note "attention: FAIL"; fail=1; fi
grep -E "FAIL|^time|PASS" "$OUT/attention.txt" | tee -a "$OUT/summary.txt"

note "2. whole model, step-1 loss and gradients against the C reference"
$G/uvmrt-gpt --layers 2 --channels 128 --heads 2 --vocab 1000 --batch 2 --seq 64 --steps 1 \
    --policy none -q --dump-weights "$T/w.bin" --dump-grads "$T/g.bin" --loss-log "$T/l.txt" \
    >"$OUT/model-run.txt" 2>&1
loss=$(awk 'NR==1 {print $2}' "$T/l.txt")
if $G/gpt-gpu-check --model "$T/w.bin" "$T/g.bin" "$loss" 2 64 1 >"$OUT/model.txt" 2>&1; then
    note "model: PASS"; else note "model: FAIL"; fail=1; fi
cat "$OUT/model.txt" >>"$OUT/summary.txt"

note "3. training d12 B4 T256, 20 steps: loss falls; resident vs --budget 2G bitwise"
for opt in gpu cpu; do
    $G/uvmrt-gpt --depth 12 --batch 4 --seq 256 --steps 20 --lr 1e-3 --warmup 2 -q \
        --optimizer-on $opt --recompute none --policy none \
        --loss-log "$OUT/loss-d12-$opt-resident.txt" \
        >"$OUT/train-d12-$opt-resident.txt" 2>&1 || fail=1
    $G/uvmrt-gpt --depth 12 --batch 4 --seq 256 --steps 20 --lr 1e-3 --warmup 2 -q \
        --optimizer-on $opt --recompute none --budget 2G \
        --loss-log "$OUT/loss-d12-$opt-2g.txt" \
        >"$OUT/train-d12-$opt-2g.txt" 2>&1 || fail=1
    if cmp -s "$OUT/loss-d12-$opt-resident.txt" "$OUT/loss-d12-$opt-2g.txt"; then
        note "optimizer $opt: loss logs resident and 2G identical"
    else note "optimizer $opt: loss logs DIFFER"; fail=1; fi
    tail -1 "$OUT/train-d12-$opt-2g.txt" | tee -a "$OUT/summary.txt"
    awk 'NR==1 {a=$2} END {b=$2; printf "loss %s -> %s\n", a, b}' \
        "$OUT/loss-d12-$opt-resident.txt" | tee -a "$OUT/summary.txt"
done

note "3b. d12 B4 T256, 10 steps: a split optimizer, partial recompute, auto; resident vs --budget 1G bitwise"
# mixed: the head and the top 2 blocks on the CPU, the rest on the GPU; rec2: blocks 1-2
# recompute, the others keep their activations; auto: whatever uvmrt chooses at 1G (and
# the review may re-plan between steps), against resident with the values it chose first
for split in "mixed:--cpu-layers 3 --recompute none" "rec2:--cpu-layers 0 --recompute 2"; do
    name=${split%%:*} flags=${split#*:}
    $G/uvmrt-gpt --depth 12 --batch 4 --seq 256 --steps 10 --lr 1e-3 --warmup 2 -q $flags \
        --policy none --loss-log "$OUT/loss-d12-$name-resident.txt" \
        >"$OUT/train-d12-$name-resident.txt" 2>&1 || fail=1
    $G/uvmrt-gpt --depth 12 --batch 4 --seq 256 --steps 10 --lr 1e-3 --warmup 2 -q $flags \
        --budget 1G --loss-log "$OUT/loss-d12-$name-1g.txt" \
        >"$OUT/train-d12-$name-1g.txt" 2>&1 || fail=1
    if cmp -s "$OUT/loss-d12-$name-resident.txt" "$OUT/loss-d12-$name-1g.txt"; then
        note "$name ($flags): loss logs resident and 1G identical"
    else note "$name ($flags): loss logs DIFFER"; fail=1; fi
    tail -1 "$OUT/train-d12-$name-1g.txt" | tee -a "$OUT/summary.txt"
done
$G/uvmrt-gpt --depth 12 --batch 4 --seq 256 --steps 10 --lr 1e-3 --warmup 2 -q --budget 1G \
    --loss-log "$OUT/loss-d12-auto-1g.txt" >"$OUT/train-d12-auto-1g.txt" 2>&1 || fail=1
grep "^auto:" "$OUT/train-d12-auto-1g.txt" | tee -a "$OUT/summary.txt"
k=$(sed -n 's/^auto: cpu_layers \([0-9]*\), recompute \([0-9]*\) (predicted.*/\1/p' "$OUT/train-d12-auto-1g.txt" | head -1)
n=$(sed -n 's/^auto: cpu_layers \([0-9]*\), recompute \([0-9]*\) (predicted.*/\2/p' "$OUT/train-d12-auto-1g.txt" | head -1)
if [ -n "$k" ] && [ -n "$n" ]; then
    $G/uvmrt-gpt --depth 12 --batch 4 --seq 256 --steps 10 --lr 1e-3 --warmup 2 -q \
        --cpu-layers "$k" --recompute "$n" --policy none \
        --loss-log "$OUT/loss-d12-auto-resident.txt" >"$OUT/train-d12-auto-resident.txt" 2>&1 || fail=1
    if cmp -s "$OUT/loss-d12-auto-resident.txt" "$OUT/loss-d12-auto-1g.txt"; then
        note "auto (cpu_layers $k, recompute $n first): loss logs resident and 1G identical"
    elif grep -q "^auto: re-planned" "$OUT/train-d12-auto-1g.txt"; then
        note "auto: loss logs differ after a re-plan (the CPU's and the GPU's AdamW are not bitwise equal?): see $OUT/loss-d12-auto-*.txt"
    else note "auto (cpu_layers $k, recompute $n): loss logs DIFFER"; fail=1; fi
else note "auto: no choice line in $OUT/train-d12-auto-1g.txt"; fail=1; fi
# a changed choice applied between steps (the CPU thread's layers, placements, per-block
# activations): the test hook makes the review apply cpu_layers 3, recompute 2 after step 4;
# the losses must equal the mixed run's (where AdamW runs and recompute change no bits)
UVMRT_TEST_REPLAN=3,2 $G/uvmrt-gpt --depth 12 --batch 4 --seq 256 --steps 10 --lr 1e-3 \
    --warmup 2 -q --budget 1G --loss-log "$OUT/loss-d12-replan-1g.txt" \
    >"$OUT/train-d12-replan-1g.txt" 2>&1 || fail=1
grep "^auto:" "$OUT/train-d12-replan-1g.txt" | tee -a "$OUT/summary.txt"
if cmp -s "$OUT/loss-d12-mixed-resident.txt" "$OUT/loss-d12-replan-1g.txt"; then
    note "re-plan applied after step 4: loss log identical to the mixed resident run"
else note "re-plan applied after step 4: loss log DIFFERS from the mixed resident run"; fail=1; fi

note "4. timings B8 T1024; loss logs resident vs 8G bitwise"
for d in 12 48; do
    if [ "$d" = 48 ] && [ "${free_mib:-0}" -lt 80000 ]; then note "d48 skipped: $free_mib MiB free"; continue; fi
    for b in resident 8G; do
        if [ $b = resident ]; then flags="--policy none"; else flags="--budget 8G"; fi
        $G/uvmrt-gpt --depth $d --batch 8 --seq 1024 --steps 4 -q $flags \
            --loss-log "$OUT/loss-time-d$d-$b.txt" \
            --result-json "$OUT/time-d$d-$b.json" >"$OUT/time-d$d-$b.txt" 2>&1 || fail=1
        note "d$d $b"; grep -E "^auto|^step|^summary" "$OUT/time-d$d-$b.txt" | tail -6 | tee -a "$OUT/summary.txt"
    done
    if cmp -s "$OUT/loss-time-d$d-resident.txt" "$OUT/loss-time-d$d-8G.txt"; then
        note "d$d B8 T1024: loss logs resident and 8G identical"
    else note "d$d B8 T1024: loss logs resident and 8G DIFFER"; fail=1; fi
done
rm -rf "$T"
note "gpu-check: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
