# plot_faults.gp -- uvmrt fault statistics per layer and step time, per policy.
# Called by plot.sh with: datadir, out, fmt (png|svg), policies (space separated).
# Data: datadir/POLICY.layers.dat = layer name faults/step faultMiB/step prefetchMiB/step
# evictMiB/step; datadir/POLICY.steps.dat = step ms.

if (fmt eq 'svg') { set terminal svg size 1200,800 dynamic font 'sans,11' } \
else { set terminal pngcairo size 1200,800 font 'sans,10' }
set output out
if (!exists('label')) label = ''
set multiplot layout 2,2 title 'uvmrt: what the driver did, per layer and policy (means per step, steps 2..N)'.(label eq '' ? '' : ' -- '.label)
set key top right opaque box
set grid ytics
set style data linespoints
set xlabel 'layer'

set title 'GPU page faults (fault groups)'
set ylabel 'fault groups per step'
n = words(policies)
plot for [i=1:n] sprintf('%s/%s.layers.dat', datadir, word(policies, i)) using 1:3 title word(policies, i) lw 2 lc i

set title 'bytes to the GPU on demand (faults)'
set ylabel 'MiB per step'
plot for [i=1:n] sprintf('%s/%s.layers.dat', datadir, word(policies, i)) using 1:4 title word(policies, i) lw 2 lc i

set title 'bytes prefetched to the GPU (uvmrt), and written to the host'
set ylabel 'MiB per step'
plot for [i=1:n] sprintf('%s/%s.layers.dat', datadir, word(policies, i)) using 1:5 \
         title word(policies, i).' prefetch' lw 2 lc i, \
     for [i=1:n] sprintf('%s/%s.layers.dat', datadir, word(policies, i)) using 1:6 \
         title word(policies, i).' to host' lw 1 dt 2 lc i

set title 'step time'
set xlabel 'step'
set xtics 1
set ylabel 'ms'
set logscale y
plot for [i=1:n] sprintf('%s/%s.steps.dat', datadir, word(policies, i)) using 1:2 title word(policies, i) lw 2 lc i
unset logscale y
unset multiplot
