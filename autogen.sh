#!/bin/sh
# autogen.sh -- generate configure and Makefile.in from a git checkout.
# Release tarballs (make dist) already contain them.
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
exec autoreconf -fi
