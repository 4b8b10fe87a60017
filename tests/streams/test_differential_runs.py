"""The integration tier of the differential tests: `kstool run` (Spark, the Apache Kafka broker,
micro-batches of a few records or all of them) against Kafka Streams itself (tests/twin.py), on
random inputs written by an independent producer, records without a key or a value among them;
few cases (KSTOOL_DIFFERENTIAL_RUNS, default 3 per family: each is a run). The comparison
contract per topology is the fast tier's for larger micro-batches (docs/differences-from-kafka-streams.md, "Differences from
Kafka Streams"): windows' last values, and kstool's updates among Kafka Streams'; final results
exactly; table outputs' last result per key; a stream join in one batch exactly as Kafka Streams
fed in the order kstool processes the batch."""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter

from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from tests.conftest import cli
from tests.helpers import T0, create_topic, produce_keyed, read_all
from tests.streams import differential_joins as joins, differential_table_aggregates as table_aggregates, differential_windows as windows

RUNS = settings(max_examples=int(os.environ.get("KSTOOL_DIFFERENTIAL_RUNS", "3")),
                phases=[Phase.explicit, Phase.generate],  # no shrinking: each case is a run
                suppress_health_check=[HealthCheck.function_scoped_fixture])
ONE_BATCH, SMALL_BATCHES = 100_000, 3  # --max-records-per-batch
TEXT_AGGREGATIONS = ("count", "concat", "latest")  # what a value "n,g" re-keyed by split:,:1 can give


def _run(kafka, *args: str, batch: int) -> str:
    """`kstool run ... --once` on a fresh app; its output topic's name."""
    name = f"diff-{uuid.uuid4().hex[:8]}"
    result = cli("run", *args, "--output", name + "-out", "--app-id", name, "--once",
                 "--max-records-per-batch", str(batch))
    assert result.exit_code == 0, result.stderr
    return name + "-out"


def _topic(kafka, partitions: list[list[tuple]]) -> str:
    """A new topic with these records, (key, value, ms after T0[, headers]) per partition in order."""
    topic = f"diff-in-{uuid.uuid4().hex[:8]}"
    create_topic(kafka, topic, len(partitions))
    for number, records in enumerate(partitions):
        produce_keyed(kafka, topic, [(key, value, ms / 1000, *headers) for key, value, ms, *headers in records], number)
    return topic


# (key or None, a number or None for no value, ms after T0)
window_inputs = st.lists(st.tuples(st.sampled_from([*windows.KEYS, None]), st.one_of(st.none(), st.integers(-5, 5)),
                                   st.integers(0, 60)), min_size=1, max_size=20)


@RUNS
@given(window_inputs, windows.windows, windows.aggregations, st.integers(0, 8), st.sampled_from(["update", "final"]),
       st.booleans(), st.sampled_from([ONE_BATCH, SMALL_BATCHES]))
def test_windowed_aggregate_runs_are_kafka_streams_aggregates(kafka, spark, twin, inputs, window, agg, grace, emit,
                                                             group_by, batch):
    kstool_window, twin_window = window
    if emit == "final" and twin_window["type"] != "session":
        twin_window = {**twin_window, "retention": windows.LONG_RETENTION_MS}
    group_by = group_by and agg in TEXT_AGGREGATIONS
    # re-keyed: one partition, the group in the value; else the keys spread over two partitions
    records = [(key, None if n is None else f"{n},{windows.KEYS[abs(n) % 3]}" if group_by else str(n), ms,
                [(name, value.encode()) for name, value in windows.header_of(i)])
               for i, (key, n, ms) in enumerate(inputs)]
    partitions = [records] if group_by else [
        [r for r in records if (windows.KEYS.index(r[0]) if r[0] else 0) % 2 == p] for p in (0, 1)]
    out = _run(kafka, "aggregate", "--input", _topic(kafka, partitions), "--window", kstool_window, "--agg", agg,
               "--grace", f"{grace}ms", "--emit", emit, "--key-format", "json",
               *(("--group-by", "split:,:1") if group_by else ()), batch=batch)
    ours = []
    for message in read_all(kafka, out):
        key = json.loads(message.key())
        ours.append((key["key"], key["start"] - T0, key["end"] - T0, windows.kstool_value(agg, message.value()),
                     message.timestamp()[1] - T0, tuple((name, value.decode()) for name, value in message.headers() or ())))
    theirs = []
    for part in partitions:
        # Kafka Streams 4.4's time and session windows aggregate a record without a value (their
        # javadoc: ignored, as kstool and its sliding windows and unwindowed aggregates do)
        part = [record for record in part if record[1] is not None]
        case = {"window": {**twin_window, "grace": grace}, "agg": agg, "emit": emit, "final": "on-window-close",
                "cache": twin_window["type"] != "session",
                "records": [["input", k, v, T0 + ms, [[name, value.decode()] for name, value in headers]]
                            for k, v, ms, headers in part],
                **({"group_by": {"separator": ",", "index": 1}} if group_by else {})}
        for record in twin.ask(case):
            key = json.loads(record["key"])
            theirs.append((key["key"], key["start"] - T0, key["end"] - T0, windows.twin_value(agg, record["value"]),
                           record["timestamp"] - T0, tuple(tuple(header) for header in record["headers"])))
    theirs = windows.without_tombstones_of_unmoved_sessions(theirs)
    if emit == "final":  # partitions interleave in the output topic: each window's records alike, with their headers
        assert sorted(ours, key=repr) == sorted(theirs, key=repr)
    else:
        windows.assert_updates_within(ours, theirs)
        if twin_window["type"] != "session":  # (the twin's sessions, without the record cache, have none)
            windows.assert_last_headers_alike(ours, theirs)


@RUNS
@given(joins.records, joins.joins, st.integers(0, 6), st.integers(0, 6), st.integers(0, 6),
       st.sampled_from([ONE_BATCH, SMALL_BATCHES]))
def test_join_runs_are_kafka_streams_joins(kafka, spark, twin, inputs, join, before, after, grace, batch):
    kind, how = join
    if kind == "stream-stream" and not before + after + grace:
        grace = 1  # kstool refuses join stores that would hold nothing (usage error, tests/topologies/test_join.py)
    table_output = kind in joins.TABLE_OUTPUTS
    batch = batch if table_output else ONE_BATCH  # a stream join's order within batches is kstool's
    if "stream" in kind:  # a stream record is an event: no tombstones
        inputs = [(side, key, value or (0, key), ts) if side == "left" or kind == "stream-stream" else
                  (side, key, value, ts) for side, key, value, ts in inputs]
    if kind == "versioned-stream-table" and grace:  # Kafka Streams 4.4 fails on a stream record without a key
        inputs = [record for record in inputs if record[1] is not None]
    sides = {side: _topic(kafka, [[(key, joins.value_of(value), ts, [("n", joins.header_of(s, key, value, ts))])
                                   for s, key, value, ts in inputs if s == side]])
             for side in ("left", "right")}
    history = ("--table-history", f"{joins.table_history(before, grace)}ms")
    options = {"stream-stream": ("--before", f"{before}ms", "--after", f"{after}ms", "--grace", f"{grace}ms"),
               "versioned-stream-table": (*history, "--grace", f"{grace}ms"),
               "stream-global": ("--global-key", "split:,:1"),
               "foreign-key": ("--foreign-key", "split:,:1"),
               "versioned-foreign-key": ("--foreign-key", "split:,:1", *history)}.get(kind, ())
    kstool_kind = {"foreign-key": "table-table", "versioned-foreign-key": "table-table",
                   "versioned-stream-table": "stream-table"}.get(kind, kind)
    out = _run(kafka, "join", "--left", sides["left"], "--right", sides["right"], "--kind", kstool_kind, "--how", how,
               "--joiner", "concat", "--separator", ",", *options, batch=batch)
    # each with the headers of the input record Kafka Streams forwards it from
    ours = [(None if m.key() is None else m.key().decode(), None if m.value() is None else m.value().decode(),
             m.timestamp()[1] - T0, tuple(v.decode() for _, v in m.headers() or ())) for m in read_all(kafka, out)]
    if table_output:  # the tables end alike whatever the batches: so do their joins
        assert joins.latest(ours) == joins.latest(joins.kafka_streams(twin, kind, how, before, after, grace, inputs))
        return
    # one batch: the global table's records first, else both sides in the order kstool processes them
    fed = ([r for r in inputs if r[0] == "right"] + [r for r in inputs if r[0] == "left"] if kind == "stream-global"
           else joins.in_processing_order(inputs, max(len(inputs), 1)))
    theirs = joins.kafka_streams(twin, kind, how, before, after, grace, fed)
    if kind == "stream-stream" and how != "inner":
        assert [r for r in ours if not joins.has_null_side(r)] == [r for r in theirs if not joins.has_null_side(r)]
        assert not Counter(r for r in theirs if joins.has_null_side(r)) - Counter(ours)
    else:
        assert ours == theirs


@RUNS
@given(table_aggregates.rows, st.sampled_from(["count", "sum"]), st.one_of(st.none(), st.integers(0, 30)),
       st.sampled_from([ONE_BATCH, SMALL_BATCHES]))
def test_table_aggregate_runs_are_kafka_streams_aggregates(kafka, spark, twin, inputs, agg, history, batch):
    topic = _topic(kafka, [[(key, table_aggregates.row_value("field", value), ts) for key, value, ts in inputs]])
    out = _run(kafka, "table-aggregate", "--input", topic, "--group-by", "field:g", "--agg", agg,
               *(("--value-field", "n") if agg == "sum" else ()),
               *(("--table-history", f"{history}ms") if history is not None else ()), batch=batch)
    ours = {m.key().decode(): None if m.value() is None else int.from_bytes(m.value(), "big", signed=True)
            for m in read_all(kafka, out)}
    theirs = table_aggregates.kafka_streams(twin, "field", agg, None, None, history, inputs)
    assert ours == {key: value for key, value, *_ in theirs}
