"""The key mappers of --group-by, --foreign-key and --global-key (kstool.streams.key_mappers),
among them the one Kafka's own tests use: `value.split(",")[1]` (KStreamGlobalKTableJoinTest,
KTableKTableForeignKeyJoinIntegrationTest's `value.split("\\|")[1]`)."""

from __future__ import annotations

import pytest

from kstool.base.errors import UsageError
from kstool.streams.key_mappers import key_mapper

ALL = ("key", "value", "field", "split")


@pytest.mark.parametrize("spec, key, value, expected", [
    ("key", b"k", b"v", b"k"),
    ("value", b"k", b"v", b"v"),
    ("value", b"k", None, None),
    ("field:customer.id", b"k", b'{"customer": {"id": "c1"}}', b"c1"),
    ("field:n", b"k", b'{"n": 7}', b"7"),  # not a string: its JSON
    ("field:n", b"k", b"not json", None),
    ("split:,:1", b"k", b"X0,FKey0", b"FKey0"),  # KStreamGlobalKTableJoinTest's mapper
    ("split:,:1", b"k", b"X0", None),  # no such field: no key
    ("split:|:1", b"k", b"a1|c1|gold", b"c1"),  # the foreign-key integration test's
    ("split:::0", b"k", b"a:b", b"a"),  # the separator is everything up to the last ':'
    ("split:->:2", b"k", b"a->b->c", b"c"),
    ("split:,:2", b"k", b"a,b,", b""),  # an empty trailing field is kept (Java's split drops it)
    ("split:,:0", b"k", None, None),
    ("split:\u00e9:1", b"k", "x\u00e9y".encode(), b"y"),  # UTF-8 separators split as Java's Strings do
])
def test_each_form_maps_a_record_to_its_key(spec, key, value, expected):
    assert key_mapper(spec, "--group-by", ALL)(key, value) == expected


@pytest.mark.parametrize("spec", ["field:", "split:,", "split::1", "split:,:-1", "split:,:x", "keys", "value:x"])
def test_a_malformed_spec_is_one_line_naming_the_forms(spec):
    with pytest.raises(UsageError) as refused:
        key_mapper(spec, "--group-by", ALL)
    message = str(refused.value)
    assert message.startswith("--group-by is one of key, value, field:PATH, split:SEP:N") and repr(spec) in message
    assert "\n" not in message


def test_a_form_the_option_does_not_take_is_refused():
    with pytest.raises(UsageError, match=r"--foreign-key is one of field:PATH, split:SEP:N"):
        key_mapper("key", "--foreign-key", ("field", "split"))
