"""Kafka Streams' suppression buffer values, as Kafka Streams 4.3.1 wrote one (the reference
app "windows", a tumbling count's buffer: window a@2026-01-01T00:00, count 1 after 0)."""

from __future__ import annotations

import pytest

from kstool.changelog.layouts import value_decoder
from kstool.changelog.suppress_buffer import parse

WRITTEN_BY_KAFKA_STREAMS = bytes.fromhex(
    "0000019b76daa800" "0000000000000000" "00000006" "6576656e7473" "00000000" "00000000"
    "00000008" "0000000000000000" "fffffffe" "00000008" "0000000000000001" "0000019b76db9260")


def test_a_buffered_change_reads_as_its_parts():
    assert parse(WRITTEN_BY_KAFKA_STREAMS) == {
        "buffer_time": 1_767_225_660_000, "prior": bytes(8), "old": bytes(8), "new": (1).to_bytes(8, "big"),
        "record": {"timestamp": 1_767_225_600_000, "topic": "events", "partition": 0, "offset": 0, "headers": []}}
    value, ok = value_decoder("suppress-buffer:long")(WRITTEN_BY_KAFKA_STREAMS)
    assert ok and (value["value"], value["old_value"], value["prior_value"]) == (1, 0, 0)


@pytest.mark.parametrize("damaged", [WRITTEN_BY_KAFKA_STREAMS[:-1], WRITTEN_BY_KAFKA_STREAMS + b"\x00", b"\x00" * 7])
def test_bytes_that_are_not_a_buffered_change_are_shown_as_hex(damaged):
    value, ok = value_decoder("suppress-buffer:long")(damaged)
    assert not ok and value == {"hex": damaged.hex()}
