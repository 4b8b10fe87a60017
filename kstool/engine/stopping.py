"""How a run is asked to stop after its current batch: SIGINT/SIGTERM when it runs in a
process of its own; a request from its client when the warm engine hosts it
(kstool.engine.daemon), where signals belong to the engine."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

_hosted: ContextVar[threading.Event | None] = ContextVar("kstool_stop_request", default=None)
_last_signal: int = signal.SIGINT  # what asked this process's run to stop: its exit code says which


def note_stop_signal(signum: int) -> None:
    global _last_signal
    _last_signal = signum


def last_stop_signal() -> int:
    """The signal that last asked a run of this process to stop (SIGINT: 130, SIGTERM: 143)."""
    return _last_signal


@contextmanager
def hosted(stop: threading.Event) -> Iterator[None]:
    """Runs inside this block stop when `stop` is set."""
    token = _hosted.set(stop)
    try:
        yield
    finally:
        _hosted.reset(token)


@contextmanager
def stop_request() -> Iterator[threading.Event]:
    """The event a run watches: its host's, or one that SIGINT/SIGTERM set."""
    event = _hosted.get()
    if event is not None:
        yield event
        return
    event = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        note_stop_signal(signum)
        event.set()
    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield event
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
