"""The JVM must not outlive its command. kstool does not wait for Spark to stop: the JVM stops
itself when kstool exits (it watches its stdin). Once, after a cold 2M-record stream-stream
join, the JVM's shutdown hung instead: 8 minutes later it was still there, 1 GB resident, its
temporary folders deleted (bench/README.md). A cron job would pile such JVMs up. So when kstool
exits it leaves a detached watcher that kills the JVM if it is still running a grace period
later. Nothing is lost: a run's work is committed before kstool exits."""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import time

from kstool.base.processes import start_time, still_running

# long enough for a JVM's normal exit: Spark's shutdown hooks
GRACE_S = 120.0
WATCH_INTERVAL_S = 1.0

def reap_at_exit(pid: int, grace_s: float = GRACE_S) -> None:
    """When this process exits, leave a watcher that kills process `pid` if it still runs
    `grace_s` later."""
    started = start_time(pid)
    if started is not None:
        atexit.register(leave_watcher, pid, started, grace_s)


def leave_watcher(pid: int, started: str, grace_s: float) -> None:
    subprocess.Popen([sys.executable, "-m", __name__, str(pid), started, str(grace_s)], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _watch(pid: int, started: str, grace_s: float) -> None:
    """The watcher: after grace_s, kill the process if it is the same one (not another one given
    its pid since); gone as soon as the process is (a JVM's normal exit takes seconds, and a
    watcher left in `ps` for two minutes after every cron run is noise)."""
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not still_running(pid, started):
            return
        time.sleep(min(WATCH_INTERVAL_S, max(deadline - time.monotonic(), 0)))
    if still_running(pid, started):
        os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    _watch(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]))
