"""What the fault tests share: where a query is, read from its checkpoint (Spark writes
offsets/N when batch N starts and commits/N when it is done), and how a run dies (SIGKILL to
the driver and everything it started)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from tests.helpers import KSTOOL  # not conftest: the bench imports this module


def batches(folder: Path) -> set[int]:
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()


def in_flight(checkpoint: Path) -> int | None:
    """The batch that started (offsets/N) and is not committed (no commits/N), if any."""
    pending = batches(checkpoint / "offsets") - batches(checkpoint / "commits")
    return max(pending) if pending else None


def batch_ranges(checkpoint: Path) -> list[dict[tuple[str, int], tuple[int, int]]]:
    """Per committed batch, {(topic, partition): (first offset, end offset)} from Spark's offset log."""
    ranges, previous = [], {}
    for batch in sorted(batches(checkpoint / "commits")):
        offsets = json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1])
        ends = {(topic, int(p)): end for topic, parts in offsets.items() for p, end in parts.items()}
        ranges.append({tp: (previous.get(tp, 0), end) for tp, end in ends.items()})
        previous = ends
    return ranges


def in_batches(records, ranges) -> list:
    """The records the batches read, batch after batch."""
    def read_by(batch, m) -> bool:
        first, end = batch.get((m.topic(), m.partition()), (0, 0))
        return first <= m.offset() < end
    return [[m for m in records if read_by(batch, m)] for batch in ranges]


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc. Each thread lists the children it started (the
    JVM starts Python processes from many threads), so every thread's list is read."""
    found, stack = [], [pid]
    while stack:
        children = _children(stack.pop())
        found += children
        stack += children
    return found


def _children(pid: int) -> list[int]:
    """The processes `pid`'s threads started: none once it has ended (a process or a thread can
    end between listing and reading)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    children: list[int] = []
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children") as f:
                children += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return children


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the driver and everything it started (the JVM runs in its own session)."""
    victims = [proc.pid, *descendants(proc.pid)]
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(30)
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{p}") and open(f"/proc/{p}/stat").read().split()[2] != "Z"
              for p in victims if os.path.exists(f"/proc/{p}")) and time.monotonic() < deadline:
        time.sleep(0.1)


class ContinuousRun:
    """`kstool run TOPOLOGY ... --app-id APP` without --once, against `bootstrap`, its stderr
    collected as it comes; its checkpoint in the kstool home of the test."""

    def __init__(self, bootstrap: str, app: str, *args: str):
        env = {**os.environ, "KSTOOL_BOOTSTRAP_SERVERS": bootstrap}
        self.proc = subprocess.Popen([*KSTOOL, "run", *args, "--app-id", app], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(self.proc.stderr), daemon=True).start()
        self.checkpoint = Path(os.environ["KSTOOL_HOME"]) / "apps" / app / "checkpoint"

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def wait_for(self, condition, what: str, seconds: float = 240) -> None:
        deadline = time.monotonic() + seconds  # a hang guard, not a timing check
        while not condition():
            assert self.proc.poll() is None or condition(), f"the run ended before {what}: {self.lines[-3:]}"
            assert time.monotonic() < deadline, f"no {what}: {self.lines[-3:]}"
            time.sleep(0.1)

    def finish(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # stops after the current batch
        return self.proc.wait(120)
