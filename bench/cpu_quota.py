"""CPU-quota groups for the scale-out bench (#71): cgroup v1, a group of the `cpu` hierarchy
(its quota) and one of `cpuacct` (its CPU time) per process, so that a Spark worker and the
executors and Python workers it forks get a fixed share of the machine, whatever else runs.
Where this machine does not allow it (no v1 hierarchy, not root), `problem()` says why."""

from __future__ import annotations

import os
import time
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


def problem() -> str | None:
    """Why quota groups cannot be made here, or None."""
    for hierarchy in ("cpu", "cpuacct"):
        if not (CGROUP / hierarchy / "cgroup.procs").exists():
            return f"no cgroup v1 '{hierarchy}' hierarchy at {CGROUP / hierarchy}"
        if not os.access(CGROUP / hierarchy, os.W_OK):
            return f"{CGROUP / hierarchy} is not writable (root is needed to make groups)"
    return None


class QuotaGroup:
    """A group capped at `cores` of CPU (cpu.cfs_quota_us over a 100 ms period), removed by
    `remove()` (its processes go back to the root group first: a group with members cannot go)."""

    def __init__(self, name: str, cores: float):
        self.name, self.cores = f"kstool-bench-{name}-{os.getpid()}", cores
        self.dirs = [CGROUP / hierarchy / self.name for hierarchy in ("cpu", "cpuacct")]
        for folder in self.dirs:
            folder.mkdir()
        (self.dirs[0] / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (self.dirs[0] / "cpu.cfs_quota_us").write_text(str(round(cores * PERIOD_US)))

    def add(self, pid: int) -> None:
        """`pid` with all its threads; the processes it starts later are born in the group."""
        for folder in self.dirs:
            (folder / "cgroup.procs").write_text(str(pid))

    def usage(self) -> dict:
        """CPU seconds the group's processes used, its quota's periods so far and those it was throttled in."""
        stat = dict(line.split() for line in (self.dirs[0] / "cpu.stat").read_text().splitlines())
        return {"cpu_s": int((self.dirs[1] / "cpuacct.usage").read_text()) / 1e9, "periods": int(stat["nr_periods"]),
                "throttled": int(stat["nr_throttled"])}

    def remove(self) -> None:
        for folder in self.dirs:
            if not folder.exists():
                continue
            for _ in range(50):  # a process forking meanwhile lands in the group: move until empty
                pids = (folder / "cgroup.procs").read_text().split()
                if not pids:
                    break
                for pid in pids:
                    try:
                        (folder.parent / "cgroup.procs").write_text(pid)
                    except ProcessLookupError:
                        pass
                time.sleep(0.02)
            folder.rmdir()


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has used since boot (all cores; idle and iowait excluded)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9])  # guest time is in user's
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
