"""Changelog key formats (kstool.changelog.layouts.KeySpec)."""

from __future__ import annotations

from hypothesis import given, strategies as st

from kstool.base.errors import UsageError
from kstool.changelog.layouts import KEY_FORMATS, KeySpec


@given(st.text(max_size=30) | st.builds("{}:{}".format, st.sampled_from(["windowed", "window", "session",
                                                                      "time-windowed", "key-value", "x"]),
                                      st.sampled_from([*KEY_FORMATS, "nope"])))
def test_a_key_format_the_parser_accepts_reads_back_from_its_canonical_spelling(text):
    try:
        spec = KeySpec.parse(text)
    except UsageError:
        return
    canonical = spec.key_format if spec.layout == "key-value" else f"{spec.layout}:{spec.key_format}"
    assert spec.layout in ("key-value", "window", "session", "time-windowed") and KeySpec.parse(canonical) == spec
