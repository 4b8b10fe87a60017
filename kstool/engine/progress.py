"""What a run reports while it works: the engine calls a Progress with messages and one
BatchStatus per micro-batch; how they are shown is the caller's (kstool.output.RunReporter)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


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
