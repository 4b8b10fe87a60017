"""A stage's emitted records as the next stage's rows (kstool.tasks.repartition): each record sent
on reaches the task Kafka's partitioner gives its key, as a repartition topic's producer would put
it, in its sending order; the rest (changelogs) goes through the sending task's number to the
sink as the same records. No Kafka or Spark: the table-aggregate Spark tests run it."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, strategies as st

from kstool.contract import REPARTITION, changelog_role
from kstool.engine.io.packs import unpacked
from kstool.kafka.partitioner import partition_for
from kstool.streams.task import Emitted
from kstool.tasks.combiners.packs import unpack
from kstool.tasks.processor import _frame
from kstool.tasks.repartition import PASS_THROUGH, next_stage_rows

LOG = changelog_role("table")
headers = st.one_of(st.none(), st.lists(st.fixed_dictionaries({"key": st.text(max_size=3),
                                                                "value": st.one_of(st.none(), st.binary(max_size=4))}),
                                         min_size=1, max_size=2))
emitted = st.lists(st.builds(Emitted, st.sampled_from([REPARTITION, LOG]), st.binary(max_size=6),
                             st.one_of(st.none(), st.binary(max_size=20)), st.integers(0, 2**41),
                             headers=headers), max_size=80)


@given(emitted, st.integers(0, 5), st.integers(1, 7), st.lists(emitted, max_size=2))
def test_sent_records_reach_their_keys_task_in_order_and_the_rest_passes_through(records, task, tasks, earlier):
    # `earlier`: what an earlier stage's task of this number passed through this one
    passed = [pack for batch in earlier for pack in _passed_through(next_stage_rows(batch, task, tasks))]
    rows = next_stage_rows(records, task, tasks, passed)
    sent = [e for e in records if e.role == REPARTITION]
    received: dict[int, list[tuple]] = {}
    for row in rows[rows["side"] != PASS_THROUGH].itertuples():
        assert row.partition == task  # the sender, as the merge of a repartition partition sees it
        keys, values, times, offsets, carried = unpack(row.pack)
        assert row.event_time == max(times) and row.offset == offsets[-1]
        received.setdefault(row.task, []).extend(zip(offsets, keys, values, times, carried))
    assert received == {
        target: [(i, e.key, e.value, e.timestamp, e.headers) for i, e in enumerate(sent)
                 if partition_for(e.key, tasks) == target]
        for target in {partition_for(e.key, tasks) for e in sent}}

    through = rows[rows["side"] == PASS_THROUGH]
    assert set(through["task"]) <= {task}
    # the next stage's task passes them on: the sink reads the same records in order
    frame = _frame([], task, _passed_through(rows))
    table = unpacked(pa.table({"role": frame["role"].tolist(), "key": pa.array([None] * len(frame), pa.binary()),
                               "value": pa.array([None] * len(frame), pa.binary()),
                               "timestamp": pa.array([0] * len(frame), pa.timestamp("us", tz="UTC")),
                               "task": pa.array(frame["task"].tolist(), pa.int32()),
                               "pack": pa.array(frame["pack"].tolist(), pa.binary())}))
    kept = [e for e in [*(e for batch in earlier for e in batch), *records] if e.role != REPARTITION]
    millis = [micros // 1000 for micros in table.column("timestamp").cast(pa.int64()).to_pylist()]
    assert [(r["role"], r["key"], r["value"], ms, r["task"], r["headers"])
            for r, ms in zip(table.to_pylist(), millis)] == [(LOG, e.key, e.value, e.timestamp, task, e.headers)
                                                             for e in kept]


def _passed_through(rows) -> list[bytes]:
    return rows["pack"][rows["side"] == PASS_THROUGH].tolist()
