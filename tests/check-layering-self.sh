#!/bin/sh
# check-layering-self.sh -- check-layering.sh can fail: its fixtures (tests/data/layering/)
# with a call up, a stale allowlist entry and an unplaced file each fail it.
: "${top_srcdir:=.}"
exec sh "$top_srcdir/tests/check-layering.sh" --self-test
