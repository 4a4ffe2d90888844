#!/usr/bin/env python3
"""Interleaved A/B of two (or more) builds of the CLI on one command, by hand.

    python3 bench/ab-latency.py [-n 500] [--levels standard,full] BIN_A BIN_B [...]

Every iteration runs bare `/bin/true x` and `BIN sandbox run --level L -- /bin/true x` for each
binary and level once, in a shuffled order (`posix_spawn` to `waitpid`, stdio on /dev/null), after
one warm-up run of each; it prints p50, p90 and the mean per variant, in ms. Run it in the
workspace to measure (the current directory), as the user to measure. A failed run stops it.

Each binary is first copied to a fresh file in a temporary directory and run from there: how a
file came into the page cache changes how many page faults its start takes (here a binary
written by the linker, or read back after its pages were dropped, started ~0.3-0.4 ms slower per
run than a `cp` of the same bytes: 407 page faults against 365), which would otherwise decide an
A/B of two builds. The copies are removed at the end.
`localgpt-latency` (bench/src/latency.rs) is the gated benchmark; this compares builds, which it
does not.
"""
import argparse
import os
import random
import shutil
import statistics
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=500, help="interleaved iterations (default 500)")
    ap.add_argument("--levels", default="standard,full", help="comma-separated levels (default standard,full)")
    ap.add_argument("bins", nargs="+", help="the CLI binaries to compare")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ab-latency-")
    os.chmod(tmp, 0o755)
    copies = []
    for i, b in enumerate(a.bins):
        c = os.path.join(tmp, f"{i}-{os.path.basename(b)}")
        shutil.copyfile(b, c)
        os.chmod(c, 0o755)
        copies.append(c)
    try:
        measure(a, copies)
    finally:
        shutil.rmtree(tmp)


def measure(a, copies):
    devnull = os.open("/dev/null", os.O_RDWR)
    actions = [(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)]
    variants = [("bare", ["/bin/true", "x"])]
    for b, c in zip(a.bins, copies):
        for level in a.levels.split(","):
            variants.append((f"{b} {level}", [c, "sandbox", "run", "--level", level, "--", "/bin/true", "x"]))

    def run(argv):
        t = time.perf_counter_ns()
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=actions)
        _, status = os.waitpid(pid, 0)
        if status != 0:
            raise SystemExit(f"{' '.join(argv)}: wait status {status}")
        return (time.perf_counter_ns() - t) / 1e6

    times = {name: [] for name, _ in variants}
    for _, argv in variants:
        run(argv)
    for _ in range(a.n):
        random.shuffle(variants)
        for name, argv in variants:
            times[name].append(run(argv))
    for name in sorted(times):
        v = sorted(times[name])
        print(f"{name:60s} p50 {statistics.median(v):7.3f}  p90 {v[int(len(v) * 0.9)]:7.3f}  mean {statistics.mean(v):7.3f}")


if __name__ == "__main__":
    main()
