"""Watching a running query batch by batch: each batch's progress as Spark reports it, with
the sink's report of what it wrote, counted into the run's summary and shown (kstool.engine.progress)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from kstool.checkpoint.logs import last_committed_batch, uncommitted_batch
from kstool.engine.failures import query_failure
from kstool.engine.io import errors_policy
from kstool.engine.progress import BatchStatus, Progress
from kstool.engine.stopping import stop_request

if TYPE_CHECKING:  # the sink's module loads pyarrow, which reset, for one, does not need
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.streaming.listener import StreamingQueryProgress

    from kstool.checkpoint.location import CheckpointFiles
    from kstool.engine.io.sink import BatchReport
    from kstool.engine.query.options import RunSummary

INPUT_METRICS = "kstool_input"  # the input records a batch read, where partial rows stand for several


def watch(query: StreamingQuery, reports: dict[int, BatchReport], summary: RunSummary, progress: Progress,
          checkpoint: CheckpointFiles) -> None:
    """Until the query ends: caught up (--once), stopped after the current batch on
    SIGINT/SIGTERM, or failed (raised in one line)."""
    seen: set[int] = set()
    current: int | None = None  # the batch in flight when the stop was asked for
    reported = -1  # the last batch whose progress Spark has reported
    with stop_request() as stop:
        while query.isActive:
            try:
                query.awaitTermination(0.25)  # type: ignore[arg-type]  # seconds; pyspark's stub says int
            except Exception:
                break  # failed: query.exception() below says why
            for batch_progress in progress_since(query, reported):
                if ran_a_batch(batch_progress):
                    reported = max(reported, batch_progress["batchId"])
                account(batch_progress, reports, seen, summary, progress)
            if not stop.is_set():
                continue
            current = _batch_in_flight(checkpoint) if current is None else current
            # With a backlog, triggers run back to back: a moment with none active may never be
            # seen, so the stop also comes once the current batch has committed and its progress
            # is reported (Spark reports it after the commit; a stop between the two loses it)
            committed = last_committed_batch(checkpoint)
            if not query.status["isTriggerActive"] or (committed is not None and
                                                       current <= committed <= reported):
                summary.stopped_by_signal = True
                progress.message("stopping after the current batch")
                query.stop()
        for batch_progress in query.recentProgress:
            account(batch_progress, reports, seen, summary, progress)
    failure = query.exception()
    if failure is not None and summary.stopped_by_signal:
        # A trigger can begin between the check that none runs and the stop; Spark then reports
        # the interruption as a failure unless it came from a call it knows (a Python source's
        # or sink's is not). Nothing is lost: a batch left half done is not committed.
        _say_if_interrupted(checkpoint, progress)
    elif failure is not None:
        raise query_failure(failure, summary.app_id)


def progress_since(query: StreamingQuery, last_ran: int) -> list[StreamingQueryProgress]:
    """The progress reports to look at when batch `last_ran` is the last one seen to run: the
    latest alone when no batch can have run since, else all that Spark keeps (a backlog's
    batches can end between two looks). recentProgress makes each kept report JSON at every
    call: with Spark's 100 kept, ~34 ms (16 ms of the driver's CPU) against 0.3 ms for the last."""
    latest = query.lastProgress
    if latest is None:
        return []
    return [latest] if latest["batchId"] <= last_ran + 1 else query.recentProgress


def ran_a_batch(batch_progress: StreamingQueryProgress) -> bool:
    """Whether a progress report is a batch's. A trigger that found nothing to do reports too, with
    the id of the batch it would have run (noDataProgressEventInterval): that batch has not run."""
    return "addBatch" in (batch_progress["durationMs"] or {})


def _batch_in_flight(checkpoint: CheckpointFiles) -> int:
    """The batch planned and not committed yet, else the one a running trigger would plan."""
    planned = uncommitted_batch(checkpoint)
    if planned is not None:
        return planned
    committed = last_committed_batch(checkpoint)
    return 0 if committed is None else committed + 1


def _say_if_interrupted(checkpoint: CheckpointFiles, progress: Progress) -> None:
    interrupted = uncommitted_batch(checkpoint)
    if interrupted is not None:
        progress.message(f"batch {interrupted} was interrupted by the stop: the next run does it again")


def account(batch_progress: StreamingQueryProgress, reports: dict[int, BatchReport], seen: set[int], summary: RunSummary,
            progress: Progress, gated: bool = False) -> None:
    """One batch's progress, once (seen: the batches accounted). A trigger that ran no batch
    reports the id of the batch it would have run: were it taken for that batch once the sink
    has reported it, the batch's own report would come as seen, its records never counted.
    gated: a parked query's, whose trigger waited in latestOffset for a run to open its gate:
    idle time, not the batch's."""
    if not ran_a_batch(batch_progress):
        return
    batch_id = batch_progress["batchId"]
    rows = batch_progress["numInputRows"]
    records = _observed(batch_progress, INPUT_METRICS, "records") if rows else 0
    rows = records or rows  # the source's rows, or the records its partial rows stand for
    durations = batch_progress.get("durationMs") or {}
    took_ms = durations.get("triggerExecution", 0) - (durations.get("latestOffset", 0) if gated else 0)
    rate = rows / (took_ms / 1000) if took_ms > 0 else 0.0
    report = reports.get(batch_id)
    if batch_id in seen or (rows == 0 and report is None):
        return
    seen.add(batch_id)
    if report is not None and report.restored:
        if rows:  # Spark's own aggregations: the store entries were the batch's rows
            progress.message(f"restored {rows} store entries")
        return
    bad = _observed(batch_progress, errors_policy.METRICS_NAME, "bad_records")
    summary.batches += 1
    summary.input_records += rows
    summary.bad_records += bad
    summary.late_records += report.late if report else 0
    summary.last_batch = batch_id
    summary.lag = _lag(batch_progress)
    written = report.written if report else {}
    for topic, n in written.items():
        summary.written[topic] = summary.written.get(topic, 0) + n
    progress.batch(BatchStatus(batch_id, rows, rate, took_ms, written, report.seconds if report else 0.0,
                               summary.lag, bad, report.late if report else 0))


def _observed(batch_progress: StreamingQueryProgress, name: str, field_name: str) -> int:
    row = (batch_progress["observedMetrics"] or {}).get(name)  # a Row, when the metric exists
    try:
        return int(row[field_name] or 0) if row is not None else 0
    except (KeyError, ValueError):
        return 0


def _lag(batch_progress: StreamingQueryProgress) -> int | None:
    try:
        source = batch_progress["sources"][0]
        end = json.loads(source["endOffset"]) if isinstance(source["endOffset"], str) else source["endOffset"]
        latest = source.get("latestOffset")
        latest = json.loads(latest) if isinstance(latest, str) else latest
        if not latest:
            return None
        return int(sum(max(o - end.get(t, {}).get(p, 0), 0) for t, parts in latest.items() for p, o in parts.items()))
    except (KeyError, IndexError, TypeError, ValueError):
        return None
