#!/bin/sh
# check-layering-self.sh -- check-layering.sh can fail: its fixtures (tests/data/layering/)
# with a call up, a stale allowlist entry, an unplaced file and a three-file call cycle
# each fail it, and one without them passes.
: "${top_srcdir:=.}"
exec sh "$top_srcdir/tests/check-layering.sh" --self-test
