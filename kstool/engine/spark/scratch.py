"""Spark's scratch files in a folder per JVM under $KSTOOL_HOME/tmp instead of /tmp.

A JVM removes its scratch files (block manager and user-file folders, the RocksDB and LZ4
native libraries it unpacks, Python workers' fault logs) only when it exits normally. A killed
run (cron's timeout, the OOM killer, kill -9) leaves them in /tmp, ~18 MB a stateful run (the
RocksDB library alone is 15 MB), found nowhere near the app. Here a folder stays locked (flock)
while its kstool process or its JVM, which inherits the lock, is alive; each new JVM's start
removes the folders no one holds.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from pathlib import Path

from kstool.base.home import kstool_home, private_dir

LOCK_NAME = ".lock"
# a folder made by a run killed before it could lock it: old enough to be no starting run's
UNLOCKED_GRACE_S = 600.0


class ScratchDir:
    """A locked scratch folder for one JVM; `lock_fd` must be passed on to that JVM."""

    def __init__(self, root: Path | None = None):
        self.root = private_dir(root or kstool_home() / "tmp")
        sweep(self.root)
        self.path = Path(tempfile.mkdtemp(prefix="jvm-", dir=self.root))
        self.lock_fd = os.open(self.path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.lock_fd, fcntl.LOCK_EX)

    def java_option(self) -> str:
        return f"-Djava.io.tmpdir={self.path}"


def sweep(root: Path) -> list[Path]:
    """Remove the scratch folders under `root` that no process holds; returns them."""
    removed = []
    for folder in root.glob("jvm-*"):
        try:
            fd = os.open(folder / LOCK_NAME, os.O_RDWR)
        except FileNotFoundError:
            if _age_s(folder) > UNLOCKED_GRACE_S:
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
            continue
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held: its run or its JVM is alive
            continue
        finally:
            os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0
