"""aggregate: count | sum | min | max | avg of numbers per key, emitted as KTable updates
(Kafka Streams' groupBy(...).aggregate(...) without windows).

Numbers come from the value as text (default), as Kafka's 8-byte Long or Double, or from a
JSON field (`--value-field a.b`). Groups: the record key, or a JSON field of the value
(`--group-by field:PATH`, Kafka Streams' groupBy re-keying; Spark's shuffle stands in for the
repartition topic). Output and changelog values: count, and sum/min/max of integers, as 8-byte
longs; of decimals and avg as 8-byte doubles (`--value-format string|json` for text).
Values that are not numbers (or not JSON where JSON is read) follow --on-error; null values
and null group keys are ignored, as Kafka Streams ignores them.

Windowed (`--window tumbling:SIZE | hopping:SIZE,ADVANCE | session:GAP`): event time from the
record or a JSON field (`--time`), Kafka Streams' grace, late-record and emit rules
(`kstool.streams.aggregate`), run per task with Spark's transformWithState. The store is a
window or session store with Kafka Streams' changelog layouts; output keys are windowed keys
(key ‖ start, sessions key ‖ end ‖ start) or `--key-format json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from kstool.engine.app import StoreSpec
from kstool.engine.sink import SinkTarget
from kstool.errors import UsageError
from kstool.names import changelog_topic
from kstool.streams.aggregate import (AGGREGATIONS, STORE, SessionAggregate, WindowedAggregate, output_value,
                                      store_value)
from kstool.streams.windows import WindowSpec
from kstool.topologies import events

INPUT_FORMATS = ("text", "long", "double", "json")
EMIT_MODES = ("update", "final")


@dataclass
class Aggregate:
    input_topic: str
    output_topic: str
    agg: str = "count"
    value_field: str | None = None
    group_by: str = "key"  # key | field:PATH
    input_value_format: str = "text"
    value_format: str = "auto"  # auto: long or double as the result is integral or not
    window: str | None = None  # tumbling:SIZE | hopping:SIZE,ADVANCE | session:GAP
    grace: int = 0  # ms; Kafka Streams' ofSizeWithNoGrace default
    time: str = "record"  # | field:PATH
    emit: str = "update"  # | final
    key_format: str = "windowed"  # | json (windowed output keys)
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
        self.spec = WindowSpec.parse(self.window) if self.window else None
        if self.spec is not None and self.time != "record":
            self.invalid_reason += ", or no event time in the value"
        if self.spec is None and (self.grace or self.emit != "update" or self.time != "record"):
            raise UsageError("--grace, --emit final and --time need --window")
        if self.emit not in EMIT_MODES:
            raise UsageError(f"--emit must be one of {', '.join(EMIT_MODES)}")
        if self.grace < 0:
            raise UsageError("--grace must not be negative")
        events.check_time(self.time)

    @property
    def per_task(self) -> bool:
        return self.spec is not None

    def input_topics(self) -> list[str]:
        return [self.input_topic]

    def output_topics(self) -> list[str]:
        return [self.output_topic]

    def parameters(self) -> dict[str, Any]:
        windowed = {"window": self.window, "grace": self.grace, "time": self.time, "emit": self.emit,
                    "key_format": self.key_format} if self.spec else {}
        return {"agg": self.agg, "value_field": self.value_field, "group_by": self.group_by,
                "input_value_format": self.input_value_format, "value_format": self.value_format,
                **windowed}

    def _store_kind(self) -> str:
        return "key-value" if self.spec is None else "session" if self.spec.kind == "session" else "window"

    def stores(self, app_id: str) -> list[StoreSpec]:
        value_kind = "long" if self.agg == "count" else "double"
        if self.spec is None:
            return [StoreSpec(STORE, "key-value", changelog_topic(app_id, STORE), "string", value_kind,
                              spark_key_field="group_key", spark_value_field="")]
        # Kafka Streams' default retention: size + grace (sessions: gap + grace)
        retention = self.spec.size + self.grace
        size = self.spec.size if self.spec.kind != "session" else None
        return [StoreSpec(STORE, self._store_kind(), changelog_topic(app_id, STORE), "string", value_kind,
                          spark_state_var=STORE, retention_ms=retention, window_size_ms=size)]

    def sink_targets(self, app_id: str) -> list[SinkTarget]:
        if self.spec is None:
            return [SinkTarget(self.output_topic, "out_value"),
                    SinkTarget(changelog_topic(app_id, STORE), "store_value")]
        return events.sink_targets(self.output_topic, app_id, [STORE])

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

    def check_run(self, partitions: dict[str, int]) -> None:
        pass  # one input

    def valid_record(self):
        from pyspark.sql import functions as F

        # null values and null group keys are ignored (build drops them), as in Kafka Streams
        json_ok = (F.get_json_object(self._json_text(), "$").isNotNull()
                   if self.input_value_format == "json" or self.group_by != "key" else F.lit(True))
        number_ok = F.lit(True) if self.agg == "count" else self._number().isNotNull()
        valid = F.col("value").isNull() | F.coalesce(json_ok & (number_ok | self._group_key().isNull()), F.lit(False))
        return valid if self.spec is None else valid & events.valid_time(self.time)

    def processor(self):
        kind = SessionAggregate if self.spec.kind == "session" else WindowedAggregate
        return kind(self.spec, self.agg, self.grace, self.emit, self.value_format, self.key_format)

    def build(self, source, tasks: int = 1):
        from pyspark.sql import functions as F

        if self.spec is not None:
            from kstool.engine.tasks import run_tasks

            rows = source.filter(F.col("value").isNotNull()).select(
                events.task(self._group_key(), self.group_by != "key", tasks).alias("task"),
                F.lit(0).alias("side"), self._group_key().alias("key"), F.col("value"),
                self._number().alias("number"), events.event_time(self.time).alias("event_time"),
                "partition", "offset")
            return run_tasks(rows.filter(F.col("key").isNotNull()), self.processor)
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

    def encode(self, updates):
        if self.spec is not None:
            return events.encode(updates)
        table = updates.select("group_key", "result", "whole", "timestamp").toArrow()
        results, wholes = table.column("result").to_pylist(), table.column("whole").to_pylist()
        out = [output_value(self.agg, r, w == 1, self.value_format) for r, w in zip(results, wholes)]
        store = [store_value(self.agg, r) for r in results]
        return pa.table({"key": table.column("group_key"), "timestamp": table.column("timestamp"),
                         "out_value": pa.array(out, pa.binary()), "store_value": pa.array(store, pa.binary())})

    def describe(self, app_id: str) -> dict:
        store = self.stores(app_id)[0]
        aggregate = "KSTREAM-AGGREGATE-0000000002"
        select = "KSTREAM-SELECTKEY-0000000001" if self.group_by != "key" else None
        nodes = [{"name": "KSTREAM-SOURCE-0000000000", "type": "source", "topics": [self.input_topic],
                  "successors": [select or aggregate]}]
        if select:
            nodes.append({"name": select, "type": "processor", "stores": [], "successors": [aggregate],
                          "spark": f"re-key by {self.group_by} (the task stands in for the repartition topic)"})
        if self.spec is None:
            spark = f"groupBy(key).agg({self.agg})"
        else:
            spark = (f"transformWithState per task: {self.spec.text()} windows, grace {self.grace}ms, "
                     f"event time from {self.time}, {self.agg}")
        chain = ["KTABLE-SUPPRESS-0000000003"] if self.emit == "final" else []
        chain += ["KTABLE-TOSTREAM-0000000004", "KSTREAM-SINK-0000000005"]
        nodes.append({"name": aggregate, "type": "processor", "stores": [store.name], "successors": chain[:1],
                      "spark": spark})
        for name, successor in zip(chain, chain[1:] + [None]):
            if successor is None:
                nodes.append({"name": name, "type": "sink", "topic": self.output_topic})
            else:
                node = {"name": name, "type": "processor", "stores": [], "successors": [successor]}
                if name.startswith("KTABLE-SUPPRESS"):
                    node["spark"] = "untilWindowCloses: emit each window once, when it closes (end + grace reached by stream time)"
                nodes.append(node)
        return {"topology": self.name, "sub_topologies": [{"id": 0, "nodes": nodes}],
                "stores": [{"name": store.name, "kind": store.kind, "changelog_topic": store.changelog_topic,
                            "key_format": store.key_format, "value_format": store.value_format}]}


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
