"""Runs a topology as a Spark Structured Streaming query: the app runtime.

One run = take the app's lock, prepare without Spark (kstool.engine.prepare), run the query
(kstool.engine.query), then commit the processed offsets to the app's group, also when the
query failed, so the group shows what did complete.
"""

from __future__ import annotations

import time

from kstool.application.checkpoint import committed_offsets
from kstool.application.model import AppLock, AppPaths
from kstool.contract import Topology
from kstool.engine.options import RunOptions, RunSummary
from kstool.engine.prepare import prepare
from kstool.engine.progress import Progress, Silent
from kstool.engine.query import make_sink, run_query
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import commit_offsets


def run_app(clients: KafkaClients, topology: Topology, options: RunOptions,
            progress: Progress | None = None) -> RunSummary:
    started = time.monotonic()
    progress = progress or Silent()
    paths = AppPaths(options.state_dir, options.app_id)
    with AppLock(paths):
        partitions = prepare(clients, topology, options.app_id, paths, options.on_error, options.late_topic)
        summary = RunSummary(options.app_id)
        try:
            sink = make_sink(clients, topology, options, paths)
            run_query(clients, topology, options, paths, partitions, sink, summary, progress)
        except BaseException:
            progress.close()
            try:  # keep the group's offsets true to what did complete, then report the failure
                _commit_group_offsets(clients, options.app_id, paths, summary)
            except Exception:
                pass
            raise
        progress.close()
        _commit_group_offsets(clients, options.app_id, paths, summary)
        summary.total_seconds = round(time.monotonic() - started, 3)
        return summary


def _commit_group_offsets(clients: KafkaClients, group: str, paths: AppPaths, summary: RunSummary) -> None:
    """Spark calls the source's commit() for a batch only when the next one starts; commit
    the last completed batch's offsets now so the group shows where the app stands."""
    batch, offsets = committed_offsets(paths.checkpoint)
    if batch is None:
        return
    commit_offsets(clients, group, offsets)
    summary.committed = {f"{t}:{p}": o for (t, p), o in sorted(offsets.items())}
