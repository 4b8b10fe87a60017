"""Scripted windowed-aggregate inputs and the outputs worked out for them by hand, and how the
output's windowed keys read, shared by the windowed aggregate, restore and cluster tests."""

from __future__ import annotations

import struct

from tests.helpers import T0

# (key, value, seconds after T0), one partition, in offset order
INPUT = [("a", "1", 1), ("a", "1", 3), ("a", "1", 12), ("b", "1", 2), ("a", "1", 16),
         ("a", "1", 4), ("b", "1", 25), ("a", "1", 9), ("a", "1", 22)]


def at(seconds: float) -> int:
    return T0 + round(seconds * 1000)


def windowed_counts(messages) -> list[tuple]:
    """(key, start, count or None, timestamp) from TimeWindowedSerializer keys (key ‖ start)."""
    out = []
    for m in messages:
        key, start = m.key()[:-8], struct.unpack(">q", m.key()[-8:])[0]
        count = None if m.value() is None else struct.unpack(">q", m.value())[0]
        out.append((key.decode(), start, count, m.timestamp()[1]))
    return out


def session_counts(messages) -> list[tuple]:
    """(key, start, end, count or None) from SessionWindowedSerializer keys (key ‖ end ‖ start)."""
    out = []
    for m in messages:
        end, start = struct.unpack(">qq", m.key()[-16:])
        count = None if m.value() is None else struct.unpack(">q", m.value())[0]
        out.append((m.key()[:-16].decode(), start, end, count))
    return out


SESSION_WINDOW = ("--window", "session:5s", "--grace", "2s", "--max-records-per-batch", "2")


# worked out in test_session_windows; in final mode [22,22] and [25,25] are still open at stream time 25
SESSION_OUTPUT = {
    "update": [("a", at(1), at(3), 2), ("a", at(12), at(12), 1), ("a", at(12), at(12), None),
               ("a", at(12), at(16), 2), ("b", at(25), at(25), 1), ("a", at(22), at(22), 1)],
    "final": [("a", at(1), at(3), 2), ("a", at(12), at(16), 2)]}


# The input of the tests above in two runs: the second run must know stream time 16 and the
# open windows from the first (a@4 late; [0,10) closed, not reopened). Run 1 (one batch):
# [0,10) a=2, [0,10) b=1, [10,20) a=2; run 2: [20,30) b=1, a=1.
TWO_RUNS = (INPUT[:5], INPUT[5:])


TWO_RUNS_WINDOW = ("--window", "tumbling:10s", "--grace", "5s")


TWO_RUNS_OUTPUT = [("a", at(0), 2, at(3)), ("b", at(0), 1, at(2)), ("a", at(10), 2, at(16)),
                   ("b", at(20), 1, at(25)), ("a", at(20), 1, at(22))]


# KGroupedStreamImplTest#doCountSlidingWindows (KGroupedStreamImplTest.java:222): (key, ms), in order
SLIDING_INPUT = [("1", 500), ("1", 999), ("1", 600), ("2", 500), ("2", 600), ("2", 700), ("3", 501), ("1", 1000),
                 ("1", 1000), ("2", 1000), ("2", 1000), ("3", 600)]


# its expected updates, the last one of each window: (key, start, count, timestamp), ms
SLIDING_LAST = [("1", 0, 1, 500), ("1", 100, 2, 600), ("1", 499, 3, 999), ("1", 500, 5, 1000), ("1", 501, 4, 1000),
                ("1", 601, 3, 1000), ("1", 1000, 2, 1000), ("2", 0, 1, 500), ("2", 100, 2, 600), ("2", 200, 3, 700),
                ("2", 500, 5, 1000), ("2", 501, 4, 1000), ("2", 601, 3, 1000), ("2", 701, 2, 1000),
                ("3", 1, 1, 501), ("3", 100, 2, 600), ("3", 502, 1, 600)]
