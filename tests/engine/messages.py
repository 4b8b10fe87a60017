"""A run's messages and batches as a test collects them (the watch's listener)."""

from __future__ import annotations


class Messages:
    def __init__(self):
        self.lines: list[str] = []
        self.batches: list[int] = []

    def message(self, text: str) -> None:
        self.lines.append(text)

    def batch(self, status) -> None:
        self.batches.append(status.batch_id)

    def close(self) -> None:
        pass
