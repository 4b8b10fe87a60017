"""kstool.engine.source's stream reader as Spark uses it: the driver's copy lives in Spark's
source process for the query's life and plans every batch; pickled copies read the ranges on
the executors."""

from __future__ import annotations

import pickle
from datetime import datetime, timezone

from confluent_kafka import TIMESTAMP_CREATE_TIME

from kstool.config import ClientConfig
from kstool.engine.source import CLIENT_CONFIG_FILE_OPTION, KafkaStreamReader, OffsetRange, read_range, write_client_config
from tests.helpers import create_topic, produce_batched, produce_records


def test_the_planning_reader_keeps_its_clients_and_its_executor_copies_read_without_them(kafka, topic_name,
                                                                                        tmp_path):
    # a new admin client per call crashed the source process now and then (see _clients)
    create_topic(kafka, topic_name, 2)
    produce_batched(kafka, topic_name, [(b"k%d" % i, b"v%d" % i, i % 2) for i in range(30)])
    config = write_client_config(ClientConfig(kafka.bootstrap, "test"), tmp_path / "client.json")
    reader = KafkaStreamReader({CLIENT_CONFIG_FILE_OPTION: str(config), "topics": topic_name,
                                "group": topic_name + "-app"})
    start = reader.initialOffset()
    admin = reader._clients().admin()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    ranges = reader.partitions(start, end)
    assert reader._clients().admin() is admin
    assert end == {topic_name: {"0": 15, "1": 15}}

    executor_copy = pickle.loads(pickle.dumps(reader))
    read = [row for rng in ranges for batch in executor_copy.read(rng) for row in batch.to_pylist()]
    assert sorted(row["value"] for row in read) == sorted(b"v%d" % i for i in range(30))


def test_a_range_reads_as_its_records_were_written(kafka, topic_name):
    """Each record's key, value, offset, timestamp and headers, from an independent producer
    (records batched as clients batch them)."""
    create_topic(kafka, topic_name, 1)
    written = [{"key": b"k%d" % i if i % 3 else None, "value": b"v%d" % i if i % 4 else None, "partition": 0,
                "timestamp": 1_700_000_000_000 + 7 * i, "headers": [("h", b"%d" % i)] if i % 5 == 0 else None}
               for i in range(40)]
    produce_records(kafka, topic_name, written)
    config = ClientConfig(kafka.bootstrap, "test")
    rows = [row for batch in read_range(config, OffsetRange(topic_name, 0, 5, 40)) for row in batch.to_pylist()]
    assert [row["offset"] for row in rows] == list(range(5, 40))
    for row, record in zip(rows, written[5:]):
        assert (row["key"], row["value"]) == (record["key"], record["value"])
        assert row["timestamp"] == datetime.fromtimestamp(record["timestamp"] / 1000, timezone.utc)
        assert row["timestamp_type"] == TIMESTAMP_CREATE_TIME  # librdkafka's numbering
        assert row["headers"] == ([{"key": "h", "value": record["headers"][0][1]}] if record["headers"] else None)
