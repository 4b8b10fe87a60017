"""What the windowed aggregates' differential tests share (tests/streams/test_differential_windows.py,
the fast tier; test_differential_runs.py, kstool runs): inputs, windows, aggregations, Kafka
Streams' answer (tests/twin.py) and the comparison of larger micro-batches."""

from __future__ import annotations

import json
import os
import struct
from collections import defaultdict

from hypothesis import strategies as st

# `make test-differential` runs many more (KSTOOL_DIFFERENTIAL_EXAMPLES)
EXAMPLES = int(os.environ.get("KSTOOL_DIFFERENTIAL_EXAMPLES", "200"))
KEYS = ["a", "b", "c"]
inputs = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 60), st.integers(-5, 5)), max_size=30)
aggregations = st.sampled_from(["count", "sum", "min", "max", "avg", "concat", "latest"])
windows = st.sampled_from([("tumbling:10ms", {"type": "tumbling", "size": 10}),
                           ("hopping:10ms,5ms", {"type": "hopping", "size": 10, "advance": 5}),
                           ("hopping:9ms,3ms", {"type": "hopping", "size": 9, "advance": 3}),
                           ("sliding:7ms", {"type": "sliding", "size": 7}),
                           ("session:5ms", {"type": "session", "size": 5})])
# onWindowClose with a time window store's default retention (size + grace) loses a window when
# one record moves stream time past its end + retention: the store drops it before the emit reads
# it (docs/differences-from-kafka-streams.md); kstool emits it, as suppress does
LONG_RETENTION_MS = 10_000


def kstool_value(agg: str, value: bytes | None) -> int | float | str | None:
    """An aggregate as the output has it: an 8-byte long (an average: a double), or text."""
    if value is None:
        return None
    if agg in ("concat", "latest"):
        return value.decode()
    return struct.unpack(">d" if agg == "avg" else ">q", value)[0]


def header_of(index: int) -> tuple[tuple[str, str], ...]:
    """The headers of an input's record `index`: its index, but every fourth record has none."""
    return () if index % 4 == 3 else (("n", str(index)),)


def kafka_streams(twin, window: dict, agg: str, grace: int, emit: str, records: list[tuple[str, int, int]],
                  final: str = "on-window-close") -> list[tuple]:
    """Kafka Streams' output records: (key, start, end, value, timestamp, headers)."""
    answer = twin.ask({"window": {**window, "grace": grace}, "agg": agg, "emit": emit, "final": final,
                       "cache": window["type"] != "session",
                       "records": [["input", k, str(n), ts, list(header_of(i))] for i, (k, ts, n) in enumerate(records)]})
    rows = []
    for record in answer:
        window_key = json.loads(record["key"])
        rows.append((window_key["key"], window_key["start"], window_key["end"], twin_value(agg, record["value"]),
                     record["timestamp"], tuple(tuple(header) for header in record["headers"])))
    return rows


def twin_value(agg: str, text: str | None) -> int | float | str | None:
    """An aggregate as the twin writes it: text (a number's, but by concat and latest)."""
    return text if text is None or agg in ("concat", "latest") else float(text) if agg == "avg" else int(text)


def partitions_of(records: list[tuple[str, int, int]], partitions: int) -> list[list[tuple[str, int, int]]]:
    """Each partition is a task of its own, with its own stream time: keys spread over them."""
    return [[record for record in records if KEYS.index(record[0]) % partitions == p] for p in range(partitions)]


SLIDING_7, SESSION_5, TUMBLING_10 = (("sliding:7ms", {"type": "sliding", "size": 7}),
                                     ("session:5ms", {"type": "session", "size": 5}),
                                     ("tumbling:10ms", {"type": "tumbling", "size": 10}))


def assert_updates_within(ours: list[tuple], theirs: list[tuple]) -> None:
    """Larger micro-batches: each window's last value is the same, and kstool's values of a
    window are Kafka Streams' updates of it with some left out (a batch writes a window's latest
    value once; a window a batch made and merged away, a session, is not written at all)."""
    ours_by_window, theirs_by_window = defaultdict(list), defaultdict(list)
    for rows, by_window in ((ours, ours_by_window), (theirs, theirs_by_window)):
        for key, start, end, value, *_ in rows:
            by_window[key, start, end].append(value)
    assert {w: v[-1] for w, v in ours_by_window.items()} == {w: v[-1] for w, v in theirs_by_window.items()
                                                             if v[-1] is not None or w in ours_by_window}
    for window_key, values in ours_by_window.items():
        remaining = iter(theirs_by_window[window_key])
        assert all(value in remaining for value in values), (window_key, values, theirs_by_window[window_key])


def assert_last_headers_alike(ours: list[tuple], theirs: list[tuple]) -> None:
    """Each window's last update carries the headers of the last record that updated it (rows
    end with their headers), in any micro-batches."""
    def last(rows: list[tuple]) -> dict[tuple, tuple]:
        return {row[:3]: row[-1] for row in rows}
    assert last(ours) == {window: headers for window, headers in last(theirs).items() if window in last(ours)}


def without_tombstones_of_unmoved_sessions(rows: list[tuple]) -> list[tuple]:
    """Kafka Streams removes every session a record merges, then puts the merged one: when that is
    the same session (the record fell inside it), its output with caching off is a tombstone and
    then the new value of the same window; kstool writes the value alone, as the cache would."""
    return [row for row, after in zip(rows, [*rows[1:], None])
            if not (row[3] is None and after is not None and after[:3] == row[:3] and after[3] is not None)]
