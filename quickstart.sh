#!/usr/bin/env bash
# quickstart.sh -- from a fresh Debian/Ubuntu checkout to a running demo or a
# tested build in one command.
#
#   ./quickstart.sh demo  [CONFIGURE-ARGS...]   build, run the demo
#   ./quickstart.sh check [CONFIGURE-ARGS...]   build, make check, make check-gpu
#
# check also makes (once) a Python virtual environment with torch, transformers and
# pytest for the Python package's tests, in $UVMRT_VENV (default ~/.cache/uvmrt-venv,
# outside the tree; about 5 GB and 2-3 minutes from PyPI), unless UVMRT_VENV=none or
# PYTHON is set; without it (no network) those tests are skipped.
#
# Installs the missing build dependencies with apt-get (sudo when not root).
# CUDA is not installed here: configure uses /usr/local/cuda (or $CUDA_HOME)
# when present and builds without it otherwise. Without a GPU the demo falls
# back to the sim backend and check-gpu skips its tests.
set -euo pipefail

DEPS=(autoconf automake libtool pkg-config make gcc g++
      libcriterion-dev libjansson-dev libnuma-dev liburing-dev mandoc python3 python3-venv)

usage() {
    sed -n '2,16s/^# \{0,1\}//p' "$0"
}

mode=${1:-}
case $mode in
    demo|check) shift ;;
    -h|--help|help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
esac

cd "$(dirname "$0")"

# A clear last line whatever happens (set -e stops at the failing step).
trap 'status=$?; if [ $status -eq 0 ]; then echo "== quickstart $mode: OK"; else echo "== quickstart $mode: FAILED (exit status $status)" >&2; fi' EXIT

install_deps() {
    if ! command -v dpkg-query >/dev/null 2>&1; then
        echo "== not a Debian system: install ${DEPS[*]} (or equivalents) yourself"
        return 0
    fi
    local missing=() pkg
    for pkg in "${DEPS[@]}"; do
        if [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]; then
            missing+=("$pkg")
        fi
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "== build dependencies present"
        return 0
    fi
    local sudo=
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || {
            echo "quickstart: need root or sudo to install: ${missing[*]}" >&2
            return 1
        }
        sudo=sudo
    fi
    echo "== installing ${missing[*]}"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

jobs=$(nproc 2>/dev/null || echo 2)

# A virtual environment with torch for the Python package's tests (check only).
python_venv() {
    local venv=${UVMRT_VENV:-${HOME:-/root}/.cache/uvmrt-venv}
    [ "$venv" != none ] || return 0
    [ -z "${PYTHON:-}" ] || return 0
    if ! "$venv/bin/python" -c 'import torch, pytest, transformers' >/dev/null 2>&1; then
        echo "== python: torch, transformers and pytest into $venv (once; about 5 GB)"
        if ! { python3 -m venv "$venv" && "$venv/bin/python" -m pip install -q --disable-pip-version-check \
                   torch transformers pytest; }; then
            echo "== python: could not make $venv: the Python package's tests will be skipped" >&2
            return 0
        fi
    fi
    export PYTHON=$venv/bin/python
    echo "== python: $PYTHON ($("$PYTHON" -c 'import torch; print("torch", torch.__version__)'))"
}

install_deps
[ "$mode" != check ] || python_venv

echo "== configuring"
./autogen.sh
./configure "$@"

echo "== building"
make -j"$jobs"

case $mode in
    demo)
        echo "== running the demo"
        examples/demo/uvmrt-demo --policy all --steps 4
        ;;
    check)
        log=$(mktemp)
        status=0
        # GPU tests first (they skip themselves without a GPU), then the unit
        # tests, so that automake's summary of what ran closes the output.
        echo "== testing: make check-gpu"
        make check-gpu 2>&1 | tee "$log" || status=$?
        echo "== testing: make check"
        # VERBOSE=1 prints the failing tests' logs, which CI would not keep.
        make -j"$jobs" check VERBOSE=1 2>&1 | tee -a "$log" || status=$?
        # One closing line for both suites: unit tests (automake's counts) and
        # GPU tests (check-gpu's), skipped ones apart.
        awk '/^# PASS:/ {p += $3} /^# (FAIL|ERROR|XPASS):/ {f += $3} /^# SKIP:/ {s += $3}
             /^check-gpu: [0-9]+ passed/ {p += $2; f += $4; s += $6}
             /^check-gpu: [0-9]+ skipped/ {s += $2}
             END {printf "tests: %d passed, %d failed, %d skipped\n", p, f, s}' "$log"
        rm -f "$log"
        exit "$status"
        ;;
esac
