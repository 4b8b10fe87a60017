"""Rendering (kstool.output): csv as JSON has it, times in tables, record format strings."""

from __future__ import annotations

import io

from confluent_kafka import Message
from hypothesis import example, given, strategies as st

from kstool.base.serdes import decoder
from kstool.kafka.records import Record, to_envelope
from kstool.output import Column, Listing, compile_batch_format, compile_batch_jsonl, compile_record_format, dumps, emit
from kstool.output.record_format import _FORMAT_TOKEN
from tests.conftest import cli
from tests.helpers import create_topic, jsonl_rows, nonempty_lines, produce_records


def test_csv_writes_booleans_and_nulls_as_json_does(kafka):
    out = io.StringIO()
    emit(Listing([{"ok": True, "gone": False, "none": None, "n": 1, "list": [1]}],
                 [Column(k) for k in ("ok", "gone", "none", "n", "list")]), "csv", out)
    assert out.getvalue() == 'ok,gone,none,n,list\ntrue,false,null,1,[1]\n'
    if kafka.embedded:
        status = nonempty_lines(cli("broker", "status", "-o", "csv").stdout)
        assert status[0].startswith("running,") and status[1].startswith("true,")


def test_tables_show_times_for_people_and_json_keeps_the_numbers(kafka, topic_name):
    create_topic(kafka, topic_name, 1)
    produce_records(kafka, topic_name, [{"key": b"k", "value": b"v", "partition": 0, "timestamp": 1_000}])
    assert "1970-01-01T00:00:01.000Z" in cli("consume", topic_name, "-e", "-o", "table").stdout
    assert [r["timestamp"] for r in jsonl_rows(cli("consume", topic_name, "-e", "-o", "jsonl").stdout)] == [1_000]
    described = cli("changelog", "describe", topic_name).stdout
    assert described.count("1970-01-01T00:00:01.000Z") == 2  # oldest and newest
    # --tz: tables in that zone (Asia/Kolkata is UTC+05:30 all year), JSON still epoch ms
    assert "1970-01-01T05:30:01.000+05:30" in cli("consume", topic_name, "-e", "-o", "table", "--tz", "Asia/Kolkata").stdout
    assert [r["timestamp"] for r in jsonl_rows(cli("consume", topic_name, "-e", "-o", "jsonl", "--tz", "Asia/Kolkata").stdout)] == [1_000]
    assert "1970-01-01T00:00:01.000Z" in cli("consume", topic_name, "-e", "-o", "table").stdout  # one invocation's
    unknown = cli("--tz", "Mars/Base", "consume", topic_name, "-e")
    assert unknown.exit_code == 2 and "unknown time zone 'Mars/Base'" in unknown.stderr


@given(st.text(max_size=40))
def test_record_format_strings(fmt):
    render = compile_record_format(fmt)
    out = render({"topic": "t", "partition": 0, "offset": 1, "timestamp": None, "key": None,
                  "value": {"base64": "AA=="}, "headers": []})
    assert isinstance(out, bytes)


def test_record_format_tokens():
    render = compile_record_format("%t/%p@%o %k=%s ts=%T [%h] %K %S 100%%\\n")
    env = {"topic": "t", "partition": 1, "offset": 7, "timestamp": 99, "key": "k", "value": {"a": 1},
           "headers": [["h", "v"]]}
    assert render(env) == b't/1@7 k={"a":1} ts=99 [h=v] 1 7 100%\n'
    raw = {**env, "key": None, "value": b"\xff\x00bin"}  # --value-format raw: bytes as they are
    assert render(raw) == b't/1@7 =\xff\x00bin ts=99 [h=v] -1 5 100%\n'


_TOKENS = ["%k", "%s", "%t", "%p", "%o", "%T", "%h", "%K", "%S", "%%", "\\n", "\\t", "\\\\"]
_BYTES = st.one_of(st.none(), st.binary(max_size=6), st.text(max_size=4).map(str.encode))
_MESSAGES = st.lists(st.builds(
    lambda key, value, partition, offset, timestamp, headers: Message(
        topic="tópico", partition=partition, offset=offset, key=key, value=value, timestamp=timestamp,
        headers=headers or None),
    _BYTES, _BYTES, st.integers(0, 11), st.integers(0, 2**40), st.tuples(st.sampled_from([0, 1, 2]), st.integers(0, 2**42)),
    st.lists(st.tuples(st.text(max_size=3), _BYTES), max_size=2)), max_size=8)


@given(st.lists(st.one_of(st.sampled_from(_TOKENS), st.text(max_size=3).filter(lambda t: "%" not in t and "\\" not in t)),
                max_size=7).map("".join),
       _MESSAGES, st.sampled_from(["raw", "string"]), st.sampled_from(["raw", "string"]))
# two keys that are not UTF-8, but their bytes one after the other are ("é")
@example("%k", [Message(topic="t", partition=0, offset=o, key=k) for o, k in enumerate((b"\xc3", b"\xa9"))],
         "string", "raw")
def test_a_batch_renders_as_its_records_one_by_one_do(fmt, messages, key_format, value_format):
    """`consume -f`'s batch path against the record-by-record one (its oracle): the same bytes,
    or, where keys or values are shown as text and one of them is not UTF-8, no batch at all."""
    one = compile_record_format(fmt)
    expected = b"".join(one(to_envelope(Record.from_message(m), decoder(key_format), decoder(value_format)))
                        for m in messages)
    text_fields = [part for part, f in (("key", key_format), ("value", value_format)) if f == "string"]
    rendered = compile_batch_format(fmt, text_fields)(messages)
    if rendered is None:
        shown = [m.key() for m in messages if "key" in text_fields and {"%k", "%K"} & set(_FORMAT_TOKEN.findall(fmt))]
        shown += [m.value() for m in messages if "value" in text_fields and {"%s", "%S"} & set(_FORMAT_TOKEN.findall(fmt))]
        assert not all(_utf8(field) for field in shown)
    else:
        assert rendered == expected


@given(_MESSAGES, st.sampled_from(["raw", "string"]), st.sampled_from(["raw", "string"]))
# a key that is not UTF-8, JSON's escapes in a value, a record without a timestamp
@example([Message(topic="t\"", partition=0, offset=1, key=b"\xc3", value='"\\\n\x00é'.encode(), timestamp=(0, 5))],
         "string", "string")
def test_a_batch_of_jsonl_envelopes_is_their_envelopes_one_by_one(messages, key_format, value_format):
    """`consume -o jsonl`'s batch path against dumps(to_envelope(...)), its oracle: the same
    bytes, or no batch at all where a record has headers."""
    structured = {"raw": "bytes", "string": "string"}  # how consume decodes them for an envelope
    expected = "".join(dumps(to_envelope(Record.from_message(m), decoder(structured[key_format]),
                                         decoder(structured[value_format]))) + "\n" for m in messages).encode("utf-8")
    rendered = compile_batch_jsonl(key_format, value_format)(messages)  # type: ignore[misc]
    if rendered is None:
        assert any(m.headers() is not None for m in messages)
    else:
        assert rendered == expected


def test_jsonl_batches_are_for_text_and_raw_keys_and_values_only():
    assert compile_batch_jsonl("string", "long") is None and compile_batch_jsonl("json", "raw") is None


def _utf8(data: bytes | None) -> bool:
    try:
        (data or b"").decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
