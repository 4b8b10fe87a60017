"""A run served by a parked query (kstool.engine.query.parking.drive) accounts every batch its gate
let through, also one whose trigger began a moment before the gate opened and then found it open
(seen in a full run: test_engine's Ctrl-C test, whose second run reported 381 of its 390
records). Such timing cannot be forced on a real query, so a stand-in plays Spark's part; the
checkpoint is a real folder in Spark's layout."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

from kstool.checkpoint.location import LocalCheckpoint
from kstool.engine.query.options import RunSummary
from kstool.engine.query.parking import ParkedQueries, ParkedQuery, drive
from tests.engine.messages import Messages

OPENED_MS = 1_800_000_000_000  # when the run opened the gate


def _progress(batch_id: int, started_ms: int, rows: int | None) -> dict:
    """A trigger's progress as pyspark gives it: with data (rows) or without (None)."""
    stamp = datetime.fromtimestamp(started_ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    durations = {"triggerExecution": 40, **({"addBatch": 30} if rows is not None else {})}
    return {"batchId": batch_id, "numInputRows": rows or 0, "processedRowsPerSecond": 100.0,
            "observedMetrics": {}, "durationMs": durations, "timestamp": stamp, "sources": []}


class _ParkedStandIn:
    def __init__(self, progress: list[dict]):
        self.isActive, self.recentProgress = True, progress

    @property
    def lastProgress(self):
        return self.recentProgress[-1] if self.recentProgress else None

    def awaitTermination(self, timeout: float) -> bool:
        return False

    def exception(self):
        return None


def test_a_batch_whose_trigger_began_just_before_the_gate_opened_is_the_runs(tmp_path):
    (tmp_path / "commits").mkdir()
    for batch in range(6):
        (tmp_path / "commits" / str(batch)).write_text("v1\n{}\n")
    query = _ParkedStandIn([
        _progress(3, OPENED_MS - 60_000, 10),  # the last run's batch
        _progress(4, OPENED_MS - 60_000 + 100, None),  # the last run's trigger that found nothing to do
        _progress(4, OPENED_MS - 20, 9),  # began before the gate opened, and found it open
        _progress(5, OPENED_MS + 80, 10),
        _progress(6, OPENED_MS + 200, None),  # nothing left: the run is done
    ])
    parked = ParkedQuery("key", query, tmp_path / "gate", last_batch=3)
    summary, messages = RunSummary("app"), Messages()
    drive(parked, ParkedQueries(2), OPENED_MS, SimpleNamespace(root=tmp_path),  # type: ignore[arg-type]
          LocalCheckpoint(tmp_path.as_uri(), tmp_path), summary, messages)
    assert (summary.batches, summary.input_records, summary.last_batch) == (2, 19, 5)
    assert parked.last_batch == 5, "parked again at the checkpoint's last committed batch"
