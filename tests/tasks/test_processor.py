"""A task's emitted records packed into a few rows (kstool.tasks.processor._frame,
kstool.engine.io.packs) reach the sink's targets as the same records, in the same order, as
when every record crossed as a row of its own (the oracle, built here). No Kafka or Spark: the
Spark tests of every per-task topology write through the packs."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from kstool.contract import LATE, OUTPUT, PACKED, SinkTarget
from kstool.engine.io import packs
from kstool.engine.io.packs import unpacked
from kstool.engine.io.sink import late_rows, target_rows
from kstool.streams.task import Emitted
from kstool.tasks.processor import _frame

TARGETS = [SinkTarget("out", "value", OUTPUT), SinkTarget("late", "value", LATE),
           SinkTarget("log", "value", "store-changelog", by_task=True)]
SINK_SCHEMA = pa.schema([pa.field("role", pa.string(), False), ("key", pa.binary()), ("value", pa.binary()),
                         ("timestamp", pa.timestamp("us", tz="UTC")), pa.field("task", pa.int32(), False),
                         ("pack", pa.binary())])
emitted = st.lists(st.builds(Emitted, st.sampled_from([OUTPUT, LATE, "store-changelog"]),
                             st.one_of(st.none(), st.binary(max_size=6)), st.one_of(st.none(), st.binary(max_size=30)),
                             st.integers(-1, 2**41)), max_size=60)


def _as_the_sink_reads(frame) -> pa.Table:
    """What events.encode makes of a task's frame: event time in ms -> a timestamp."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    micros = pa.compute.multiply(table.column("event_time"), 1000).cast(pa.timestamp("us", tz="UTC"))
    return pa.table([table.column("role"), table.column("key"), table.column("value"), micros,
                     table.column("task").cast(pa.int32()), table.column("pack")], schema=SINK_SCHEMA)


def _row_per_record(records: list[Emitted], task: int) -> pa.Table:
    return pa.table([pa.array([e.role for e in records], pa.string()), pa.array([e.key for e in records], pa.binary()),
                     pa.array([e.value for e in records], pa.binary()),
                     pa.array([e.timestamp * 1000 for e in records], pa.timestamp("us", tz="UTC")),
                     pa.array([task] * len(records), pa.int32()), pa.nulls(len(records), pa.binary())], schema=SINK_SCHEMA)


@settings(max_examples=200)
@given(emitted, st.sampled_from([1, 40, 4 << 20]), st.integers(0, 7))
def test_packed_records_reach_each_target_as_rows_of_their_own_would(records, pack_bytes, task):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(packs, "PACK_BYTES", pack_bytes)
        frame = _frame(records, task)
    packed, oracle = unpacked(_as_the_sink_reads(frame)), unpacked(_row_per_record(records, task))
    assert list(target_rows(packed, TARGETS, {})) == list(target_rows(oracle, TARGETS, {}))
    assert late_rows(packed) == sum(e.role == LATE for e in records)
    assert set(frame["role"]) <= {PACKED}
    if pack_bytes == 4 << 20:  # small records: one row for them all
        assert len(frame) == (1 if records else 0)
