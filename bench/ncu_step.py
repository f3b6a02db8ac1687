#!/usr/bin/env python3
"""ncu_step.py -- where one training step's GPU time goes, kernel by kernel, from Nsight
Compute's durations.

    ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw PROGRAM ... > run.csv
    python3 bench/ncu_step.py run.csv [--marker NAME] [--top N]

The CSV may be gzip-compressed. The program's kernels repeat once per step; the step is
cut at the marker kernel (default: the first kernel the program launched, e.g. the
embedding's forward), and the last complete step (from the second-to-last marker to the
last) is summed per kernel name (templates and arguments dropped). Prints the step's
kernel count and total, then each kernel's total, share and launches, largest first.
ncu runs kernels one at a time, so the total is the sum of kernel durations, not the
step's wall time. Exit status 2 (with the file named) for input it cannot read.
"""
import argparse
import collections
import csv
import gzip
import io
import re
import sys


class InputError(Exception):
    pass


def read_kernels(path):
    """(name, ns) per kernel launch, in launch order."""
    try:
        raw = open(path, "rb").read()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}")
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    lines = raw.decode("utf-8", errors="replace").splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        raise InputError(f"{path}: no ncu CSV header (a line starting with \"ID\"); run ncu with --csv --page raw")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    head = rows[0]
    try:
        ki, ti = head.index("Kernel Name"), head.index("gpu__time_duration.sum")
    except ValueError:
        raise InputError(f"{path}: the CSV lacks 'Kernel Name' or 'gpu__time_duration.sum' "
                         "(ncu --metrics gpu__time_duration.sum)")
    out = []
    for r in rows[1:]:
        if len(r) <= max(ki, ti) or not r[ki]:
            continue  # the units row, blank lines
        try:
            out.append((r[ki], float(r[ti].replace(",", ""))))
        except ValueError:
            continue
    if not out:
        raise InputError(f"{path}: no kernel rows")
    return out


def short(name):
    """The kernel's name without return type, template arguments or parameters."""
    n = re.sub(r"\(.*", "", name)
    n = re.sub(r"<.*", "", n)
    return n.replace("void ", "").strip()


def last_step(kernels, marker=None):
    names = [short(n) for n, _ in kernels]
    marker = marker or names[0]
    at = [i for i, n in enumerate(names) if n == marker]
    if len(at) < 2:
        raise InputError(f"the marker kernel '{marker}' runs {len(at)} time(s): need two steps or more "
                         "(profile more steps, or name another --marker)")
    return marker, len(at) - 1, [(names[i], kernels[i][1]) for i in range(at[-2], at[-1])]


def summary(step):
    total = collections.Counter()
    count = collections.Counter()
    for n, ns in step:
        total[n] += ns
        count[n] += 1
    return total, count


def main(argv=None):
    ap = argparse.ArgumentParser(description=" ".join(__doc__.split("\n")[0:2]).split(" -- ", 1)[1])
    ap.add_argument("--version", action="version", version="ncu_step 1")
    ap.add_argument("csv", help="ncu --csv --page raw output (may be .gz)")
    ap.add_argument("--marker", help="the kernel that starts each step (default: the first launched)")
    ap.add_argument("--top", type=int, default=40, help="kernels listed (default 40)")
    a = ap.parse_args(argv)
    try:
        kernels = read_kernels(a.csv)
        marker, steps, step = last_step(kernels, a.marker)
    except InputError as e:
        print(f"ncu_step.py: {e}", file=sys.stderr)
        return 2
    total, count = summary(step)
    ns = sum(total.values())
    print(f"{a.csv}: {len(kernels)} kernels, {steps} complete step(s) cut at '{marker}'; "
          f"the last: {len(step)} kernels, {ns / 1e6:.3f} ms")
    for n, t in total.most_common(a.top):
        print(f"  {t / 1e6:8.3f} ms {100 * t / ns:5.1f}% {count[n]:5d}  {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
