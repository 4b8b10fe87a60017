"""Windowed keys (kstool.schemas.windowed) decode and round-trip; a key of another layout is an error."""

from __future__ import annotations

import struct

from tests.conftest import cli
from tests.helpers import create_topic, jsonl_rows, produce_records, read_all


def test_windowed_keys_decode_and_round_trip_and_another_layout_is_an_error(kafka, topic_name):
    # Kafka Streams' output keys: TimeWindowedSerializer -> WindowKeySchema.toBinary(Windowed, ..)
    # writes key ‖ start (8 bytes); SessionWindowedSerializer -> SessionKeySchema.toBinary writes
    # key ‖ end ‖ start (apache/kafka streams/.../state/internals/WindowKeySchema.java, SessionKeySchema.java)
    windowed, sessions, copy = f"{topic_name}-w", f"{topic_name}-s", f"{topic_name}-copy"
    for topic in (windowed, sessions, copy):
        create_topic(kafka, topic, 1)
    keys = [b"user42" + struct.pack(">q", 1_700_000_100_000), "ü".encode() + struct.pack(">q", 0)]
    produce_records(kafka, windowed, [{"key": k, "value": struct.pack(">q", n), "partition": 0,
                                    "timestamp": 1_700_000_200_000} for n, k in enumerate(keys)])
    session_key = b"user42" + struct.pack(">qq", 1_700_000_160_000, 1_700_000_100_000)
    produce_records(kafka, sessions, [{"key": session_key, "value": b"x", "partition": 0, "timestamp": 5}])

    shown = cli("consume", windowed, "-e", "-o", "jsonl", "--key-format", "windowed:string", "--value-format", "long")
    assert shown.exit_code == 0, shown.stderr
    assert [e["key"] for e in jsonl_rows(shown.stdout)] == [{"key": "user42", "start": 1_700_000_100_000},
                                                        {"key": "ü", "start": 0}]
    written = cli("produce", copy, "--format", "jsonl", "--key-format", "windowed:string", "--value-format", "long",
                  input=shown.stdout)
    assert written.exit_code == 0, written.stderr
    assert [m.key() for m in read_all(kafka, copy)] == keys  # the same bytes back

    session = cli("consume", sessions, "-e", "-o", "jsonl", "--key-format", "session:string")
    assert jsonl_rows(session.stdout)[0]["key"] == {"key": "user42", "start": 1_700_000_100_000, "end": 1_700_000_160_000}

    # a time-windowed key read as a session key: an error in its place and a warning, not garbage
    wrong = cli("consume", windowed, "-e", "-o", "jsonl", "--key-format", "session:string")
    assert wrong.exit_code == 0
    assert all(set(e["key"]) == {"error", "hex"} for e in jsonl_rows(wrong.stdout))
    assert "2 key(s)/value(s) did not decode" in wrong.stderr
    # ... and as a window store's key (key ‖ start ‖ seqnum) by changelog dump: hex, a warning naming the way
    dumped = cli("changelog", "dump", windowed, "--key-format", "windowed:string", "--value-format", "long",
                 "-o", "jsonl")
    assert [r["key"] for r in jsonl_rows(dumped.stdout)] == [{"hex": k.hex()} for k in keys]
    assert "time-windowed:FMT" in dumped.stderr
    dumped = cli("changelog", "dump", windowed, "--key-format", "time-windowed:string", "--value-format", "long",
                 "-o", "jsonl")
    assert [(r["key"], r["window_start"]) for r in jsonl_rows(dumped.stdout)] == [("user42", 1_700_000_100_000),
                                                                              ("ü", 0)]

    bad = cli("produce", copy, "--format", "jsonl", "--key-format", "session:string",
              input='{"key": {"key": "k", "start": 10, "end": 5}, "value": "v"}\n')
    assert bad.exit_code != 0 and "ends at or after its start" in bad.stderr
