"""An app's per-batch metrics, kept in its folder (metrics.jsonl, one BatchMetrics per line) so
that `kstool apps top` reads them without Spark. Bounded: past MAX_LINES the oldest half goes.

Appends are single writes of whole lines, and trimming replaces the file atomically, so a
reader sees whole lines (a line cut short by a crash is skipped)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kstool.application.model import AppPaths
from kstool.base.documents import BatchMetrics
from kstool.base.home import private_dir, write_private_text

MAX_LINES = 1000


def read_metrics(paths: AppPaths) -> list[BatchMetrics]:
    try:
        text = paths.metrics.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines: list[BatchMetrics] = []
    for line in text.splitlines():
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return lines


class MetricsLog:
    """The writer: one per run (the run holds the app's lock, so it is the only one)."""

    def __init__(self, paths: AppPaths):
        self.path: Path = paths.metrics
        self._end_cut_line()
        kept = read_metrics(paths)
        self.lines = len(kept)
        last = kept[-1] if kept else None
        self.late_total = last["late_total"] if last else 0
        self.bad_total = last["bad_total"] if last else 0
        # the kept batches that the totals count, by id: a batch run again after a rollback
        # (reprocess) replaces them from its id on, so its late and bad records count once
        self._counted: dict[int, tuple[int, int]] = {}
        for line in kept:
            self._drop_from(line["batch_id"])
            self._counted[line["batch_id"]] = (line["late"], line["bad"])

    def _drop_from(self, batch_id: int) -> tuple[int, int]:
        undone = [b for b in self._counted if b >= batch_id]
        late = sum(self._counted[b][0] for b in undone)
        bad = sum(self._counted.pop(b)[1] for b in undone)
        return late, bad

    def append(self, time_ms: int, batch_id: int, input_records: int, written: dict[str, int],
               duration_ms: int, records_per_second: float, lag: int | None, late: int, bad: int) -> None:
        undone_late, undone_bad = self._drop_from(batch_id)
        self._counted[batch_id] = (late, bad)
        self.late_total += late - undone_late
        self.bad_total += bad - undone_bad
        line: BatchMetrics = {
            "time_ms": time_ms, "batch_id": batch_id, "input_records": input_records, "written": written,
            "duration_ms": duration_ms, "records_per_second": round(records_per_second, 1), "lag": lag,
            "late": late, "bad": bad, "late_total": self.late_total, "bad_total": self.bad_total}
        private_dir(self.path.parent)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())
        finally:
            os.close(fd)
        self.lines += 1
        if self.lines > MAX_LINES:
            self._trim()

    def _end_cut_line(self) -> None:
        """A crash may leave a line cut short: end it, so the next line stays whole."""
        try:
            with self.path.open("rb+") as f:
                if f.seek(0, os.SEEK_END) == 0:
                    return
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")
        except FileNotFoundError:
            pass

    def _trim(self) -> None:
        kept = self.path.read_text(encoding="utf-8").splitlines()[-(MAX_LINES // 2):]
        write_private_text(self.path, "".join(line + "\n" for line in kept))
        self.lines = len(kept)
