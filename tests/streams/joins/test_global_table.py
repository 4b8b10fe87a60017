"""Stream-GlobalKTable joins (`run join --kind stream-global`) replayed from apache/kafka's own
KStreamGlobalKTableJoinTest and KStreamGlobalKTableLeftJoinTest
(streams/src/test/java/org/apache/kafka/streams/kstream/internals/, trunk as of 2024-10): each
piped record goes through kstool's GlobalTableJoin on its own, as TopologyTestDriver processes
it. The tests' key mapper takes the table key from the stream value "X0,FKey0" (the token after
the comma; none: no key); MockValueJoiner.TOSTRING_JOINER is value1 + "+" + value2; stream
timestamps advance 1 ms per record from 0. The mapper is `--global-key split:,:1`."""

from __future__ import annotations

from kstool.contract import OUTPUT
from kstool.streams.joins.global_table import GlobalTableJoin
from kstool.streams.joins.joiners import make_joiner
from kstool.streams.key_mappers import key_mapper
from kstool.streams.task import LEFT, RIGHT, Record, TaskState, run_task, task_stores

KEYS = (0, 1, 2, 3)


class _Driver:
    def __init__(self, how: str):
        self.join = GlobalTableJoin(how, key_mapper("split:,:1", "--global-key", ("split",)), make_joiner("concat", "+"))
        self.state, self.clock, self.offset = TaskState.empty(task_stores(self.join)), 0, 0

    def _pipe(self, record: Record) -> list[tuple]:
        record.offset, self.offset = self.offset, self.offset + 1
        out = run_task(self.join, self.state, [record])
        return [(e.key and int(e.key), e.value.decode(), e.timestamp) for e in out if e.role == OUTPUT]

    def stream(self, count: int, prefix: str, foreign_key: bool = True, null_key: bool = False) -> list[tuple]:
        """pushToStream."""
        out = []
        for i in KEYS[:count]:
            value = f"{prefix}{i}" + (f",FKey{i}" if foreign_key else "")
            key = None if null_key and i == 0 else str(i).encode()
            out += self._pipe(Record(key, value.encode(), self.clock, LEFT))
            self.clock += 1
        return out

    def table(self, count: int, prefix: str | None) -> list[tuple]:
        """pushToGlobalTable (prefix None: pushNullValueToGlobalTable)."""
        return sum((self._pipe(Record(f"FKey{i}".encode(), None if prefix is None else f"{prefix}{i}".encode(), 0,
                                      RIGHT)) for i in KEYS[:count]), [])


def _joined(prefix: str, table_prefix: str | None, keys, first_ts: int) -> list[tuple]:
    return [(k, f"{prefix}{k},FKey{k}+{'null' if table_prefix is None else f'{table_prefix}{k}'}", first_ts + n)
            for n, k in enumerate(keys)]


def test_inner_join_only_on_stream_updates():
    """shouldNotJoinOnGlobalTableUpdates (KStreamGlobalKTableJoinTest.java:157) and
    shouldNotJoinWithEmptyGlobalTableOnStreamUpdates (:148)."""
    driver = _Driver("inner")
    assert driver.stream(2, "X") == []
    assert driver.table(2, "Y") == []
    assert driver.stream(4, "X") == _joined("X", "Y", (0, 1), 2)
    assert driver.table(4, "YY") == []
    assert driver.stream(4, "X") == _joined("X", "YY", KEYS, 6)
    assert driver.table(4, "YYY") == []


def test_inner_join_clears_an_entry_on_a_tombstone():
    """shouldClearGlobalTableEntryOnNullValueUpdates (KStreamGlobalKTableJoinTest.java:211)."""
    driver = _Driver("inner")
    driver.table(4, "Y")
    assert driver.stream(4, "X") == _joined("X", "Y", KEYS, 0)
    assert driver.table(2, None) == []
    assert driver.stream(4, "XX") == _joined("XX", "Y", (2, 3), 6)


def test_inner_join_skips_records_the_mapper_gives_no_key_and_joins_key_less_ones_it_does():
    """shouldNotJoinOnNullKeyMapperValues (KStreamGlobalKTableJoinTest.java:239) and
    shouldJoinOnNullKeyWithNonNullKeyMapperValues (:254)."""
    driver = _Driver("inner")
    driver.table(4, "Y")
    assert driver.stream(4, "XXX", foreign_key=False) == []
    other = _Driver("inner")
    other.table(2, "Y")
    assert other.stream(4, "X", null_key=True) == [(None, "X0,FKey0+Y0", 0), (1, "X1,FKey1+Y1", 1)]


def test_left_join():
    """KStreamGlobalKTableLeftJoinTest: shouldNotJoinOnGlobalTableUpdates (:158),
    shouldClearGlobalTableEntryOnNullValueUpdates (:217), shouldNotJoinOnNullKeyMapperValues
    (:247), shouldJoinOnNullKeyWithNonNullKeyMapperValues (:262)."""
    driver = _Driver("left")
    assert driver.stream(2, "X") == _joined("X", None, (0, 1), 0)
    assert driver.table(2, "Y") == []
    assert driver.stream(4, "X") == _joined("X", "Y", (0, 1), 2) + _joined("X", None, (2, 3), 4)
    cleared = _Driver("left")
    cleared.table(4, "Y")
    assert cleared.stream(4, "X") == _joined("X", "Y", KEYS, 0)
    cleared.table(2, None)
    assert cleared.stream(4, "XX") == _joined("XX", None, (0, 1), 4) + _joined("XX", "Y", (2, 3), 6)
    unmapped = _Driver("left")
    unmapped.table(4, "Y")
    assert unmapped.stream(4, "XXX", foreign_key=False) == []
    key_less = _Driver("left")
    key_less.table(4, "Y")
    assert key_less.stream(4, "X", null_key=True) == [(None, "X0,FKey0+Y0", 0)] + _joined("X", "Y", (1, 2, 3), 1)
