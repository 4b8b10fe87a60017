"""JSONL record envelopes (kstool.kafka.records): any text is a record or an EnvelopeError, and
a record read writes back as the same record."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from kstool.base.serdes import decoder
from kstool.kafka.exceptions import EnvelopeError
from kstool.kafka.records import from_envelope, to_envelope


@given(st.text(max_size=200))
@settings(max_examples=300)
def test_jsonl_envelope_parser(text):
    try:
        record = from_envelope(text)
    except EnvelopeError:
        return
    again = from_envelope(json.dumps(to_envelope(record, decoder("string"), decoder("string"))))
    assert (again.key, again.value, again.headers, again.timestamp, again.partition) == (
        record.key, record.value, record.headers, record.timestamp, record.partition)
