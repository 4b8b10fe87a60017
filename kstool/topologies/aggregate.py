"""aggregate: count | sum | min | max | avg of numbers per key, emitted as KTable updates
(Kafka Streams' groupBy(...).aggregate(...)); with --window, the windowed aggregation of
kstool.topologies.windowed_aggregate; concat | latest of texts: kstool.topologies.text_aggregate.

Without windows, Spark's own stateful aggregation keeps the store and Spark's shuffle stands in
for the repartition topic. Output and changelog values: count, and sum/min/max of integers, as
8-byte longs; of decimals and avg as 8-byte doubles (`--value-format string|json` for text).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator

from kstool.application.model import StoreSpec
from kstool.base.errors import UsageError
from kstool.base.names import changelog_topic
from kstool.contract import PARTIAL, RESTORED, CombinerSpec, SinkTarget, Topology
from kstool.streams.accumulators import AGGREGATIONS, TEXT_AGGREGATIONS, output_value, store_format
from kstool.streams.window_aggregation import STORE
from kstool.streams.windows import WINDOW_KINDS
from kstool.tasks import combiners
from kstool.topologies import aggregate_inputs
from kstool.topologies.aggregate_inputs import (
    INPUT_FORMATS,
    VALUE_FORMATS,
    NumberInput,
    last_headers,
    last_headers_columns,
)
from kstool.topologies.one_input import OneInput
from kstool.topologies.spec import DURATION, TOPIC, Setting, TopologyType
from kstool.topologies.text_aggregate import TextAggregation
from kstool.topologies.windowed_aggregate import EMIT_MODES, KEY_FORMATS, WindowedAggregation

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame


@dataclass
class KeyedAggregation(OneInput):
    agg: str = "count"
    value_field: str | None = None
    group_by: str = "key"
    input_value_format: str = "text"
    value_format: str = "auto"  # auto: long or double as the result is integral or not
    name: str = "aggregate"
    invalid_reason: str = aggregate_inputs.INVALID_REASON
    per_task: bool = False
    tasks_are_partitions: bool = False
    forwards_headers: bool = True  # False: an app whose Spark state predates them (Manifest.aggregate_headers)
    numbers: NumberInput = field(init=False)

    def __post_init__(self) -> None:
        self.numbers = NumberInput(self.agg, self.value_field, self.group_by, self.input_value_format)
        self.input_value_format = self.numbers.input_value_format  # --value-field implies json

    def parameters(self) -> dict[str, Any]:
        return {**self.numbers.parameters(), "value_format": self.value_format}

    def stores(self, app_id: str) -> list[StoreSpec]:
        return [StoreSpec(STORE, "key-value", changelog_topic(app_id, STORE), "string",
                          store_format(self.agg, self.value_format), spark_key_field="group_key", spark_value_field="")]

    def sink_targets(self, app_id: str) -> list[SinkTarget]:
        return [SinkTarget(self.output_topic, "out_value"),  # one serde: the store holds the output
                SinkTarget(changelog_topic(app_id, STORE), "out_value", headers=False)]

    def valid_record(self) -> Column:
        return self.numbers.valid()

    @property
    def combiner(self) -> CombinerSpec | None:
        return combiners.number_spec(self.agg, self.group_by, self.input_value_format)

    def build(self, source: DataFrame, tasks: int = 1) -> DataFrame:
        from pyspark.sql import functions as F

        # a restore's store entries: the aggregate so far as one number (a count: that many
        # records); integral ones are taken as whole, and an avg goes on from its value alone.
        # A partial row (the source's combiner) is its records' count, and their sum, min or max.
        restored, partial = F.col(RESTORED), F.col(PARTIAL)
        combined = partial.isNotNull()
        rows = source.filter(F.col("value").isNotNull() | combined).select(
            F.when(restored | combined, F.col("key")).otherwise(self.numbers.group_key()).alias("group_key"),
            F.when(restored, aggregate_inputs.restored_number(self.value_format))
             .when(combined, partial[self.agg] if self.agg in ("sum", "min", "max") else F.lit(None))
             .otherwise(self.numbers.number()).alias("n"),
            F.when(restored, aggregate_inputs.restored_number(self.value_format).cast("long"))
             .when(combined, partial["count"]).otherwise(F.lit(1).cast("long")).alias("weight"),
            F.when(combined, partial["whole"].cast("int")).alias("combined_whole"), F.col("timestamp"),
            *(last_headers_columns() if self.forwards_headers else ()))
        rows = rows.filter(F.col("group_key").isNotNull())
        aggregate = {
            "count": F.sum("weight"), "sum": F.sum("n"), "min": F.min("n"), "max": F.max("n"),
            "avg": F.avg("n"),
        }[self.agg]
        # whether every input so far was a whole number decides long vs double output
        whole = F.coalesce(F.col("combined_whole"), F.when(F.col("n") % 1 == 0, 1).otherwise(0))
        return rows.groupBy("group_key").agg(
            aggregate.alias("result"), F.min(whole).alias("whole"), F.max("timestamp").alias("timestamp"),
            *(last_headers(),) if self.forwards_headers else ())

    def encode(self, updates: DataFrame) -> DataFrame:
        headers = f", headers {updates.schema['headers'].dataType.simpleString()}" if self.forwards_headers else ""
        return updates.select("group_key", "result", "whole", "timestamp", *(("headers",) if headers else ())).mapInArrow(
            functools.partial(_encode_batches, self.agg, self.value_format),
            "key binary, timestamp timestamp, out_value binary" + headers)

    def describe(self, app_id: str) -> dict[str, Any]:
        return aggregate_inputs.describe(self.name, self.input_topic, self.output_topic, self.stores(app_id)[0],
                                    self.group_by, f"groupBy(key).agg({self.agg})", final=False)


def _encode_batches(agg: str, value_format: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Runs where the rows are (executors): results as the output's bytes (the store's too)."""
    import pyarrow as pa

    for batch in batches:
        results, wholes = batch.column("result").to_pylist(), batch.column("whole").to_pylist()
        out = [output_value(agg, r, w == 1, value_format) for r, w in zip(results, wholes)]
        columns = {"key": batch.column("group_key").cast(pa.binary()), "timestamp": batch.column("timestamp"),
                   "out_value": pa.array(out, pa.binary())}
        if "headers" in batch.schema.names:
            columns["headers"] = batch.column("headers")
        yield pa.RecordBatch.from_pydict(columns)


def create(window: str | None = None, grace: int = 0, time: str = "record", emit: str = "update",
           key_format: str = "windowed", separator: str = ",", **settings: Any) -> Topology:
    text = settings.get("agg") in TEXT_AGGREGATIONS
    if text and settings.get("value_format", "auto") != "auto":
        raise UsageError("--value-format is for numbers: --agg concat and latest write the texts as they are")
    if separator != "," and not text:
        raise UsageError("--separator is for --agg concat")
    if window:
        return WindowedAggregation(window=window, grace=grace, time=time, emit=emit, key_format=key_format,
                                   separator=separator, **settings)
    if text:
        settings.pop("value_format", None)
        return TextAggregation(separator=separator, **settings)
    if grace or emit != "update" or time != "record":
        raise UsageError("--grace, --emit final and --time need --window")
    return KeyedAggregation(**settings)


TYPE = TopologyType(
    "aggregate",
    "Aggregate numbers per key (count, sum, min, max, avg), optionally in windows, or texts (concat, "
    "latest); emit each changed aggregate, or each window's final result.",
    (Setting("input_topic", "--input", kind=TOPIC, required=True, metavar="TOPIC"),
     Setting("output_topic", "--output", kind=TOPIC, required=True, metavar="TOPIC"),
     Setting("agg", "--agg", "Numbers: count, sum, min, max, avg; texts: concat (joined by --separator, in "
             "processing order), latest.", default="count", choices=AGGREGATIONS + TEXT_AGGREGATIONS),
     Setting("separator", "--separator", "For --agg concat.", default=","),
     Setting("value_field", "--value-field", "The number (concat, latest: the text) is this JSON field (dot path) "
             "of the value.", metavar="PATH"),
     Setting("group_by", "--group-by", "Group by the record key, or re-key by a JSON field of the value, or by "
             "field N (from 0) of the value split at SEP.", default="key", metavar="key|field:PATH|split:SEP:N"),
     Setting("input_value_format", "--input-value-format", "How input values hold their number.",
             default="text", choices=INPUT_FORMATS),
     Setting("value_format", "--value-format",
             "auto: 8-byte long for counts and whole sums/min/max, 8-byte double otherwise.",
             default="auto", choices=VALUE_FORMATS),
     Setting("window", "--window",
             "tumbling:SIZE | hopping:SIZE,ADVANCE (epoch-aligned) | sliding:DIFFERENCE (a window "
             "[t - D, t] per record, as Kafka Streams' SlidingWindows) | session:GAP.",
             metavar="SPEC", describe_help="aggregate: tumbling:SIZE | hopping:SIZE,ADVANCE | sliding:DIFFERENCE "
                                           "| session:GAP.",
             suggestions=tuple(f"{kind}:" for kind in WINDOW_KINDS)),
     Setting("grace", "--grace",
             "How long after a window's end records are still accepted (later: dropped, counted).",
             default="0ms", kind=DURATION, metavar="DURATION"),
     Setting("time", "--time", "Event time: the record timestamp, or a JSON field (epoch ms or ISO-8601).",
             default="record", metavar="record|field:PATH"),
     Setting("emit", "--emit", "update: every change; final: each window once, after end + grace (suppress).",
             default="update", choices=EMIT_MODES, describe_help="aggregate with --window."),
     Setting("key_format", "--key-format",
             "Windowed output keys: Kafka Streams' layout (key+start, sessions key+end+start) or JSON.",
             default="windowed", choices=KEY_FORMATS)),
    create,
    examples=("kstool run aggregate --input clicks --output clicks-per-minute --window tumbling:1m "
              "--grace 10s --emit final --once",
              "kstool run aggregate --input logins --output logins-within-5m --window sliding:5m --grace 1m",
              "kstool run aggregate --input payments --output totals --agg sum --value-field amount "
              "--input-value-format json"),
    shapes=((), ("--window", "tumbling:10s"), ("--window", "hopping:10s,5s"), ("--window", "sliding:10s"),
            ("--window", "session:5m")),
)
