"""Serdes (kstool.base.serdes) against Kafka's encodings, both ways."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from kstool.base.serdes import FORMATS, EncodeError, decoder, encoder


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)),
       st.sampled_from(FORMATS))
def test_what_an_encoder_writes_decodes_to_a_value_it_writes_again_byte_for_byte(value, fmt):
    try:
        encoded = encoder(fmt)(value)
    except EncodeError:
        return
    assert encoded is None or encoder(fmt)(decoder(fmt)(encoded)) == encoded


@pytest.mark.parametrize("fmt,value,raw", [
    ("long", 1, b"\x00" * 7 + b"\x01"), ("long", -1, b"\xff" * 8), ("int", 258, b"\x00\x00\x01\x02"),
    ("double", 1.5, bytes.fromhex("3ff8000000000000")), ("string", "ü", "ü".encode()),
    ("hex", "00ff", b"\x00\xff"), ("base64", "AP8=", b"\x00\xff"), ("json", {"a": 1}, b'{"a":1}'),
])
def test_serdes_match_kafka_encodings(fmt, value, raw):
    assert encoder(fmt)(value) == raw
    assert decoder(fmt)(raw) == value


def test_undecodable_bytes_become_base64():
    assert decoder("string")(b"\xff") == {"base64": "/w=="}
    assert decoder("long")(b"\x01") == {"base64": "AQ=="}
    assert decoder("json")(b"{nope") == {"base64": "e25vcGU="}


@given(st.binary(max_size=64))
def test_string_serde_round_trips_any_bytes(data):
    assert encoder("string")(decoder("string")(data)) == data
