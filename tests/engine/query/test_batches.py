"""kstool.engine.query.batches.watch when a stop request meets a trigger that began after the check
that none was running: Spark may then report the interrupted trigger as a failure (seen once in
a full run: test_engine's Ctrl-C test); and when triggers run back to back, so that no moment
without one is ever seen (a backlog: seen in a full run, where a Ctrl-C'd run went on for 180 s,
test_top); and when the stop comes between a batch's commit and its progress report, which
Spark makes in that order (MicroBatchExecution.executeOneBatch: runBatch, then finishTrigger; a
full run's test_top lost a batch's metrics line so). None can be forced on a real query, so a
stand-in plays Spark's part; the checkpoint is a real folder in Spark's layout."""

from __future__ import annotations

import threading

import pytest

from kstool.checkpoint.location import LocalCheckpoint
from kstool.engine.exceptions import QueryFailedError
from kstool.engine.query.batches import progress_since, watch
from kstool.engine.query.options import RunSummary
from kstool.engine.stopping import hosted
from tests.engine.messages import Messages


def _progress(batch_id: int, rows: int, ran: bool = True) -> dict:
    """A progress report as the watch reads it: a batch's (its sink's addBatch timed), or a
    trigger's that ran none, with the id of the batch it would have run."""
    return {"batchId": batch_id, "numInputRows": rows, "observedMetrics": {},
            "durationMs": {"addBatch": 5, "triggerExecution": 9} if ran else {"triggerExecution": 1}}


class _QueryFailingOnStop:
    """A query between triggers whose stop() interrupts one that just began."""

    def __init__(self, failed_before_stop: bool = False):
        self.isActive = not failed_before_stop
        self.failure = "[STREAM_FAILED] Query terminated with exception: null" if failed_before_stop else None
        self.recentProgress: list = []
        self.status = {"isTriggerActive": False}

    @property
    def lastProgress(self):
        return self.recentProgress[-1] if self.recentProgress else None

    def awaitTermination(self, timeout: float) -> bool:
        return not self.isActive

    def stop(self) -> None:
        self.isActive = False
        self.failure = "[STREAM_FAILED] Query terminated with exception: null"

    def exception(self):
        return self.failure


class _QueryWithABacklog(_QueryFailingOnStop):
    """Triggers back to back: whenever asked, one is running; each wait commits the batch in
    flight, reports it and plans the next one at once. It gives up by itself after `patience` waits."""

    def __init__(self, checkpoint_dir, patience: int = 40):
        super().__init__()
        self.dir, self.patience = checkpoint_dir, patience
        self.status = {"isTriggerActive": True}
        self.committed_at_stop: list[str] | None = None

    def awaitTermination(self, timeout: float) -> bool:
        self.patience -= 1
        if self.patience == 0:
            self.isActive = False
        planned = max(int(p.name) for p in (self.dir / "offsets").iterdir())
        (self.dir / "commits" / str(planned)).write_text("v1\n{}\n")
        self.recentProgress.append(_progress(planned, rows=0))
        (self.dir / "offsets" / str(planned + 1)).write_text("v1\n{}\n")
        return not self.isActive

    def stop(self) -> None:
        self.committed_at_stop = sorted((p.name for p in (self.dir / "commits").iterdir()), key=int)
        super().stop()


class _QueryReportingAfterItCommits(_QueryWithABacklog):
    """A backlog whose waits take turns: one commits the batch in flight (after a trigger that
    ran nothing reported that batch's id), the next reports that batch's progress and plans the
    following one."""

    def __init__(self, checkpoint_dir):
        super().__init__(checkpoint_dir)
        self.unreported: int | None = None

    def awaitTermination(self, timeout: float) -> bool:
        planned = max(int(p.name) for p in (self.dir / "offsets").iterdir())
        if self.unreported is None:
            self.recentProgress.append(_progress(planned, rows=0, ran=False))
            (self.dir / "commits" / str(planned)).write_text("v1\n{}\n")
            self.unreported = planned
        else:
            self.recentProgress.append(_progress(self.unreported, rows=20))
            (self.dir / "offsets" / str(planned + 1)).write_text("v1\n{}\n")
            self.unreported = None
        return not self.isActive


def _checkpoint(tmp_path, planned: int, committed: int) -> LocalCheckpoint:
    for folder, last in (("offsets", planned), ("commits", committed)):
        (tmp_path / folder).mkdir()
        for batch in range(last + 1):
            (tmp_path / folder / str(batch)).write_text("v1\n{}\n")
    return LocalCheckpoint(tmp_path.as_uri(), tmp_path)


def _watch_with_stop_requested(query, checkpoint) -> tuple[RunSummary, Messages]:
    summary, messages, stop = RunSummary("app"), Messages(), threading.Event()
    stop.set()
    with hosted(stop):
        watch(query, {}, summary, messages, checkpoint)
    return summary, messages


def test_a_trigger_interrupted_between_batches_is_a_clean_stop(tmp_path):
    summary, messages = _watch_with_stop_requested(_QueryFailingOnStop(), _checkpoint(tmp_path, 4, 4))
    assert summary.stopped_by_signal
    assert messages.lines == ["stopping after the current batch"]


def test_a_batch_interrupted_by_the_stop_is_named_for_the_next_run(tmp_path):
    summary, messages = _watch_with_stop_requested(_QueryFailingOnStop(), _checkpoint(tmp_path, 5, 4))
    assert summary.stopped_by_signal
    assert messages.lines[-1] == "batch 5 was interrupted by the stop: the next run does it again"


def test_a_query_that_failed_before_the_stop_still_fails(tmp_path):
    with pytest.raises(QueryFailedError):
        _watch_with_stop_requested(_QueryFailingOnStop(failed_before_stop=True), _checkpoint(tmp_path, 4, 4))


def test_a_stop_during_a_backlog_comes_after_the_batch_in_flight_commits(tmp_path):
    query = _QueryWithABacklog(tmp_path)
    # the first wait commits batch 5 and plans 6: the watch sees the stop with batch 6 in flight
    summary, messages = _watch_with_stop_requested(query, _checkpoint(tmp_path, 5, 4))
    assert query.committed_at_stop == [str(b) for b in range(7)], "stopped once batch 6 had committed"
    assert summary.stopped_by_signal
    assert messages.lines == ["stopping after the current batch",
                              "batch 7 was interrupted by the stop: the next run does it again"]


def test_a_stop_waits_for_the_committed_batch_s_progress_so_every_committed_batch_is_shown(tmp_path):
    query = _QueryReportingAfterItCommits(tmp_path)
    summary, messages = _watch_with_stop_requested(query, _checkpoint(tmp_path, 5, 4))
    assert query.committed_at_stop is not None, "the watch stopped the query"
    last_committed = int(query.committed_at_stop[-1])
    assert messages.batches == list(range(5, last_committed + 1)), "each batch committed in this run, once"
    assert summary.input_records == 20 * len(messages.batches)


class _Reports:
    """Spark's kept progress reports; the reads of them all counted (the costly call)."""

    def __init__(self, reports: list[dict]):
        self.reports, self.full_reads = reports, 0

    @property
    def lastProgress(self):
        return self.reports[-1] if self.reports else None

    @property
    def recentProgress(self):
        self.full_reads += 1
        return self.reports


def test_the_latest_report_alone_is_read_unless_batches_can_have_run_since_the_last_one_seen():
    kept = _Reports([_progress(b, rows=10) for b in range(100)])  # Spark keeps 100
    assert progress_since(kept, 98) == [kept.reports[-1]] and kept.full_reads == 0
    # a trigger that ran none reports the id of the batch it would have run
    idle = _Reports([_progress(4, rows=10), _progress(5, rows=0, ran=False)])
    assert progress_since(idle, 4) == [idle.reports[-1]] and idle.full_reads == 0
    # a backlog's batches 97 and 98 ended between two looks: every kept report, theirs among them
    assert progress_since(kept, 96) == kept.reports and kept.full_reads == 1
    # the same with the report after them one of a trigger that ran none
    ended = _Reports([*kept.reports[:99], _progress(99, rows=0, ran=False)])
    assert progress_since(ended, 97) == ended.reports and ended.full_reads == 1
    assert progress_since(_Reports([]), -1) == []


def test_a_trigger_that_ran_nothing_is_not_taken_for_the_batch_whose_id_it_reports():
    """After an idle start: the sink has reported batch 1 while Spark's latest report is still
    the idle trigger's, which bears batch 1's id (a continuous run counted 0 of 3 records so)."""
    from kstool.engine.io.sink import BatchReport
    from kstool.engine.query.batches import account

    summary, messages, seen = RunSummary("app"), Messages(), set()
    reports = {1: BatchReport(1, {"out": 3}, 0.1)}
    for report in (_progress(1, rows=0, ran=False), _progress(1, rows=3), _progress(2, rows=0, ran=False)):
        account(report, reports, seen, summary, messages)
    assert messages.batches == [1]
    assert (summary.batches, summary.input_records, summary.written) == (1, 3, {"out": 3})
