"""When an xdist worker dies, say how: its Python stacks if a fatal signal or SIGTERM ended it
(faulthandler, into a file the run's main process prints; a segfault inside librdkafka left
none), and how much memory the machine had left (the kernel's OOM killer sends SIGKILL). A
worker's own stderr never reaches the terminal, so without this a CI log says only "node down:
Not properly terminated"."""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import IO

import pytest

CRASH_DIR = "KSTOOL_TEST_CRASH_DIR"
_dump_key = pytest.StashKey[IO[str]]()


def pytest_configure(config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # the main process: its workers inherit the folder's name
        os.environ[CRASH_DIR] = tempfile.mkdtemp(prefix="kstool-test-crashes-")
        return
    if CRASH_DIR in os.environ:
        dump = open(Path(os.environ[CRASH_DIR]) / worker, "w")
        config.stash[_dump_key] = dump  # open for the worker's whole life
        faulthandler.enable(file=dump, all_threads=True)
        faulthandler.register(signal.SIGTERM, file=dump, all_threads=True, chain=True)


def pytest_testnodedown(node, error) -> None:
    if not error:
        return
    worker = node.gateway.id
    dump = Path(os.environ[CRASH_DIR]) / worker
    stacks = dump.read_text(errors="replace").strip() if dump.exists() else ""
    sys.stderr.write(f"\n[{worker}] {stacks or 'died leaving no stacks: SIGKILL, os._exit, or a crash faulthandler could not report'}\n"
                     f"[{worker}] memory then: {_memory_available()}\n")


def pytest_unconfigure(config) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ and CRASH_DIR in os.environ:
        shutil.rmtree(os.environ.pop(CRASH_DIR), ignore_errors=True)


def _memory_available() -> str:
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    except OSError:
        return "unknown (no /proc/meminfo)"
    return f"{info['MemAvailable'].strip()} available of {info['MemTotal'].strip()}"

