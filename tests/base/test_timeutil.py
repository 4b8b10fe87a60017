"""Times and durations users give (kstool.base.timeutil)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, strategies as st

from kstool.base.errors import UsageError
from kstool.base.timeutil import MAX_TIME_MS, format_time, parse_duration, parse_time

NOW = 1_750_000_000_000


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


@pytest.mark.parametrize("text,expected", [
    ("500ms", 500), ("10s", 10_000), ("5m", 300_000), ("1h", 3_600_000), ("2d", 172_800_000),
    ("1h30m", 5_400_000), ("PT5M", 300_000), ("P1DT2H", 93_600_000), ("PT0.5S", 500),
])
def test_durations(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "5", "5x", "P", "PT", "h", "1h 2m", "-5m", "P1Y"])
def test_bad_durations_are_usage_errors(text):
    with pytest.raises(UsageError):
        parse_duration(text)


@pytest.mark.parametrize("text,expected", [
    ("2024-05-01T12:00:00", _ms(datetime(2024, 5, 1, 12, tzinfo=timezone.utc))),
    ("2024-05-01T12:00:00.250Z", _ms(datetime(2024, 5, 1, 12, 0, 0, 250_000, tzinfo=timezone.utc))),
    ("2024-05-01T12:00:00+0200", _ms(datetime(2024, 5, 1, 10, tzinfo=timezone.utc))),
    ("2024-05-01T12:00:00+02:00", _ms(datetime(2024, 5, 1, 10, tzinfo=timezone.utc))),
    ("1714564800000", 1_714_564_800_000),
    ("-1h", NOW - 3_600_000),
    ("PT30M", NOW - 1_800_000),
    ("now", NOW),
])
def test_times(text, expected):
    assert parse_time(text, now=NOW) == expected


@given(st.text(max_size=30))
def test_a_time_the_parser_accepts_reads_back_from_its_iso_rendering(text):
    try:
        value = parse_time(text, now=NOW)
    except UsageError:
        return
    assert 0 <= value <= MAX_TIME_MS and parse_time(format_time(value)) == value


@given(st.text(max_size=20))
def test_a_duration_the_parser_accepts_is_that_long_ago_as_a_time(text):
    try:
        ms = parse_duration(text)
    except UsageError:
        return
    assert ms >= 0 and parse_time("-" + text.strip(), now=ms) == 0  # relative times take durations as they are


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1)))
def test_iso_times_round_trip(dt):
    dt = dt.replace(microsecond=(dt.microsecond // 1000) * 1000, tzinfo=timezone.utc)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    assert parse_time(dt.isoformat()) == (dt - epoch) // timedelta(milliseconds=1)
