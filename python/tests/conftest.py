"""pytest setup: the binding under test loads the libuvmrt of the build tree
(UVMRT_LIBRARY, set by `make check`, or found beside this file) and runs on the
sim backend with CPU tensors."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # python/ : the package under test

if "UVMRT_LIBRARY" not in os.environ:
    for cand in (os.path.join(HERE, "..", "..", "src", ".libs", "libuvmrt.so"),):
        if os.path.exists(cand):
            os.environ["UVMRT_LIBRARY"] = os.path.abspath(cand)
os.environ.setdefault("UVMRT_BACKEND", "sim")
os.environ.setdefault("UVMRT_LOG_LEVEL", "error")
os.environ.setdefault("UVMRT_MONITOR", "0")
