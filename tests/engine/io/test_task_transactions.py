"""exactly_once_v2 written by the tasks, a transaction each (kstool.engine.io.task_transactions),
and by the driver for the topologies that re-key (kstool.engine.io.sink.TransactionalSink): the
committed output equals the oracle, the group ends at the input's end, and a batch that Spark
runs again after its transactions committed (its commit log entry lost, as when the driver
dies between the two) writes nothing."""

from __future__ import annotations

import json
import os
import random
import struct
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from kstool.kafka.groups import committed_offsets
from tests.conftest import cli
from tests.faults import batches
from tests.helpers import T0, create_topic, produce_batched
from tests.isolation import read_committed
from tests.oracles import word_counts

RECORDS = 2_000
WINDOW_MS = 10_000


def _input(kafka, topic: str) -> list[tuple[bytes, bytes, int, int]]:
    """Keyed records over 2 partitions (key k<i> in partition i % 2) and 60 s of event time,
    from a default-batching producer."""
    rng = random.Random(7)
    records = []
    for _ in range(RECORDS):
        i = rng.randrange(20)
        words = " ".join(rng.choice("abcdef") for _ in range(3))
        records.append((f"k{i}".encode(), words.encode(), i % 2, T0 + rng.randrange(60_000)))
    create_topic(kafka, topic, 2)
    produce_batched(kafka, topic, records)
    return records


def _windowed_counts(committed) -> dict[tuple[bytes, int], int]:
    """The last committed count per (key, window start) of TimeWindowedSerializer keys."""
    return {(r.key[:-8], struct.unpack(">q", r.key[-8:])[0]): struct.unpack(">q", r.value)[0] for r in committed}


def _rerun_last_batch(app: str) -> None:
    """Forget that Spark committed the last batch: the next run runs it again."""
    commits = Path(os.environ["KSTOOL_HOME"]) / "apps" / app / "checkpoint" / "commits"
    last = max(batches(commits))
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)


@pytest.mark.parametrize("topology", ["windowed", "wordcount"])
def test_exactly_once_output_commits_once_with_its_offsets_and_a_batch_run_again_writes_nothing(
        kafka, spark, topic_name, topology):
    source, sink, app = topic_name, topic_name + "-out", topic_name + "-app"
    records = _input(kafka, source)
    args = (["aggregate", "--window", "tumbling:10s", "--grace", "1h"] if topology == "windowed" else ["wordcount"])
    run = ["run", *args, "--input", source, "--output", sink, "--app-id", app, "--once",
           "--processing-guarantee", "exactly_once_v2", "--max-records-per-batch", "600"]
    first = cli(*run)
    assert first.exit_code == 0, first.stderr
    committed, scans = read_committed(kafka, sink)
    if topology == "windowed":
        expected = Counter((key, (ts - ts % WINDOW_MS)) for key, _, _, ts in records)
        assert _windowed_counts(committed) == dict(expected)
        # a task's transactions hold its own changelog partition: one producer per task, not the driver's
        changelog = read_committed(kafka, f"{app}-aggregate-changelog")[1]
        assert changelog[0].producers and changelog[1].producers
        assert not changelog[0].producers & changelog[1].producers
    else:
        counts = {r.key.decode(): struct.unpack(">q", r.value)[0] for r in committed}
        assert counts == dict(word_counts(value.decode() for _, value, _, _ in records))
    assert sum(scan.open_records for scan in scans) == 0
    group = json.loads(cli("groups", "describe", app, "-o", "json").stdout)
    # each partition's end: its record count (the embedded broker's high watermark is wrong for batches)
    assert {(p["topic"], p["partition"]): p["committed"] for p in group["partitions"]} == {
        (source, p): n for p, n in Counter(partition for _, _, partition, _ in records).items()}

    _rerun_last_batch(app)
    again = cli(*run)
    assert again.exit_code == 0, again.stderr
    assert read_committed(kafka, sink)[0] == committed


def test_a_tasks_attempt_fences_the_attempt_that_died_and_commits_once(kafka, topic_name):
    """Spark runs a task again after its executor died inside the task's transaction: the new
    attempt's writer fences the dead one's and aborts its open transaction, then commits the
    task's records with its offsets. A read_committed reader sees the new attempt's records
    once; the dead attempt's are aborted and it cannot commit any more."""
    from confluent_kafka import KafkaException

    from kstool.config import build_client_config
    from kstool.contract import SinkTarget
    from kstool.engine.io.task_transactions import commit_task, task_transactional_id
    from kstool.kafka.client import KafkaClients
    from kstool.kafka.transactions import TransactionalWriter

    source, output, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 1)
    create_topic(kafka, output, 1)
    clients = KafkaClients(build_client_config(kafka.bootstrap))
    counts = {output: 1}
    values = [b"%d" % i for i in range(10)]
    dead = TransactionalWriter(clients, task_transactional_id(app, 0), app, counts).producer()
    dead.begin_transaction()
    for value in values:
        dead.produce(output, key=b"k", value=value, timestamp=T0)
    assert dead.flush(10) == 0  # in the log, its transaction open

    rows = pa.table({"key": pa.array([b"k"] * 10, pa.binary()), "value": pa.array(values, pa.binary()),
                     "timestamp": pa.array([T0 * 1000] * 10, pa.timestamp("us")),
                     "task": pa.array([0] * 10, pa.int32())})
    assert commit_task(clients, app, 0, counts, rows, [SinkTarget(output, "value")],
                       {(source, 0): 10}) == {output: 10}
    with pytest.raises(KafkaException):
        dead.commit_transaction(10)
    committed, [scan] = read_committed(kafka, output)
    assert [r.value for r in committed] == values
    assert (scan.aborted_records, scan.open_records) == (10, 0)
    assert committed_offsets(clients, app) == {(source, 0): 10}
