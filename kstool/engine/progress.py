"""What a run reports while it works: the engine calls a Progress with messages and one
BatchStatus per micro-batch; how they are shown is the caller's (kstool.output.RunReporter)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from kstool.application.metrics import MetricsLog
from kstool.base.timeutil import now_ms


@dataclass
class BatchStatus:
    batch_id: int
    input_records: int
    records_per_second: float
    duration_ms: int
    written: dict[str, int] = field(default_factory=dict)
    sink_seconds: float = 0.0
    lag: int | None = None
    errors: int = 0
    late: int = 0


class Progress(Protocol):
    def message(self, text: str) -> None: ...

    def batch(self, status: BatchStatus) -> None: ...

    def close(self) -> None: ...


class Silent:
    """A Progress that shows nothing (library use, --quiet)."""

    def message(self, text: str) -> None:
        pass

    def batch(self, status: BatchStatus) -> None:
        pass

    def close(self) -> None:
        pass


class Recorded:
    """A Progress that also keeps each batch's metrics in the app's folder, for `apps top`."""

    def __init__(self, inner: Progress, log: MetricsLog):
        self.inner, self.log = inner, log

    def message(self, text: str) -> None:
        self.inner.message(text)

    def batch(self, status: BatchStatus) -> None:
        try:
            self.log.append(now_ms(), status.batch_id, status.input_records, status.written, status.duration_ms,
                            status.records_per_second, status.lag, status.late, status.errors)
        except OSError:
            pass  # metrics never fail a run; a full disk is reported by what the run itself writes
        self.inner.batch(status)

    def close(self) -> None:
        self.inner.close()
