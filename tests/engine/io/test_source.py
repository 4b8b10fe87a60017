"""kstool.engine.io.source's stream reader as Spark uses it: the driver's copy lives in Spark's
source process for the query's life and plans every batch; pickled copies read the ranges on
the executors."""

from __future__ import annotations

import pickle
from datetime import datetime, timezone

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME
from hypothesis import given, settings, strategies as st

from kstool.config import ClientConfig
from kstool.engine.io.range_reader import OffsetRange, read_range
from kstool.engine.io.source import KafkaStreamReader, _cap
from kstool.engine.io.source_options import CLIENT_CONFIG_FILE_OPTION, write_client_config
from tests.cluster import free_ports
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
    planning = datetime.now(timezone.utc)
    ranges = reader.partitions(start, end)
    planned = datetime.now(timezone.utc)
    assert reader._clients().admin() is admin
    assert end == {topic_name: {"0": 15, "1": 15}}

    executor_copy = pickle.loads(pickle.dumps(reader))
    read = [row for rng in ranges for batch in executor_copy.read(rng) for row in batch.to_pylist()]
    assert sorted(row["value"] for row in read) == sorted(b"v%d" % i for i in range(30))
    (batch_time,) = {row["batch_time"] for row in read}  # one for the whole batch: when it was planned
    assert planning <= batch_time <= planned


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


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5_000)), min_size=1, max_size=8), st.integers(1, 6_000))
def test_a_batch_budget_is_split_in_proportion_and_used_whole(partitions, budget):
    start = {("t", p): first for p, (first, _) in enumerate(partitions)}
    end = {("t", p): first + n for p, (first, n) in enumerate(partitions)}
    capped = _cap(start, end, budget)
    taken = {tp: capped[tp] - start[tp] for tp in end}
    available = {tp: end[tp] - start[tp] for tp in end}
    total = sum(available.values())
    assert all(0 <= taken[tp] <= available[tp] for tp in end)
    if total <= budget:
        assert taken == available
        return
    for tp, n in available.items():  # in proportion, within the rounding; a partition with records gets one
        assert taken[tp] in {budget * n // total, budget * n // total + 1} or (n and taken[tp] == 1)
    # the whole budget, unless partitions given their one record at least took more
    lifted = sum(1 for tp, n in available.items() if n and budget * n // total == 0)
    assert budget <= sum(taken.values()) <= budget + lifted


def test_two_budgets_of_records_take_two_batches():
    # the join benchmarks' case: 2 x 1M records over four partitions, 1M a batch
    start = {("l", 0): 0, ("l", 1): 0, ("r", 0): 0, ("r", 1): 0}
    end = {("l", 0): 500_321, ("l", 1): 499_679, ("r", 0): 499_902, ("r", 1): 500_098}
    first = _cap(start, end, 1_000_000)
    assert sum(first.values()) == 1_000_000
    assert _cap(first, end, 1_000_000) == end


def test_a_read_whose_broker_went_away_fails_at_once_saying_so():
    """A broker that stopped refuses connections: the batch fails within seconds (the run's
    outage handling takes over) instead of after the stall limit of a minute."""
    gone = f"127.0.0.1:{free_ports(1)[0]}"
    with pytest.raises(RuntimeError) as failed:
        list(read_range(ClientConfig(gone, "test"), OffsetRange("lines", 1, 75, 100)))
    assert str(failed.value) == f"no records from lines:1 at offset 75: connection refused at {gone}"
