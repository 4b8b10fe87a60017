"""Kafka's reset-offsets CSV (kstool.reset.offset_spec), parsed and written back."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kstool.reset.exceptions import ResetPlanError
from kstool.reset.offset_spec import parse_offsets_csv


@given(st.text(max_size=200))
@settings(max_examples=200)
def test_offsets_csv_parser(text):
    try:
        offsets = parse_offsets_csv(text)
    except ResetPlanError:
        return
    assert offsets and all(p >= 0 and o >= 0 for (_, p), o in offsets.items())


@given(st.integers(0, 10**6), st.integers(0, 10**12), st.text(alphabet="abc-._", min_size=1, max_size=10))
def test_offsets_csv_round_trip(partition, offset, topic):
    from kstool.reset.offset_spec import format_offsets_csv

    data = {(topic, partition): offset}
    assert parse_offsets_csv(format_offsets_csv(data)) == data
