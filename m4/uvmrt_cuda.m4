# uvmrt_cuda.m4 -- optional CUDA, CUPTI and cuBLAS detection.
#
# Modelled on UCX's config/m4/cuda.m4: every option takes yes/no/DIR; the
# default ("check") looks and quietly goes without; an explicit request that
# cannot be met is a configure error, never a silent fallback.
#
# Each candidate prefix is probed by file tests plus a real compile/link, not
# by AC_CHECK_HEADER/AC_CHECK_LIB, whose cached results would leak from one
# candidate prefix to the next.

# _UVMRT_LIBDIR_OF(PREFIX, LIBNAME)
# -------------------------------
# Sets uvmrt_libdir to the first library directory under PREFIX that holds
# libLIBNAME (shared or static), or to the empty string.
AC_DEFUN([_UVMRT_LIBDIR_OF], [
    uvmrt_libdir=
    for uvmrt_d in "$1/lib64" "$1/lib" "$1/targets/x86_64-linux/lib" \
                   "$1/targets/sbsa-linux/lib" "$1/lib/x86_64-linux-gnu"; do
        if test -f "$uvmrt_d/lib$2.so" || test -f "$uvmrt_d/lib$2.a"; then
            uvmrt_libdir=$uvmrt_d
            break
        fi
    done
])

# _UVMRT_LDFLAGS_FOR(LIBDIR)
# --------------------------
# Sets uvmrt_ldflags to -L LIBDIR plus a run path, so that the demo, the tests
# and libuvmrt.so find libcudart at run time without LD_LIBRARY_PATH. The
# run path is left out for directories the dynamic linker searches anyway.
AC_DEFUN([_UVMRT_LDFLAGS_FOR], [
    case $1 in
        /usr/lib|/usr/lib64|/usr/lib/*-linux-gnu|/lib|/lib64|/lib/*-linux-gnu)
            uvmrt_ldflags="-L$1" ;;
        *)  uvmrt_ldflags="-L$1 -Wl,-rpath,$1" ;;
    esac
])

# _UVMRT_CUDA_ARCH_FLAGS(LIST)
# ----------------------------
# "80,90" -> sm code for each listed arch plus PTX for the highest one, so the
# named GPUs run native code and newer ones can JIT the PTX.
AC_DEFUN([_UVMRT_CUDA_ARCH_FLAGS], [
    NVCC_ARCH_FLAGS=
    uvmrt_arch_max=
    uvmrt_arch_max_num=-1
    for uvmrt_a in `echo "$1" | tr ',' ' '`; do
        uvmrt_a=`echo "$uvmrt_a" | sed -e 's/^sm_//' -e 's/^compute_//'`
        # digits, optionally followed by one feature letter (90a, 100f)
        case $uvmrt_a in
            ''|*@<:@!0-9af@:>@*|@<:@!0-9@:>@*)
                AC_MSG_ERROR([--with-cuda-arch: bad architecture '$uvmrt_a' (want e.g. 90 or 80,86,90)]) ;;
        esac
        uvmrt_a_num=`echo "$uvmrt_a" | sed 's/@<:@af@:>@$//'`
        NVCC_ARCH_FLAGS="$NVCC_ARCH_FLAGS -gencode arch=compute_$uvmrt_a,code=sm_$uvmrt_a"
        if test "$uvmrt_a_num" -gt "$uvmrt_arch_max_num"; then
            uvmrt_arch_max=$uvmrt_a
            uvmrt_arch_max_num=$uvmrt_a_num
        fi
    done
    AS_IF([test -z "$uvmrt_arch_max"],
          [AC_MSG_ERROR([--with-cuda-arch: empty architecture list])])
    NVCC_ARCH_FLAGS="${NVCC_ARCH_FLAGS# } -gencode arch=compute_$uvmrt_arch_max,code=compute_$uvmrt_arch_max"
])

# _UVMRT_CUDA_TRY(PREFIX)
# -----------------------
# Probes one CUDA prefix: cuda_runtime_api.h, libcudart (compile + link) and
# nvcc. On success sets uvmrt_cuda_ok=yes and CUDA_HOME_DIR, CUDA_CPPFLAGS,
# CUDA_LDFLAGS, CUDA_LIBS, NVCC.
AC_DEFUN([_UVMRT_CUDA_TRY], [
    uvmrt_cuda_ok=no
    AC_MSG_CHECKING([for CUDA in $1])
    _UVMRT_LIBDIR_OF([$1], [cudart])
    if test ! -f "$1/include/cuda_runtime_api.h"; then
        AC_MSG_RESULT([no (no include/cuda_runtime_api.h)])
    elif test -z "$uvmrt_libdir"; then
        AC_MSG_RESULT([no (no libcudart)])
    elif test -z "$uvmrt_nvcc_user" && test ! -x "$1/bin/nvcc"; then
        AC_MSG_RESULT([no (no bin/nvcc)])
    else
        _UVMRT_LDFLAGS_FOR([$uvmrt_libdir])
        uvmrt_save_CPPFLAGS=$CPPFLAGS
        uvmrt_save_LDFLAGS=$LDFLAGS
        uvmrt_save_LIBS=$LIBS
        CPPFLAGS="-I$1/include $CPPFLAGS"
        LDFLAGS="$uvmrt_ldflags $LDFLAGS"
        LIBS="-lcudart $LIBS"
        AC_LINK_IFELSE(
            [AC_LANG_PROGRAM([[#include <cuda_runtime_api.h>]],
                             [[int v = 0; return (int)cudaRuntimeGetVersion(&v);]])],
            [uvmrt_cuda_ok=yes])
        CPPFLAGS=$uvmrt_save_CPPFLAGS
        LDFLAGS=$uvmrt_save_LDFLAGS
        LIBS=$uvmrt_save_LIBS
        if test "$uvmrt_cuda_ok" = yes; then
            AC_MSG_RESULT([yes])
            CUDA_HOME_DIR=$1
            CUDA_LIBDIR=$uvmrt_libdir
            CUDA_CPPFLAGS="-I$1/include"
            CUDA_LDFLAGS=$uvmrt_ldflags
            CUDA_LIBS="-lcudart"
            AS_IF([test -z "$uvmrt_nvcc_user"], [NVCC="$1/bin/nvcc"])
        else
            AC_MSG_RESULT([no (cannot link a program against libcudart)])
        fi
    fi
])

# UVMRT_CHECK_CUDA
# ----------------
# --with-cuda[=DIR] (default: look in $CUDA_HOME, /usr/local/cuda, then the
# prefix of an nvcc on PATH) and --with-cuda-arch=LIST (default 90).
# AC_SUBSTs CUDA_CPPFLAGS CUDA_LDFLAGS CUDA_LIBS NVCC NVCC_FLAGS
# NVCC_ARCH_FLAGS CUDA_HOME_DIR; defines UVMRT_HAVE_CUDA and
# HAVE_DECL_CUDAMEMDISCARDBATCHASYNC / HAVE_DECL_CUDAMEMPREFETCHBATCHASYNC;
# AM_CONDITIONAL HAVE_CUDA. Leaves cuda_happy=yes|no and cuda_version.
AC_DEFUN([UVMRT_CHECK_CUDA], [
    AC_ARG_WITH([cuda],
        [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
            [build the CUDA backend and kernels, CUDA toolkit in DIR
             (default: look in $CUDA_HOME and /usr/local/cuda; build without
             CUDA if not found)])],
        [], [with_cuda=check])
    AC_ARG_WITH([cuda-arch],
        [AS_HELP_STRING([--with-cuda-arch=LIST],
            [comma-separated GPU architectures to build kernels for
             (default: 90); sm code for each, PTX for the highest])],
        [uvmrt_arch_explicit=yes], [with_cuda_arch=90; uvmrt_arch_explicit=no])
    AC_ARG_VAR([NVCC], [CUDA compiler (default: DIR/bin/nvcc of the CUDA found)])
    AC_ARG_VAR([NVCC_FLAGS], [extra nvcc flags (default: -O2); the
                -gencode flags of --with-cuda-arch are prepended])
    AC_ARG_VAR([CUDA_HOME], [where to look for CUDA when --with-cuda has no DIR])

    AS_CASE([$with_cuda_arch],
            [yes|no|''], [AC_MSG_ERROR([--with-cuda-arch needs a list, e.g. --with-cuda-arch=80,90])])

    uvmrt_nvcc_user=$NVCC
    uvmrt_nvcc_flags_user=${NVCC_FLAGS--O2}
    cuda_happy=no
    cuda_version=
    CUDA_HOME_DIR=
    CUDA_CPPFLAGS=
    CUDA_LDFLAGS=
    CUDA_LIBS=
    NVCC_ARCH_FLAGS=

    AS_IF([test "x$with_cuda" != xno], [
        AS_CASE([$with_cuda],
            [yes|check], [
                uvmrt_cuda_dirs=
                test -n "$CUDA_HOME" && uvmrt_cuda_dirs="$CUDA_HOME"
                uvmrt_cuda_dirs="$uvmrt_cuda_dirs /usr/local/cuda"
                # last resort: the prefix of an nvcc on PATH
                AC_PATH_PROG([uvmrt_nvcc_on_path], [nvcc])
                AS_IF([test -n "$uvmrt_nvcc_on_path"], [
                    uvmrt_cuda_dirs="$uvmrt_cuda_dirs `dirname \`dirname $uvmrt_nvcc_on_path\``"])
            ],
            [uvmrt_cuda_dirs=$with_cuda])
        for uvmrt_dir in $uvmrt_cuda_dirs; do
            _UVMRT_CUDA_TRY([$uvmrt_dir])
            AS_IF([test "$uvmrt_cuda_ok" = yes], [cuda_happy=yes; break])
        done

        # Kernels must really build for the requested architectures.
        AS_IF([test "$cuda_happy" = yes], [
            _UVMRT_CUDA_ARCH_FLAGS([$with_cuda_arch])
            NVCC_FLAGS="$NVCC_ARCH_FLAGS $uvmrt_nvcc_flags_user"
            cuda_version=`$NVCC --version 2>/dev/null | sed -n 's/.*release \(@<:@0-9.@:>@*\),.*/\1/p'`
            AC_MSG_CHECKING([whether $NVCC compiles for $with_cuda_arch])
            cat > conftest.cu <<_UVMRT_EOF
__global__ void uvmrt_conftest_kernel(int *p) { *p = 1; }
extern "C" void uvmrt_conftest(int *p) { uvmrt_conftest_kernel<<<1, 1>>>(p); }
_UVMRT_EOF
            AS_IF([$NVCC $NVCC_FLAGS -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
                  [AC_MSG_RESULT([yes])],
                  [AC_MSG_RESULT([no])
                   cuda_happy=no
                   AS_IF([test "x$with_cuda" != xcheck || test "$uvmrt_arch_explicit" = yes],
                         [AC_MSG_ERROR([$NVCC cannot compile for --with-cuda-arch=$with_cuda_arch; see config.log])],
                         [AC_MSG_WARN([$NVCC cannot compile for $with_cuda_arch; building without CUDA])])])
            rm -f conftest.cu conftest.$OBJEXT
        ])

        AS_IF([test "$cuda_happy" != yes && test "x$with_cuda" != xcheck],
              [AC_MSG_ERROR([--with-cuda=$with_cuda requested but no usable CUDA found (need include/cuda_runtime_api.h, libcudart and bin/nvcc); see config.log])])
    ])

    AS_IF([test "$cuda_happy" = yes], [
        AC_DEFINE([UVMRT_HAVE_CUDA], [1], [Define to 1 to build the CUDA backend.])
        # CUDA 13 batch APIs: the backend uses them when declared.
        uvmrt_save_CPPFLAGS=$CPPFLAGS
        CPPFLAGS="$CUDA_CPPFLAGS $CPPFLAGS"
        AC_CHECK_DECLS([cudaMemDiscardBatchAsync, cudaMemPrefetchBatchAsync], [], [],
                       [[#include <cuda_runtime_api.h>]])
        CPPFLAGS=$uvmrt_save_CPPFLAGS
    ], [
        # Same macros, defined to 0, so `#if HAVE_DECL_...` never sees them undefined.
        AC_DEFINE([HAVE_DECL_CUDAMEMDISCARDBATCHASYNC], [0])
        AC_DEFINE([HAVE_DECL_CUDAMEMPREFETCHBATCHASYNC], [0])
        NVCC=
        NVCC_FLAGS=
    ])

    AC_SUBST([CUDA_HOME_DIR])
    AC_SUBST([CUDA_CPPFLAGS])
    AC_SUBST([CUDA_LDFLAGS])
    AC_SUBST([CUDA_LIBS])
    AC_SUBST([NVCC_ARCH_FLAGS])
    AM_CONDITIONAL([HAVE_CUDA], [test "$cuda_happy" = yes])
])

# UVMRT_CHECK_CUPTI
# -----------------
# --with-cupti[=DIR] (default: look in $cuda/extras/CUPTI, then $cuda). Needs
# CUDA. AC_SUBSTs CUPTI_CPPFLAGS CUPTI_LDFLAGS CUPTI_LIBS; defines
# UVMRT_HAVE_CUPTI; AM_CONDITIONAL HAVE_CUPTI. Leaves cupti_happy, cupti_dir.
AC_DEFUN([UVMRT_CHECK_CUPTI], [
    AC_REQUIRE([UVMRT_CHECK_CUDA])
    AC_ARG_WITH([cupti],
        [AS_HELP_STRING([--with-cupti@<:@=DIR@:>@],
            [unified-memory fault records through CUPTI in DIR
             (default: look in the CUDA toolkit)])],
        [], [with_cupti=check])
    cupti_happy=no
    cupti_dir=
    CUPTI_CPPFLAGS=
    CUPTI_LDFLAGS=
    CUPTI_LIBS=
    AS_IF([test "x$with_cupti" != xno], [
        AS_IF([test "$cuda_happy" != yes], [
            AS_IF([test "x$with_cupti" != xcheck],
                  [AC_MSG_ERROR([--with-cupti needs CUDA, which was not found or disabled])])
        ], [
            AS_CASE([$with_cupti],
                [yes|check], [uvmrt_cupti_dirs="$CUDA_HOME_DIR/extras/CUPTI $CUDA_HOME_DIR"],
                [uvmrt_cupti_dirs="$with_cupti $with_cupti/extras/CUPTI"])
            for uvmrt_dir in $uvmrt_cupti_dirs; do
                AC_MSG_CHECKING([for CUPTI in $uvmrt_dir])
                _UVMRT_LIBDIR_OF([$uvmrt_dir], [cupti])
                AS_IF([test -f "$uvmrt_dir/include/cupti.h" && test -n "$uvmrt_libdir"], [
                    _UVMRT_LDFLAGS_FOR([$uvmrt_libdir])
                    uvmrt_save_CPPFLAGS=$CPPFLAGS
                    uvmrt_save_LDFLAGS=$LDFLAGS
                    uvmrt_save_LIBS=$LIBS
                    CPPFLAGS="-I$uvmrt_dir/include $CUDA_CPPFLAGS $CPPFLAGS"
                    LDFLAGS="$uvmrt_ldflags $CUDA_LDFLAGS $LDFLAGS"
                    LIBS="-lcupti $CUDA_LIBS $LIBS"
                    AC_LINK_IFELSE(
                        [AC_LANG_PROGRAM([[#include <cupti.h>]],
                                         [[uint32_t v = 0; return (int)cuptiGetVersion(&v);]])],
                        [cupti_happy=yes])
                    CPPFLAGS=$uvmrt_save_CPPFLAGS
                    LDFLAGS=$uvmrt_save_LDFLAGS
                    LIBS=$uvmrt_save_LIBS
                ])
                AC_MSG_RESULT([$cupti_happy])
                AS_IF([test "$cupti_happy" = yes], [
                    cupti_dir=$uvmrt_dir
                    CUPTI_CPPFLAGS="-I$uvmrt_dir/include"
                    CUPTI_LDFLAGS=$uvmrt_ldflags
                    CUPTI_LIBS="-lcupti"
                    break])
            done
            AS_IF([test "$cupti_happy" != yes && test "x$with_cupti" != xcheck],
                  [AC_MSG_ERROR([--with-cupti=$with_cupti requested but cupti.h/libcupti not usable; see config.log])])
        ])
    ])
    AS_IF([test "$cupti_happy" = yes],
          [AC_DEFINE([UVMRT_HAVE_CUPTI], [1], [Define to 1 to build CUPTI unified-memory records.])])
    AC_SUBST([CUPTI_CPPFLAGS])
    AC_SUBST([CUPTI_LDFLAGS])
    AC_SUBST([CUPTI_LIBS])
    AM_CONDITIONAL([HAVE_CUPTI], [test "$cupti_happy" = yes])
])

# UVMRT_CHECK_CUBLAS
# ------------------
# --with-cublas (default: look when CUDA is found; the example trainers need
# it). AC_SUBSTs CUBLAS_LIBS; defines UVMRT_HAVE_CUBLAS; AM_CONDITIONAL
# HAVE_CUBLAS. cuBLAS ships with the toolkit, so CUDA_CPPFLAGS/LDFLAGS apply.
AC_DEFUN([UVMRT_CHECK_CUBLAS], [
    AC_REQUIRE([UVMRT_CHECK_CUDA])
    AC_ARG_WITH([cublas],
        [AS_HELP_STRING([--with-cublas],
            [cuBLAS for the example trainers (default: look when CUDA is found)])],
        [], [with_cublas=check])
    cublas_happy=no
    CUBLAS_LIBS=
    AS_CASE([$with_cublas],
        [no|check|yes], [],
        [AC_MSG_ERROR([--with-cublas takes no directory; cuBLAS is looked for in the CUDA toolkit (--with-cuda=DIR)])])
    AS_IF([test "x$with_cublas" != xno], [
        AS_IF([test "$cuda_happy" != yes], [
            AS_IF([test "x$with_cublas" = xyes],
                  [AC_MSG_ERROR([--with-cublas needs CUDA, which was not found or disabled])])
        ], [
            AC_MSG_CHECKING([for cuBLAS])
            uvmrt_save_CPPFLAGS=$CPPFLAGS
            uvmrt_save_LDFLAGS=$LDFLAGS
            uvmrt_save_LIBS=$LIBS
            CPPFLAGS="$CUDA_CPPFLAGS $CPPFLAGS"
            LDFLAGS="$CUDA_LDFLAGS $LDFLAGS"
            LIBS="-lcublas -lcublasLt $CUDA_LIBS $LIBS"
            AC_LINK_IFELSE(
                [AC_LANG_PROGRAM([[#include <cublas_v2.h>
#include <cublasLt.h>]],
                                 [[cublasHandle_t h; cublasLtHandle_t lt;
                                   return (int)cublasCreate(&h) + (int)cublasLtCreate(&lt);]])],
                [cublas_happy=yes])
            CPPFLAGS=$uvmrt_save_CPPFLAGS
            LDFLAGS=$uvmrt_save_LDFLAGS
            LIBS=$uvmrt_save_LIBS
            AC_MSG_RESULT([$cublas_happy])
            AS_IF([test "$cublas_happy" != yes && test "x$with_cublas" = xyes],
                  [AC_MSG_ERROR([--with-cublas requested but cublas_v2.h/libcublas not usable; see config.log])])
        ])
    ])
    AS_IF([test "$cublas_happy" = yes], [
        CUBLAS_LIBS="-lcublas -lcublasLt" # cuBLASLt: uvmrt-gpt's matmuls with fused epilogues
        AC_DEFINE([UVMRT_HAVE_CUBLAS], [1], [Define to 1 when cuBLAS is available.])])
    AC_SUBST([CUBLAS_LIBS])
    AM_CONDITIONAL([HAVE_CUBLAS], [test "$cublas_happy" = yes])
])

# UVMRT_CHECK_NCCL
# ----------------
# --with-nccl[=DIR] (default: look in the CUDA toolkit, then /usr). Needs CUDA.
# The collectives of the data-parallel examples (examples/common/collective_nccl.c).
# AC_SUBSTs NCCL_CPPFLAGS NCCL_LDFLAGS NCCL_LIBS; defines UVMRT_HAVE_NCCL;
# AM_CONDITIONAL HAVE_NCCL. Leaves nccl_happy, nccl_dir, nccl_version.
AC_DEFUN([UVMRT_CHECK_NCCL], [
    AC_REQUIRE([UVMRT_CHECK_CUDA])
    AC_ARG_WITH([nccl],
        [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@],
            [NCCL for the data-parallel examples, in DIR
             (default: look in the CUDA toolkit, then /usr)])],
        [], [with_nccl=check])
    nccl_happy=no
    nccl_dir=
    nccl_version=
    NCCL_CPPFLAGS=
    NCCL_LDFLAGS=
    NCCL_LIBS=
    AS_IF([test "x$with_nccl" != xno], [
        AS_IF([test "$cuda_happy" != yes], [
            AS_IF([test "x$with_nccl" != xcheck],
                  [AC_MSG_ERROR([--with-nccl needs CUDA, which was not found or disabled])])
        ], [
            AS_CASE([$with_nccl],
                [yes|check], [uvmrt_nccl_dirs="$CUDA_HOME_DIR /usr"],
                [uvmrt_nccl_dirs="$with_nccl"])
            for uvmrt_dir in $uvmrt_nccl_dirs; do
                AC_MSG_CHECKING([for NCCL in $uvmrt_dir])
                _UVMRT_LIBDIR_OF([$uvmrt_dir], [nccl])
                AS_IF([test -f "$uvmrt_dir/include/nccl.h" && test -n "$uvmrt_libdir"], [
                    _UVMRT_LDFLAGS_FOR([$uvmrt_libdir])
                    uvmrt_save_CPPFLAGS=$CPPFLAGS
                    uvmrt_save_LDFLAGS=$LDFLAGS
                    uvmrt_save_LIBS=$LIBS
                    CPPFLAGS="-I$uvmrt_dir/include $CUDA_CPPFLAGS $CPPFLAGS"
                    LDFLAGS="$uvmrt_ldflags $CUDA_LDFLAGS $LDFLAGS"
                    LIBS="-lnccl $CUDA_LIBS $LIBS"
                    AC_LINK_IFELSE(
                        [AC_LANG_PROGRAM([[#include <nccl.h>]],
                                         [[int v = 0; ncclCommAbort(0);
                                           return (int)ncclGetVersion(&v);]])],
                        [nccl_happy=yes])
                    CPPFLAGS=$uvmrt_save_CPPFLAGS
                    LDFLAGS=$uvmrt_save_LDFLAGS
                    LIBS=$uvmrt_save_LIBS
                ])
                AC_MSG_RESULT([$nccl_happy])
                AS_IF([test "$nccl_happy" = yes], [
                    nccl_dir=$uvmrt_dir
                    nccl_version=`$AWK '/^#define NCCL_(MAJOR|MINOR|PATCH) /{v = v sep $NF; sep = "."} END{print v}' "$uvmrt_dir/include/nccl.h"`
                    AS_IF([test "$uvmrt_dir" != /usr], [NCCL_CPPFLAGS="-I$uvmrt_dir/include"])
                    NCCL_LDFLAGS=$uvmrt_ldflags
                    NCCL_LIBS="-lnccl"
                    break])
            done
            AS_IF([test "$nccl_happy" != yes && test "x$with_nccl" != xcheck],
                  [AC_MSG_ERROR([--with-nccl=$with_nccl requested but nccl.h/libnccl not usable (Debian: libnccl-dev); see config.log])])
        ])
    ])
    AS_IF([test "$nccl_happy" = yes],
          [AC_DEFINE([UVMRT_HAVE_NCCL], [1], [Define to 1 when NCCL is available.])])
    AC_SUBST([NCCL_CPPFLAGS])
    AC_SUBST([NCCL_LDFLAGS])
    AC_SUBST([NCCL_LIBS])
    AM_CONDITIONAL([HAVE_NCCL], [test "$nccl_happy" = yes])
])

# UVMRT_CHECK_CUDNN
# -----------------
# --with-cudnn[=DIR] (default: look in the CUDA toolkit, then /usr). Needs CUDA.
# For uvmrt-gpt's fused attention through cuDNN's backend API (cudnn_graph.h), reached
# through cudnn-frontend (UVMRT_CHECK_CUDNN_FRONTEND, below); uvmrt-gpt opens
# libcudnn.so.9 at run time rather than linking it. DIR may be PyTorch's wheel folder (site-packages/nvidia/cudnn),
# whose lib/ has only libcudnn.so.9: the check then also accepts that name.
# AC_SUBSTs CUDNN_CPPFLAGS CUDNN_LDFLAGS CUDNN_LIBS; defines UVMRT_HAVE_CUDNN;
# AM_CONDITIONAL HAVE_CUDNN. Leaves cudnn_happy, cudnn_dir, cudnn_version.
AC_DEFUN([UVMRT_CHECK_CUDNN], [
    AC_REQUIRE([UVMRT_CHECK_CUDA])
    AC_ARG_WITH([cudnn],
        [AS_HELP_STRING([--with-cudnn@<:@=DIR@:>@],
            [cuDNN 9 for uvmrt-gpt's fused attention, in DIR
             (default: look in the CUDA toolkit, then /usr)])],
        [], [with_cudnn=check])
    cudnn_happy=no
    cudnn_dir=
    cudnn_version=
    CUDNN_CPPFLAGS=
    CUDNN_LDFLAGS=
    CUDNN_LIBS=
    AS_IF([test "x$with_cudnn" != xno], [
        AS_IF([test "$cuda_happy" != yes], [
            AS_IF([test "x$with_cudnn" != xcheck],
                  [AC_MSG_ERROR([--with-cudnn needs CUDA, which was not found or disabled])])
        ], [
            AS_CASE([$with_cudnn],
                [yes|check], [uvmrt_cudnn_dirs="$CUDA_HOME_DIR /usr"],
                [uvmrt_cudnn_dirs="$with_cudnn"])
            for uvmrt_dir in $uvmrt_cudnn_dirs; do
                AC_MSG_CHECKING([for cuDNN 9 in $uvmrt_dir])
                _UVMRT_LIBDIR_OF([$uvmrt_dir], [cudnn])
                uvmrt_cudnn_lib="-lcudnn"
                # a wheel's lib/ holds libcudnn.so.9 only: link it by file name
                AS_IF([test -z "$uvmrt_libdir" && test -f "$uvmrt_dir/lib/libcudnn.so.9"], [
                    uvmrt_libdir="$uvmrt_dir/lib"
                    uvmrt_cudnn_lib="-l:libcudnn.so.9"])
                uvmrt_cudnn_inc="$uvmrt_dir/include"
                AS_IF([test ! -f "$uvmrt_cudnn_inc/cudnn_graph.h" &&
                       test -f "$uvmrt_dir/include/x86_64-linux-gnu/cudnn_graph.h"],
                      [uvmrt_cudnn_inc="$uvmrt_dir/include/x86_64-linux-gnu"])
                AS_IF([test -f "$uvmrt_cudnn_inc/cudnn_graph.h" && test -n "$uvmrt_libdir"], [
                    _UVMRT_LDFLAGS_FOR([$uvmrt_libdir])
                    uvmrt_save_CPPFLAGS=$CPPFLAGS
                    uvmrt_save_LDFLAGS=$LDFLAGS
                    uvmrt_save_LIBS=$LIBS
                    CPPFLAGS="-I$uvmrt_cudnn_inc $CUDA_CPPFLAGS $CPPFLAGS"
                    LDFLAGS="$uvmrt_ldflags $CUDA_LDFLAGS $LDFLAGS"
                    LIBS="$uvmrt_cudnn_lib $CUDA_LIBS $LIBS"
                    AC_LINK_IFELSE(
                        [AC_LANG_PROGRAM([[#include <cudnn_graph.h>
#if CUDNN_MAJOR < 9
#error cuDNN 9 or later is needed (the backend API's SDPA graphs)
#endif]],
                                         [[cudnnBackendDescriptor_t d = 0;
                                           (void)cudnnBackendCreateDescriptor(
                                               CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &d);
                                           return (int)cudnnGetVersion();]])],
                        [cudnn_happy=yes])
                    CPPFLAGS=$uvmrt_save_CPPFLAGS
                    LDFLAGS=$uvmrt_save_LDFLAGS
                    LIBS=$uvmrt_save_LIBS
                ])
                AC_MSG_RESULT([$cudnn_happy])
                AS_IF([test "$cudnn_happy" = yes], [
                    cudnn_dir=$uvmrt_dir
                    uvmrt_cudnn_vh="$uvmrt_cudnn_inc/cudnn_version.h"
                    cudnn_version=`$AWK '/^#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{v = v sep $NF; sep = "."} END{print v}' "$uvmrt_cudnn_vh" 2>/dev/null`
                    AS_IF([test "$uvmrt_cudnn_inc" != /usr/include],
                          [CUDNN_CPPFLAGS="-I$uvmrt_cudnn_inc"])
                    CUDNN_LDFLAGS=$uvmrt_ldflags
                    CUDNN_LIBS=$uvmrt_cudnn_lib
                    break])
            done
            AS_IF([test "$cudnn_happy" != yes && test "x$with_cudnn" != xcheck],
                  [AC_MSG_ERROR([--with-cudnn=$with_cudnn requested but cuDNN 9's cudnn_graph.h/libcudnn not usable (Debian: nvidia-cudnn; pip: nvidia-cudnn-cu12/13, then --with-cudnn=.../site-packages/nvidia/cudnn); see config.log])])
        ])
    ])
    AS_IF([test "$cudnn_happy" = yes],
          [AC_DEFINE([UVMRT_HAVE_CUDNN], [1], [Define to 1 when cuDNN 9 is available.])])
    AC_SUBST([CUDNN_CPPFLAGS])
    AC_SUBST([CUDNN_LDFLAGS])
    AC_SUBST([CUDNN_LIBS])
    AM_CONDITIONAL([HAVE_CUDNN], [test "$cudnn_happy" = yes])
])

# UVMRT_CHECK_CUDNN_FRONTEND
# -------------------------
# --with-cudnn-frontend[=DIR] (default: look in /usr/include, /usr/local/include and the
# source tree's .peers/cudnn-frontend/include, which bench/peers/fetch-llmc.sh fills).
# cudnn-frontend is NVIDIA's header-only C++ library over cuDNN's backend API (PyPI's
# nvidia-cudnn-frontend wheel carries its include/ folder); uvmrt-gpt's cuDNN attention
# (examples/gpt/gpt_attn_cudnn.cpp) is built with it and opens libcudnn.so.9 at run time.
# DIR: a folder with cudnn_frontend.h, or one whose include/ has it. Needs cuDNN (the
# headers) and a C++17 compiler. AC_SUBSTs CUDNN_FRONTEND_CPPFLAGS; defines
# UVMRT_HAVE_CUDNN_FRONTEND; AM_CONDITIONAL HAVE_CUDNN_FRONTEND. Leaves
# cudnn_frontend_happy, cudnn_frontend_dir, cudnn_frontend_version.
AC_DEFUN([UVMRT_CHECK_CUDNN_FRONTEND], [
    AC_REQUIRE([UVMRT_CHECK_CUDNN])
    AC_ARG_WITH([cudnn-frontend],
        [AS_HELP_STRING([--with-cudnn-frontend@<:@=DIR@:>@],
            [cudnn-frontend's headers for uvmrt-gpt's cuDNN attention, in DIR or DIR/include
             @<:@default: check /usr/include, /usr/local/include, .peers/cudnn-frontend/include@:>@])],
        [], [with_cudnn_frontend=check])
    cudnn_frontend_happy=no
    cudnn_frontend_dir=
    cudnn_frontend_version=
    CUDNN_FRONTEND_CPPFLAGS=
    AS_IF([test "x$with_cudnn_frontend" != xno], [
        AS_IF([test "$cudnn_happy" != yes], [
            AS_IF([test "x$with_cudnn_frontend" != xcheck],
                  [AC_MSG_ERROR([--with-cudnn-frontend needs cuDNN 9, which was not found or disabled (--with-cudnn)])])
        ], [
            AS_CASE([$with_cudnn_frontend],
                [yes|check], [uvmrt_fe_dirs="/usr/include /usr/local/include $srcdir/.peers/cudnn-frontend/include"],
                [uvmrt_fe_dirs="$with_cudnn_frontend $with_cudnn_frontend/include"])
            AC_LANG_PUSH([C++])
            for uvmrt_dir in $uvmrt_fe_dirs; do
                test -f "$uvmrt_dir/cudnn_frontend.h" || continue
                AC_MSG_CHECKING([for cudnn-frontend (C++17) in $uvmrt_dir])
                uvmrt_save_CPPFLAGS=$CPPFLAGS
                uvmrt_save_CXXFLAGS=$CXXFLAGS
                CPPFLAGS="-I$uvmrt_dir $CUDNN_CPPFLAGS $CUDA_CPPFLAGS $CPPFLAGS"
                CXXFLAGS="-std=c++17 $CXXFLAGS"
                AC_COMPILE_IFELSE(
                    [AC_LANG_PROGRAM([[#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING 1
#include <cudnn_frontend.h>]],
                                     [[cudnn_frontend::graph::SDPA_backward_attributes a;
                                       a.set_deterministic_algorithm(true).set_causal_mask(true);]])],
                    [cudnn_frontend_happy=yes])
                CPPFLAGS=$uvmrt_save_CPPFLAGS
                CXXFLAGS=$uvmrt_save_CXXFLAGS
                AC_MSG_RESULT([$cudnn_frontend_happy])
                AS_IF([test "$cudnn_frontend_happy" = yes], [
                    cudnn_frontend_dir=$uvmrt_dir
                    cudnn_frontend_version=`$AWK '/^#define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION /{v = v sep $NF; sep = "."} END{print v}' "$uvmrt_dir/cudnn_frontend_version.h" 2>/dev/null`
                    CUDNN_FRONTEND_CPPFLAGS="-I$uvmrt_dir"
                    break])
            done
            AC_LANG_POP([C++])
            AS_IF([test "$cudnn_frontend_happy" != yes && test "x$with_cudnn_frontend" != xcheck],
                  [AC_MSG_ERROR([--with-cudnn-frontend=$with_cudnn_frontend requested but no usable cudnn_frontend.h there (pip download nvidia-cudnn-frontend, unzip its include/; or bench/peers/fetch-llmc.sh); see config.log])])
        ])
    ])
    AS_IF([test "$cudnn_frontend_happy" = yes],
          [AC_DEFINE([UVMRT_HAVE_CUDNN_FRONTEND], [1], [Define to 1 when cudnn-frontend's headers are available.])])
    AC_SUBST([CUDNN_FRONTEND_CPPFLAGS])
    AM_CONDITIONAL([HAVE_CUDNN_FRONTEND], [test "$cudnn_frontend_happy" = yes])
])
