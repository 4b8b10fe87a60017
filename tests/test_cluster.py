"""kstool on a real Spark standalone cluster whose worker cannot see the driver's files (#21):
state survives a worker's death when the checkpoint is shared, and its loss is reported in one
line when it is not."""

from __future__ import annotations

import json

from tests.conftest import cli, cli_subprocess
from tests.helpers import as_long, create_topic, latest_per_key, produce_values, read_all
from tests.oracles import word_counts

BEFORE = ["the cat sat", "on the mat"]
AFTER = ["the dog sat", "THE END"]


def _wordcount(cluster, source: str, app: str, *extra: str):
    return cli_subprocess("run", "wordcount", "--input", source, "--output", source + "-out", "--app-id", app,
                          "--once", "--quiet", "--master", cluster.url, *extra, timeout=600)


def _counts(kafka, topic: str) -> dict[str, int]:
    return {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, topic)).items()}


def _executor_logs(cluster) -> str:
    return "".join(p.read_text(errors="replace") for p in (cluster.work / "worker").glob("app-*/*/stderr"))


def test_shared_checkpoint_survives_a_worker_restart(kafka, spark_cluster, topic_name, tmp_path):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 2)
    produce_values(kafka, source, [line.encode() for line in BEFORE])
    shared = tmp_path / "ckpt"
    # the executors log at Spark's default level (kstool's quiets them), to show where tasks ran
    first = _wordcount(spark_cluster, source, app, "--checkpoint-location", str(shared),
                       "--conf", "spark.executor.extraJavaOptions=-Dkstool.test=cluster")
    assert first.exit_code == 0, first.stderr
    assert "Running task" in _executor_logs(spark_cluster)  # the tasks ran on the worker
    assert any((shared / "state" / "0").glob("*/1.changelog"))  # written by the worker, seen here

    spark_cluster.kill_worker()
    spark_cluster.start_worker()
    produce_values(kafka, source, [line.encode() for line in AFTER])
    second = _wordcount(spark_cluster, source, app)  # the manifest keeps the location
    assert second.exit_code == 0, second.stderr
    assert _counts(kafka, source + "-out") == dict(word_counts(BEFORE + AFTER))


def test_state_lost_with_a_worker_is_reported_in_one_line(kafka, spark_cluster, topic_name, tmp_path):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 2)
    produce_values(kafka, source, [line.encode() for line in BEFORE])
    first = _wordcount(spark_cluster, source, app)  # the checkpoint in the app folder: the worker's own copy
    assert first.exit_code == 0, first.stderr

    spark_cluster.kill_worker()
    spark_cluster.start_worker()
    produce_values(kafka, source, [line.encode() for line in AFTER])
    lost = _wordcount(spark_cluster, source, app)
    assert lost.exit_code == 1
    assert len(lost.stderr.strip().splitlines()) == 1, lost.stderr
    assert "cannot load the app's state" in lost.stderr and "does not exist" in lost.stderr
    assert f"kstool reset --app-id {app} --to-earliest" in lost.stderr
    group = json.loads(cli("groups", "describe", app, "-o", "json").stdout)
    assert sum(p["committed"] for p in group["partitions"]) == len(BEFORE)  # nothing committed ahead

    assert cli("reset", "--app-id", app, "--to-earliest", "--yes").exit_code == 0
    again = _wordcount(spark_cluster, source, app, "--checkpoint-location", str(tmp_path / "ckpt"))
    assert again.exit_code == 0, again.stderr
    assert _counts(kafka, source + "-out") == dict(word_counts(BEFORE + AFTER))
