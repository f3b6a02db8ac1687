#!/usr/bin/env bash
# .ci/cuda12-toolkit.sh -- a CUDA 12.x toolkit directory from PyPI wheels, for
# compile-and-link checks of the CUDA 12 code paths (no GPU, no driver needed).
#
#   .ci/cuda12-toolkit.sh SERIES CACHE DIR     SERIES: 12.6 or 12.1
#
# Downloads (once, into CACHE) nvidia-cuda-runtime-cu12, -cuda-cupti-cu12,
# -cublas-cu12, -cuda-nvcc-cu12 of that series and nvidia-nccl-cu12 (2.21.5,
# the oldest NCCL the collectives are checked against) and lays them out as DIR
# with include/, lib64/ (unversioned .so links added: the wheels ship only
# libX.so.12) and bin/nvcc.
#
# The nvcc wheels hold ptxas, libnvvm and the crt headers but no nvcc driver,
# cicc or cudafe++, so .cu files cannot be compiled with CUDA 12 from PyPI.
# DIR/bin/nvcc is therefore a wrapper around the system's nvcc ($HOST_NVCC,
# default /usr/local/cuda/bin/nvcc) that drops -IDIR/include, so kernels are
# compiled with that nvcc and its own headers, while every C file (the
# library, the CUDA backend, CUPTI, the trainers' host code) is compiled
# against the 12.x headers, and everything is linked against the 12.x
# libraries. 12.6 covers the _v2 calls of CUDA 12.2-12.9, 12.1 the int-device
# forms from before 12.2.
set -euo pipefail

series=${1:?usage: $0 SERIES CACHE DIR}
cache=${2:?usage: $0 SERIES CACHE DIR}
dir=${3:?usage: $0 SERIES CACHE DIR}
host_nvcc=${HOST_NVCC:-/usr/local/cuda/bin/nvcc}

case $series in
    12.6) pkgs=(nvidia-cuda-runtime-cu12==12.6.77 nvidia-cuda-cupti-cu12==12.6.80
                nvidia-cublas-cu12==12.6.4.1 nvidia-cuda-nvcc-cu12==12.6.85
                nvidia-nccl-cu12==2.21.5) ;;
    12.1) pkgs=(nvidia-cuda-runtime-cu12==12.1.105 nvidia-cuda-cupti-cu12==12.1.105
                nvidia-cublas-cu12==12.1.3.1 nvidia-cuda-nvcc-cu12==12.1.105
                nvidia-nccl-cu12==2.21.5) ;;
    *) echo "$0: unknown series '$series' (want 12.6 or 12.1)" >&2; exit 2 ;;
esac

mkdir -p "$cache/$series"
# Every wheel of the series already in the cache: no network needed.
need=()
for p in "${pkgs[@]}"; do
    name=${p%%==*}
    ver=${p##*==}
    ls "$cache/$series/${name//-/_}-$ver-"*.whl >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "== cuda $series: downloading ${need[*]}"
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --platform manylinux2014_x86_64 --python-version 3.11 \
        -d "$cache/$series" "${need[@]}"
fi

rm -rf "$dir"
mkdir -p "$dir/unpacked" "$dir/include" "$dir/lib64" "$dir/bin"
for w in "$cache/$series"/*.whl; do
    python3 -m zipfile -e "$w" "$dir/unpacked"
done
for part in cuda_runtime cuda_nvcc cuda_cupti cublas nccl; do
    [ -d "$dir/unpacked/nvidia/$part/include" ] &&
        cp -Rn "$dir/unpacked/nvidia/$part/include/." "$dir/include/"
    [ -d "$dir/unpacked/nvidia/$part/lib" ] &&
        cp -Rn "$dir/unpacked/nvidia/$part/lib/." "$dir/lib64/"
done
find "$dir/include" "$dir/lib64" -name __init__.py -delete
for so in "$dir/lib64"/lib*.so.*; do
    base=${so%%.so.*}.so
    [ -e "$base" ] || ln -s "$(basename "$so")" "$base"
done
rm -rf "$dir/unpacked"

dir=$(cd "$dir" && pwd -P)
cat >"$dir/bin/nvcc" <<_EOF
#!/bin/sh
# nvcc wrapper (see .ci/cuda12-toolkit.sh): the system nvcc, without the
# CUDA 12 include directory (however spelled), whose headers do not match it.
for a in "\$@"; do
    shift
    case \$a in
        -I*) d=\$(cd "\${a#-I}" 2>/dev/null && pwd -P) || d=
             [ "\$d" = "$dir/include" ] && continue ;;
    esac
    set -- "\$@" "\$a"
done
exec $host_nvcc "\$@"
_EOF
chmod +x "$dir/bin/nvcc"
grep -h '#define CUDART_VERSION' "$dir/include/cuda_runtime_api.h"
echo "== cuda $series toolkit in $dir"
