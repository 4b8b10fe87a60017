"""The table-table join's record cache (kstool.streams.record_cache; Kafka Streams'
statestore.cache.max.bytes), worked by hand from Kafka Streams 4.4's caching store
(CachingKeyValueStore.putAndMaybeForward, NamedCache.flush/evict) and join processors
(KTableKTableInnerJoin, -LeftJoin, -OuterJoin). Against Kafka Streams itself:
tests/streams/test_differential_joins.py and tests/topologies/test_join.py."""

from __future__ import annotations

import pytest

from kstool.contract import OUTPUT, changelog_role
from kstool.streams.joins.joiners import make_joiner
from kstool.streams.joins.table_table import TableTableJoin
from kstool.streams.task import LEFT, RIGHT, Record, TaskState, run_task

# left: a=La1@1, b=Lb1@3, a=La2@7, delete a@9; right: a=Ra1@2, c=Rc1@4, b=Rb1@5, delete c@8 (in processing order)
BATCH = [Record(b"a", b"La1", 1, LEFT), Record(b"a", b"Ra1", 2, RIGHT), Record(b"b", b"Lb1", 3, LEFT),
         Record(b"c", b"Rc1", 4, RIGHT), Record(b"b", b"Rb1", 5, RIGHT), Record(b"a", b"La2", 7, LEFT),
         Record(b"c", None, 8, RIGHT), Record(b"a", None, 9, LEFT)]


def _run(how: str, budget: int, batch: list[Record]) -> tuple[list[tuple], list[tuple]]:
    """(output records, changelog records) of one batch on empty tables."""
    join = TableTableJoin(how, make_joiner("concat", "+"), budget)
    out = run_task(join, TaskState.empty(join.stores), batch)
    return ([(e.key, e.value, e.timestamp) for e in out if e.role == OUTPUT],
            [(e.role, e.key, e.value) for e in out if e.role != OUTPUT])


@pytest.mark.parametrize(("how", "expected"), [
    # the left cache flushes first: b (a was made and deleted within the batch: nothing), then the
    # right's in the order of their last updates: a@2 (no left row), b@5 (c: made and deleted)
    ("inner", [(b"b", b"Lb1+Rb1", 5), (b"b", b"Lb1+Rb1", 5)]),
    ("left", [(b"b", b"Lb1+Rb1", 5), (b"b", b"Lb1+Rb1", 5)]),
    ("outer", [(b"b", b"Lb1+Rb1", 5), (b"a", b"null+Ra1", 2), (b"b", b"Lb1+Rb1", 5)]),
])
def test_a_cached_batch_writes_each_key_s_last_update_once_per_table(how, expected):
    output, changelogs = _run(how, 10 << 20, BATCH)
    assert output == expected
    assert changelogs == [(changelog_role("join-left-table"), b"b", b"Lb1"),
                          (changelog_role("join-right-table"), b"a", b"Ra1"), (changelog_role("join-right-table"), b"b", b"Rb1")]


def test_a_key_that_existed_before_the_batch_is_deleted_with_a_tombstone():
    join = TableTableJoin("outer", make_joiner("concat", "+"), 10 << 20)
    state = TaskState.empty(join.stores)
    run_task(join, state, [Record(b"a", b"La1", 1, LEFT)])
    out = run_task(join, state, [Record(b"a", b"La2", 2, LEFT), Record(b"a", None, 3, LEFT)])
    assert [(e.role, e.key, e.value, e.timestamp) for e in out] == [
        (changelog_role("join-left-table"), b"a", None, 3), (OUTPUT, b"a", None, 3)]


def test_a_result_is_deleted_when_both_its_rows_are_deleted_between_two_flushes():
    # Kafka Streams' inner join writes nothing for either delete (each finds the other row gone
    # through its cache), leaving a+a standing; kstool writes its tombstone
    join = TableTableJoin("inner", make_joiner("concat", "+"), 10 << 20)
    state = TaskState.empty(join.stores)
    assert [e.value for e in run_task(join, state, [Record(b"a", b"L", 1, LEFT), Record(b"a", b"R", 2, RIGHT)])
            if e.role == OUTPUT] == [b"L+R", b"L+R"]
    out = run_task(join, state, [Record(b"a", None, 3, LEFT), Record(b"a", None, 4, RIGHT)])
    assert [(e.key, e.value, e.timestamp) for e in out if e.role == OUTPUT] == [(b"a", None, 3)]


def test_a_full_cache_flushes_both_tables():
    # 49 bytes an update, 147 the budget: the fourth update (left a) flushes the left table, which
    # joins right a from the right's cache, and the right table with it (Kafka Streams flushes
    # only the left one: right a, then made and deleted within its cache's interval, would leave
    # a+a standing); right a's delete then deletes the result
    batch = [Record(b"a", b"0,a", 0, RIGHT), Record(b"b", b"0,a", 0, LEFT), Record(b"c", b"0,a", 0, LEFT),
             Record(b"a", b"0,a", 0, LEFT), Record(b"a", None, 1, RIGHT)]
    output, _ = _run("inner", 147, batch)
    assert output == [(b"a", b"0,a+0,a", 0), (b"a", b"0,a+0,a", 0), (b"a", None, 1)]


@pytest.mark.parametrize("how", ["inner", "left", "outer"])
def test_no_cache_and_a_cache_too_small_for_one_update_write_every_update(how):
    assert _run(how, 1, BATCH) == _run(how, 0, BATCH)
    assert len(_run(how, 0, BATCH)[1]) == 8  # every table update logged
