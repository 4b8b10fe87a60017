"""aggregate --window: count | sum | min | max | avg per key in tumbling, hopping, sliding or session
windows (Kafka Streams' groupBy(...).windowedBy(...).aggregate(...)).

Event time from the record or a JSON field (`--time`), Kafka Streams' grace, late-record and
emit rules (`kstool.streams.time_windows`, `.sessions`), run per task with Spark's transformWithState (counts
in time windows arrive combined per key and window: kstool.tasks.combiners). The
store is a window or session store with Kafka Streams' changelog layouts; output keys are
windowed keys (key ‖ start, sessions key ‖ end ‖ start) or `--key-format json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kstool.application.model import StoreSpec
from kstool.base.errors import UsageError
from kstool.base.names import changelog_topic
from kstool.contract import PARTIAL, CombinerSpec, SinkTarget
from kstool.stores.windowed_keys import output_key_suffix
from kstool.streams.accumulators import TEXT_AGGREGATIONS, store_format
from kstool.streams.sessions import SessionAggregate
from kstool.streams.sliding import SlidingWindowAggregate
from kstool.streams.time_windows import WindowedAggregate
from kstool.streams.window_aggregation import STORE
from kstool.streams.windows import WindowSpec
from kstool.tasks import combiners
from kstool.topologies import aggregate_inputs, events
from kstool.topologies.aggregate_inputs import NumberInput
from kstool.topologies.one_input import OneInputPerTask

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

EMIT_MODES = ("update", "final")
KEY_FORMATS = ("windowed", "json")


@dataclass
class WindowedAggregation(OneInputPerTask):
    window: str  # tumbling:SIZE | hopping:SIZE,ADVANCE | sliding:DIFFERENCE | session:GAP
    agg: str = "count"
    value_field: str | None = None
    group_by: str = "key"
    input_value_format: str = "text"
    value_format: str = "auto"
    grace: int = 0  # ms; Kafka Streams' ofSizeWithNoGrace default
    time: str = "record"  # | field:PATH
    emit: str = "update"  # | final
    key_format: str = "windowed"  # | json
    separator: str = ","  # --agg concat
    name: str = "aggregate"
    per_task: bool = True
    numbers: NumberInput = field(init=False)
    spec: WindowSpec = field(init=False)

    def __post_init__(self) -> None:
        # texts (concat, latest) take the value or its field where numbers are read
        self.numbers = NumberInput("count" if self.text else self.agg, self.value_field, self.group_by,
                                   self.input_value_format)
        self.input_value_format = self.numbers.input_value_format  # --value-field implies json
        self.spec = WindowSpec.parse(self.window)
        if self.emit not in EMIT_MODES:
            raise UsageError(f"--emit must be one of {', '.join(EMIT_MODES)}")
        if self.grace < 0:
            raise UsageError("--grace must not be negative")
        events.check_time(self.time)

    @property
    def text(self) -> bool:
        return self.agg in TEXT_AGGREGATIONS

    @property
    def invalid_reason(self) -> str:
        late = ", or no event time in the value" if self.time != "record" else ""
        return aggregate_inputs.INVALID_REASON + late

    def parameters(self) -> dict[str, Any]:
        return {**self.numbers.parameters(), "agg": self.agg, "value_format": self.value_format, "window": self.window,
                "grace": self.grace, "time": self.time, "emit": self.emit, "key_format": self.key_format,
                **({"separator": self.separator} if self.text else {})}

    def stores(self, app_id: str) -> list[StoreSpec]:
        value_kind = "string" if self.text else store_format(self.agg, self.value_format)
        kind = "session" if self.spec.kind == "session" else "window"
        size = self.spec.size if self.spec.kind != "session" else None
        return [StoreSpec(STORE, kind, changelog_topic(app_id, STORE), "string", value_kind,
                          spark_state_var=STORE, retention_ms=self.processor().retention, window_size_ms=size)]

    def sink_targets(self, app_id: str) -> list[SinkTarget]:
        window_bytes = output_key_suffix(self.spec.kind == "session", self.key_format)
        return events.sink_targets(self.output_topic, app_id, [STORE], window_bytes)

    def valid_record(self) -> Column:
        return self.numbers.valid() & events.valid_time(self.time, self.numbers.json_text())

    @property
    def tasks_are_partitions(self) -> bool:
        return self.group_by == "key"

    @property
    def combiner(self) -> CombinerSpec | None:
        return combiners.window_spec(self.spec, self.grace, self.agg, self.group_by, self.time,
                                     self.input_value_format)

    def processor(self) -> WindowedAggregate | SessionAggregate | SlidingWindowAggregate:
        kind: type[WindowedAggregate | SessionAggregate | SlidingWindowAggregate] = (
            SessionAggregate if self.spec.kind == "session" else
            SlidingWindowAggregate if self.spec.kind == "sliding" else WindowedAggregate)
        return kind(self.spec, self.agg, self.grace, self.emit, self.value_format, self.key_format,
                    separator=self.separator)

    def build(self, source: DataFrame, tasks: int = 1, seed: DataFrame | None = None) -> DataFrame:
        from pyspark.sql import functions as F

        from kstool.tasks.processor import PARTIAL_COLUMNS, run_tasks

        group_key = self.numbers.group_key()
        # the source's partial rows (self.combiner) carry a key, or none (a range's newest time; a pack), and no value
        partial = F.col(PARTIAL)
        value = (F.encode(F.get_json_object(self.numbers.json_text(), "$." + self.value_field), "UTF-8")
                 if self.text and self.value_field else F.col("value"))  # a text aggregate's input
        rows = source.filter(value.isNotNull() | partial.isNotNull()).select(
            events.task(group_key, self.group_by != "key", tasks).alias("task"),
            F.lit(0).alias("side"), group_key.alias("key"), value.alias("value"),
            self.numbers.number().alias("number"), events.event_time(self.time, self.numbers.json_text()).alias("event_time"),
            "partition", "offset", partial["pack"].alias("pack"), events.headers_text(),
            *(partial[c].alias(c) for c in PARTIAL_COLUMNS))
        return run_tasks(rows.filter(F.col("key").isNotNull() | F.col("count").isNotNull() | F.col("pack").isNotNull()),
                         self.processor, seed)

    def describe(self, app_id: str) -> dict[str, Any]:
        spark = (f"transformWithState per task: {self.spec.text()} windows, grace {self.grace}ms, "
                 f"event time from {self.time}, {self.agg}")
        return aggregate_inputs.describe(self.name, self.input_topic, self.output_topic, self.stores(app_id)[0],
                                    self.group_by, spark, self.emit == "final")
