"""kstool.streams' incremental processors (heaps, indexes, store expiry) against brute-force
oracles of the Kafka Streams rules, on random out-of-order inputs. No Kafka or Spark needed:
the same processors run inside the engine (tests/topologies/test_windowed_aggregate.py, test_join.py)."""

from __future__ import annotations

import json
import struct
from collections import Counter, defaultdict
from typing import cast

from hypothesis import example, given, settings, strategies as st

from kstool.contract import LATE, OUTPUT
from kstool.streams.joins.joiners import make_joiner
from kstool.streams.joins.stream_stream import StreamStreamJoin
from kstool.streams.joins.versioned_stream_table import VersionedStreamTableJoin
from kstool.streams.sessions import SessionAggregate
from kstool.streams.sliding import SlidingWindowAggregate
from kstool.streams.table_aggregation import BUFFER, TableAggregate
from kstool.streams.task import LEFT, RIGHT, Record, RecordByRecord, TaskState, processing_order, run_task, task_stores
from kstool.streams.time_windows import WindowedAggregate
from kstool.streams.windows import WindowSpec

records = st.lists(st.tuples(st.sampled_from([b"a", b"b"]), st.integers(0, 60)), max_size=40)
batch_sizes = st.integers(1, 7)
# the processors' time indexes (kstool.streams.indexes) in buckets of 1 ms (many buckets, big
# jumps read the index whole), 3 ms, and the default (one bucket, read and rewritten in part)
index_buckets = st.sampled_from([1, 3, 1000])


def _run(processor, inputs: list[Record], batch: int):
    """Through the processor in batches, as micro-batches would: state survives between them."""
    state, out = TaskState.empty(task_stores(processor)), []
    for i in range(0, len(inputs), batch):
        out += run_task(processor, state, inputs[i:i + batch])
    return out, state


def _time_window_oracle(spec: WindowSpec, grace: int, inputs):
    """Per record: stream time is the max timestamp so far; the record counts in each window
    holding it whose end + grace is after stream time; no such window: late."""
    counts, late, stream_time = Counter(), 0, -1
    for key, ts in inputs:
        stream_time = max(stream_time, ts)
        starts = [s for s in range(ts - spec.size + 1, ts + 1) if s >= 0 and s % spec.advance == 0]
        open_ = [s for s in starts if s + spec.size + grace > stream_time]
        late += not open_
        for s in open_:
            counts[key, s] += 1
    closed = {w for w in counts if w[1] + spec.size + grace <= stream_time}
    return counts, late, closed


@settings(max_examples=150)
@given(records, st.sampled_from(["tumbling:10ms", "hopping:10ms,5ms", "hopping:9ms,3ms"]),
       st.integers(0, 8), batch_sizes, index_buckets)
def test_time_windows_match_the_oracle(inputs, window, grace, batch, bucket):
    spec = WindowSpec.parse(window)
    counts, late, closed = _time_window_oracle(spec, grace, inputs)
    recs = [Record(k, b"1", ts, offset=i) for i, (k, ts) in enumerate(inputs)]
    for emit in ("update", "final"):
        out, state = _run(WindowedAggregate(spec, "count", grace, emit, index_bucket_ms=bucket), recs, batch)
        results = defaultdict(list)
        for e in out:
            if e.role == OUTPUT:
                results[e.key[:-8], struct.unpack(">q", e.key[-8:])[0]].append(struct.unpack(">q", e.value)[0])
        assert sum(e.role == LATE for e in out) == late
        if emit == "update":  # per batch a window's latest count: rising to its total
            assert {w: v[-1] for w, v in results.items()} == dict(counts)
            assert all(v == sorted(set(v)) for v in results.values())
        else:  # exactly the closed windows, once each, with their totals, by window end then key
            assert results == {w: [counts[w]] for w in closed}
            emitted = [(struct.unpack(">q", e.key[-8:])[0], e.key[:-8]) for e in out if e.role == OUTPUT]
            assert emitted == sorted(emitted)
        # the store keeps the open windows only
        assert len(state.stores["aggregate"]) == len(set(counts) - closed)


@settings(max_examples=150)
@given(records, st.sampled_from(["tumbling:10ms", "hopping:9ms,3ms", "sliding:7ms", "session:5ms"]), st.integers(0, 8),
       batch_sizes, index_buckets)
def test_text_concat_in_windows_follows_the_count(inputs, window, grace, batch, bucket):
    """--agg concat against --agg count, the same records and windows (each record's value its
    number): every window's latest text joins as many values as it counted, each once, in
    processing order (sessions: merged sessions' texts in session order, then the record, as
    Kafka Streams' session merger for a reduce), and `latest` ends with the last processed;
    late records are late alike."""
    spec = WindowSpec.parse(window)
    kind = {"session": SessionAggregate, "sliding": SlidingWindowAggregate}.get(spec.kind, WindowedAggregate)
    recs = [Record(k, str(i).encode(), ts, offset=i) for i, (k, ts) in enumerate(inputs)]

    def latest_per_window(agg):
        out, _ = _run(kind(spec, agg, grace, "update", "string", "json", bucket, separator="|"), recs, batch)
        last = {}
        for e in out:
            if e.role == OUTPUT:
                last[e.key] = None if e.value is None else e.value.decode()
        return {w: v for w, v in last.items() if v is not None}, sum(e.role == LATE for e in out)

    counts, late = latest_per_window("count")
    texts, text_late = latest_per_window("concat")
    latest, _ = latest_per_window("latest")
    assert text_late == late and texts.keys() == counts.keys() == latest.keys()
    for w, text in texts.items():
        numbers = [int(n) for n in text.split("|")]
        assert len(numbers) == int(counts[w]) == len(set(numbers)) and latest[w] == str(max(numbers))
        assert spec.kind == "session" or numbers == sorted(numbers)


def _session_oracle(gap: int, grace: int, inputs):
    """Sessions per key by the merge rule of KStreamSessionWindowAggregate#process (Kafka 3.0+,
    KAFKA-12718): the close time is stream time - grace - gap; a record whose merged session
    ends before it is late; a session ending before the close time as it stood before this
    record is closed, and one ending at it is no longer merged with either: the store's
    retention (gap + grace) hides it (found by the differential test against Kafka Streams);
    a new session of the same bounds replaces it."""
    sessions: dict[bytes, list[list[int]]] = defaultdict(list)  # [start, end, count]
    late, stream_time = 0, -1
    for key, ts in inputs:
        alive = [s for s in sessions[key] if s[1] > stream_time - gap - grace]
        stream_time = max(stream_time, ts)
        near = [s for s in alive if s[1] >= ts - gap and s[0] <= ts + gap]
        start, end = min([ts] + [s[0] for s in near]), max([ts] + [s[1] for s in near])
        if end < stream_time - grace - gap:
            late += 1
            continue
        sessions[key] = [s for s in sessions[key] if s not in near] + [[start, end, 1 + sum(s[2] for s in near)]]
    final = {(k, s, e): n for k, lst in sessions.items() for s, e, n in lst}
    return final, late, stream_time


@settings(max_examples=150)
@given(records, st.integers(1, 8), st.integers(0, 5), batch_sizes, index_buckets)
def test_sessions_match_the_oracle(inputs, gap, grace, batch, bucket):
    final, late, stream_time = _session_oracle(gap, grace, inputs)
    recs = [Record(k, b"1", ts, offset=i) for i, (k, ts) in enumerate(inputs)]
    out, _ = _run(SessionAggregate(WindowSpec("session", gap, 0), "count", grace, "update", index_bucket_ms=bucket),
                  recs, batch)
    latest = {}
    for e in out:
        if e.role == OUTPUT:
            end, start = struct.unpack(">qq", e.key[-16:])
            session = (e.key[:-16], start, end)
            assert e.value is not None or session in latest  # tombstones only for written sessions
            latest[session] = None if e.value is None else struct.unpack(">q", e.value)[0]
    assert {w: n for w, n in latest.items() if n is not None} == final
    assert sum(e.role == LATE for e in out) == late
    out, state = _run(SessionAggregate(WindowSpec("session", gap, 0), "count", grace, "final", index_bucket_ms=bucket),
                      recs, batch)
    emitted = Counter()
    for e in out:
        if e.role == OUTPUT:
            end, start = struct.unpack(">qq", e.key[-16:])
            emitted[e.key[:-16], start, end, struct.unpack(">q", e.value)[0]] += 1
    closed = {w: n for w, n in final.items() if w[2] < stream_time - grace - gap}
    # exactly the closed sessions, once each, with their final counts; the store keeps the rest
    assert emitted == Counter({(*w, n): 1 for w, n in closed.items()})
    assert len(state.stores["aggregate"]) == len(final) - len(closed)


class _SessionsRecordByRecord(SessionAggregate):
    process_batch = RecordByRecord.process_batch  # the oracle: process() per record


def _observable(out, state) -> tuple[list, dict]:
    """What a batch leaves that anyone sees: its records in order, and the session store."""
    return ([(e.role, e.key, e.value, e.timestamp) for e in out],
            {k: (v.value, v.timestamp, v.stored_aux()) for k, v in state.stores["aggregate"].items()})


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from([b"a", b"b", b"c"]), st.integers(0, 60),
                          st.sampled_from([1.0, 0.1, -2.5, 7.0])), max_size=40),
       st.integers(1, 8), st.integers(0, 5), batch_sizes, st.sampled_from(["update", "final"]),
       st.sampled_from(["count", "sum", "avg"]))
# a stored session that stream time closes within the batch, before its key's next record
# within the gap: that record starts a session of its own
@example(inputs=[(b"a", 0, 1.0), (b"c", 0, 1.0), (b"b", 11, 1.0), (b"a", 5, 1.0)], gap=8, grace=0, batch=2,
         emit="update", agg="count")
def test_sessions_batch_at_once_equals_record_by_record(inputs, gap, grace, batch, emit, agg):
    """SessionAggregate.process_batch (each key's sessions merged at once) against process()
    per record: the same records out in the same order, the same store, batch after batch."""
    _assert_sessions_at_once_as_record_by_record(inputs, gap, grace, batch, emit, agg)


# times as producers stamp them: each key's mostly rising (kstool.streams.session_batches takes
# a key's records in order at once), at times stepping back; keys' clocks apart, so that stream
# time runs ahead of a key (its open session closes while its next record is still in the gap)
steps = st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(-3, 9),
                           st.sampled_from([1.0, 0.1, -2.5, 7.0])), max_size=40)


@settings(max_examples=300)
@given(steps, st.lists(st.integers(0, 12), min_size=3, max_size=3), st.integers(1, 8), st.integers(0, 5),
       batch_sizes, st.sampled_from(["update", "final"]), st.sampled_from(["count", "sum", "avg"]))
def test_sessions_of_records_mostly_in_order_equal_record_by_record(inputs, clocks_apart, gap, grace, batch, emit, agg):
    rising, clock = [], 0
    for key, step, number in inputs:
        clock = max(0, clock + (step if step > -3 else -20))  # steps back: small ones, at times a large one
        rising.append((b"abc"[key:key + 1], clock + clocks_apart[key], number))
    _assert_sessions_at_once_as_record_by_record(rising, gap, grace, batch, emit, agg)


def _assert_sessions_at_once_as_record_by_record(inputs, gap, grace, batch, emit, agg):
    recs = [Record(k, b"v", ts, number=n, offset=i) for i, (k, ts, n) in enumerate(inputs)]
    spec = WindowSpec("session", gap, 0)
    at_once, by_record = SessionAggregate(spec, agg, grace, emit), _SessionsRecordByRecord(spec, agg, grace, emit)
    fast, slow = TaskState.empty(task_stores(at_once)), TaskState.empty(task_stores(by_record))
    for i in range(0, len(recs), batch):
        assert _observable(run_task(at_once, fast, recs[i:i + batch]), fast) == \
            _observable(run_task(by_record, slow, recs[i:i + batch]), slow)
        assert fast.stream_time == slow.stream_time


sides = st.lists(st.tuples(st.sampled_from([LEFT, RIGHT]), st.sampled_from([b"a", b"b"]), st.integers(0, 40)),
                 max_size=30)  # equal key, side and time happen often: duplicates must all come out


@settings(max_examples=300)
@given(sides, st.integers(0, 6), st.integers(0, 6), st.integers(0, 4), st.sampled_from(["inner", "left", "outer"]),
       batch_sizes, index_buckets)
# a late record whose window closes just at stream time still waits unmatched (found here)
@example(inputs=[(LEFT, b"a", 35), (LEFT, b"a", 29), (RIGHT, b"a", 41)], before=0, after=6, grace=0, how="left",
         batch=1, bucket=1)
def test_stream_stream_join_matches_the_oracle(inputs, before, after, grace, how, batch, bucket):
    """KStreamKStreamJoin#process (apache/kafka trunk, KStreamKStreamJoin.java lines 115-165),
    brute force, in processing order, JoinWindows of `before` and `after` (equal: `--within`):
    no record is dropped for lateness; a left record at t joins every right record with its key
    from t - before to t + after (a right record: left ones from t - after to t + before;
    KStreamKStreamJoinLeftSide / RightSide swap them) that the other side's store still holds
    (timestamp >= that side's newest - retention + 1, retention = before + after + grace); a
    record past its own side's retention is not stored and counts as late; unmatched records
    of the outer side(s) get their null result at once when t + (after for a left record, before
    for a right one) < stream time, else when a record at stream time sees t + lookback + grace
    < stream time (lookback: after for a left record, before for a right one;
    KStreamKStreamJoin#getOuterJoinLookBackTimeMs)."""
    if before + after == 0 and grace == 0:
        grace = 1  # refused by the topology: the stores would hold nothing
    recs = [Record(k, f"{'LR'[s]}{i}".encode(), ts, s, offset=i) for i, (s, k, ts) in enumerate(inputs)]
    # batches cut from the processing order (each batch's own order is then the same)
    out, _ = _run(StreamStreamJoin(how, before, after, grace, make_joiner("concat"), bucket),
                  list(processing_order(recs)), batch)
    retention = before + after + grace
    probe = {LEFT: (before, after), RIGHT: (after, before)}  # (earlier, later) partners of a side's record
    lookback = {LEFT: after, RIGHT: before}
    outer_sides = {"inner": (), "left": (LEFT,), "outer": (LEFT, RIGHT)}[how]
    stored, waiting, expected, late = [], [], [], 0
    stream_time, observed, seq = -1, {LEFT: -1, RIGHT: -1}, 0

    def null_result(r):
        return (r.value + b",null") if r.side == LEFT else (b"null," + r.value)

    for r in processing_order(recs):
        stream_time = max(stream_time, r.timestamp)
        if r.timestamp == stream_time:
            closed = [w for w in waiting if w[0].timestamp + lookback[w[0].side] + grace < stream_time]
            for w, _ in sorted(closed, key=lambda w: (w[0].timestamp, w[0].side == LEFT, w[0].key, w[1])):
                expected.append((null_result(w), w.timestamp))
            waiting = [w for w in waiting if w not in closed]
        observed[r.side] = max(observed[r.side], r.timestamp)
        if r.timestamp < observed[r.side] - retention + 1:
            late += 1
        else:
            seq += 1
            stored.append((r, seq))
        earlier, later = probe[r.side]
        partners = [o for o, _ in stored if o.side != r.side and o.key == r.key
                    and o.timestamp >= observed[o.side] - retention + 1
                    and r.timestamp - earlier <= o.timestamp <= r.timestamp + later]
        for o in sorted(partners, key=lambda o: o.timestamp):  # stable: insertion order at equal times
            left, right = (r, o) if r.side == LEFT else (o, r)
            expected.append((left.value + b"," + right.value, max(r.timestamp, o.timestamp)))
            waiting = [w for w in waiting if w[0] is not o]
        if r.side in outer_sides and not partners:
            if r.timestamp + later < stream_time:
                expected.append((null_result(r), r.timestamp))
            else:
                waiting.append((r, seq))
    assert [(e.value, e.timestamp) for e in out if e.role == OUTPUT] == expected
    assert sum(e.role == LATE for e in out) == late


table_records = st.lists(st.tuples(st.sampled_from([LEFT, RIGHT]), st.sampled_from([b"a", b"b"]), st.integers(0, 60),
                                   st.booleans()), max_size=40)  # the bool: a table tombstone


@settings(max_examples=300)
@given(table_records, st.sampled_from([0, 3, 10, 100]), st.integers(0, 4), st.sampled_from(["inner", "left"]),
       batch_sizes, index_buckets)
@example(inputs=[(0, b"b", 1, False), (1, b"b", 1, False), (1, b"b", 1, True), (1, b"b", 0, False)], history=3, grace=0,
         how="inner", batch=1, bucket=1)  # left b@1 joins right b@0: the tombstone at 1 deleted b@1
def test_versioned_stream_table_join_matches_the_oracle(inputs, history, grace, how, batch, bucket):
    """KStreamKTableJoinProcessor against a versioned table (apache/kafka trunk, brute force, in
    processing order): the table keeps every put not older than its observed time - history
    (RocksDBVersionedStore#put, RocksDBVersionedStore.java:134), a put at a time it has replaces
    that version; a stream record joins get(key, its time): the newest version from at or
    before it (a tombstone: none), but only the latest version, if it began by then, for a time
    older than the table's observed time - history (RocksDBVersionedStore.java:207). With a
    grace, a stream record not older than the buffer's newest - grace waits, and all records up
    to newest - grace join in (time, key, arrival) order (RocksDBTimeOrderedKeyValueBuffer
    #put / #evictWhile); an older one joins at once."""
    grace = min(grace, history)  # refused by the topology otherwise
    recs = [Record(k, None if side == RIGHT and tomb else f"{'LR'[side]}{i}".encode(), ts, side, offset=i)
            for i, (side, k, ts, tomb) in enumerate(inputs)]
    order = list(processing_order(recs))
    out, _ = _run(VersionedStreamTableJoin(how, history, grace, make_joiner("concat"), bucket), order, batch)
    versions: dict[bytes, dict[int, bytes | None]] = defaultdict(dict)
    table_time, buffer, buffer_time, expected = -1, [], -1, []

    def get(key: bytes, t: int) -> bytes | None:
        held = versions[key]
        if not held:
            return None
        if t < table_time - history:
            return held[max(held)] if max(held) <= t else None
        earlier = [v for v in held if v <= t]
        return held[max(earlier)] if earlier else None

    def join(key: bytes, value: bytes, ts: int) -> None:
        right = get(key, ts)
        if right is not None or how == "left":
            expected.append((value + b"," + (right if right is not None else b"null"), ts))

    def put(key: bytes, value: bytes | None, ts: int) -> None:
        """RocksDBVersionedStore#put: a tombstone at the time of a key's only version deletes it (no
        older version's validTo holds a tombstone: an older put later becomes the latest again;
        Kafka Streams does so, tests/streams/test_differential_joins.py's example); versions that
        ended by the history's start, and a tombstone that began before it, are dropped."""
        nonlocal table_time
        table_time = max(table_time, ts)
        held = versions[key]
        if value is None and list(held) == [ts] and held[ts] is not None:
            del held[ts]
            return
        held[ts] = value
        horizon, times = table_time - history, sorted(held)
        while len(times) > 1 and times[1] <= horizon:
            del held[times.pop(0)]
        if held[times[0]] is None and times[0] < horizon:
            del held[times.pop(0)]

    for r in order:
        key = cast(bytes, r.key)
        if r.side == RIGHT:
            if r.timestamp >= table_time - history:
                put(key, r.value, r.timestamp)
        elif not grace or buffer_time - grace > r.timestamp:
            join(key, cast(bytes, r.value), r.timestamp)
        else:
            buffer.append((r.timestamp, key, r.offset, r.value))
            buffer_time = max(buffer_time, r.timestamp)
            due = sorted(b for b in buffer if b[0] <= buffer_time - grace)
            buffer = [b for b in buffer if b[0] > buffer_time - grace]
            for ts, waiting_key, _, value in due:
                join(waiting_key, value, ts)
    assert [(e.value, e.timestamp) for e in out if e.role == OUTPUT] == expected


@settings(max_examples=300)
@given(records, st.integers(1, 15), batch_sizes, index_buckets)
def test_sliding_windows_match_the_oracle(inputs, difference, batch, bucket):
    """SlidingWindows (KIP-450) by their definition, brute force: per key, a window [t - D, t]
    for each record at t, and [t + 1, t + 1 + D] for each record with a later one within D;
    each holds the records of its time range, its timestamp the newest of them. Out of order
    within the grace, from D on (earlier records share [0, D], processEarly), the last update
    of each window (KStreamSlidingWindowAggregate's, copied from its neighbours) is that."""
    inputs = [(key, ts + difference) for key, ts in inputs]
    window = SlidingWindowAggregate(WindowSpec("sliding", difference, 0), "sum", 1000, "update", "string", "json",
                                    bucket)
    out, _ = _run(window, [Record(k, b"", ts, number=i + 1, offset=i) for i, (k, ts) in enumerate(inputs)], batch)
    last = {}
    for e in (e for e in out if e.role == OUTPUT):
        key = json.loads(e.key)
        last[key["key"], key["start"]] = (int(e.value), e.timestamp)
    expected = {}
    for key in {k for k, _ in inputs}:
        held = [(ts, i + 1) for i, (k, ts) in enumerate(inputs) if k == key]
        times = {ts for ts, _ in held}
        starts = {t - difference for t in times} | {t + 1 for t in times if any(t < u <= t + difference for u in times)}
        for start in starts:
            inside = [(ts, n) for ts, n in held if start <= ts <= start + difference]
            expected[key.decode(), start] = (sum(n for _, n in inside), max(ts for ts, _ in inside))
    assert last == expected


table_rows = st.lists(st.tuples(st.sampled_from([b"r1", b"r2", b"r3", b"r4"]),
                                st.sampled_from([None, b"1", b"2", b"5"]), st.integers(0, 60)), max_size=40)


@settings(max_examples=300)
@given(table_rows, st.sampled_from(["count", "sum"]), st.sampled_from([None, 0, 5]), st.sampled_from([None, 1, 2]),
       batch_sizes, index_buckets)
def test_table_aggregation_matches_the_oracle(rows, agg, suppress_ms, suppress_records, batch, bucket):
    """KTable.groupBy(value).count() / .aggregate(adder, subtractor), brute force: after every
    update, each group's aggregate is that of the table's current rows whose value names it
    (a group emptied stays at 0). Each group's latest write, or else its update still waiting
    in the suppression buffer, is that; with a suppression of 0 ms the writes are those of no
    suppression."""
    records = [Record(k, v, ts, offset=i) for i, (k, v, ts) in enumerate(rows)]
    plain = TableAggregate(agg, "value", index_bucket_ms=bucket)
    out, _ = _run(plain, records, batch)
    latest: dict[bytes, bytes] = {}
    for k, v, _ in rows:
        if v is None:
            latest.pop(k, None)
        else:
            latest[k] = v
    touched = {v for _, v, _ in rows if v is not None}
    expected = {group: sum(1 if agg == "count" else int(group) for v in latest.values() if v == group)
                for group in touched}
    written = {e.key: struct.unpack(">q", e.value)[0] for e in out if e.role == OUTPUT}
    assert written == expected
    if suppress_ms is None and suppress_records is None:
        return
    suppressed = TableAggregate(agg, "value", suppress_ms=suppress_ms, suppress_records=suppress_records,
                                index_bucket_ms=bucket)
    out_s, state = _run(suppressed, records, batch)
    if suppress_ms == 0:
        assert [(e.key, e.value, e.timestamp) for e in out_s if e.role == OUTPUT] == [
            (e.key, e.value, e.timestamp) for e in out if e.role == OUTPUT]
    final = {e.key: struct.unpack(">q", e.value)[0] for e in out_s if e.role == OUTPUT}
    final.update({group: struct.unpack(">q", entry.value[9:])[0] for group, entry in state.stores[BUFFER].items()})
    assert final == expected


def test_processing_order_merges_partitions_by_next_timestamp():
    # left partition 0: @5 @7; left partition 1: @6 @1; right: @6
    records = [Record(b"k", b"", ts, side, None, partition, offset)
               for side, partition, offset, ts in [(LEFT, 0, 0, 5), (LEFT, 0, 1, 7), (LEFT, 1, 0, 6),
                                                   (LEFT, 1, 1, 1), (RIGHT, 0, 0, 6)]]
    order = [(r.side, r.partition, r.timestamp) for r in processing_order(records)]
    # each partition keeps its offset order (@6 before @1 in partition 1); the right side wins the tie at 6
    assert order == [(LEFT, 0, 5), (RIGHT, 0, 6), (LEFT, 1, 6), (LEFT, 1, 1), (LEFT, 0, 7)]


def test_key_less_record_on_an_outer_side_gets_its_null_result_at_once():
    # KStreamKStreamJoin#process (trunk, KStreamKStreamJoin.java:121): `outer && key == null && value != null`
    # forwards joiner(value, null); on an inner side a key-less record is skipped
    for how, side, expected in (("left", LEFT, [b"L,null"]), ("left", RIGHT, []),
                                ("outer", RIGHT, [b"null,R"]), ("inner", LEFT, [])):
        out, state = _run(StreamStreamJoin(how, 10, 10, 0, make_joiner("concat")),
                          [Record(None, b"LR"[side:side + 1], 5, side)], 1)
        assert [e.value for e in out if e.role == OUTPUT] == expected, (how, side)
        assert all(not entries for entries in state.stores.values())
