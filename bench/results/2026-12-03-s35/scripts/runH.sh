#!/bin/bash
# session 35 run H: a layer call that waits for nothing records one timing event less, and
# one that follows the previous call on its stream starts at that call's end (three
# events a call cost the d12 step about 0.18 ms: runG's report, 1.4 us between two events
# with nothing between): d12 and d48 resident beside llm.c + cuDNN (10 steps, d12 twice,
# alternating), d48 at 8 GiB (its prediction, which reads the calls' times), and make
# check-gpu's scenarios
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
run() { # run DIR ROW [ENV...]
  local d=$1 r=$2; shift 2; mkdir -p $o/$d
  env STEPS=10 "$@" CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=10 timeout 200 bench/run-gpt.sh $o/$d $r > $o/$d/$r.out 2>&1
  echo "$d $r rc=$? after $(since) s"
  [ -f $o/$d/gpt.$r.json ] && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('  runtime', round(j['ms_per_step_median'],2), 'wall', j.get('wall_ms_per_step_median'), 'steps', [round(x,2) for x in j['step_ms']])" $o/$d/gpt.$r.json
}
run a d12-llmc-cudnn
run a d12-resident
run b d12-llmc-cudnn
run b d12-resident
run a d48-llmc-cudnn
run a d48-resident
run c d48-prefetch-8g-auto STEPS=12
grep -h "^| d" $o/a/table.md $o/b/table.md $o/c/table.md
(cd $BUILD && timeout 150 tests/gpu/test_gpu -j1 > $o/test_gpu.txt 2>&1); echo "test_gpu rc=$? after $(since) s"; tail -2 $o/test_gpu.txt
for d in $o/*/; do rm -rf $d/llmc; done
gzip $o/*/*.report.json 2>/dev/null
pack runH
