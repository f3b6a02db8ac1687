#!/bin/bash
# session 29 run E: bench/probes/copy_contention.py with the backward's pattern (a chain of
# small kernels, each followed by a gradient's copy on a side stream)
set -uo pipefail
root=$PWD
. bench/device-env.sh >/dev/null
timeout 80 python bench/probes/copy_contention.py 2>&1 | tee $o/copy_contention2.txt
