"""Table aggregation (`run table-aggregate`: a table's rows re-grouped, counted or summed, optionally
suppressed) of kstool's processor against Kafka Streams itself (tests/twin.py: KTable#groupBy
then count or aggregate with a subtractor, in TopologyTestDriver with its record cache, which the
driver commits after each record), on random row updates, moves between groups and tombstones,
out of order, over a plain or a versioned table (`--table-history`). The comparison contract (docs/differences-from-kafka-streams.md):
- a micro-batch per row update: the same output records in the same order, with the same
  headers (those of the row update that made the value; suppressed: the last update's);
- larger micro-batches: each group's last value and headers are the same (a batch writes a
  group's latest value once, as the record cache does at a commit)."""

from __future__ import annotations

import struct

from hypothesis import example, given, settings, strategies as st

from kstool.contract import OUTPUT
from kstool.streams.table_aggregation import TableAggregate
from kstool.streams.task import Record, TaskState, run_task, task_stores
from tests.streams.differential_table_aggregates import EXAMPLES, kafka_streams, row_value, rows, shapes
from tests.streams.differential_windows import header_of


def _kstool(shape, agg, suppress_ms, suppress_records, history, inputs, batch: int) -> list[tuple]:
    processor = TableAggregate(agg, "split:,:0" if shape == "split" else "field:g", "n" if shape == "field" else None,
                               "auto", suppress_ms, suppress_records, history)
    state, out = TaskState.empty(task_stores(processor)), []
    recs = [Record(key.encode(), None if (v := row_value(shape, value)) is None else v.encode(), ts, offset=i,
                   headers=[{"key": k, "value": v.encode()} for k, v in header_of(i)] or None)
            for i, (key, value, ts) in enumerate(inputs)]
    for i in range(0, len(recs), batch):
        out += run_task(processor, state, recs[i:i + batch])
    return [(e.key.decode(), None if e.value is None else struct.unpack(">q", e.value)[0], e.timestamp,
             tuple((h["key"], h["value"].decode()) for h in e.headers or ())) for e in out if e.role == OUTPUT]


@settings(max_examples=EXAMPLES)
# versioned: r1@5 is out of order (older than r1@9) and changes no group; r2@0 is older than the history
@example(inputs=[("r1", ("a", 1), 9), ("r1", ("b", 1), 5), ("r3", ("c", 1), 20), ("r2", ("a", 1), 0)], shape="split",
         agg="count", suppress_ms=None, suppress_records=None, history=10, batch=1)
# versioned (RocksDBVersionedStore.maybePutToLatestValueStore): a tombstone of the latest value's own
# time deletes it and keeps nothing, so r1's older a@7 becomes its latest and counts again (#84)
@example(inputs=[("r1", ("a", 1), 8), ("r1", None, 8), ("r1", ("a", 1), 7)], shape="split", agg="count",
         suppress_ms=None, suppress_records=None, history=1, batch=1)
# versioned: the same, when the version before the deleted one is a tombstone (a@3's deletion leaves
# the history ending at the tombstone's time 2, so a@2 becomes the latest)
@example(inputs=[("r1", None, 2), ("r1", ("a", 0), 3), ("r1", None, 3), ("r1", ("a", 0), 2)], shape="split",
         agg="count", suppress_ms=None, suppress_records=None, history=1, batch=1)
@given(rows, shapes, st.sampled_from(["count", "sum"]), st.one_of(st.none(), st.integers(0, 10)),
       st.one_of(st.none(), st.integers(1, 3)), st.one_of(st.none(), st.integers(0, 30)), st.integers(1, 7))
def test_table_aggregates_are_kafka_streams_aggregates(twin, inputs, shape, agg, suppress_ms, suppress_records, history,
                                                       batch):
    if agg == "sum" and shape == "split":
        shape = "field"  # a sum reads its number from a JSON field
    theirs = kafka_streams(twin, shape, agg, suppress_ms, suppress_records, history, inputs)
    assert _kstool(shape, agg, suppress_ms, suppress_records, history, inputs, 1) == theirs
    batched = _kstool(shape, agg, suppress_ms, suppress_records, history, inputs, batch)
    if suppress_ms is None and suppress_records is None:  # each group's last value, with its last update's headers
        assert {key: (value, headers) for key, value, _, headers in batched} == \
            {key: (value, headers) for key, value, _, headers in theirs}
