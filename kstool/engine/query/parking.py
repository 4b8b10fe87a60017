"""Queries the warm engine keeps between the --once runs of an app ("parked").

Every query start costs Spark 1-3 s before its first batch: a Python process for the source,
the state stores opened, and for transformWithState a Python process that checks the state
schema (once per query start). A parked query has done all that: the next --once run of the
same app only opens its gate (kstool.engine.io.gate) to the inputs' ends at
the time of the call, and waits for a trigger that finds nothing left to do, which is where an
availableNow query would have ended.

A parked query holds no lock and does nothing while its gate is shut. Whatever takes an app's
lock for another use (a run of its own, a continuous or exactly-once run, reset, restore) first
has the engine stop it (the lock's hook, kstool.engine.daemon.app_use), so a checkpoint is never
used by two queries.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kstool.checkpoint.logs import last_committed_batch
from kstool.engine.exceptions import QueryFailedError
from kstool.engine.failures import query_failure
from kstool.engine.io import gate as gates
from kstool.engine.query.batches import account, progress_since, ran_a_batch
from kstool.engine.stopping import stop_request

if TYPE_CHECKING:  # the lock's hook loads this module wherever an app is taken: it stays light
    from pyspark.sql.streaming.listener import StreamingQueryProgress

    from kstool.application.model import AppPaths
    from kstool.checkpoint.location import CheckpointFiles
    from kstool.engine.io.sink import BatchReport
    from kstool.engine.progress import Progress
    from kstool.engine.query.options import RunSummary
    from kstool.kafka.client import KafkaClients

_log = logging.getLogger("kstool.engine")
# a parked query's trigger interval: how soon after a batch the next one starts (with its gate
# shut, a trigger waits for it to open: kstool.engine.io.source.GATE_WAIT_S)
PARK_TRIGGER_MS = 100


@dataclass
class ParkedQuery:
    key: str  # what the query was built from (parking_key)
    query: Any  # pyspark's StreamingQuery
    gate: Path
    last_batch: int | None = None  # the checkpoint's last committed batch when the query was parked
    reports: dict[int, BatchReport] = field(default_factory=dict)  # the sink's report per batch id

    def open_gate(self, target: dict[str, dict[str, int]]) -> int:
        """Ask for everything up to `target`; returns the time (epoch ms) after which a trigger
        sees it."""
        gates.open_gate(self.gate, target)
        return int(time.time() * 1000) + 1

    def shut_gate(self) -> None:
        gates.shut_gate(self.gate)

    def close_gate(self) -> None:
        gates.close_gate(self.gate)

    def stop(self) -> None:
        self.close_gate()  # a trigger waiting at the gate lets go of the query at once
        try:
            self.query.stop()
        except Exception:
            pass  # it failed or stopped already: nothing is running
        self.shut_gate()


class ParkedQueries:
    """The engine's parked queries, one per app folder, at most `limit`: parking one more stops
    the one used least recently (each holds its state stores and a Python source process)."""

    def __init__(self, limit: int) -> None:
        self._lock = threading.Lock()
        self._by_app: dict[Path, ParkedQuery] = {}  # least recently used first
        self.limit = limit

    def take(self, app: Path, key: str, last_batch: int | None) -> ParkedQuery | None:
        """The app's parked query when it can serve a run built from `key` on a checkpoint whose
        last committed batch is `last_batch` (else it is stopped)."""
        with self._lock:
            parked = self._by_app.pop(app, None)
        if parked is None:
            return None
        if parked.key == key and parked.last_batch == last_batch and parked.query.isActive:
            return parked
        parked.stop()
        return None

    def park(self, app: Path, parked: ParkedQuery) -> None:
        with self._lock:
            self._by_app[app] = parked
            evicted = list(self._by_app.items())[:max(0, len(self._by_app) - self.limit)]
            for folder, _ in evicted:
                del self._by_app[folder]
        for folder, query in evicted:
            query.stop()
            _log.info("%s: parked query stopped (the engine keeps %d)", folder, self.limit)

    def release(self, app: Path) -> bool:
        with self._lock:
            parked = self._by_app.pop(app, None)
        if parked is not None:
            parked.stop()
        return parked is not None

    def apps(self) -> list[str]:
        with self._lock:
            return sorted(str(app) for app in self._by_app)

    def stop_all(self) -> int:
        """Stop every parked query; how many there were."""
        with self._lock:
            parked, self._by_app = list(self._by_app.values()), {}
        for each in parked:
            each.stop()
        return len(parked)


def parking_key(*parts: Any) -> str:
    """A digest of what a query is built from (settings may hold secrets: only the digest is kept)."""
    text = json.dumps([asdict(p) if hasattr(p, "__dataclass_fields__") else p for p in parts],
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def open_gate_to_ends(parked: ParkedQuery, clients: KafkaClients, input_topics: list[str]) -> int:
    """Open the parked query's gate to the inputs' ends now, as availableNow would."""
    from kstool.engine.io.source_options import input_ends, nest_offsets

    return parked.open_gate(nest_offsets(input_ends(clients, input_topics)))


def drive(parked: ParkedQuery, parked_queries: ParkedQueries, opened_ms: int, paths: AppPaths,
          checkpoint: CheckpointFiles, summary: RunSummary, progress: Progress) -> None:
    """Wait until a trigger that began after the gate opened finds nothing left to do (the
    batches up to the gate's offsets are committed, and any batch they called for after them),
    or a stop request's current batch ends; then shut the gate and park the query again."""
    query, seen = parked.query, set[int]()
    last_ran = parked.last_batch if parked.last_batch is not None else -1
    done = False
    try:
        with stop_request() as stop:
            while query.isActive and not done:
                try:
                    query.awaitTermination(0.05)
                except Exception:
                    pass  # failed (query.exception() below says why): its last batches are still accounted
                if stop.is_set() and not summary.stopped_by_signal:
                    parked.close_gate()  # the next trigger finds nothing to do
                    summary.stopped_by_signal = True
                    progress.message("stopping after the current batch")
                for batch_progress in progress_since(query, last_ran):
                    if ran_a_batch(batch_progress):
                        # this run's: no batch runs while the gate is shut, but a trigger begun
                        # just before it opened may still have found it open
                        if parked.last_batch is None or batch_progress["batchId"] > parked.last_batch:
                            account(batch_progress, parked.reports, seen, summary, progress, gated=True)
                        last_ran = max(last_ran, batch_progress["batchId"])
                    elif _started_ms(batch_progress) >= opened_ms:
                        done = True
    finally:
        parked.shut_gate()
    failure = query.exception()
    if failure is not None or not query.isActive:
        parked.stop()
        raise query_failure(failure, summary.app_id) if failure is not None else \
            QueryFailedError("the query stopped") from None
    parked.last_batch = last_committed_batch(checkpoint)
    parked.reports.clear()  # every batch asked for is accounted
    parked_queries.park(paths.root, parked)


def _started_ms(batch_progress: StreamingQueryProgress) -> int:
    """When a trigger began (its progress' timestamp, ISO-8601 with milliseconds, UTC)."""
    stamp = datetime.strptime(batch_progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(stamp.replace(tzinfo=timezone.utc).timestamp() * 1000)
