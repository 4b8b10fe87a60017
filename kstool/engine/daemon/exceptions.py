from __future__ import annotations

from kstool.base.errors import EXIT_BUSY, BusyError, KstoolError


class EngineError(KstoolError):
    """The engine could not be started, reached or used."""


class EngineNotRunningError(EngineError):
    pass


class EngineRunningError(BusyError):
    """A second engine for the same kstool home."""


class EngineLostError(EngineError):
    """The engine went away while a client waited for it."""


class EngineStoppedRunError(EngineError):
    """The engine's own stop ended a run it hosted: not done, and to be run again (a supervisor
    restarts on a non-zero exit; EX_TEMPFAIL says a retry goes on)."""

    exit_code = EXIT_BUSY


class RemoteError(KstoolError):
    """A failure inside the engine that cannot travel as itself: its message and exit code."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code

    def __reduce__(self) -> tuple[type[RemoteError], tuple[str, int]]:
        return RemoteError, (str(self), self.exit_code)
