#!/bin/sh
# nvcc-libtool.sh -- run nvcc with the flags libtool and the C build hand it.
#
# Usage: nvcc-libtool.sh NVCC [ARGS...]
#   e.g. libtool --tag=CC --mode=compile sh nvcc-libtool.sh nvcc -c -o x.lo x.cu
#
# libtool adds -fPIC (and the C build may carry -pthread, -fopenmp, -Wall,
# -std=gnu11, ...) which nvcc rejects: host-compiler flags are forwarded with
# -Xcompiler, C-only flags and dependency-tracking flags are dropped, the rest
# passes through unchanged.

if [ $# -lt 1 ]; then
    echo "usage: $0 NVCC [ARGS...]" >&2
    exit 2
fi
nvcc=$1
shift

# Rebuild "$@" in place: take each argument off the front, append its
# translation at the back, $# times.
n=$#
while [ "$n" -gt 0 ]; do
    arg=$1
    shift
    n=$((n - 1))
    case $arg in
        # Options whose value is the next argument: both pass untouched (the
        # value of -Xcompiler -Wall must not be wrapped a second time).
        -Xcompiler|--compiler-options|-Xlinker|--linker-options|-Xptxas|\
        --ptxas-options|-Xnvlink|--nvlink-options|-Xarchive|-ccbin|\
        --compiler-bindir|-o|--output-file|-I|-D|-U|-isystem|-include|\
        -gencode|--generate-code|-arch|-code)
            set -- "$@" "$arg"
            if [ "$n" -gt 0 ]; then set -- "$@" "$1"; shift; n=$((n - 1)); fi ;;
        # Warnings nvcc itself understands stay as they are.
        -Werror=*|-Wno-deprecated-gpu-targets|-Wno-deprecated-declarations|\
        -Wreorder|-Wdefault-stream-launch|-Wmissing-launch-bounds|\
        -Wext-lambda-captures-this)
            set -- "$@" "$arg" ;;
        # Host-compiler flags: position-independent code, threads, warnings,
        # any other -f option.
        -fPIC|-fpic|-fPIE|-fpie|-pthread|-fopenmp|-W*|-f*)
            set -- "$@" -Xcompiler "$arg" ;;
        # A C++ dialect is nvcc's business; a C dialect does not apply to .cu.
        -std=c++*|-std=gnu++*)
            set -- "$@" "$arg" ;;
        -std=c*|-std=gnu*|-std=iso*)
            ;;
        # Dependency tracking (nvcc's -M* differ); the two with an argument.
        -MT|-MF|-MQ)
            if [ "$n" -gt 0 ]; then shift; n=$((n - 1)); fi ;;
        -MD|-MMD|-MP)
            ;;
        *)
            set -- "$@" "$arg" ;;
    esac
done

exec "$nvcc" "$@"
