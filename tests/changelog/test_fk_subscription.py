"""A foreign-key join's subscription store records, as Kafka Streams 4.3.1 wrote one (the
reference app "joins": account a1 subscribing to customer c1)."""

from __future__ import annotations

from kstool.changelog.layouts import KeySpec, key_decoder, value_decoder

KEY = bytes.fromhex("00000002" "6331" "6131")  # CombinedKey: len(c1) ‖ c1 ‖ a1
VALUE = bytes.fromhex("01" "03" "7f2cb73f7f559dcffdb7e23bd3941da5" "6131" "00000001")


def test_a_subscription_reads_as_its_parts():
    key = key_decoder(KeySpec.parse("subscription:string"))(KEY)
    assert key.ok and key.key == {"foreign_key": "c1", "primary_key": "a1"}
    value, ok = value_decoder("subscription:string")(VALUE)
    assert ok and value == {"version": 1, "instruction": "PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE",
                            "hash": "7f2cb73f7f559dcffdb7e23bd3941da5", "primary_key": "a1", "primary_partition": 1}


def test_bytes_that_are_not_a_subscription_are_shown_as_hex():
    too_long = bytes.fromhex("00000009") + b"c1"
    key = key_decoder(KeySpec.parse("subscription:string"))(too_long)
    assert not key.ok and key.key == {"hex": too_long.hex()}
    unknown_instruction = b"\x01\x09" + VALUE[2:]
    assert value_decoder("subscription:string")(unknown_instruction) == ({"hex": unknown_instruction.hex()}, False)
