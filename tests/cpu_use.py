"""Where the suite's CPU goes, per test: with KSTOOL_TEST_CPU=FILE, each test appends a JSON line
{"test", "worker", "cpu_s", "wall_s", "ended"} to FILE, its CPU being that of the worker's process tree
(its brokers, JVMs, kstool subprocesses and what they reaped) from its setup to its teardown.
On a busy 2-core machine the suite is bound by CPU, not by its waits: this says which tests to
make cheaper. `python -m tests.cpu_use FILE` sums it per module; `python -m tests.cpu_use FILE
--start-order` writes tests/start_order.txt from it (conftest starts those modules first)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> float:
    """utime + stime of `root` and its live descendants, with what each reaped (cutime, cstime)."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        stats[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / _TICK)
    children: dict[int, list[int]] = defaultdict(list)
    for pid, (ppid, _) in stats.items():
        children[ppid].append(pid)
    total, pending = 0.0, [root]
    while pending:
        pid = pending.pop()
        total += stats.get(pid, (0, 0.0))[1]
        pending += children.get(pid, [])
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    out = os.environ.get("KSTOOL_TEST_CPU")
    if not out:
        yield
        return
    began_cpu, began = tree_cpu_s(os.getpid()), time.monotonic()
    yield
    line = {"test": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
            "cpu_s": round(tree_cpu_s(os.getpid()) - began_cpu, 1), "wall_s": round(time.monotonic() - began, 1),
            "ended": round(time.time(), 1)}
    with open(out, "a") as f:
        f.write(json.dumps(line) + "\n")


START_ORDER = Path(__file__).with_name("start_order.txt")
START_FIRST_S = 20  # modules shorter than this fill in at the end, in collection order
START_ORDER_HEADER = """\
# The modules `make test` starts first, the longest first, each with its wall seconds in a full
# run (KSTOOL_TEST_CPU=FILE make test; python -m tests.cpu_use FILE --start-order): xdist gives a
# worker a module at a time, so the run ends when its workers do; a long module started late ends
# last alone. Modules not listed follow, those that need a broker or Spark first.
"""


def start_order_ranks() -> dict[str, int]:
    """The modules to start first, by rank (the longest first)."""
    listed = [line.split()[0] for line in START_ORDER.read_text().splitlines() if line and not line.startswith("#")]
    return {module: rank for rank, module in enumerate(listed)}


def main() -> None:
    per_module: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for text in Path(sys.argv[1]).read_text().splitlines():
        line = json.loads(text)
        module = per_module[line["test"].split("::")[0]]
        module[0] += line["cpu_s"]
        module[1] += line["wall_s"]
        module[2] += 1
    if "--start-order" in sys.argv:
        longest = sorted((kv for kv in per_module.items() if kv[1][1] >= START_FIRST_S), key=lambda kv: -kv[1][1])
        START_ORDER.write_text(START_ORDER_HEADER + "".join(f"{name} {wall:.0f}\n" for name, (_, wall, _) in longest))
        return
    total = sum(m[0] for m in per_module.values())
    print(f"{'module':70} {'CPU-s':>8} {'wall-s':>8} {'tests':>6}")
    for name, (cpu, wall, count) in sorted(per_module.items(), key=lambda kv: -kv[1][0])[:40]:
        print(f"{name:70} {cpu:8.0f} {wall:8.0f} {count:6}")
    print(f"{'all':70} {total:8.0f}")


if __name__ == "__main__":
    main()
