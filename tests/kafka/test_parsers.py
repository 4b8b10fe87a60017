"""Parsers of the Kafka layer: --from start specs, JSONL record envelopes."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from kstool.base.errors import UsageError
from kstool.base.serdes import decoder
from kstool.kafka.consume import StartSpec
from kstool.kafka.exceptions import EnvelopeError
from kstool.kafka.records import from_envelope


@given(st.text(max_size=20))
def test_start_spec_parser(text):
    try:
        spec = StartSpec.parse(text)
    except UsageError:
        return
    assert spec.kind in ("beginning", "end", "stored", "offset", "last")


@given(st.text(max_size=200))
@settings(max_examples=300)
def test_jsonl_envelope_parser(text):
    """Any text is a record or an EnvelopeError, and a record it reads writes back the same."""
    from kstool.kafka.records import to_envelope

    try:
        record = from_envelope(text)
    except EnvelopeError:
        return
    again = from_envelope(json.dumps(to_envelope(record, decoder("string"), decoder("string"))))
    assert (again.key, again.value, again.headers, again.timestamp, again.partition) == (
        record.key, record.value, record.headers, record.timestamp, record.partition)
