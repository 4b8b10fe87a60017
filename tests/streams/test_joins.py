"""The json joiner: each side parsed as JSON when it is JSON, else taken as text; the plain
definition (parse, fall back to text on failure) is the oracle of the faster one."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from kstool.streams.joins import make_joiner


def _plain_json_joiner(left: bytes | None, right: bytes | None) -> bytes:
    def side(data: bytes | None):
        if data is None:
            return None
        text = data.decode("utf-8", "replace")
        try:
            return json.loads(text)
        except ValueError:
            return text
    return json.dumps({"left": side(left), "right": side(right)}, separators=(",", ":"), ensure_ascii=False).encode()


_json_texts = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                           max_leaves=6).map(json.dumps)
_sides = st.none() | st.binary(max_size=12) | _json_texts.map(str.encode) | st.sampled_from(
    [b"", b" ", b" \t\n{\"a\": 1}", b"NaN", b"-Infinity", b"Infinity", b"nul", b"trueish", b"[1,", b"\xff\xfe",
     b"k123", b"12abc", b"\"open", "grüße".encode()])


@given(_sides, _sides)
def test_json_joiner_equals_its_plain_definition(left, right):
    assert make_joiner("json")(left, right) == _plain_json_joiner(left, right)


def test_json_joiner_nests_json_and_quotes_text():
    assert make_joiner("json")(b'{"a": 1}', b"k1") == b'{"left":{"a":1},"right":"k1"}'
    assert make_joiner("json")(b"k1", None) == b'{"left":"k1","right":null}'
