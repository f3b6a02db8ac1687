#!/bin/bash
# session 35 run D: where uvmrt-gpt's d12 step spends the time its kernels do not (runC:
# its kernels sum to 16.33 ms, llm.c's to 16.39, the steps 17.5 and 17.1): d12 resident,
# 10 steps, with and without the fault statistics (UVMRT_FAULT_STATS=0), the runtime's
# step beside the wall clock between steps' ends, beside llm.c + cuDNN, alternating
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
run() { # run DIR ROW [ENV...]
  local d=$1 r=$2; shift 2; mkdir -p $o/$d
  env "$@" STEPS=10 CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=10 timeout 150 bench/run-gpt.sh $o/$d $r > $o/$d/$r.out 2>&1
  echo "$d $r rc=$? after $(since) s: $(grep -h "^| d12" $o/$d/table.md | tail -1 | cut -c1-120)"
  [ -f $o/$d/gpt.$r.json ] && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('  runtime', round(j['ms_per_step_median'],2), 'wall', j.get('wall_ms_per_step_median'), 'steps', [round(x,2) for x in j['step_ms']])" $o/$d/gpt.$r.json
}
for k in 1 2; do
  run l$k d12-llmc-cudnn
  run u$k d12-resident
  run f$k d12-resident UVMRT_FAULT_STATS=0
done
grep -h "ms" $o/l1/llmc.d12-llmc-cudnn.log | grep "step" | tail -3
for d in $o/*/; do rm -rf $d/llmc; done
gzip $o/*/*.report.json 2>/dev/null
pack runD
