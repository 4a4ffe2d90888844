#!/usr/bin/env python3
"""Interleaved per-step medians of `LOCALGPT_SANDBOX_TIMING`, by hand.

    python3 bench/timing-steps.py [-n 100] 'ARGV A' ['ARGV B' ...]

Each ARGV is a whole `localgpt sandbox run ...` command line (split on spaces; pass
`--keep-env LOCALGPT_SANDBOX_TIMING` in it so that the helper's and the command's stamps are
printed too). Every iteration runs each command line once, in a shuffled order, with
`LOCALGPT_SANDBOX_TIMING=1`, stdout on /dev/null; the stamps of the runner (`cli`), the
supervisor and the command's process are merged in time order (CLOCK_MONOTONIC, the same clock in
every process) and each step's time is the time since the stamp before it. Prints, per step, the
median over the iterations of each command line, in µs, one column per command line, and the
median total from the first stamp to the last. A label stamped by more than one process (`start`,
`fork`, ...) counts once, where it first appears. A failed run stops it.

Comparing two builds or two policies step by step is what this is for (`bench/ab-latency.py`
compares end-to-end times; `localgpt-latency` is the gated benchmark). It does not copy the
binaries: give it copies made the same way (see `bench/ab-latency.py` on page-cache effects).
"""
import argparse
import collections
import os
import random
import statistics
import subprocess
import sys


def steps(stderr):
    """(label, µs since the stamp before) in time order, and the total in µs."""
    first = {}
    for line in stderr.splitlines():
        if not line.startswith("localgpt-sandbox-timing "):
            continue
        parts = line.split()
        who = parts[1]
        for kv in parts[2:]:
            k, _, v = kv.partition("=")
            if v.isdigit():
                first.setdefault(k, (who, int(v)))
    items = sorted(first.items(), key=lambda x: x[1][1])
    if not items:
        return [], 0.0
    out = [(f"{who}:{k}", (t - items[i - 1][1][1]) / 1000) for i, (k, (who, t)) in enumerate(items) if i > 0]
    return out, (items[-1][1][1] - items[0][1][1]) / 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=100, help="interleaved iterations (default 100)")
    ap.add_argument("argvs", nargs="+", help="command lines to compare")
    a = ap.parse_args()
    argvs = [s.split() for s in a.argvs]
    env = dict(os.environ, LOCALGPT_SANDBOX_TIMING="1")
    rows = [collections.defaultdict(list) for _ in argvs]
    totals = [[] for _ in argvs]
    order = []
    for _ in range(a.n):
        idx = list(range(len(argvs)))
        random.shuffle(idx)
        for j in idx:
            r = subprocess.run(argvs[j], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                sys.exit(f"{' '.join(argvs[j])}: exit {r.returncode}\n{r.stderr}")
            got, total = steps(r.stderr)
            for label, us in got:
                if label not in order:
                    order.append(label)
                rows[j][label].append(us)
            totals[j].append(total)
    med = lambda v: f"{statistics.median(v):9.0f}" if v else f"{'-':>9}"
    for label in order:
        print(f"{label:32}" + "".join(med(r[label]) for r in rows))
    print(f"{'TOTAL':32}" + "".join(med(t) for t in totals))


if __name__ == "__main__":
    main()
