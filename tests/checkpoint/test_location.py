"""--checkpoint-location: the Spark checkpoint outside the app's folder, as a URI (#21)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kstool.base.errors import UsageError
from kstool.checkpoint.exceptions import CheckpointLocationError
from kstool.checkpoint.location import LocalCheckpoint, normalize_location
from kstool.checkpoint.logs import committed_batches
from tests.conftest import cli
from tests.helpers import as_long, create_topic, latest_per_key, produce_values, read_all
from tests.oracles import word_counts

PART1 = ["red green red", "blue"]
PART2 = ["green green", "red"]


def test_locations_become_uris(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert normalize_location("ckpt/app") == f"file://{tmp_path}/ckpt/app"
    assert normalize_location("hdfs://nn:8020/ckpt/app/") == "hdfs://nn:8020/ckpt/app"
    for bad in ("hdfs://nn:8020", "file:ckpt", "s3a://bucket"):
        with pytest.raises(UsageError):
            normalize_location(bad)


def test_a_local_location_must_be_a_writable_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(CheckpointLocationError, match="cannot write there"):
        LocalCheckpoint("unused", blocker / "ckpt").check_usable()
    usable = tmp_path / "new" / "ckpt"
    LocalCheckpoint("unused", usable).check_usable()
    assert usable.is_dir() and list(usable.iterdir()) == []


def _run(source: str, app: str, *extra: str):
    return cli("run", "wordcount", "--input", source, "--output", source + "-out", "--app-id", app,
               "--once", "--quiet", *extra)


def test_run_state_describe_and_reset_use_the_checkpoint_location(kafka, spark, topic_name, tmp_path):
    source, app = topic_name, topic_name + "-app"
    shared = tmp_path / "shared" / app
    create_topic(kafka, source, 2)
    produce_values(kafka, source, [line.encode() for line in PART1])
    first = _run(source, app, "--checkpoint-location", str(shared))
    assert first.exit_code == 0, first.stderr

    assert committed_batches(LocalCheckpoint("", shared)) == [0]
    described = json.loads(cli("apps", "describe", app, "--offline", "-o", "json").stdout)
    assert described["checkpoint_location"] == shared.as_uri()
    assert described["last_committed_batch"] == 0
    app_folder = Path(described["state_dir"])
    assert not (app_folder / "checkpoint").exists()

    # later runs find the location in the manifest; another location is refused
    produce_values(kafka, source, [line.encode() for line in PART2])
    moved = _run(source, app, "--checkpoint-location", str(tmp_path / "elsewhere"))
    assert moved.exit_code == 2 and "keeps its checkpoint at" in moved.stderr
    assert _run(source, app).exit_code == 0
    assert committed_batches(LocalCheckpoint("", shared)) == [0, 1]
    total = word_counts(PART1 + PART2)
    output = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, source + "-out")).items()}
    assert output == dict(total)
    state = json.loads(cli("state", "all", "--app-id", app, "-o", "json").stdout)
    assert {row["key"]: row["value"] for row in state} == dict(total)

    plan = json.loads(cli("reset", "--app-id", app, "--to-earliest", "--dry-run", "-o", "json").stdout)
    assert plan["local_state"]["checkpoint_location"] == shared.as_uri()
    reset = cli("reset", "--app-id", app, "--to-earliest", "--yes")
    assert reset.exit_code == 0, reset.stderr
    assert not shared.exists() and not (app_folder / "app.json").exists()


def _one_batch_app(kafka, topic_name: str, shared: Path) -> str:
    """A wordcount app with one committed batch, its checkpoint at `shared`; returns its id."""
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"one two"])
    assert _run(source, app, "--checkpoint-location", str(shared)).exit_code == 0
    return app


def test_a_location_that_holds_other_files_is_not_deleted_by_reset(kafka, spark, topic_name, tmp_path):
    shared = tmp_path / "ckpt"
    app = _one_batch_app(kafka, topic_name, shared)
    (shared / "notes.txt").write_text("someone else's file")
    refused = cli("reset", "--app-id", app, "--to-earliest", "--yes")
    assert refused.exit_code != 0 and "refusing to delete" in refused.stderr
    assert (shared / "notes.txt").exists() and (shared / "commits").is_dir()


def test_hadoop_file_systems_read_the_same_checkpoint(kafka, spark, topic_name, tmp_path):
    from kstool.checkpoint.files import HadoopCheckpoint
    from kstool.engine.spark.session import start_local_spark

    shared = tmp_path / "ckpt"
    _one_batch_app(kafka, topic_name, shared)
    local, hadoop = LocalCheckpoint("", shared), HadoopCheckpoint(shared.as_uri(), start_local_spark)
    assert committed_batches(hadoop) == committed_batches(local) == [0]
    assert hadoop.read_text("offsets/0") == local.read_text("offsets/0")
    assert hadoop.exists("metadata") and not hadoop.exists("no-such-file")

    with pytest.raises(CheckpointLocationError, match="No FileSystem for scheme"):
        HadoopCheckpoint("nosuchfs://host/ckpt", start_local_spark).exists()


@pytest.mark.parametrize("location", ["nosuchfs://host/ckpt", "/proc/kstool-ckpt"])
def test_an_unusable_location_changes_nothing(kafka, spark, topic_name, location):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 1)
    produce_values(kafka, source, [b"one"])
    result = _run(source, app, "--checkpoint-location", location)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"kstool: error: checkpoint location {normalize_location(location)}")
    assert len(result.stderr.strip().splitlines()) == 1
    assert cli("apps", "describe", app, "--offline").exit_code == 1  # no manifest
    listed = json.loads(cli("topics", "list", "-o", "json").stdout)
    assert source + "-out" not in {t["topic"] if isinstance(t, dict) else t for t in listed}


def test_missing_state_files_stop_the_run_before_it_reads_anything(kafka, spark, topic_name):
    source, app = topic_name, topic_name + "-app"
    create_topic(kafka, source, 2)
    produce_values(kafka, source, [line.encode() for line in PART1])
    assert _run(source, app).exit_code == 0
    described = json.loads(cli("apps", "describe", app, "--offline", "-o", "json").stdout)
    state = Path(described["state_dir"]) / "checkpoint" / "state" / "0"
    (state / "1" / "1.changelog").unlink()  # as when executors kept the state on a lost disk
    output_before = len(read_all(kafka, source + "-out"))
    produce_values(kafka, source, [line.encode() for line in PART2])

    stopped = _run(source, app)
    assert stopped.exit_code == 1
    assert len(stopped.stderr.strip().splitlines()) == 1
    assert "lacks state/0/1/1.changelog" in stopped.stderr
    assert f"kstool reset --app-id {app} --to-earliest" in stopped.stderr
    assert len(read_all(kafka, source + "-out")) == output_before
    group = json.loads(cli("groups", "describe", app, "-o", "json").stdout)
    assert sum(p["committed"] for p in group["partitions"]) == len(PART1)

    assert cli("reset", "--app-id", app, "--to-earliest", "--yes").exit_code == 0
    assert _run(source, app).exit_code == 0
    output = {k.decode(): as_long(v) for k, v in latest_per_key(read_all(kafka, source + "-out")).items()}
    assert output == dict(word_counts(PART1 + PART2))


def test_a_checkpoint_spark_cannot_open_is_named_in_one_line(kafka, spark, topic_name, tmp_path):
    shared = tmp_path / "ckpt"
    app = _one_batch_app(kafka, topic_name, shared)
    (shared / "metadata").write_text("not a checkpoint's metadata")
    broken = _run(topic_name, app)
    assert broken.exit_code == 1
    assert len(broken.stderr.strip().splitlines()) == 1, broken.stderr
    assert "Py4JJavaError" not in broken.stderr and "streaming query failed:" in broken.stderr
