"""Kafka's reset-offsets CSV (kstool.reset.offset_spec), parsed and written back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kstool.reset.exceptions import ResetPlanError
from kstool.reset.offset_spec import format_offsets_csv, parse_offsets_csv


@given(st.text(max_size=200))
@settings(max_examples=200)
def test_what_the_parser_accepts_reads_back_from_its_canonical_spelling(text):
    """Anything else is the one-line reset error (a crash fails the test)."""
    try:
        offsets = parse_offsets_csv(text)
    except ResetPlanError:
        return
    assert offsets and all(p >= 0 and o >= 0 for (_, p), o in offsets.items())
    assert parse_offsets_csv(format_offsets_csv(offsets)) == offsets


def test_a_digit_that_is_not_a_number_is_the_one_line_reset_error():
    """'²' is a digit to str.isdigit, not to int(): it crashed with ValueError."""
    for line in ("t,²,1", "t,1,³", "t,⑦,1"):
        with pytest.raises(ResetPlanError, match=r"^offsets.csv:1: expected topic,partition,offset with non-negative"):
            parse_offsets_csv(line + "\n", "offsets.csv")
    assert parse_offsets_csv("t,٣,42\n") == {("t", 3): 42}  # a decimal digit of another script, as Java's parseInt


@given(st.integers(0, 10**6), st.integers(0, 10**12), st.text(alphabet="abc-._", min_size=1, max_size=10))
def test_offsets_csv_round_trip(partition, offset, topic):
    data = {(topic, partition): offset}
    assert parse_offsets_csv(format_offsets_csv(data)) == data
