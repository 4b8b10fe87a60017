"""What an aggregate keeps while it grows: numbers (count, sum, min, max, avg) or texts (concat,
latest: Kafka Streams' reduce), with the serdes its store, changelog and output share."""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any, cast

from kstool.base.serdes import decode_number
from kstool.streams.task import StoreValue

AGGREGATIONS = ("count", "sum", "min", "max", "avg")
TEXT_AGGREGATIONS = ("concat", "latest")  # Kafka Streams' reduce of texts


@dataclass
class Accumulator:
    count: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    whole: bool = True  # every number so far integral: sum/min/max are longs

    def add(self, number: float | None) -> None:
        self.count += 1
        if number is not None:
            self.total += number
            self.low, self.high = min(self.low, number), max(self.high, number)
            self.whole = self.whole and float(number).is_integer()

    def add_all(self, numbers: list[float | None]) -> None:
        for number in numbers:  # in record order: sums of doubles as one by one
            self.add(number)

    def merge(self, other: "Accumulator") -> None:
        self.count += other.count
        self.total += other.total
        self.low, self.high = min(self.low, other.low), max(self.high, other.high)
        self.whole = self.whole and other.whole

    def result(self, agg: str) -> float:
        return {"count": self.count, "sum": self.total, "min": self.low, "max": self.high,
                "avg": self.total / self.count if self.count else math.nan}[agg]

    def dump(self) -> str:
        return json.dumps([self.count, self.total, _finite(self.low), _finite(self.high), self.whole])

    @classmethod
    def restored(cls, agg: str, stored: bytes, value_format: str) -> "Accumulator":
        """An accumulator from the store's value alone (a changelog restore): exact for count,
        sum, min and max; integral results are taken as whole; avg restarts from its value as
        one number (the changelog keeps no count)."""
        result = stored_number(stored, value_format)
        if agg == "count":
            return cls(count=int(result))
        return cls(1, result, result, result, result.is_integer())

    @classmethod
    def of(cls, value: StoreValue | None) -> "Accumulator":
        """The live accumulator of a store entry (decoded once per batch, then kept in it)."""
        if value is None:
            return cls()
        if isinstance(value.aux, str):
            # [:5]: checkpoints of kstool <= 0.1 kept a sixth field (a session's emitted flag)
            count, total, low, high, whole = json.loads(value.aux)[:5]
            value.aux = cls(count, total, math.inf if low is None else low,
                            -math.inf if high is None else high, whole)
        return cast(Accumulator, value.aux)


@dataclass
class TextAccumulator:
    """A text aggregate (Kafka Streams' reduce): `concat` joins the values with the separator in
    processing order; `latest` (no separator) keeps the last. Merging (sessions) appends the
    other's text, as Kafka Streams' session merger does for a reduce."""

    separator: bytes | None
    text: bytes | None = None

    def add(self, value: Any) -> None:
        self.text = value if self.text is None or self.separator is None else self.text + self.separator + value

    def add_all(self, values: list[Any]) -> None:
        for value in values:
            self.add(value)

    def merge(self, other: "TextAccumulator") -> None:
        if other.text is not None:
            self.add(other.text)

    def dump(self) -> str:
        return ""  # the text is the store's value


Acc = Accumulator | TextAccumulator


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def store_format(agg: str, value_format: str) -> str:
    """The aggregate store's and its changelog's serde: the output's (Kafka Streams' Materialized
    serde), so that the store, the changelog and the output show one number alike."""
    if value_format != "auto":
        return value_format  # string | json: the number as text
    return "long" if agg == "count" else "number"


def stored_number(data: bytes, value_format: str) -> float:
    """The number a store value (output_value's bytes) holds. 8-byte values are read as
    kstool's `number` serde, so a changelog written before the store took the output's serde
    (8-byte Doubles) reads the same."""
    return float(data) if value_format != "auto" else float(decode_number(data))


def output_value(agg: str, result: float, whole: bool, value_format: str) -> bytes:
    """auto: 8-byte long for counts and for sum/min/max of whole numbers, else 8-byte double;
    string/json: the number as text."""
    integral = agg == "count" or (agg != "avg" and whole and -2**63 <= result < 2**63)
    if value_format == "auto":
        return struct.pack(">q", int(result)) if integral else struct.pack(">d", float(result))
    return (str(int(result)) if integral else repr(float(result))).encode()
