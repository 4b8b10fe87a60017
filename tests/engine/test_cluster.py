"""kstool on a real Spark standalone cluster whose worker cannot see the driver's files (#21):
state survives a worker's death when the checkpoint is shared, and its loss is reported in one
line when it is not."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import KSTOOL, cli, cli_subprocess
from tests.helpers import as_long, create_topic, latest_per_key, produce_keyed, produce_values, read_all
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


def _executor_logs(cluster) -> str:
    return "".join(p.read_text(errors="replace") for p in (cluster.work / "worker").glob("app-*/*/stderr"))


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


def test_a_running_app_survives_its_worker_dying(kafka, spark_cluster, topic_name, tmp_path):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 2)
    shared = tmp_path / "ckpt"
    # the executors log at Spark's default level (kstool quiets them), to show where tasks ran
    args = _run_args(spark_cluster, "wordcount", app, "--input", source, "--output", source + "-out",
                     "--checkpoint-location", str(shared), "--trigger", "1s",
                     "--conf", "spark.executor.extraJavaOptions=-Dkstool.test=cluster")
    run = subprocess.Popen([*KSTOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        produce_values(kafka, source, [line.encode() for line in BEFORE])
        assert _counted(kafka, source + "-out", BEFORE)
        assert "Running task" in _executor_logs(spark_cluster)  # the tasks ran on the worker
        driver_log = (Path(os.environ["KSTOOL_HOME"]) / "apps" / app / "spark.log").read_text()
        assert "Granted executor ID app-" in driver_log and "Executor added" in driver_log  # and the driver says where
        assert any((shared / "state" / "0").glob("*/1.changelog"))  # written by the worker, seen here

        spark_cluster.kill_worker()
        produce_values(kafka, source, [line.encode() for line in AFTER])
        spark_cluster.start_worker()
        assert _counted(kafka, source + "-out", BEFORE + AFTER)
    finally:
        run.send_signal(signal.SIGTERM)  # stops after the current batch
        _, stderr = run.communicate(timeout=120)
    assert run.returncode == 0, stderr


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
            spark_cluster.kill_worker()
            spark_cluster.start_worker()
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

    spark_cluster.kill_worker()
    spark_cluster.start_worker()
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
