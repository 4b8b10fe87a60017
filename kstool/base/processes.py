"""Other processes, as /proc shows them: alive or not, and when they started; and a variable of
the environment the processes started meanwhile inherit."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


def pid_alive(pid: int) -> bool:
    try:  # reap it first if it is our own exited child, or kill(0) would see a zombie
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat_fields(pid)
    return not (fields and fields[0] == "Z")  # a zombie: exited, waiting for its parent to reap it


def still_running(pid: int, started: str | None) -> bool:
    """Process `pid` runs and is the one that started at `started` (start_time), not a later
    process given the same pid once the first ended (pids wrap: 32768 on many machines).
    `started` None: whichever process has the pid."""
    return pid_alive(pid) and (started is None or start_time(pid) == started)


def start_time(pid: int) -> str | None:
    """The process's start time (/proc/PID/stat, field 22), which tells it from a later process
    with the same pid; None where there is no /proc."""
    fields = _stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat from its third field (the state) on: after the command name, which may
    hold spaces and parentheses of its own."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].decode("ascii", "replace").split()
    except OSError:
        return None


@contextlib.contextmanager
def inherited_variable(name: str, value: str) -> Iterator[None]:
    """`name` set to `value` in this process's environment while it starts a process (a JVM:
    pyspark hands it os.environ), then as it was: kstool's own later work, and the processes it
    starts later, see no change."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous
