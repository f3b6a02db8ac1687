# device-env.sh -- sourced by a script that runs on the GPU machine from a copy of this
# repository with a build carried beside it: sets up the environment every such script
# needs, so that the scripts under bench/results/*/scripts say only what they run.
#
#   . bench/device-env.sh [BUILD]        (BUILD default: $root/.devb, else $root/b)
#
# Sets root (the repository), BUILD, LD_LIBRARY_PATH (BUILD's library first, then
# $root/.ldlibs: libraries the GPU machine lacks, such as Criterion's), UVMRT_LIBRARY,
# PYTHONPATH (the repository's python/), PYTHONUNBUFFERED, PYTORCH_CUDA_ALLOC_CONF
# (expandable segments, as every torch row of the benchmark runs), o ($OUT/w, made: what
# the script leaves there comes back) and t0; `since` prints the seconds since t0, and
# `pack NAME` ends a run: $OUT/NAME.tgz of $o, with machine paths replaced by PATH.
root=${root:-$PWD}
BUILD=${1:-${BUILD:-}}
if [ -z "$BUILD" ]; then
    BUILD=$root/.devb
    [ -d "$BUILD" ] || BUILD=$root/b
fi
export BUILD
export LD_LIBRARY_PATH=$BUILD/src/.libs:$root/.ldlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export UVMRT_LIBRARY=$BUILD/src/.libs/libuvmrt.so
export PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}
o=${OUT:?device-env.sh: OUT is not set (the device tool sets it)}/w
mkdir -p "$o"
t0=$(date +%s)
since() { echo $(($(date +%s) - t0)); }
pack() {
    local f py
    py=$(python3 -c 'import sys; print(sys.prefix)' 2>/dev/null || echo "$root")
    # the machine's paths are no one else's business: PATH in their place
    grep -rlI -e "$root" -e "$HOME" -e "$py" "$o" 2>/dev/null | while read -r f; do
        sed -i -e "s#$root#PATH#g" -e "s#$py#PATH#g" -e "s#$HOME#PATH#g" "$f"
    done
    (cd "$OUT" && tar czf "$1.tgz" w && rm -rf w)
}
