"""A JVM that outlives its command is killed by the watcher kstool leaves when it exits
(kstool.engine.spark.jvm_reaper); a process that merely has its pid later is left alone. A `sleep`
process stands in for the JVM."""

from __future__ import annotations

import subprocess
import sys
import time

from kstool.base.processes import start_time
from kstool.engine.spark.jvm_reaper import leave_watcher


def _ended(process: subprocess.Popen, within_s: float = 30) -> int | None:
    """Its exit code once it has ended (a bound, not a timing assertion: None if it never did)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return process.returncode
        time.sleep(0.05)
    return None


def test_a_process_still_running_after_the_grace_period_is_killed():
    stuck = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        leave_watcher(stuck.pid, start_time(stuck.pid), 0.1)
        assert _ended(stuck) == -9
    finally:
        stuck.kill()


def test_another_process_with_the_pid_is_left_alone():
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        leave_watcher(other.pid, "0", 0.1)  # a start time that is not this process's
        assert _ended(other, within_s=2) is None  # the watcher has long woken up and left it
    finally:
        other.kill()
        other.wait()


def test_the_watcher_leaves_as_soon_as_the_process_has_ended():
    ended = subprocess.Popen(["true"])
    ended.wait()
    watcher = subprocess.Popen([sys.executable, "-m", "kstool.engine.spark.jvm_reaper", str(ended.pid), "0", "600"])
    try:
        assert _ended(watcher) == 0  # not after its 600 s of grace
    finally:
        watcher.kill()
        watcher.wait()
