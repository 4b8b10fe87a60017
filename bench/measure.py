"""Measuring helpers: a process tree's peak RSS and CPU seconds from /proc, percentiles, the environment of
bench commands."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time

from tests.faults import descendants


def tree_rss_bytes(pid: int) -> int:
    return rss_bytes((pid, *descendants(pid)))


def rss_bytes(pids) -> int:
    total, page = 0, os.sysconf("SC_PAGE_SIZE")
    for current in pids:
        try:
            with open(f"/proc/{current}/statm") as f:
                total += int(f.read().split()[1]) * page
        except OSError:
            continue
    return total


class ProcessTree:
    """Samples a process and all its descendants (e.g. the JVM): their resident memory's peak,
    and the CPU seconds each used (the last sample of each: a process's last interval is missed)."""

    def __init__(self, pid: int, interval: float = 0.2):
        self.pid, self.interval, self.peak = pid, interval, 0
        self._ticks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            pids = (self.pid, *descendants(self.pid))
            self.peak = max(self.peak, rss_bytes(pids))
            for current in pids:
                try:
                    with open(f"/proc/{current}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()  # after the command's name
                except OSError:
                    continue
                self._ticks[current] = int(fields[11]) + int(fields[12])  # utime + stime
            time.sleep(self.interval)

    def stop(self) -> tuple[int, float]:
        """The peak RSS in bytes and the CPU seconds."""
        self._stop.set()
        self._thread.join()
        return self.peak, sum(self._ticks.values()) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def scratch_dir(prefix: str) -> str:
    """A folder of the bench's own (a kstool home, a cluster's), removed when the bench exits:
    a full run's held ~3 GB of broker logs and checkpoints."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, True)
    return path


def cold_env(prefix: str = "kstool-bench-") -> dict:
    """The environment of a bench's commands: a private kstool home (its own broker), and every
    run cold, in its own process (no warm engine)."""
    env = {**os.environ, "KSTOOL_HOME": scratch_dir(prefix), "KSTOOL_ENGINE": "off"}
    env.pop("KSTOOL_BOOTSTRAP_SERVERS", None)
    return env
