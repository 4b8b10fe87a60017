"""The source's record packer (kstool.tasks.combiners.packs.RecordPacker) and the task's
unpacking (kstool.tasks.processor): a task gets the same records, in the same order, as when
every record crosses as a row of its own. No Kafka or Spark here: test_join.py and
test_windowed_aggregate.py run both ways through Spark."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kstool.engine.io.combining import combined
from kstool.engine.io.range_reader import OffsetRange
from kstool.streams.task import Record
from kstool.tasks.combiners.packs import PACK_BYTES, RecordPacker
from kstool.tasks.processor import _unpacked
from kstool.topologies.join import Join
from tests.helpers import source_rows

# (key, value, timestamp): without a timestamp (or a negative one) Spark flags the record bad
inputs = st.lists(st.tuples(st.sampled_from([b"a", b"b", None]), st.sampled_from([b"1", b"", None]),
                            st.one_of(st.integers(0, 10**13), st.just(None), st.just(-5))), max_size=80)


def _arrow_batches(rows, size: int):
    """The source's Arrow batches of `rows` (offset = index), `size` rows each."""
    batches = []
    for first in range(0, len(rows), size):
        piece = rows[first:first + size]
        batches.append(source_rows([k for k, _, _ in piece], [v for _, v, _ in piece],
                                   offsets=list(range(first, first + len(piece))), stamps_ms=[t for _, _, t in piece]))
    return batches


@settings(max_examples=200)
@given(inputs, st.booleans(), st.integers(1, 20), st.sampled_from([1, 3, 10**6]))
def test_a_task_gets_the_records_it_would_get_row_by_row(rows, keyed_values, arrow_size, pack_bytes):
    def passed_on(key, value, ts) -> bool:  # what Spark's filters leave of a row of its own
        return ts is not None and ts >= 0 and (not keyed_values or (key is not None and value is not None))

    out = list(combined(RecordPacker(keyed_values, pack_bytes), OffsetRange("t", 0, 0, len(rows)),
                        iter(_arrow_batches(rows, arrow_size))))
    crossing = [row for batch in out for row in batch.to_pylist()]
    task_rows = [(Record(r["key"], r["value"], None if r["timestamp"] is None else int(r["timestamp"].timestamp() * 1000),
                         offset=r["offset"]), (r["partial"] or {}).get("pack")) for r in crossing]
    kept = [(record, pack) for record, pack in task_rows
            if pack is not None or passed_on(record.key, record.value, record.timestamp)]
    records = _unpacked([record for record, _ in kept], [pack for _, pack in kept])
    got = sorted((r.offset, r.key, r.value, r.timestamp) for r in records)
    assert got == [(i, k, v, t) for i, (k, v, t) in enumerate(rows) if passed_on(k, v, t)]
    # the batches' input count (kstool.engine.query.batches): a row counts 1, a pack row its range's records
    counted = [(r["partial"] or {}).get("records") for r in crossing]
    assert sum(1 if n is None else n for n in counted) == len(rows)


def test_a_batch_crosses_as_one_row_unless_its_records_are_large():
    keys = [b"k%d" % (i % 7) for i in range(5000)]
    out = list(combined(RecordPacker(False), OffsetRange("t", 0, 0, 5000), iter([source_rows(keys, keys)])))
    assert sum(batch.num_rows for batch in out) == 1
    large = [b"v" * 100_000] * 200  # 20 MB: several packs, each under 2 x PACK_BYTES
    out = list(combined(RecordPacker(False), OffsetRange("t", 0, 0, 200), iter([source_rows(keys[:200], large)])))
    packs = [row["partial"]["pack"] for batch in out for row in batch.to_pylist()]
    assert 5 <= len(packs) <= 6 and all(len(pack) < 2 * PACK_BYTES for pack in packs)


@pytest.mark.parametrize("options, packs", [
    ({"kind": "stream-stream", "within": 1000}, True),
    ({"kind": "stream-table"}, True),
    ({"kind": "table-table", "how": "outer"}, True),
    ({"kind": "table-table", "repartition": True}, False),  # re-keyed: tasks are not partitions
    ({"kind": "stream-table", "input_value_format": "avro"}, False),  # Spark decodes the values
    ({"kind": "stream-global"}, False),  # the table's records go to every task
    ({"kind": "table-table", "foreign_key": "field:customer"}, False),
])
def test_which_joins_pack(options, packs):
    assert (Join("l", "r", "out", **options).combiner is not None) == packs
