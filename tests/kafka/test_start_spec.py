"""--from's start spec (kstool.kafka.consume.StartSpec): what the parser accepts reads back the
same from its canonical spelling; anything else is the one-line usage error."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from kstool.base.errors import UsageError
from kstool.kafka.consume import StartSpec

SPELLINGS = ["beginning", "earliest", " END ", "latest", "stored", "0", "42", "-0", "-10", "٣"]


def _canonical(spec: StartSpec) -> str:
    return {"offset": str(spec.value), "last": f"-{spec.value}"}.get(spec.kind, spec.kind)


@given(st.one_of(st.text(max_size=20), st.sampled_from(SPELLINGS), st.from_regex(r"\s*-?[0-9]{1,12}\s*", fullmatch=True)))
def test_what_the_parser_accepts_reads_back_from_its_canonical_spelling(text):
    try:
        spec = StartSpec.parse(text)
    except UsageError as error:
        assert "\n" not in str(error) and "invalid --from" in str(error)
        return
    assert StartSpec.parse(_canonical(spec)) == spec


@pytest.mark.parametrize("text, expected", [("earliest", StartSpec("beginning")), ("-5", StartSpec("last", 5)),
                                            ("17", StartSpec("offset", 17))])
def test_kafkas_spellings_mean_what_kafka_means(text, expected):
    assert StartSpec.parse(text) == expected
