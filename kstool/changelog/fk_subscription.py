"""A foreign-key join's subscription store (Kafka Streams' `...-SUBSCRIPTION-STATE-STORE-N`, or
`<name>-subscription-store` when the join is named): which primary keys of the left table
subscribe to each foreign key. Its changelog key is a CombinedKey (CombinedKeySchema.toBytes:
foreign key length(4) ‖ foreign key ‖ primary key); its value a SubscriptionWrapper
(SubscriptionWrapperSerde: version(7 bits, the top bit set when there is no hash) ‖
instruction(1) ‖ [hash of the left value(16)] ‖ primary key ‖ [primary partition(4), version 1+])."""

from __future__ import annotations

import re
import struct
from typing import Any, Callable

FORMAT_PREFIX = "subscription"
# the store's changelog, by the names Kafka Streams gives it
TOPIC = re.compile(r".+(-SUBSCRIPTION-STATE-STORE-\d+|-subscription-store)-changelog")
INSTRUCTIONS = ("DELETE_KEY_NO_PROPAGATE", "DELETE_KEY_AND_PROPAGATE", "PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE",
                "PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE")
_INT = struct.Struct(">i")
_NO_HASH = 0x80
_HASH_SIZE = 16


def split_key(data: bytes) -> tuple[bytes, bytes]:
    """(foreign key, primary key) of a CombinedKey; ValueError when the bytes are not one."""
    if len(data) < _INT.size:
        raise ValueError("shorter than its length prefix")
    (size,) = _INT.unpack_from(data)
    if not 0 <= size <= len(data) - _INT.size:
        raise ValueError("a foreign key length past the end")
    return data[_INT.size:_INT.size + size], data[_INT.size + size:]


def key_decoder(inner: Callable[[bytes | None], Any], failed: Callable[[Any], bool]) -> Callable[[bytes | None], tuple[Any, bool]]:
    """`subscription:FMT` keys: {"foreign_key", "primary_key"}, both decoded with FMT."""
    def decode(data: bytes | None) -> tuple[Any, bool]:
        if data is None:
            return None, True
        try:
            foreign, primary = split_key(data)
        except ValueError:
            return {"hex": data.hex()}, False
        parts = {"foreign_key": inner(foreign), "primary_key": inner(primary)}
        return parts, not any(failed(part) for part in parts.values())
    return decode


def parse_value(data: bytes) -> dict[str, Any]:
    """A SubscriptionWrapper's parts; ValueError when the bytes are not one."""
    if len(data) < 2:
        raise ValueError("shorter than its header")
    version, has_hash, instruction = data[0] & 0x7F, not data[0] & _NO_HASH, data[1]
    if instruction >= len(INSTRUCTIONS) or version > 1:
        raise ValueError("not a subscription's version or instruction")
    pos = 2 + (_HASH_SIZE if has_hash else 0)
    end = len(data) - (_INT.size if version > 0 else 0)
    if end < pos:
        raise ValueError("shorter than its parts")
    return {"version": version, "instruction": INSTRUCTIONS[instruction],
            "hash": data[2:2 + _HASH_SIZE].hex() if has_hash else None, "primary_key": data[pos:end],
            "primary_partition": _INT.unpack_from(data, end)[0] if version > 0 else None}


def value_decoder(inner: Callable[[bytes | None], tuple[Any, bool]]) -> Callable[[bytes | None], tuple[Any, bool]]:
    """`subscription:FMT` values, the primary key decoded with FMT."""
    def decode(data: bytes | None) -> tuple[Any, bool]:
        if data is None:
            return None, True
        try:
            parts = parse_value(data)
        except ValueError:
            return {"hex": data.hex()}, False
        primary, ok = inner(parts["primary_key"])
        return {**parts, "primary_key": primary}, ok
    return decode
