"""A parked query's gate (kstool.engine.query.parking): the file a run writes, naming the offsets
the query may read up to ({}: nothing, at once), and its doorbell, a FIFO beside it that wakes a
trigger waiting for a shut gate. Both sides of it here: the run's (open, close, shut) and the
source's (wait)."""

from __future__ import annotations

import json
import os
import select
import time
from pathlib import Path

from kstool.base.home import write_private_text
from kstool.engine.io.source_options import Offsets, flatten_offsets


def open_gate(gate: Path, target: Offsets) -> None:
    """Let the query read up to `target` (the source's nested offsets)."""
    write_private_text(gate, json.dumps(target))
    _ring(gate)


def close_gate(gate: Path) -> None:
    """Nothing to read, and no trigger waits: the next one finds nothing to do at once."""
    write_private_text(gate, "{}")
    _ring(gate)


def shut_gate(gate: Path) -> None:
    """Parked: each trigger waits for the next run to open the gate."""
    gate.unlink(missing_ok=True)


def wait_for_gate(gate: str, wait_s: float) -> dict[tuple[str, int], int] | None:
    """What the gate lets the query read; while it is shut, wait up to wait_s for a run to open
    it (None: still shut). Waiting on the doorbell costs nothing until it rings; polling the
    file every 100 ms, as a trigger every 100 ms did, cost ~1% of a core per parked query."""
    found = read_gate(gate)
    if found is not None:
        return found
    bell = _bell(gate)
    try:
        os.mkfifo(bell, 0o600)
    except FileExistsError:
        pass
    fd = os.open(bell, os.O_RDWR | os.O_NONBLOCK)  # a writer of its own: no hang-up when a ringer leaves
    try:
        deadline = time.monotonic() + wait_s
        while (found := read_gate(gate)) is None and (left := deadline - time.monotonic()) > 0:
            if select.select([fd], [], [], left)[0]:
                os.read(fd, 4096)
        return found
    finally:
        os.close(fd)


def read_gate(gate: str) -> dict[tuple[str, int], int] | None:
    try:
        with open(gate, encoding="utf-8") as f:
            nested = json.load(f)
    except FileNotFoundError:
        return None
    return flatten_offsets(nested)


def _bell(gate: str | Path) -> str:
    return f"{gate}.bell"


def _ring(gate: Path) -> None:
    """Wake a trigger waiting for the gate, if one is (else nobody has the doorbell open)."""
    try:
        fd = os.open(_bell(gate), os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # no doorbell yet, or nobody waiting at it
        return
    try:
        os.write(fd, b"\0")
    except BlockingIOError:
        pass  # rung often enough already
    finally:
        os.close(fd)
