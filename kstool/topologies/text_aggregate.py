"""aggregate --agg concat | latest: a text aggregate per key (kstool.streams.reduce), run per
task with Spark's transformWithState (Spark's own aggregation has no order to concatenate in).
The task is the input partition, or with `--group-by field:` the partition a repartition topic
would give the new key; the aggregated text is the value, or its `--value-field`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kstool.application.model import StoreSpec
from kstool.base.names import changelog_topic
from kstool.contract import SinkTarget
from kstool.streams.reduce import TextReduce
from kstool.streams.window_aggregation import STORE
from kstool.topologies import aggregate_inputs, events
from kstool.topologies.aggregate_inputs import NumberInput
from kstool.topologies.one_input import OneInputPerTask

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


@dataclass
class TextAggregation(OneInputPerTask):
    agg: str  # concat | latest
    separator: str = ","
    value_field: str | None = None
    group_by: str = "key"
    input_value_format: str = "text"
    name: str = "aggregate"
    invalid_reason: str = "not JSON where a field is read"
    per_task: bool = True
    fields: NumberInput = field(init=False)  # where the group key and the value's field are

    def __post_init__(self) -> None:
        self.fields = NumberInput("count", self.value_field, self.group_by, self.input_value_format)
        self.input_value_format = self.fields.input_value_format  # --value-field implies json

    @property
    def tasks_are_partitions(self) -> bool:
        return self.group_by == "key"

    def parameters(self) -> dict[str, Any]:
        return {**self.fields.parameters(), "agg": self.agg, "separator": self.separator}

    def processor(self) -> TextReduce:
        return TextReduce(self.agg, self.separator.encode())

    def stores(self, app_id: str) -> list[StoreSpec]:
        return [StoreSpec(STORE, "key-value", changelog_topic(app_id, STORE), "string", "string", spark_state_var=STORE)]

    def sink_targets(self, app_id: str) -> list[SinkTarget]:
        return events.sink_targets(self.output_topic, app_id, [STORE])

    def valid_record(self) -> Column:
        return self.fields.valid()

    def build(self, source: DataFrame, tasks: int = 1, seed: DataFrame | None = None) -> DataFrame:
        from pyspark.sql import functions as F

        from kstool.tasks.processor import run_tasks

        group_key = self.fields.group_key()
        text = (F.encode(F.get_json_object(self.fields.json_text(), "$." + self.value_field), "UTF-8")
                if self.value_field else F.col("value"))
        rows = events.keyed_rows(source.withColumn("key", group_key),
                                 events.task(F.col("key"), self.group_by != "key", tasks), F.lit(0), text)
        return run_tasks(rows.filter(F.col("key").isNotNull() & F.col("value").isNotNull()), self.processor, seed)

    def describe(self, app_id: str) -> dict[str, Any]:
        return aggregate_inputs.describe(self.name, self.input_topic, self.output_topic, self.stores(app_id)[0],
                                         self.group_by, f"transformWithState per task: reduce ({self.agg})", final=False)
