"""kstool on a real Spark standalone cluster of two one-core workers that cannot see the driver's
files nor each other's (#21, #38): a run's tasks land on both; a worker killed while a batch's
tasks run loses and repeats nothing but the retried tasks' output when the checkpoint is
shared; state lost with the workers is reported in one line when it is not."""

from __future__ import annotations

import json
import os
import shutil
import signal
import struct
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import KSTOOL, cli, cli_subprocess
from tests.engine.test_killed_runs import _batches, _in_flight
from tests.helpers import (
    T0,
    as_long,
    create_topic,
    end_offsets,
    latest_per_key,
    produce_batched,
    produce_keyed,
    produce_values,
    read_all,
    wait_until,
)
from tests.isolation import read_committed
from tests.oracles import word_counts
from tests.topologies.test_join import STREAM_TABLE_OUTPUT, TABLE_STREAM, TABLE_UPDATES, _output
from tests.topologies.test_windowed_aggregate import TWO_RUNS, TWO_RUNS_OUTPUT, TWO_RUNS_WINDOW, _windowed

BEFORE = ["the cat sat", "on the mat"]
AFTER = ["the dog sat", "THE END"]


def _run_args(cluster, topology: str, app: str, *args: str) -> list[str]:
    return ["run", topology, *args, "--app-id", app, "--quiet", "--master", cluster.url]


def _once(cluster, topology: str, app: str, *args: str):
    return cli_subprocess(*_run_args(cluster, topology, app, *args), "--once", timeout=600)


def _counts(kafka, topic: str) -> dict[str, int]:
    return {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, topic)).items()}


# the first batch waits until both workers' executors have registered (at most 30 s),
# instead of starting on the first one; the executors log at Spark's default level (kstool
# quiets them) to show where tasks ran
BOTH_WORKERS = ("--conf", "spark.cores.max=2", "--conf", "spark.scheduler.minRegisteredResourcesRatio=1",
                "--conf", "spark.executor.extraJavaOptions=-Dkstool.test=cluster")


def _counted(kafka, topic: str, lines: list[str], seconds: float = 300) -> bool:
    """Whether the output's latest counts reach the lines' word counts within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if _counts(kafka, topic) == dict(word_counts(lines)):
                return True
        except KeyError:  # the app has not created its output topic yet
            pass
        time.sleep(2)
    return False


def test_a_running_apps_tasks_land_on_both_workers_and_it_survives_one_dying(kafka, spark_cluster, topic_name,
                                                                            tmp_path):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 2)
    shared = tmp_path / "ckpt"
    args = _run_args(spark_cluster, "wordcount", app, "--input", source, "--output", source + "-out",
                     "--checkpoint-location", str(shared), "--trigger", "1s", *BOTH_WORKERS)
    run = subprocess.Popen([*KSTOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        produce_values(kafka, source, [line.encode() for line in BEFORE])
        assert _counted(kafka, source + "-out", BEFORE)
        for worker in (0, 1):  # each worker's executor ran tasks of the run
            assert "Running task" in spark_cluster.executor_log(worker), worker
        driver_log = (Path(os.environ["KSTOOL_HOME"]) / "apps" / app / "spark.log").read_text()
        assert driver_log.count("Granted executor ID app-") == 2  # and the driver says where
        assert any((shared / "state" / "0").glob("*/1.changelog"))  # written by the workers, seen here

        spark_cluster.kill_worker(0)
        produce_values(kafka, source, [line.encode() for line in AFTER])
        assert _counted(kafka, source + "-out", BEFORE + AFTER)  # on worker 1 alone
        spark_cluster.start_workers()
    finally:
        run.send_signal(signal.SIGTERM)  # stops after the current batch
        _, stderr = run.communicate(timeout=120)
    assert run.returncode == 0, stderr


def _running_tasks(cluster) -> list[int]:
    return [cluster.executor_log(worker).count("Running task") for worker in range(len(cluster.workers))]


def _batch_ranges(checkpoint: Path) -> list[dict[int, tuple[int, int]]]:
    """Per committed batch, {partition: (first offset, end offset)} from Spark's offset log."""
    ranges, previous = [], {}
    for batch in sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()):
        (ends,) = json.loads((checkpoint / "offsets" / str(batch)).read_text().splitlines()[-1]).values()
        ranges.append({int(p): (previous.get(int(p), 0), end) for p, end in ends.items()})
        previous = {int(p): end for p, end in ends.items()}
    return ranges


def _window_updates(records, ranges, size_ms: int) -> list[tuple[str, int, int]]:
    """The oracle of `--window tumbling --emit update` over these batches, nothing late: per
    batch, each window it changed once, at its count after the batch."""
    counts: Counter = Counter()
    updates = []
    for batch in ranges:
        changed = {}
        for m in records:
            first, end = batch.get(m.partition(), (0, 0))
            if first <= m.offset() < end:
                window = (m.key().decode(), m.timestamp()[1] // size_ms * size_ms)
                counts[window] += 1
                changed[window] = counts[window]
        updates += [(key, start, count) for (key, start), count in changed.items()]
    return updates


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_a_worker_killed_while_its_tasks_run_a_windowed_batch_loses_nothing(kafka, spark_cluster, topic_name,
                                                                             tmp_path, guarantee):
    """The batch's tasks are retried on the other worker, which loads the state from the shared
    checkpoint. Every window update of every batch is in the output and in the changelog; at
    least once, the only repeats are the killed batch's; exactly once, the committed output holds
    each update once."""
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 2)
    keys = [f"k{i}" for i in range(200)]
    produce_batched(kafka, source, [(keys[i % 200].encode(), b"v", i % 2, T0 + 5 * i) for i in range(40_000)])
    for partition in (0, 1):  # a single-record batch last: the embedded broker's high watermark
        produce_keyed(kafka, source, [(keys[partition], "v", 200)], partition=partition)
    checkpoint = tmp_path / "ckpt"
    args = _run_args(spark_cluster, "aggregate", app, "--input", source, "--output", source + "-out",
                     "--window", "tumbling:10s", "--grace", "1h", "--checkpoint-location", str(checkpoint),
                     "--max-records-per-batch", "4000", "--processing-guarantee", guarantee, *BOTH_WORKERS)
    run = subprocess.Popen([*KSTOOL, *args, "--once"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _in_flight(checkpoint) is not None and _batches(checkpoint / "commits"),
                   "a batch in flight after a committed one", limit_s=300, poll_s=0.05)
        batch, started = _in_flight(checkpoint), _running_tasks(spark_cluster)
        wait_until(lambda: _running_tasks(spark_cluster) != started, "the batch's tasks", poll_s=0.05)
        busy = next(w for w, n in enumerate(_running_tasks(spark_cluster)) if n > started[w])
        spark_cluster.kill_worker(busy)
        assert batch not in _batches(checkpoint / "commits")  # the kill landed inside the batch
        _, stderr = run.communicate(timeout=600)
    finally:
        run.kill()
        spark_cluster.start_workers()
    assert run.returncode == 0, stderr
    driver_log = (Path(os.environ["KSTOOL_HOME"]) / "apps" / app / "spark.log").read_text()
    assert "Lost executor" in driver_log  # the driver saw the executor go and ran its work again

    records = read_all(kafka, source)
    ranges = _batch_ranges(checkpoint)
    expected = _window_updates(records, ranges, 10_000)
    assert {p: end for p, (_, end) in ranges[-1].items()} == end_offsets(kafka, source)
    in_retried = set(_window_updates(records, ranges[:batch + 1], 10_000)) - set(
        _window_updates(records, ranges[:batch], 10_000))
    for topic, decode in ((source + "-out", _output_update), (app + "-aggregate-changelog", _changelog_update)):
        if guarantee == "exactly_once_v2":
            committed, _ = read_committed(kafka.bootstrap, topic)
            assert sorted(decode(r.key, r.value) for r in committed) == sorted(expected), topic
        else:
            written = Counter(decode(m.key(), m.value()) for m in read_all(kafka, topic))
            assert set(written) == set(expected), topic
            assert {u for u, n in written.items() if n > 1} <= in_retried, topic
    group = json.loads(cli("groups", "describe", app, "-o", "json").stdout)
    assert {p["partition"]: p["committed"] for p in group["partitions"]} == end_offsets(kafka, source)


def _output_update(key: bytes, value: bytes) -> tuple[str, int, int]:  # key ‖ start
    return key[:-8].decode(), struct.unpack(">q", key[-8:])[0], struct.unpack(">q", value)[0]


def _changelog_update(key: bytes, value: bytes) -> tuple[str, int, int]:  # key ‖ start ‖ seqnum
    return key[:-12].decode(), struct.unpack(">q", key[-12:-4])[0], struct.unpack(">q", value)[0]


def test_windows_and_join_tables_come_back_from_their_changelogs(kafka, spark_cluster, topic_name, tmp_path):
    """The two-run scripts of the windowed and join tests; between the runs the worker is
    replaced and both checkpoints are deleted: the runs refuse, `state restore` brings the
    stores back from the changelogs, and the second runs give the hand-computed outputs."""
    windowed, joined = topic_name + "-w", topic_name + "-j"
    create_topic(kafka, windowed, 1)
    create_topic(kafka, joined + "-l", 1)
    create_topic(kafka, joined + "-r", 1)
    window_args = ("--input", windowed, "--output", windowed + "-out", *TWO_RUNS_WINDOW,
                   "--checkpoint-location", str(tmp_path / "w"))
    join_args = ("--left", joined + "-l", "--right", joined + "-r", "--output", joined + "-out", "--kind",
                 "stream-table", "--how", "left", "--joiner", "concat", "--separator", "+",
                 "--checkpoint-location", str(tmp_path / "j"))
    for run_index in (0, 1):
        produce_keyed(kafka, windowed, TWO_RUNS[run_index])
        # the join's inputs split in time: stream records up to 20 s, table updates up to 22 s
        produce_keyed(kafka, joined + "-l", (TABLE_STREAM[:2], TABLE_STREAM[2:])[run_index])
        produce_keyed(kafka, joined + "-r", (TABLE_UPDATES[:2], TABLE_UPDATES[2:])[run_index])
        for topology, app, args in (("aggregate", windowed + "-app", window_args),
                                    ("join", joined + "-app", join_args)):
            result = _once(spark_cluster, topology, app, *args)
            if run_index == 1:  # the checkpoint is gone: refused, then restored
                assert result.exit_code == 1 and f"kstool state restore --app-id {app}" in result.stderr
                assert cli("state", "restore", "--app-id", app, "--yes").exit_code == 0
                result = _once(spark_cluster, topology, app, *args)
            assert result.exit_code == 0, result.stderr
        if run_index == 0:
            spark_cluster.kill_workers()
            spark_cluster.start_workers()
            shutil.rmtree(tmp_path / "w")
            shutil.rmtree(tmp_path / "j")
    assert _windowed(read_all(kafka, windowed + "-out")) == TWO_RUNS_OUTPUT
    assert _output(kafka, joined + "-out") == STREAM_TABLE_OUTPUT["left"]


def test_state_lost_with_a_worker_is_reported_in_one_line(kafka, spark_cluster, topic_name, tmp_path):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 2)
    produce_values(kafka, source, [line.encode() for line in BEFORE])
    wordcount = ("--input", source, "--output", source + "-out")
    first = _once(spark_cluster, "wordcount", app, *wordcount)  # the checkpoint in the app folder: the worker's own copy
    assert first.exit_code == 0, first.stderr

    spark_cluster.kill_workers()
    spark_cluster.start_workers()
    produce_values(kafka, source, [line.encode() for line in AFTER])
    lost = _once(spark_cluster, "wordcount", app, *wordcount)
    assert lost.exit_code == 1
    assert len(lost.stderr.strip().splitlines()) == 1, lost.stderr
    assert "cannot load the app's state" in lost.stderr and "does not exist" in lost.stderr
    assert f"kstool reset --app-id {app} --to-earliest" in lost.stderr
    group = json.loads(cli("groups", "describe", app, "-o", "json").stdout)
    assert sum(p["committed"] for p in group["partitions"]) == len(BEFORE)  # nothing committed ahead

    assert cli("reset", "--app-id", app, "--to-earliest", "--yes").exit_code == 0
    again = _once(spark_cluster, "wordcount", app, *wordcount, "--checkpoint-location", str(tmp_path / "ckpt"))
    assert again.exit_code == 0, again.stderr
    assert _counts(kafka, source + "-out") == dict(word_counts(BEFORE + AFTER))
