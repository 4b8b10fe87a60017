"""The json joiner: each side parsed as JSON when it is JSON, else taken as text; the plain
definition (parse, fall back to text on failure) is the oracle of the faster one. The stream-table
and table-table joins' batch loops against `process()` record by record, their oracle."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from kstool.streams.joins.joiners import HOWS, make_joiner
from kstool.streams.joins.stream_table import StreamTableJoin
from kstool.streams.joins.table_table import TableTableJoin
from kstool.streams.task import LEFT, RIGHT, Record, RecordByRecord, TaskState, processing_order, run_task, task_stores


def _plain_json_joiner(left: bytes | None, right: bytes | None) -> bytes:
    def side(data: bytes | None):
        if data is None:
            return None
        text = data.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            return text
    return json.dumps({"left": side(left), "right": side(right)}, separators=(",", ":"), ensure_ascii=False).encode()


_json_texts = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                           max_leaves=6).map(json.dumps)
_sides = st.none() | st.binary(max_size=12) | _json_texts.map(str.encode) | st.sampled_from(
    [b"", b" ", b" \t\n{\"a\": 1}", b"NaN", b"-Infinity", b"Infinity", b"nul", b"trueish", b"[1,", b"\xff\xfe",
     b"k123", b"12abc", b"\"open", "grüße".encode()])


@settings(max_examples=1000)
@given(_sides, _sides)
def test_json_joiner_equals_its_plain_definition(left, right):
    assert make_joiner("json")(left, right) == _plain_json_joiner(left, right)


def test_json_joiner_nests_json_and_quotes_text():
    assert make_joiner("json")(b'{"a": 1}', b"k1") == b'{"left":{"a":1},"right":"k1"}'
    assert make_joiner("json")(b"k1", None) == b'{"left":"k1","right":null}'


class _StreamTableRecordByRecord(StreamTableJoin):
    process_batch = RecordByRecord.process_batch  # the oracle: process() per record


class _TableTableRecordByRecord(TableTableJoin):
    process_batch = RecordByRecord.process_batch


_table_inputs = st.lists(st.tuples(st.sampled_from([LEFT, RIGHT]), st.sampled_from([0, 1]),  # side, partition
                                   st.sampled_from([b"a", b"b", b"c", None]), st.integers(0, 30), st.booleans()),
                         max_size=40)  # the bool: a null value (a table's tombstone)
_table_joins = st.sampled_from([(StreamTableJoin, _StreamTableRecordByRecord, how) for how in ("inner", "left")]
                               + [(TableTableJoin, _TableTableRecordByRecord, how) for how in HOWS])


@settings(max_examples=300)
@given(_table_joins, _table_inputs, st.integers(1, 12))
def test_table_joins_batch_equals_record_by_record(join, rows, batch):
    """Stream-table (inner, left) and table-table (inner, left, outer) joins: table updates,
    deletes of keys present and absent, null keys and stream values, records of two partitions
    a side; batch after batch, the same records out in order, the same tables and the same
    changed keys (each with whether it existed before the batch, which the record cache reads)."""
    fast_type, slow_type, how = join
    records = [Record(key, None if null else f"{'LR'[side]}{i}".encode(), ts, side, None, partition, i)
               for i, (side, partition, key, ts, null) in enumerate(rows)]
    order = list(processing_order(records))
    fast, slow = fast_type(how, make_joiner("concat")), slow_type(how, make_joiner("concat"))
    fast_state, slow_state = TaskState.empty(task_stores(fast)), TaskState.empty(task_stores(slow))
    for start in range(0, len(order), batch):
        chunk = order[start:start + batch]
        out = [(e.role, e.key, e.value, e.timestamp) for e in run_task(fast, fast_state, chunk)]
        assert out == [(e.role, e.key, e.value, e.timestamp) for e in run_task(slow, slow_state, chunk)]
        assert fast_state.changed == slow_state.changed
        for table in fast.stores:
            assert ({k: (v.value, v.timestamp) for k, v in fast_state.stores[table].items()}
                    == {k: (v.value, v.timestamp) for k, v in slow_state.stores[table].items()})
