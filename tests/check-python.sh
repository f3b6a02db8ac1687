#!/bin/sh
# check-python.sh -- the Python package's tests (python/tests, pytest) against the
# libuvmrt.so of this build, on the sim backend with CPU tensors.
#
# Run by `make check` (builddir as the working directory). $UVMRT_PYTHON is the
# Python configure found; the tests need torch and pytest in it (exit 77, skip,
# without them, saying how to get them). A sanitizer build (ASan) cannot be loaded
# into a Python that was not started with its runtime: skipped too.
srcdir=${top_srcdir:-${srcdir:-.}}
# Every module of the package is installed by make install (Makefile.am names it):
# checked first, with or without torch (a module left out imports here, not installed).
missing=$(cd "$srcdir" && find python/uvmrt -name '*.py' | sort | while read -r f; do
    grep -q "$f" Makefile.am || echo "$f"; done)
if [ -n "$missing" ]; then
    echo "FAIL: Makefile.am does not install: $missing"
    exit 1
fi
py=${UVMRT_PYTHON:-}
so=$PWD/src/.libs/libuvmrt.so
if [ -z "$py" ] || [ "$py" = ":" ]; then
    echo "SKIP: no Python found by configure (PYTHON=/path/to/python ./configure)"
    exit 77
fi
if ! "$py" -c 'import torch, pytest' >/dev/null 2>&1; then
    echo "SKIP: $py lacks torch or pytest: python3 -m venv V && V/bin/pip install torch pytest transformers," \
         "then PYTHON=V/bin/python ./configure"
    exit 77
fi
if [ ! -f "$so" ]; then
    echo "SKIP: $so not built (--disable-shared?)"
    exit 77
fi
if nm -D "$so" 2>/dev/null | grep -q ' U __asan_init'; then
    echo "SKIP: libuvmrt is built with AddressSanitizer, which a plain Python cannot load"
    exit 77
fi
UVMRT_LIBRARY=$so
UVMRT_BACKEND=sim
UVMRT_TOP=$PWD/tools/uvmrt-top  # the tests run it on a Python process they start
export UVMRT_LIBRARY UVMRT_BACKEND UVMRT_TOP
# the tests' own temporary files stay out of the source tree
exec "$py" -m pytest -q -p no:cacheprovider "$srcdir/python/tests"
