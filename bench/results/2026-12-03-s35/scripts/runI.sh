#!/bin/bash
# session 35 run I: the runtime's step ends when its work is done (the streams
# synchronized), no longer after the bookkeeping that follows (reading the calls' timing
# events, the observers), as llm.c's step ends with its end event: d12 resident beside
# llm.c + cuDNN, twice, alternating (10 steps), the runtime's step beside the wall clock
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
run() { # run DIR ROW [ENV...]
  local d=$1 r=$2; shift 2; mkdir -p $o/$d
  env STEPS=10 "$@" CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=10 timeout 100 bench/run-gpt.sh $o/$d $r > $o/$d/$r.out 2>&1
  echo "$d $r rc=$? after $(since) s"
  [ -f $o/$d/gpt.$r.json ] && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('  runtime', round(j['ms_per_step_median'],2), 'wall', j.get('wall_ms_per_step_median'), 'steps', [round(x,2) for x in j['step_ms']])" $o/$d/gpt.$r.json
}
for k in a b; do run $k d12-llmc-cudnn; run $k d12-resident; done
grep -h "^| d" $o/a/table.md $o/b/table.md
for d in $o/*/; do rm -rf $d/llmc; done
gzip $o/*/*.report.json 2>/dev/null
pack runI
