"""Transactions that keep timestamp 0 (librdkafka would stamp such a record with the send time, so
kstool writes those transactions with its own client), against the real broker: exactly_once_v2's
sink without Spark (the checkpoint's offset log written as Spark writes it, offsets/<batch id>)
and `replay --transactional`."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from kstool.checkpoint.location import LocalCheckpoint
from kstool.config import build_client_config
from kstool.contract import SinkTarget
from kstool.engine.io.sink import TransactionalSink
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import committed_offsets
from kstool.kafka.partitioner import partition_for
from tests.conftest import cli
from tests.helpers import create_topic, end_offsets, pipe, produce_values, read_all
from tests.isolation import read_committed

# the embedded broker's workarounds and a command group's end-to-end runs: on both brokers
pytestmark = pytest.mark.embedded_tier


def batch(rows: list[tuple[bytes, bytes, int]]) -> pa.Table:
    return pa.table({"key": pa.array([r[0] for r in rows], pa.binary()),
                     "value": pa.array([r[1] for r in rows], pa.binary()),
                     "timestamp": pa.array([r[2] * 1000 for r in rows], pa.timestamp("us"))})


def log_offsets(checkpoint, batch_id: int, source: str, end: int) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch_id)).write_text(
        f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps({source: {"0": end}})}\n', encoding="utf-8")


def test_transactional_sink_keeps_timestamp_zero_and_commits_offsets(kafka, topic_name, tmp_path):
    source, output, app = topic_name, topic_name + "-out", topic_name + "-app"
    create_topic(kafka, source, 1)
    create_topic(kafka, output, 2)
    clients = KafkaClients(build_client_config())
    checkpoint = LocalCheckpoint(tmp_path.as_uri(), tmp_path)
    sink = TransactionalSink(clients, [SinkTarget(output, "value")], app, checkpoint)
    first = [(b"a", b"1", 0), (b"b", b"2", 0), (b"c", b"3", 5), (b"a", b"4", 0)]
    second = [(b"b", b"5", 7), (b"c", b"6", 8)]
    log_offsets(tmp_path, 0, source, 4)
    log_offsets(tmp_path, 1, source, 6)

    assert sink.write_batch(batch(first), 0) == {output: 4}
    assert committed_offsets(clients, app) == {(source, 0): 4}
    assert sink.write_batch(batch(first), 0) == {}  # Spark re-runs it after a crash: nothing written
    assert sink.write_batch(batch(second), 1) == {output: 2}  # librdkafka's producer, re-initialised
    assert committed_offsets(clients, app) == {(source, 0): 6}

    got = sorted((m.key(), m.value(), m.timestamp()[1], m.partition()) for m in read_all(kafka, output))
    assert got == sorted((k, v, ts, partition_for(k, 2)) for k, v, ts in first + second)


def test_transactional_replay_keeps_timestamp_zero(kafka, topic_name):
    source, target = topic_name, topic_name + "-copy"
    create_topic(kafka, source, 1)
    create_topic(kafka, target, 1)
    records = [(f"k{i}", f"v{i}", 0 if i % 3 == 0 else 1000 + i) for i in range(2500)]  # 3 chunks
    pipe(kafka, source, records)
    result = cli("replay", "--from-topic", source, "--to-topic", target, "--transactional", "-o", "json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["records"] == 2500
    copied = [(m.key().decode(), m.value().decode(), m.timestamp()[1]) for m in read_all(kafka, target)]
    assert copied == records
    again = cli("replay", "--from-topic", source, "--to-topic", target, "--transactional", "-o", "json")
    assert again.exit_code == 0 and json.loads(again.stdout)["records"] == 0  # resumed at the end


def test_a_transaction_writes_batches_and_its_marker_ends_the_partition(kafka, topic_name):
    """Records of a transaction go in multi-record batches whatever the broker's profile (the
    embedded one's single-record batches write ~6k records/s): its COMMIT marker, a batch of
    its own, is the partition's last, so even a broker whose high watermark covers only a last
    batch's first record reports the true end."""
    source, target = topic_name, topic_name + "-copy"
    create_topic(kafka, source, 1)
    create_topic(kafka, target, 1)
    produce_values(kafka, source, [b"v%d" % i for i in range(3000)])
    result = cli("replay", "--from-topic", source, "--to-topic", target, "--transactional", "-o", "json")
    assert result.exit_code == 0 and json.loads(result.stdout)["records"] == 3000, result.stderr
    committed, [scan] = read_committed(kafka, target)
    assert [r.value for r in committed] == [b"v%d" % i for i in range(3000)]
    assert scan.data_batches < 300  # batched (3 transactions of 1000)
    assert end_offsets(kafka, target) == {0: 3000 + scan.commits}  # the records and each marker


def test_the_broker_keeps_transaction_markers_for_the_test_side_isolation(kafka, topic_name):
    """What the exactly-once tests stand on: the broker stores COMMIT and ABORT control batches
    (the embedded one does, though it returns aborted records to read_committed readers), and
    tests.isolation applies Kafka's rules to them: committed and plain records are visible,
    aborted ones are not, nor anything from an open transaction's first record on."""
    from confluent_kafka import Producer

    from tests.isolation import read_committed

    create_topic(kafka, topic_name, 1)
    plain = Producer(kafka.producer_conf())
    transactional = Producer({**kafka.producer_conf(), "transactional.id": topic_name})
    transactional.init_transactions()
    plain.produce(topic_name, value=b"plain-1")
    plain.flush(10)
    for outcome, values in (("commit", [b"c1", b"c2"]), ("abort", [b"a1", b"a2", b"a3"]), ("open", [b"o1"])):
        transactional.begin_transaction()
        for value in values:
            transactional.produce(topic_name, value=value)
        transactional.flush(10)
        if outcome == "commit":
            transactional.commit_transaction()
        elif outcome == "abort":
            transactional.abort_transaction()
    plain.produce(topic_name, value=b"plain-2")
    plain.flush(10)
    committed, (scan,) = read_committed(kafka, topic_name)
    # the open transaction holds the last stable offset at o1: plain-2, after it, waits too
    assert [r.value for r in committed] == [b"plain-1", b"c1", b"c2"]
    assert (scan.commits, scan.aborts, scan.aborted_records, scan.open_records) == (1, 1, 3, 1)
