"""kstool.streams' incremental processors (heaps, indexes, store expiry) against brute-force
oracles of the Kafka Streams rules, on random out-of-order inputs. No Kafka or Spark needed:
the same processors run inside the engine (tests/test_windowed_aggregate.py, test_join.py)."""

from __future__ import annotations

import struct
from collections import Counter, defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from kstool.streams.aggregate import SessionAggregate, WindowedAggregate
from kstool.streams.joins import StreamStreamJoin, make_joiner
from kstool.streams.task import LATE, LEFT, OUTPUT, RIGHT, Record, TaskState, processing_order, run_task
from kstool.streams.windows import WindowSpec

records = st.lists(st.tuples(st.sampled_from([b"a", b"b"]), st.integers(0, 60)), max_size=40)
batch_sizes = st.integers(1, 7)


def _run(processor, inputs: list[Record], batch: int):
    """Through the processor in batches, as micro-batches would: state survives between them."""
    state, out = TaskState.empty(processor.stores), []
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


@settings(max_examples=150, deadline=None)
@given(records, st.sampled_from(["tumbling:10ms", "hopping:10ms,5ms", "hopping:9ms,3ms"]),
       st.integers(0, 8), batch_sizes)
def test_time_windows_match_the_oracle(inputs, window, grace, batch):
    spec = WindowSpec.parse(window)
    counts, late, closed = _time_window_oracle(spec, grace, inputs)
    recs = [Record(k, b"1", ts, offset=i) for i, (k, ts) in enumerate(inputs)]
    for emit in ("update", "final"):
        out, state = _run(WindowedAggregate(spec, "count", grace, emit), recs, batch)
        results = defaultdict(list)
        for e in out:
            if e.role == OUTPUT:
                results[e.key[:-8], struct.unpack(">q", e.key[-8:])[0]].append(struct.unpack(">q", e.value)[0])
        assert sum(e.role == LATE for e in out) == late
        if emit == "update":  # per batch a window's latest count: rising to its total
            assert {w: v[-1] for w, v in results.items()} == dict(counts)
            assert all(v == sorted(set(v)) for v in results.values())
        else:  # exactly the closed windows, once each, with their totals
            assert results == {w: [counts[w]] for w in closed}
        # the store keeps the open windows only
        assert len(state.stores["aggregate"]) == len(set(counts) - closed)


def _session_oracle(gap: int, grace: int, inputs):
    """Sessions per key by the merge rule, with the store's retention (gap + grace): a session
    ending at or before stream time - gap - grace can no longer be merged with (the store
    checks against the stream time of its last write: the one before this record)."""
    sessions: dict[bytes, list[list[int]]] = defaultdict(list)  # [start, end, count]
    late, stream_time = 0, -1
    for key, ts in inputs:
        alive = [s for s in sessions[key] if s[1] > stream_time - gap - grace]
        stream_time = max(stream_time, ts)
        near = [s for s in alive if s[1] >= ts - gap and s[0] <= ts + gap]
        start, end = min([ts] + [s[0] for s in near]), max([ts] + [s[1] for s in near])
        if end < stream_time - grace:
            late += 1
            continue
        sessions[key] = [s for s in sessions[key] if s not in near] + [[start, end, 1 + sum(s[2] for s in near)]]
    final = {(k, s, e): n for k, lst in sessions.items() for s, e, n in lst}
    return final, late, stream_time


@settings(max_examples=150, deadline=None)
@given(records, st.integers(1, 8), st.integers(0, 5), batch_sizes)
def test_sessions_match_the_oracle(inputs, gap, grace, batch):
    final, late, stream_time = _session_oracle(gap, grace, inputs)
    recs = [Record(k, b"1", ts, offset=i) for i, (k, ts) in enumerate(inputs)]
    out, _ = _run(SessionAggregate(WindowSpec("session", gap, 0), "count", grace, "update"), recs, batch)
    latest = {}
    for e in out:
        if e.role == OUTPUT:
            end, start = struct.unpack(">qq", e.key[-16:])
            session = (e.key[:-16], start, end)
            assert e.value is not None or session in latest  # tombstones only for written sessions
            latest[session] = None if e.value is None else struct.unpack(">q", e.value)[0]
    assert {w: n for w, n in latest.items() if n is not None} == final
    assert sum(e.role == LATE for e in out) == late
    out, _ = _run(SessionAggregate(WindowSpec("session", gap, 0), "count", grace, "final"), recs, batch)
    emitted = [(e.key, e.value) for e in out if e.role == OUTPUT]
    closed = {w for w in final if w[2] < stream_time - grace}
    assert len(emitted) == len(set(emitted))
    assert {(k, s, e) for k, s, e in final if (k, s, e) in closed} <= {
        (key[:-16], struct.unpack(">qq", key[-16:])[1], struct.unpack(">qq", key[-16:])[0]) for key, _ in emitted}


sides = st.lists(st.tuples(st.sampled_from([LEFT, RIGHT]), st.sampled_from([b"a", b"b"]), st.integers(0, 40)),
                 max_size=30)  # equal key, side and time happen often: duplicates must all come out


@settings(max_examples=150, deadline=None)
@given(sides, st.integers(0, 6), st.integers(0, 4), st.sampled_from(["inner", "left", "outer"]))
def test_stream_stream_join_matches_the_oracle(inputs, within, grace, how):
    """In processing order, each non-late record joins every earlier non-late record of the
    other side with the same key within `within`; unmatched records of the outer side(s) come
    out with null once stream time passes t + within + grace."""
    recs = [Record(k, f"{'LR'[s]}{i}".encode(), ts, s, offset=i) for i, (s, k, ts) in enumerate(inputs)]
    out, _ = _run(StreamStreamJoin(how, within, grace, make_joiner("concat")), recs, len(recs) or 1)
    seen, pairs, late, matched, stream_time = [], Counter(), 0, set(), -1
    for r in processing_order(recs):
        stream_time = max(stream_time, r.timestamp)
        if r.timestamp + within + grace < stream_time:
            late += 1
            continue
        for o in seen:
            if o.side != r.side and o.key == r.key and abs(o.timestamp - r.timestamp) <= within:
                left, right = (r, o) if r.side == LEFT else (o, r)
                pairs[left.value + b"," + right.value] += 1
                matched |= {left.value, right.value}
        seen.append(r)
    outer_sides = {"inner": (), "left": (LEFT,), "outer": (LEFT, RIGHT)}[how]
    for r in seen:
        if r.side in outer_sides and r.value not in matched and r.timestamp + within + grace < stream_time:
            pairs[(r.value + b",null") if r.side == LEFT else (b"null," + r.value)] += 1
    got = Counter(e.value for e in out if e.role == OUTPUT)
    # an unmatched record can be emitted with null before a later, still-in-grace partner
    # (Kafka Streams does the same), so the oracle's nulls are a subset of what came out
    assert Counter({v: n for v, n in got.items() if b"null" not in v}) == Counter(
        {v: n for v, n in pairs.items() if b"null" not in v})
    assert all(got[v] >= n for v, n in pairs.items() if b"null" in v)
    assert sum(e.role == LATE for e in out) == late


def test_processing_order_merges_partitions_by_next_timestamp():
    # left partition 0: @5 @7; left partition 1: @6 @1; right: @6
    records = [Record(b"k", b"", ts, side, None, partition, offset)
               for side, partition, offset, ts in [(LEFT, 0, 0, 5), (LEFT, 0, 1, 7), (LEFT, 1, 0, 6),
                                                   (LEFT, 1, 1, 1), (RIGHT, 0, 0, 6)]]
    order = [(r.side, r.partition, r.timestamp) for r in processing_order(records)]
    # each partition keeps its offset order (@6 before @1 in partition 1); the right side wins the tie at 6
    assert order == [(LEFT, 0, 5), (RIGHT, 0, 6), (LEFT, 1, 6), (LEFT, 1, 1), (LEFT, 0, 7)]
