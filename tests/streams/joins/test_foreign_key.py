"""Foreign-key table-table joins (`run join --kind table-table --foreign-key ...`) replayed from
apache/kafka's own KTableKTableForeignKeyJoinIntegrationTest
(streams/src/test/java/org/apache/kafka/streams/integration/, trunk as of 2024-10): each piped
record goes through kstool's ForeignKeyJoin on its own, as TopologyTestDriver processes it, and
each step checks what the test checks: outputTopic.readKeyValuesToMap(), the last value written
per key (None: a tombstone). Left values are "lhsValue1|rhs1", the foreign key the part after
"|" (`--foreign-key split:|:1`); the test's joiner is "(" + left + "," + right + ")"."""

from __future__ import annotations

import pytest

from kstool.contract import OUTPUT
from kstool.streams.joins.foreign_key import ForeignKeyJoin
from kstool.streams.key_mappers import key_mapper
from kstool.streams.task import LEFT, RIGHT, Record, TaskState, run_task, task_stores


def _joiner(left: bytes | None, right: bytes | None) -> bytes:
    return b"(" + (left or b"null") + b"," + (right or b"null") + b")"


class _Driver:
    def __init__(self, how: str):
        foreign_key = key_mapper("split:|:1", "--foreign-key", ("split",))
        self.join = ForeignKeyJoin(how, lambda value: foreign_key(None, value), _joiner)
        self.state, self.offset = TaskState.empty(task_stores(self.join)), 0

    def pipe(self, side: int, key: str, value: str | None, ts: int) -> dict[str, str | None]:
        self.offset += 1
        out = run_task(self.join, self.state, [Record(key.encode(), value and value.encode(), ts, side,
                                                      offset=self.offset)])
        return {e.key.decode(): e.value and e.value.decode() for e in out if e.role == OUTPUT}

    def left(self, key: str, value: str | None, ts: int) -> dict[str, str | None]:
        return self.pipe(LEFT, key, value, ts)

    def right(self, key: str, value: str | None, ts: int) -> dict[str, str | None]:
        return self.pipe(RIGHT, key, value, ts)


@pytest.mark.parametrize("how", ["inner", "left"])
def test_join_from_left_then_delete_left_entity(how):
    """doJoinFromLeftThenDeleteLeftEntity (KTableKTableForeignKeyJoinIntegrationTest.java:164)."""
    d = _Driver(how)
    assert d.right("rhs1", "rhsValue1", 0) == d.right("rhs2", "rhsValue2", 1) == d.right("rhs3", "rhsValue3", 2) == {}
    assert {**d.left("lhs1", "lhsValue1|rhs1", 3), **d.left("lhs2", "lhsValue2|rhs2", 4)} == {
        "lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
    assert d.left("lhs3", "lhsValue3|rhs1", 5) == {"lhs3": "(lhsValue3|rhs1,rhsValue1)"}
    assert d.left("lhs1", None, 6) == {"lhs1": None}


@pytest.mark.parametrize("how", ["inner", "left"])
def test_join_from_right_then_delete_right_entity(how):
    """doJoinFromRightThenDeleteRightEntity (KTableKTableForeignKeyJoinIntegrationTest.java:289)."""
    d = _Driver(how)
    rows = {**d.left("lhs1", "lhsValue1|rhs1", 0), **d.left("lhs2", "lhsValue2|rhs2", 1),
            **d.left("lhs3", "lhsValue3|rhs1", 2)}
    assert rows == ({"lhs1": "(lhsValue1|rhs1,null)", "lhs2": "(lhsValue2|rhs2,null)", "lhs3": "(lhsValue3|rhs1,null)"}
                    if how == "left" else {})
    assert d.right("rhs1", "rhsValue1", 3) == {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"}
    assert d.right("rhs2", "rhsValue2", 4) == {"lhs2": "(lhsValue2|rhs2,rhsValue2)"}
    assert d.right("rhs3", "rhsValue3", 5) == {}
    assert d.right("rhs1", None, 6) == ({"lhs1": "(lhsValue1|rhs1,null)", "lhs3": "(lhsValue3|rhs1,null)"}
                                        if how == "left" else {"lhs1": None, "lhs3": None})


@pytest.mark.parametrize("how", ["inner", "left"])
def test_tombstones_for_deleted_rows_only_when_they_existed(how):
    """shouldEmitTombstoneWhenDeletingNonJoiningRecords (KTableKTableForeignKeyJoinIntegrationTest.java:409)
    and shouldNotEmitTombstonesWhenDeletingNonExistingRecords (:475)."""
    d = _Driver(how)
    assert d.left("lhs1", "lhsValue1|rhs1", 0) == ({"lhs1": "(lhsValue1|rhs1,null)"} if how == "left" else {})
    assert d.left("lhs1", None, 1) == {"lhs1": None}  # an unneeded tombstone for inner: no way to know
    assert d.left("lhs1", None, 2) == {}
    assert _Driver(how).left("lhs1", None, 0) == {}


@pytest.mark.parametrize("how", ["inner", "left"])
def test_moving_between_foreign_keys(how):
    """joinShouldProduceNullsWhenValueHasNonMatchingForeignKey (KTableKTableForeignKeyJoinIntegrationTest.java:507)."""
    d = _Driver(how)
    left_null = how == "left"
    assert d.left("lhs1", "lhsValue1|rhs1", 0) == ({"lhs1": "(lhsValue1|rhs1,null)"} if left_null else {})
    assert d.left("lhs1", "lhsValue1|rhs2", 1) == {"lhs1": "(lhsValue1|rhs2,null)" if left_null else None}
    assert d.left("lhs1", "lhsValue1|rhs3", 2) == {"lhs1": "(lhsValue1|rhs3,null)" if left_null else None}
    assert d.right("rhs1", "rhsValue1", 3) == {}
    assert d.left("lhs1", "lhsValue1|rhs1", 4) == {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
    assert d.left("lhs1", "lhsValue1|rhs2", 5) == {"lhs1": "(lhsValue1|rhs2,null)" if left_null else None}


@pytest.mark.parametrize("how", ["inner", "left"])
def test_an_old_foreign_key_is_unsubscribed(how):
    """shouldUnsubscribeOldForeignKeyIfLeftSideIsUpdated (KTableKTableForeignKeyJoinIntegrationTest.java:614)."""
    d = _Driver(how)
    d.right("rhs1", "rhsValue1", 0)
    d.right("rhs2", "rhsValue2", 1)
    assert d.left("lhs1", "lhsValue1|rhs1", 2) == {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
    assert d.left("lhs1", "lhsValue1|rhs2", 3) == {"lhs1": "(lhsValue1|rhs2,rhsValue2)"}
    assert d.right("rhs1", "rhsValue1Delta", 4) == {}
