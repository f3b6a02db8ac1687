#!/bin/sh
# check-ownership-self.sh -- check-ownership.sh can fail: a tree made for it with a
# context part, a tensor field, a layer's stats and a backend each changed or reached
# by a file that may not is reported, and a clean one passes.
: "${top_srcdir:=.}"
exec sh "$top_srcdir/tests/check-ownership.sh" --self-test
