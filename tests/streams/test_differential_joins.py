"""Every join kind of kstool's processors against Kafka Streams itself (tests/twin.py: the same
join in TopologyTestDriver), on random inputs of both sides: out-of-order timestamps, table
tombstones, records without a key, keys a record maps to another table's key (`split:,:1`), a
versioned table with a grace (without stream records lacking a key: Kafka Streams 4.4 fails on
them then), a foreign-key join of versioned tables. Each input record carries
a header naming it, so an output record's headers say which record it was forwarded from. The
comparison contract (docs/differences-from-kafka-streams.md; records with their headers):
- a micro-batch per record: the same output records in the same order as Kafka Streams with its
  record cache, which the driver commits after each record (kstool emulates the cache: a
  source table's tombstone for a key it does not hold changes nothing, where with caches off
  an inner join writes a tombstone for it and an outer join repeats its last result);
- left and outer stream-stream joins: the joined results in the same order, and Kafka Streams'
  null results among kstool's: kstool writes a record's null result once its window + grace has
  closed, where Kafka Streams 4.4 may wait longer (a coarse check before it looks: its shared
  min time + the processing side's `after` + grace must be before stream time), so kstool may
  write a null result Kafka Streams does not (and then the join, when a partner comes late), or
  write it at an earlier record (with that record's headers) than Kafka Streams does;
- larger micro-batches: a table join's last result per key is the same (a batch writes a key's
  latest result once, as Kafka Streams' record cache does; a key without one may end with a
  tombstone on one side and nothing on the other, as the sides interleave differently); an inner
  stream-stream join's and a stream-table join's results are the same records in the same order
  when Kafka Streams gets each batch's records
  in the order kstool processes them (Kafka Streams' order within a task: the side whose next
  record is older first), not the order they were written in."""

from __future__ import annotations

from collections import Counter

from hypothesis import example, given, settings, strategies as st

from kstool.contract import OUTPUT
from kstool.streams.joins.foreign_key import ForeignKeyJoin
from kstool.streams.joins.global_table import GlobalTableJoin
from kstool.streams.joins.joiners import make_joiner
from kstool.streams.joins.stream_stream import StreamStreamJoin
from kstool.streams.joins.stream_table import StreamTableJoin
from kstool.streams.joins.table_table import TableTableJoin
from kstool.streams.joins.versioned_stream_table import VersionedStreamTableJoin
from kstool.streams.key_mappers import key_mapper
from kstool.streams.task import Record, TaskState, run_task, task_stores
from tests.streams.differential_joins import (
    EXAMPLES,
    SIDES,
    TABLE_OUTPUTS,
    has_null_side,
    header_of,
    in_processing_order,
    joins,
    kafka_streams,
    latest,
    records,
    table_history,
    value_of,
)


def _processor(kind: str, how: str, before: int, after: int, grace: int, cache_max_bytes: int = 0):
    joiner, mapped = make_joiner("concat", ","), key_mapper("split:,:1", "--global-key", ("split",))
    if kind == "stream-stream":
        return StreamStreamJoin(how, before, after, grace, joiner)
    if kind == "stream-table":
        return StreamTableJoin(how, joiner)
    if kind == "versioned-stream-table":
        return VersionedStreamTableJoin(how, table_history(before, grace), grace, joiner)
    if kind == "table-table":
        return TableTableJoin(how, joiner, cache_max_bytes)
    if kind == "stream-global":
        return GlobalTableJoin(how, mapped, joiner)
    history = table_history(before, grace) if kind.startswith("versioned") else None
    return ForeignKeyJoin(how, lambda value: mapped(None, value), joiner, history)


def _kstool(kind, how, before, after, grace, inputs, batch: int, cache_max_bytes: int = 0) -> list[tuple]:
    processor = _processor(kind, how, before, after, grace, cache_max_bytes)
    state, out = TaskState.empty(task_stores(processor)), []
    recs = [Record(None if key is None else key.encode(), None if (v := value_of(value)) is None else v.encode(), ts,
                   SIDES[side], offset=i, headers=[{"key": "n", "value": header_of(side, key, value, ts).encode()}])
            for i, (side, key, value, ts) in enumerate(inputs)]
    for i in range(0, len(recs), batch):
        out += run_task(processor, state, recs[i:i + batch])
    return [(e.key.decode() if e.key is not None else None, None if e.value is None else e.value.decode(), e.timestamp,
             tuple(h["value"].decode() for h in e.headers or ())) for e in out if e.role == OUTPUT]


@settings(max_examples=EXAMPLES)
# kstool's null result for left@0 comes at stream time 1 (its window [0-1, 0+0] has closed);
# Kafka Streams processes right@1 with its `after` (this join's before, 1): 0 + 1 >= 1, no look yet
@example(inputs=[("left", "a", (0, "a"), 0), ("right", "a", (0, "a"), 1)], join=("stream-stream", "left"),
         before=1, after=0, grace=0, batch=1)
# a left join against a versioned table keeps a stream record without a key (kstool dropped it)
@example(inputs=[("left", None, (0, "a"), 0)], join=("versioned-stream-table", "left"), before=1, after=0, grace=0,
         batch=1)
# grace 3: left@1 waits, so it joins before left@5 does, both with right@0
@example(inputs=[("right", "a", (1, "a"), 0), ("left", "a", (0, "a"), 5), ("left", "a", (0, "a"), 1),
                 ("right", "a", (2, "a"), 7), ("left", "a", (3, "a"), 20)],
         join=("versioned-stream-table", "inner"), before=1, after=0, grace=3, batch=2)
# versioned tables: right b@5 is older than b@10 and changes no result; left a@4 is beyond the history
@example(inputs=[("right", "b", (1, "b"), 10), ("left", "a", (0, "b"), 9), ("right", "b", (2, "b"), 5),
                 ("left", "a", (3, "c"), 4)], join=("versioned-foreign-key", "left"), before=1, after=0, grace=0,
         batch=1)
# a versioned table passes a delete of nothing on: a left join's subscription step drops it, the right
# table's goes to its subscribers (kstool wrote a tombstone for a@3)
@example(inputs=[("left", "a", None, 3), ("left", "b", (0, "b"), 3), ("right", "b", None, 4)],
         join=("versioned-foreign-key", "left"), before=1, after=0, grace=0, batch=1)
# a tombstone at the latest version's own time deletes it, and an older put becomes the latest again:
# left b@1 joins right b@0 (RocksDBVersionedStore keeps no tombstone that no older version's validTo holds)
@example(inputs=[("right", "b", (1, "b"), 1), ("right", "b", None, 1), ("right", "b", (3, "b"), 0),
                 ("left", "b", (0, "b"), 1)], join=("versioned-stream-table", "inner"), before=1, after=0, grace=0,
         batch=1)
# left@1's window and grace close at 11: kstool writes its null result at left@12, Kafka Streams 4.4 at left@13
@example(inputs=[("left", "a", None, ts) for ts in (0, 1, 2, 11, 12, 13)], join=("stream-stream", "left"),
         before=0, after=4, grace=6, batch=1)
@given(records, joins, st.integers(0, 6), st.integers(0, 6), st.integers(0, 6), st.integers(1, 7))
def test_joins_are_kafka_streams_joins(twin, inputs, join, before, after, grace, batch):
    kind, how = join
    if "stream" in kind:  # a stream record is an event: no tombstones
        inputs = [(side, key, value or (0, key), ts) if side == "left" or kind == "stream-stream" else
                  (side, key, value, ts) for side, key, value, ts in inputs]
    ours, batched = (_kstool(kind, how, before, after, grace, inputs, size) for size in (1, batch))
    in_batch_order = in_processing_order(inputs, batch)
    if kind == "versioned-stream-table" and grace:  # Kafka Streams 4.4 fails on a stream record without a key
        inputs, in_batch_order = ([record for record in rows if record[1] is not None]
                                  for rows in (inputs, in_batch_order))
        ours, batched = ([row for row in rows if row[0] is not None] for rows in (ours, batched))
    theirs = kafka_streams(twin, kind, how, before, after, grace, inputs)
    if kind == "stream-stream" and how != "inner":
        joined = [row for row in ours if not has_null_side(row)]
        assert joined == [row for row in theirs if not has_null_side(row)]
        # a null result without the headers of the record it was written at (kstool's may be an earlier one)
        assert not Counter(row[:3] for row in theirs if has_null_side(row)) - Counter(row[:3] for row in ours)
    else:
        assert ours == theirs
    if kind in TABLE_OUTPUTS:  # the tables end alike whatever the interleaving: so do their joins
        assert latest(batched) == latest(theirs)
    elif (kind, how) == ("stream-stream", "inner") or kind.endswith("stream-table"):
        # fed in the order kstool processes each batch
        assert batched == kafka_streams(twin, kind, how, before, after, grace, in_batch_order)


@settings(max_examples=EXAMPLES // 4)  # one join kind of the eleven above, the budgets its own dimension
# right b made and deleted, left b between them: Kafka Streams without a cache writes `0,a,null` at
# the delete's time (1); with it, at the left update's (0), the right's pair flushing nothing
@example(inputs=[("right", "b", (0, "a"), 0), ("right", "b", None, 1), ("left", "b", (0, "a"), 0)], how="left",
         batch=3, budget=150)
# a full cache (150 bytes: three updates) flushes at left a: right a, joined then, is deleted after
@example(inputs=[("left", "b", (0, "a"), 0), ("left", "c", (0, "a"), 0), ("right", "a", (0, "a"), 0),
                 ("right", "a", None, 1), ("left", "a", (0, "a"), 0)], how="inner", batch=5, budget=150)
@given(records, st.sampled_from(["inner", "left", "outer"]), st.integers(1, 12), st.sampled_from([1, 150, 300, 10 << 20]))
def test_a_table_table_join_with_a_record_cache_writes_updates_kafka_streams_writes(twin, inputs, how, batch, budget):
    """The record cache (statestore.cache.max.bytes) against Kafka Streams without one (the
    driver commits after each record) fed in kstool's processing order: the tables end alike, so
    the last result per key is the same; every result kstool writes is one Kafka Streams writes
    for that key (a cache only leaves updates out; its tombstones aside: a key's last update may
    delete a result the cache never wrote), though maybe at another update's time (the cached
    update that writes it, where Kafka Streams without a cache wrote it at the other side's). A
    cache smaller than one update (1 byte) flushes at each update: Kafka Streams' records,
    update for update."""
    cached = _kstool("table-table", how, 0, 0, 0, inputs, batch, budget)
    theirs = kafka_streams(twin, "table-table", how, 0, 0, 0, in_processing_order(inputs, batch))
    assert latest(cached) == latest(theirs)
    assert {row[:2] for row in cached if row[1] is not None} <= {row[:2] for row in theirs}
    if budget == 1:
        assert cached == theirs
