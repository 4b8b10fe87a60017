"""kstool.engine.runtime's restarts when a query's source process dies (seen in a full test run:
a segfault of Spark's streaming source process). tests/engine/daemon/test_engine.py kills the process of
a real run; here a stand-in query run plays deaths that recur, which a real one cannot be made
to do on cue. The checkpoint is a real folder in Spark's layout."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kstool.checkpoint.location import LocalCheckpoint
from kstool.engine import runtime
from kstool.engine.exceptions import SourceProcessDiedError
from kstool.engine.query.options import RunSummary
from kstool.engine.query.placement import HERE
from tests.engine.messages import Messages


def _run_dying(monkeypatch, tmp_path, batches_between_deaths: list[int]) -> tuple[Messages, int]:
    """Run a query that commits the given number of batches, then its source process dies,
    once per entry, and then ends; returns the run's messages and the query starts."""
    commits = tmp_path / "commits"
    commits.mkdir()
    starts = 0

    def run_query(*_args) -> None:
        nonlocal starts
        starts += 1
        if starts > len(batches_between_deaths):
            return
        for _ in range(batches_between_deaths[starts - 1]):
            (commits / str(len(list(commits.iterdir())))).write_text("v1\n{}\n")
        raise SourceProcessDiedError("the query's Python source process died")

    monkeypatch.setattr(runtime, "run_query", run_query)
    monkeypatch.setattr(runtime, "make_sink", lambda *_args: None)
    plan = SimpleNamespace(options=SimpleNamespace(broker_timeout_s=1.0),
                           checkpoint=LocalCheckpoint(tmp_path.as_uri(), tmp_path),
                           paths=SimpleNamespace(spark_log=tmp_path / "spark.log"), placement=HERE)
    messages = Messages()
    runtime._run_through_outages(None, None, plan, RunSummary("app"), messages)  # type: ignore[arg-type]
    return messages, starts


def test_a_source_process_that_dies_between_committed_batches_is_started_again_each_time(monkeypatch, tmp_path):
    messages, starts = _run_dying(monkeypatch, tmp_path, [0, 2, 1])
    assert starts == 4
    assert [line.split("last committed: ")[1] for line in messages.lines] == ["none)", "batch 1)", "batch 2)"]
    assert all(line.startswith("the query's Python source process died; starting the query again from its "
                               "checkpoint") for line in messages.lines)


def test_a_death_that_recurs_before_a_batch_commits_fails_the_run(monkeypatch, tmp_path):
    with pytest.raises(SourceProcessDiedError):
        _run_dying(monkeypatch, tmp_path, [3, 0])
