"""kstool apps top: snapshots of running apps (rates from committed offsets over time, lag in
records and in time) for scripts and cron (`--once`, `--fail-on-lag`), the live dashboard in a
real terminal (tmux), and the per-batch metrics file a run keeps for it."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

from confluent_kafka import Consumer, Producer, TopicPartition

from kstool.application import metrics
from kstool.application.model import AppPaths
from tests.conftest import cli_subprocess
from tests.helpers import KSTOOL, create_topic, produce_batched, wait_until


def _snapshot(state_dir: Path, *extra: str) -> tuple[int, dict, str]:
    result = cli_subprocess("apps", "top", "--state-dir", state_dir, "--once", "--interval", "2s",
                            "-o", "json", *extra)
    rows = {row["name"]: row for row in json.loads(result.stdout)} if result.stdout else {}
    return result.exit_code, rows, result.stderr


def _snapshot_showing(state_dir: Path, shows: Callable[[dict], bool], what: str, *extra: str) -> dict:
    """The first snapshot that shows what is asked: on a busy machine a 1s-trigger batch can take
    longer than a snapshot's interval, and then that interval has no batch to measure."""
    seen: dict = {}

    def shown() -> bool:
        nonlocal seen
        code, seen, stderr = _snapshot(state_dir, *extra)
        assert code == 0, stderr
        return shows(seen)

    wait_until(shown, lambda: f"{what}; the last snapshot: {seen}", 120, poll_s=0)
    return seen


class _SteadyProducer(threading.Thread):
    """An independent producer writing one-word lines faster than the app may process them."""

    def __init__(self, kafka, topic: str, per_second: int):
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20})
        self.topic, self.per_second, self.stopped = topic, per_second, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.1):
            for _ in range(self.per_second // 10):
                self.producer.produce(self.topic, value=b"steady")
            self.producer.poll(0)
        self.producer.flush(30)


def test_top_once_shows_rates_and_a_growing_time_lag_then_the_dashboard_in_a_terminal(kafka, jvm_archive,
                                                                                      topic_name, tmp_path):
    create_topic(kafka, topic_name, 1)
    produce_batched(kafka, topic_name, [(None, b"first words") for _ in range(40)])
    app, state_dir = f"top-{uuid.uuid4().hex[:6]}", tmp_path / "apps"  # short: the dashboard's row fits
    # at most 20 records per batch, a batch per second at best: 100 records/s is more than it takes
    run = subprocess.Popen([*KSTOOL, "run", "wordcount", "--input", topic_name, "--output", app + "-out",
                            "--app-id", app, "--state-dir", str(state_dir), "--trigger", "1s",
                            "--max-records-per-batch", "20", "--no-engine"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    steady = _SteadyProducer(kafka, topic_name, per_second=100)
    try:
        wait_until(lambda: (state_dir / app / "metrics.jsonl").exists(), "the app's first batch")
        steady.start()
        # a plain consumer group beside it, as a Kafka Streams app's group would be: 5 records behind
        group = topic_name + "-plain"
        consumer = Consumer({**kafka.consumer_conf(), "group.id": group})
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 35)], asynchronous=False)
        consumer.close()

        first = _snapshot_showing(state_dir, lambda rows: rows[app]["input_rate"] > 0 and rows[app]["output_rate"] > 0,
                                  "a snapshot whose interval saw a batch", "--group", group)
        row = first[app]
        assert row["kind"] == "app" and row["state"] == "running" and row["running_pid"] == run.pid
        assert row["lag"] > 0 and row["time_lag_ms"] > 0
        assert row["last_batch"] >= 0 and row["last_batch_ms"] > 0 and row["late_records"] == 0
        plain = first[group]
        assert plain["kind"] == "group" and plain["lag"] >= 5 and plain["input_rate"] == 0.0
        assert plain["output_rate"] is None and plain["time_lag_ms"] > 0

        time.sleep(3)
        second = _snapshot_showing(state_dir, lambda rows: rows[app]["last_batch"] > row["last_batch"],
                                   "a later batch")
        assert second[app]["time_lag_ms"] > row["time_lag_ms"], "produced faster than processed: the wait grows"
        assert group not in second

        code, _, stderr = _snapshot(state_dir, "--fail-on-lag", "1h")
        assert code == 0, stderr
        code, rows, stderr = _snapshot(state_dir, "--fail-on-lag", "100ms")
        assert code == 1 and app in rows, "the snapshot is printed, then the check fails"
        assert stderr.startswith(f"kstool: error: time lag over 0.1s: {app} ") and stderr.count("\n") == 1

        _dashboard_in_tmux(state_dir, app, "1s", "q")
        _dashboard_in_tmux(state_dir, app, "1", "C-c")  # seconds, as top -d takes them; Ctrl-C quits too
    finally:
        steady.stopped.set()
        run.send_signal(signal.SIGINT)
        _, run_stderr = run.communicate(timeout=180)
    assert run.returncode == 0, run_stderr
    batches = metrics.read_metrics(AppPaths(state_dir, app))
    ids = [m["batch_id"] for m in batches]
    assert ids == sorted(set(ids)) and len(ids) > 3
    reader = Consumer({**kafka.consumer_conf(), "group.id": app})
    processed = reader.committed([TopicPartition(topic_name, 0)], timeout=10)[0].offset
    reader.close()
    assert sum(m["input_records"] for m in batches) == processed, "every processed record in one batch line"


def _dashboard_in_tmux(state_dir: Path, app: str, interval: str, quit_key: str) -> None:
    socket = f"kstool-test-{uuid.uuid4().hex[:8]}"  # a tmux server of its own, with this test's env
    tmux = ["tmux", "-L", socket]
    # the terminal's own size, not one a test runner exported
    command = shlex.join(["env", "-u", "COLUMNS", "-u", "LINES",
                          *KSTOOL, "apps", "top", "--state-dir", str(state_dir), "--interval", interval])
    subprocess.run([*tmux, "new-session", "-d", "-x", "200", "-y", "20",
                    f"{command}; echo EXIT=$?; sleep 60"], check=True)
    try:
        def screen() -> str:
            return subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True, text=True).stdout

        wait_until(lambda: "LAG TREND" in screen() and app in screen(), lambda: f"the dashboard's table:\n{screen()}", 60)
        wait_until(lambda: any(c in screen() for c in "▂▃▄▅▆▇█"), lambda: f"a lag trend of some samples:\n{screen()}", 60)
        shown = screen()
        line = next(line for line in shown.splitlines() if line.strip().startswith(app))
        assert "running" in line and "TIME LAG" in shown and "Traceback" not in shown
        subprocess.run([*tmux, "send-keys", quit_key], check=True)
        wait_until(lambda: "EXIT=0" in screen(), f"{quit_key} to quit the dashboard", 30)
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)


def test_metrics_file_is_bounded_and_keeps_the_totals(tmp_path, monkeypatch):
    monkeypatch.setattr(metrics, "MAX_LINES", 10)
    paths = AppPaths(tmp_path, "app")
    log = metrics.MetricsLog(paths)
    for batch in range(11):
        log.append(1_000 + batch, batch, 5, {"out": 5}, 100, 50.0, 0, late=1, bad=batch % 2)
    kept = metrics.read_metrics(paths)
    assert [m["batch_id"] for m in kept] == [6, 7, 8, 9, 10]
    assert (kept[-1]["late_total"], kept[-1]["bad_total"]) == (11, 5)
    with paths.metrics.open("a") as f:
        f.write('{"time_ms": 1, "batch')  # a line cut short by a crash
    again = metrics.MetricsLog(paths)  # the next run goes on counting
    again.append(2_000, 11, 1, {}, 10, 1.0, None, late=0, bad=1)
    kept = metrics.read_metrics(paths)
    assert [m["batch_id"] for m in kept] == [6, 7, 8, 9, 10, 11]
    assert (kept[-1]["late_total"], kept[-1]["bad_total"]) == (11, 6)


def test_a_batch_run_again_after_a_rollback_counts_its_late_records_once(tmp_path):
    """A reprocess rolls the app back and runs its batches again under the same ids: apps top's
    LATE and BAD counted them a second time (#84)."""
    paths = AppPaths(tmp_path, "app")
    log = metrics.MetricsLog(paths)
    for batch in range(5):
        log.append(1_000 + batch, batch, 5, {"out": 5}, 100, 50.0, 0, late=1, bad=2)
    rerun = metrics.MetricsLog(paths)  # the run after a rollback to batch 2
    for batch in (3, 4, 5):
        rerun.append(2_000 + batch, batch, 5, {"out": 5}, 100, 50.0, 0, late=1, bad=0)
    last = metrics.read_metrics(paths)[-1]
    assert (last["late_total"], last["bad_total"]) == (6, 6)  # batches 0-2 as first run, 3-5 as run again
    from_origin = metrics.MetricsLog(paths)  # a rollback to before batch 0
    from_origin.append(3_000, 0, 5, {"out": 5}, 100, 50.0, 0, late=0, bad=1)
    last = metrics.read_metrics(paths)[-1]
    assert (last["late_total"], last["bad_total"]) == (0, 1)


def test_an_app_whose_input_is_gone_shows_its_error_and_the_others_their_figures(kafka, topic_name, tmp_path):
    """#41: one stale app (its input topic deleted) must not break the view, nor --fail-on-lag."""
    from kstool.application.model import Manifest, save_manifest

    state_dir = tmp_path / "apps"
    create_topic(kafka, topic_name, 1)
    for app, source in (("healthy", topic_name), ("stale", topic_name + "-deleted")):
        paths = AppPaths(state_dir, app)
        save_manifest(paths, Manifest(app, "wordcount", {}, [source], [app + "-out"]))
        for log, last_line in (("offsets", json.dumps({source: {"0": 3}})), ("commits", "{}")):
            (paths.default_checkpoint / log).mkdir(parents=True)  # batch 0 ended at offset 3, as Spark logs it
            (paths.default_checkpoint / log / "0").write_text(f'v1\n{{"batchTimestampMs": 0, "conf": {{}}}}\n{last_line}\n')
    produce_batched(kafka, topic_name, [(None, b"x") for _ in range(5)])
    code, rows, stderr = _snapshot(state_dir, "--fail-on-lag", "1h")
    assert code == 0, stderr
    assert rows["stale"]["state"] == "error" and f"topic '{topic_name}-deleted' does not exist" in rows["stale"]["error"]
    assert rows["healthy"]["state"] == "stopped" and rows["healthy"]["error"] is None
    assert rows["healthy"]["lag"] == 2  # 5 records, 3 processed
    table = cli_subprocess("apps", "top", "--state-dir", state_dir, "--once", "--interval", "1s")
    assert table.exit_code == 0 and f"stale: topic '{topic_name}-deleted' does not exist" in table.stdout
