#!/usr/bin/env bash
#
# fetch-deepspeed.sh -- download DeepSpeed and the runtime dependencies the GPU machine
# lacks, for bench/run-torch.sh (and bench/run-gpt.sh), which install them there from
# these files (that machine has no network).
#
#   bench/peers/fetch-deepspeed.sh [DIR]
#
# Run on a machine with network access to PyPI. DIR (default .whl, keep it out of git:
# `echo /.whl/ >> .git/info/exclude`) receives:
#   deepspeed-VERSION.tar.gz   the sdist (DeepSpeed publishes no wheel); installed with
#                              --no-build-isolation --no-deps, DS_BUILD_OPS=0: its CPU Adam
#                              is built (JIT, ninja + nvcc) on first use
#   *.whl                      hjson, pydantic, pydantic-core (CPython 3.12, manylinux
#                              x86-64), annotated-types, typing-inspection, typing-extensions
#                              (a recent one: pydantic-core needs a newer one than some
#                              images ship)
# The GPU machine already has torch, numpy, packaging, psutil, py-cpuinfo, msgpack, ninja,
# einops, tqdm, nvidia-ml-py (deepspeed's other requirements). One version of each is
# kept: pydantic pins pydantic-core exactly, so both come from one resolution.
#
# Variables: DEEPSPEED_VERSION (default 0.19.8), PYTHON (default python3), PYVER (the GPU
# machine's Python, default 3.12).
#
# Prints each file and the total size at the end.

set -euo pipefail

if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    sed -n '3,24p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
fi
dir=${1:-.whl}
python=${PYTHON:-python3}
ver=${DEEPSPEED_VERSION:-0.19.8}
pyver=${PYVER:-3.12}
mkdir -p "$dir"

pip_dl() { "$python" -m pip download -q --disable-pip-version-check "$@" -d "$dir"; }

# the sdist: --no-binary, and no dependencies (they are named below)
if ! ls "$dir"/deepspeed-"$ver".tar.gz >/dev/null 2>&1; then
    pip_dl --no-deps --no-binary :all: "deepspeed==$ver"
fi

# pydantic and its dependencies resolved together for the target Python and platform,
# so that pydantic-core is the exact version pydantic pins
plat=(--only-binary=:all: --python-version "$pyver" --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux1_x86_64)
pip_dl "${plat[@]}" pydantic
pip_dl "${plat[@]}" --no-deps hjson typing-extensions

# pydantic's email/timezone extras are not needed; anything else it pulled must be one
# of the names the script expects, else say so (the GPU machine might lack it)
expected='^(deepspeed|hjson|pydantic|pydantic_core|annotated_types|typing_inspection|typing_extensions)$'
status=0
for f in "$dir"/*; do
    b=$(basename "$f")
    name=$(echo "${b%%-[0-9]*}" | tr 'A-Z-' 'a-z_')
    if ! [[ $name =~ $expected ]]; then
        echo "fetch-deepspeed.sh: unexpected file $b in $dir (remove it, or check that the GPU machine has it)" >&2
        status=1
    fi
done
# one version of each: two stop the install
dups=$(for f in "$dir"/*; do b=$(basename "$f"); echo "${b%%-[0-9]*}" | tr 'A-Z-' 'a-z_'; done |
       sort | uniq -d)
if [ -n "$dups" ]; then
    echo "fetch-deepspeed.sh: more than one version of: $dups (keep one)" >&2
    status=1
fi
ls -l "$dir"
echo "fetch-deepspeed.sh: $(du -ch "$dir"/* | tail -1 | cut -f1) in $dir"
exit $status
