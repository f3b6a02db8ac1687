#!/usr/bin/env bash
#
# plot.sh -- charts from uvmrt CSV reports (uvmrt-demo --report csv:PATH, or
# UVMRT_REPORT=csv:PATH): GPU faults, bytes faulted in and bytes prefetched per
# layer for each policy, and the step time of each policy.
#
#   bench/plot.sh CSV... OUTDIR
#
# One CSV per policy (the policy is read from the file's first column). Writes
# OUTDIR/faults.png and OUTDIR/faults.svg, plus the data files under OUTDIR/data.
# Per-layer figures are means per step over steps 2..N (step 1 records the
# schedule) that collected the driver's counters (CSV column fault_sampled). Needs gnuplot: apt-get install gnuplot-nox. Layer names must not
# contain commas (the CSV is split on them here). PLOT_LABEL is appended to the title.

set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: plot.sh CSV... OUTDIR" >&2
    exit 2
fi
command -v gnuplot >/dev/null || {
    echo "plot.sh: gnuplot not found: apt-get install gnuplot-nox" >&2
    exit 1
}
here=$(cd "$(dirname "$0")" && pwd)
outdir=${!#}
mkdir -p "$outdir/data"
policies=()
for csv in "${@:1:$#-1}"; do
    policy=$(awk -F, 'NR == 2 { print $1; exit }' "$csv")
    [ -n "$policy" ] || { echo "plot.sh: $csv has no rows" >&2; exit 1; }
    policies+=("$policy")
    # per layer: faults, MiB faulted in, MiB prefetched (CUPTI's user prefetch), MiB to host
    awk -F, -v out="$outdir/data/$policy" '
        NR == 1 { next }
        { last = $4 > last ? $4 : last; rows[NR] = $0 }
        END {
            first = last >= 2 ? 2 : 1 # steps from 1: leave the recording step out
            for (r in rows) {
                split(rows[r], f, ",")
                st[f[4]] = f[27]
                # column 28, fault_sampled: steps that did not collect the driver'"'"'s counters
                # read 0 there and stay out of the means (older CSVs have no column 28)
                if (f[4] < first || (28 in f && f[28] == 0)) continue
                if (!(f[4] in seen)) { seen[f[4]] = 1; n++ }
                l = f[5]; name[l] = f[6]; gsub(/"/, "", name[l])
                g[l] += f[18]; fi[l] += f[19]; pf[l] += f[20]; ev[l] += f[22]
                if (l > maxl) maxl = l
            }
            if (n < 1) n = 1
            for (l = 0; l <= maxl; l++)
                printf "%d %s %.3f %.3f %.3f %.3f\n", l, name[l], g[l] / n, fi[l] / n / 1048576,
                       pf[l] / n / 1048576, ev[l] / n / 1048576 > (out ".layers.dat")
            for (s = 1; s <= last; s++) printf "%d %.3f\n", s, st[s] / 1e6 > (out ".steps.dat")
        }' "$csv"
done
for fmt in png svg; do
    gnuplot -e "datadir='$outdir/data'; out='$outdir/faults.$fmt'; fmt='$fmt'; policies='${policies[*]}'; label='${PLOT_LABEL:-}'" \
        "$here/plot_faults.gp"
done
echo "plot.sh: $outdir/faults.png $outdir/faults.svg"
