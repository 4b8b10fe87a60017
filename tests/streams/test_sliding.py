"""Sliding windows (`--window sliding:D`) replayed from apache/kafka's own tests
(streams/src/test/java/org/apache/kafka/streams/kstream/internals/
KStreamSlidingWindowAggregateTest.java, trunk as of 2024-10): each piped record goes through
kstool's SlidingWindowAggregate on its own, as TopologyTestDriver processes it. The tests
aggregate with MockAggregator.TOSTRING_ADDER ("0+1+2": the initializer's 0, then each value)
and collect per window start the set of (aggregate, timestamp) forwarded (gatherOutput); here
the same values are counted and summed, "0+1+2" being count 2 and sum 3."""

from __future__ import annotations

import json

import pytest

from kstool.contract import OUTPUT
from kstool.streams.sliding import SlidingWindowAggregate
from kstool.streams.task import Record, TaskState, run_task, task_stores
from kstool.streams.windows import WindowSpec
from tests.helpers import REPO


def _forwarded(difference: int, grace: int, emit: str, piped: list[tuple[str, int, int]]) -> list[tuple]:
    """piped: (key, value, timestamp) -> what was forwarded, in order: (key, window start,
    count, sum, timestamp)."""
    results = {}
    for agg in ("count", "sum"):
        window = SlidingWindowAggregate(WindowSpec("sliding", difference, 0), agg, grace, emit, "string", "json")
        state, out = TaskState.empty(task_stores(window)), []
        for offset, (key, value, ts) in enumerate(piped):
            out += run_task(window, state, [Record(key.encode(), str(value).encode(), ts, number=value, offset=offset)])
        results[agg] = [(json.loads(e.key), int(e.value), e.timestamp) for e in out if e.role == OUTPUT]
    return [(key["key"], key["start"], count, total, ts)
            for (key, count, ts), (_, total, _) in zip(results["count"], results["sum"])]


def _gathered(difference: int, grace: int, emit: str, piped: list[tuple[int, int]]) -> dict[int, set[tuple]]:
    """piped: (value, timestamp) of key A -> window start -> {(count, sum, timestamp)}."""
    gathered: dict[int, set[tuple]] = {}
    for _, start, count, total, ts in _forwarded(difference, grace, emit, [("A", v, ts) for v, ts in piped]):
        gathered.setdefault(start, set()).add((count, total, ts))
    return gathered


def _expected(windows: dict[int, list[tuple[str, int]]]) -> dict[int, set[tuple]]:
    """The test's expected map, its "0+..." strings as (count, sum)."""
    return {start: {(*_count_and_sum(text), ts) for text, ts in values} for start, values in windows.items()}


def _count_and_sum(text: str) -> tuple[int, int]:
    terms = [int(t) for t in text.split("+")[1:]]
    return len(terms), sum(terms)


SMALL = [(1, 10), (2, 10), (3, 14), (4, 15), (5, 20), (6, 22), (7, 30)]


@pytest.mark.parametrize("emit", ["update", "final"])
def test_aggregate_small_input(emit):
    """testAggregateSmallInput (KStreamSlidingWindowAggregateTest.java:125):
    ofTimeDifferenceAndGrace(10, 5)."""
    final = {0: [("0+1+2", 10)], 4: [("0+1+2+3", 14)], 5: [("0+1+2+3+4", 15)], 10: [("0+1+2+3+4+5", 20)],
             11: [("0+3+4+5", 20)], 12: [("0+3+4+5+6", 22)]}
    update = {0: [("0+1", 10), ("0+1+2", 10)], 4: [("0+1+2+3", 14)], 5: [("0+1+2+3+4", 15)],
              10: [("0+1+2+3+4+5", 20)], 11: [("0+3", 14), ("0+3+4", 15), ("0+3+4+5", 20)],
              12: [("0+3+4+5+6", 22)], 15: [("0+4", 15), ("0+4+5", 20), ("0+4+5+6", 22)],
              16: [("0+5", 20), ("0+5+6", 22)], 20: [("0+5+6+7", 30)], 21: [("0+6", 22), ("0+6+7", 30)],
              23: [("0+7", 30)]}
    assert _gathered(10, 5, emit, SMALL) == _expected(final if emit == "final" else update)


EARLY = [(1, 0), (2, 5), (3, 6), (4, 3), (5, 13), (6, 10), (7, 70)]


@pytest.mark.parametrize("emit", ["update", "final"])
def test_early_records_small_input(emit):
    """testEarlyRecordsSmallInput (KStreamSlidingWindowAggregateTest.java:661):
    ofTimeDifferenceAndGrace(50, 0); records before 50 share the window [0, 50]."""
    final = {0: [("0+1+2+3+4+5+6", 13)], 1: [("0+2+3+4+5+6", 13)], 4: [("0+2+3+5+6", 13)],
             6: [("0+3+5+6", 13)], 7: [("0+5+6", 13)], 11: [("0+5", 13)]}
    update = {0: [("0+1", 0), ("0+1+2", 5), ("0+1+2+3", 6), ("0+1+2+3+4", 6), ("0+1+2+3+4+5", 13),
                  ("0+1+2+3+4+5+6", 13)],
              1: [("0+2", 5), ("0+2+3", 6), ("0+2+3+4", 6), ("0+2+3+4+5", 13), ("0+2+3+4+5+6", 13)],
              4: [("0+2+3", 6), ("0+2+3+5", 13), ("0+2+3+5+6", 13)],
              6: [("0+3", 6), ("0+3+5", 13), ("0+3+5+6", 13)], 7: [("0+5", 13), ("0+5+6", 13)],
              11: [("0+5", 13)], 20: [("0+7", 70)]}
    assert _gathered(50, 0, emit, EARLY) == _expected(final if emit == "final" else update)


NO_GRACE = [(1, 100), (2, 105), (3, 106), (4, 103), (5, 113), (6, 110)]


@pytest.mark.parametrize("emit", ["update", "final"])
def test_no_grace_period_small_input(emit):
    """testNoGracePeriodSmallInput (KStreamSlidingWindowAggregateTest.java:1124):
    ofTimeDifferenceWithNoGrace(50)."""
    final = {50: [("0+1", 100)], 55: [("0+1+2", 105)], 56: [("0+1+2+3+4", 106)]}
    update = {50: [("0+1", 100)], 55: [("0+1+2", 105)], 56: [("0+1+2+3", 106), ("0+1+2+3+4", 106)],
              63: [("0+1+2+3+4+5", 113), ("0+1+2+3+4+5+6", 113)],
              101: [("0+2", 105), ("0+2+3", 106), ("0+2+3+4", 106), ("0+2+3+4+5", 113), ("0+2+3+4+5+6", 113)],
              104: [("0+2+3", 106), ("0+2+3+5", 113), ("0+2+3+5+6", 113)],
              106: [("0+3", 106), ("0+3+5", 113), ("0+3+5+6", 113)], 107: [("0+5", 113), ("0+5+6", 113)],
              111: [("0+5", 113)]}
    assert _gathered(50, 0, emit, NO_GRACE) == _expected(final if emit == "final" else update)


LARGE = [("A", 1, 10), ("A", 2, 20), ("A", 3, 22), ("A", 4, 15), ("B", 1, 12), ("B", 2, 13), ("B", 3, 18),
         ("B", 4, 19), ("B", 5, 25), ("B", 6, 14), ("C", 1, 11), ("C", 2, 15), ("C", 3, 16), ("C", 4, 21),
         ("C", 5, 23), ("D", 4, 11), ("D", 2, 12), ("D", 3, 29), ("D", 5, 16)]


@pytest.mark.parametrize("emit", ["update", "final"])
def test_aggregate_large_input(emit):
    """testAggregateLargeInput (KStreamSlidingWindowAggregateTest.java:290): ofTimeDifferenceAndGrace(10,
    50), with --emit final grace 10 (B@14, C@11, D@11, D@12, D@16 then update only windows that
    have closed); the forwarded records sorted by key and window start (stably: in order)."""
    final = [("A", 0, "0+1", 10), ("A", 5, "0+1+4", 15), ("B", 2, "0+1", 12), ("B", 3, "0+1+2", 13),
             ("B", 8, "0+1+2+3+6", 18), ("C", 5, "0+2", 15), ("C", 6, "0+2+3", 16)]
    update = [
        ("A", 0, "0+1", 10), ("A", 5, "0+1+4", 15), ("A", 10, "0+1+2", 20), ("A", 10, "0+1+2+4", 20),
        ("A", 11, "0+2", 20), ("A", 11, "0+2+4", 20), ("A", 12, "0+2+3", 22), ("A", 12, "0+2+3+4", 22),
        ("A", 16, "0+2+3", 22), ("A", 21, "0+3", 22),
        ("B", 2, "0+1", 12), ("B", 3, "0+1+2", 13), ("B", 4, "0+1+2+6", 14), ("B", 8, "0+1+2+3", 18),
        ("B", 8, "0+1+2+3+6", 18), ("B", 9, "0+1+2+3+4", 19), ("B", 9, "0+1+2+3+4+6", 19), ("B", 13, "0+2", 13),
        ("B", 13, "0+2+3", 18), ("B", 13, "0+2+3+4", 19), ("B", 13, "0+2+3+4+6", 19), ("B", 14, "0+3", 18),
        ("B", 14, "0+3+4", 19), ("B", 14, "0+3+4+6", 19), ("B", 15, "0+3+4+5", 25), ("B", 19, "0+4", 19),
        ("B", 19, "0+4+5", 25), ("B", 20, "0+5", 25),
        ("C", 1, "0+1", 11), ("C", 5, "0+1+2", 15), ("C", 6, "0+1+2+3", 16), ("C", 11, "0+1+2+3+4", 21),
        ("C", 12, "0+2", 15), ("C", 12, "0+2+3", 16), ("C", 12, "0+2+3+4", 21), ("C", 13, "0+2+3+4+5", 23),
        ("C", 16, "0+3", 16), ("C", 16, "0+3+4", 21), ("C", 16, "0+3+4+5", 23), ("C", 17, "0+4", 21),
        ("C", 17, "0+4+5", 23), ("C", 22, "0+5", 23),
        ("D", 1, "0+4", 11), ("D", 2, "0+4+2", 12), ("D", 6, "0+4+2+5", 16), ("D", 12, "0+2", 12),
        ("D", 12, "0+2+5", 16), ("D", 13, "0+5", 16), ("D", 19, "0+3", 29)]
    forwarded = sorted(_forwarded(10, 10 if emit == "final" else 50, emit, LARGE), key=lambda f: f[:2])
    assert forwarded == [(key, start, *_count_and_sum(text), ts)
                         for key, start, text, ts in (final if emit == "final" else update)]



def test_windows_past_the_store_retention_are_not_seen():
    """The store keeps windows for 2D + grace (SlidingWindowStoreMaterializer.java:101) behind
    the newest window start it was given; a fetch starts no earlier than that - retention + 1
    (AbstractRocksDBSegmentedBytesStore#getActualFrom, AbstractRocksDBSegmentedBytesStore.java:119).
    D = 10, grace 5: A@105, A@119, A@120 (whose right window of 119, [120, 130], makes 120 the
    newest start), then A@115, just in time (close time 115): the window [95, 105] of A@105 is
    past 120 - 25 + 1, so A@115 finds no previous record: its left window [105, 115] holds
    A@115 alone (brute force: with A@105) and A@105 gets no right window."""
    forwarded = _forwarded(10, 5, "update", [("A", 1, 105), ("A", 2, 119), ("A", 4, 120), ("A", 8, 115)])
    assert forwarded == [("A", 95, 1, 1, 105), ("A", 109, 1, 2, 119), ("A", 120, 1, 4, 120), ("A", 110, 2, 6, 120),
                         ("A", 110, 3, 14, 120), ("A", 109, 2, 10, 119), ("A", 105, 1, 8, 115), ("A", 116, 2, 6, 120)]


SUPPRESS_SCENARIO = [("k1", 1, 10), ("k1", 1, 11), ("k1", 1, 10), ("k1", 1, 13), ("k1", 1, 10), ("k1", 1, 24),
                     ("k1", 1, 5), ("k1", 1, 7), ("k1", 1, 90)]


def test_final_results_for_sliding_windows():
    """SuppressScenarioTest#shouldSupportFinalResultsForSlidingWindows (SuppressScenarioTest.java:469):
    ofTimeDifferenceAndGrace(5, 15), count; "output-raw" sorted by window text then timestamp;
    the final results come when k1@90 closes them all, in end order. (kstool's --emit final is
    EmitStrategy.onWindowClose: a window goes once its end is before stream time - grace, which
    for these windows is when suppress(untilWindowCloses) emits them too.)"""
    def text(start: int) -> str:
        return f"[k1@{start}/{start + 5}]"

    raw = sorted(((text(start), count, ts) for _, start, count, _, ts in _forwarded(5, 15, "update", SUPPRESS_SCENARIO)),
                 key=lambda r: (r[0], r[2]))
    assert raw == [("[k1@11/16]", 1, 11), ("[k1@11/16]", 2, 13), ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24),
                   ("[k1@5/10]", 1, 10), ("[k1@5/10]", 2, 10), ("[k1@5/10]", 3, 10), ("[k1@5/10]", 4, 10),
                   ("[k1@5/10]", 5, 10), ("[k1@6/11]", 2, 11), ("[k1@6/11]", 3, 11), ("[k1@6/11]", 4, 11),
                   ("[k1@6/11]", 5, 11), ("[k1@8/13]", 4, 13), ("[k1@8/13]", 5, 13), ("[k1@85/90]", 1, 90)]
    final = [(text(start), count, ts) for _, start, count, _, ts in _forwarded(5, 15, "final", SUPPRESS_SCENARIO)]
    assert final == [("[k1@5/10]", 5, 10), ("[k1@6/11]", 5, 11), ("[k1@8/13]", 5, 13), ("[k1@11/16]", 2, 13),
                     ("[k1@12/17]", 1, 13), ("[k1@19/24]", 1, 24)]


def test_the_readme_s_lateness_rule_a_record_is_late_only_when_its_right_window_has_closed():
    """docs/running-topologies.md, "Sliding windows": late when t + 1 + D <= stream time - grace
    (KStreamSlidingWindowAggregate#process), not when its left window [t - D, t] has ended: at
    stream time 100 (D 10, no grace) a record at 90, whose left window [80, 90] has closed, still
    updates [90, 100] and makes its right window [91, 101]; one at 89 is dropped."""
    forwarded = _forwarded(10, 0, "update", [("A", 1, 100), ("A", 2, 90), ("A", 3, 89)])
    assert [(start, count, total) for _, start, count, total, _ in forwarded] == [(90, 1, 1), (90, 2, 3), (91, 1, 1)]
    readme = (REPO / "docs" / "running-topologies.md").read_text(encoding="utf-8")
    assert "late only when even its right window [t + 1, t + 1 + D] ends at or before stream time - grace" in readme
