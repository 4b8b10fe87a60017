"""aggregate: count | sum | min | max | avg of numbers per key, emitted as KTable updates
(Kafka Streams' groupBy(...).aggregate(...) without windows).

Numbers come from the value as text (default), as Kafka's 8-byte Long or Double, or from a
JSON field (`--value-field a.b`). Groups: the record key, or a JSON field of the value
(`--group-by field:PATH`, Kafka Streams' groupBy re-keying; Spark's shuffle stands in for the
repartition topic). Output and changelog values: count, and sum/min/max of integers, as 8-byte
longs; of decimals and avg as 8-byte doubles (`--value-format string|json` for text).
Values that are not numbers (or not JSON where JSON is read) follow --on-error; null values
and null group keys are ignored, as Kafka Streams ignores them. Windows (`--window`) are not
available yet.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from kstool.engine.app import StoreSpec
from kstool.engine.sink import SinkTarget
from kstool.errors import UsageError
from kstool.names import changelog_topic

STORE = "aggregate"
AGGREGATIONS = ("count", "sum", "min", "max", "avg")
INPUT_FORMATS = ("text", "long", "double", "json")
VALUE_FORMATS = ("auto", "string", "json")


@dataclass
class Aggregate:
    input_topic: str
    output_topic: str
    agg: str = "count"
    value_field: str | None = None
    group_by: str = "key"  # key | field:PATH
    input_value_format: str = "text"
    value_format: str = "auto"  # auto: long or double as the result is integral or not
    name: str = "aggregate"
    invalid_reason: str = "not a number (or not JSON)"

    def __post_init__(self) -> None:
        if self.agg not in AGGREGATIONS:
            raise UsageError(f"--agg must be one of {', '.join(AGGREGATIONS)}")
        if self.group_by != "key" and not (self.group_by.startswith("field:") and len(self.group_by) > 6):
            raise UsageError("--group-by is key or field:PATH")
        if self.value_field and self.input_value_format not in ("json", "text"):
            raise UsageError("--value-field reads JSON values: use --input-value-format json")
        if self.value_field:
            self.input_value_format = "json"

    def input_topics(self) -> list[str]:
        return [self.input_topic]

    def output_topics(self) -> list[str]:
        return [self.output_topic]

    def parameters(self) -> dict[str, Any]:
        return {"agg": self.agg, "value_field": self.value_field, "group_by": self.group_by,
                "input_value_format": self.input_value_format, "value_format": self.value_format}

    def _value_kind(self) -> str:
        return "long" if self.agg == "count" else "double"

    def stores(self, app_id: str) -> list[StoreSpec]:
        return [StoreSpec(STORE, "key-value", changelog_topic(app_id, STORE), "string",
                          "long" if self.agg == "count" else "double",
                          spark_key_field="group_key", spark_value_field="")]

    def sink_targets(self, app_id: str) -> list[SinkTarget]:
        return [SinkTarget(self.output_topic, "out_value"),
                SinkTarget(changelog_topic(app_id, STORE), "store_value")]

    # -- Spark ------------------------------------------------------------------------------
    def _json_text(self):
        from pyspark.sql import functions as F

        return F.col("value").cast("string")

    def _number(self):
        """The record's number as a double (null when it is not one)."""
        from pyspark.sql import functions as F

        if self.input_value_format == "long":
            return F.when(F.length("value") == 8,
                          F.conv(F.hex("value"), 16, -10).cast("long").cast("double"))
        if self.input_value_format == "double":
            return _ieee754(F.col("value"))
        if self.input_value_format == "json":
            path = "$." + (self.value_field or "value")
            return F.get_json_object(self._json_text(), path).try_cast("double")
        return F.trim(F.col("value").cast("string")).try_cast("double")

    def _group_key(self):
        from pyspark.sql import functions as F

        if self.group_by == "key":
            return F.col("key")
        return F.encode(F.get_json_object(self._json_text(), "$." + self.group_by[6:]), "UTF-8")

    def valid_record(self):
        from pyspark.sql import functions as F

        # null values and null group keys are ignored (build drops them), as in Kafka Streams
        json_ok = (F.get_json_object(self._json_text(), "$").isNotNull()
                   if self.input_value_format == "json" or self.group_by != "key" else F.lit(True))
        number_ok = F.lit(True) if self.agg == "count" else self._number().isNotNull()
        return F.col("value").isNull() | F.coalesce(json_ok & (number_ok | self._group_key().isNull()), F.lit(False))

    def build(self, source):
        from pyspark.sql import functions as F

        rows = source.filter(F.col("value").isNotNull()).select(
            self._group_key().alias("group_key"), self._number().alias("n"), F.col("timestamp"))
        rows = rows.filter(F.col("group_key").isNotNull())
        aggregate = {
            "count": F.count(F.lit(1)), "sum": F.sum("n"), "min": F.min("n"), "max": F.max("n"),
            "avg": F.avg("n"),
        }[self.agg]
        # whether every input so far was a whole number decides long vs double output
        return rows.groupBy("group_key").agg(
            aggregate.alias("result"), F.min(F.when(F.col("n") % 1 == 0, 1).otherwise(0)).alias("whole"),
            F.max("timestamp").alias("timestamp"))

    def encode(self, updates) -> pa.Table:
        table = updates.select("group_key", "result", "whole", "timestamp").toArrow()
        results, wholes = table.column("result").to_pylist(), table.column("whole").to_pylist()
        out, store = [], []
        for result, whole in zip(results, wholes):
            integral = self.agg == "count" or (self.agg != "avg" and whole == 1 and -2**63 <= result < 2**63)
            store.append(_long(result) if self.agg == "count" else _double(result))
            if self.value_format == "auto":
                out.append(_long(result) if integral else _double(result))
            else:
                text = str(int(result)) if integral else repr(float(result))
                out.append(text.encode())
        return pa.table({"key": table.column("group_key"), "timestamp": table.column("timestamp"),
                         "out_value": pa.array(out, pa.binary()), "store_value": pa.array(store, pa.binary())})

    def describe(self, app_id: str) -> dict:
        store = self.stores(app_id)[0]
        select = "KSTREAM-SELECTKEY-0000000001" if self.group_by != "key" else None
        nodes = [{"name": "KSTREAM-SOURCE-0000000000", "type": "source", "topics": [self.input_topic],
                  "successors": [select or "KSTREAM-AGGREGATE-0000000002"]}]
        if select:
            nodes.append({"name": select, "type": "processor", "stores": [],
                          "successors": ["KSTREAM-AGGREGATE-0000000002"],
                          "spark": f"re-key by {self.group_by} (shuffle stands in for the repartition topic)"})
        nodes += [
            {"name": "KSTREAM-AGGREGATE-0000000002", "type": "processor", "stores": [store.name],
             "successors": ["KTABLE-TOSTREAM-0000000003"], "spark": f"groupBy(key).agg({self.agg})"},
            {"name": "KTABLE-TOSTREAM-0000000003", "type": "processor", "stores": [],
             "successors": ["KSTREAM-SINK-0000000004"]},
            {"name": "KSTREAM-SINK-0000000004", "type": "sink", "topic": self.output_topic},
        ]
        return {"topology": self.name, "sub_topologies": [{"id": 0, "nodes": nodes}],
                "stores": [{"name": store.name, "kind": store.kind, "changelog_topic": store.changelog_topic,
                            "key_format": store.key_format, "value_format": store.value_format}]}


def _long(value) -> bytes:
    return struct.pack(">q", int(value))


def _double(value) -> bytes:
    return struct.pack(">d", float(value))


def _ieee754(column):
    """Kafka's DoubleSerializer bytes -> double, in Spark SQL (exact; no Python per record)."""
    from pyspark.sql import functions as F

    bits = F.conv(F.hex(column), 16, -10).cast("long")
    sign = F.when(F.shiftrightunsigned(bits, 63) == 1, -1.0).otherwise(1.0)
    exponent = F.shiftright(bits, 52).bitwiseAND(2047)
    mantissa = bits.bitwiseAND((1 << 52) - 1).cast("double") / float(2 ** 52)
    value = (F.when(exponent == 0, mantissa * F.pow(F.lit(2.0), F.lit(-1022)))
             .when(exponent == 2047, F.when(mantissa == 0, F.lit(float("inf"))).otherwise(F.lit(float("nan"))))
             .otherwise((mantissa + 1.0) * F.pow(F.lit(2.0), exponent.cast("double") - 1023)))
    return F.when(F.length(column) == 8, sign * value)
