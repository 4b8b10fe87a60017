"""table-aggregate: a table topic's rows re-grouped and counted or summed, a row that changes
group leaving its old one (Kafka Streams' KTable.groupBy(...).count() / .aggregate(adder,
subtractor), kstool.streams.table_aggregation), optionally suppressed (suppress(untilTimeLimit)).

The input is read as a table (latest value per key, a tombstone deletes the row; with
--table-history a versioned table, whose out-of-order updates change no group). It runs in two
stages of tasks, as Kafka Streams' two sub-topologies: the rows in a task per input partition,
the groups in a task per partition of the repartition topic Kafka Streams would make (as many as
the input's, a group's by Kafka's partitioner), their changes crossing between the stages in the
query (kstool.tasks.repartition) instead of through a topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kstool.application.model import StoreSpec
from kstool.base.errors import UsageError
from kstool.base.names import changelog_topic
from kstool.contract import SinkTarget, store_operators
from kstool.streams.accumulators import store_format
from kstool.streams.key_mappers import KeyMapper, key_mapper
from kstool.streams.table_aggregation import AGGREGATIONS, BUFFER, GROUP_BY_FORMS, STORE, TABLE, TableAggregate
from kstool.topologies import events
from kstool.topologies.aggregate_inputs import VALUE_FORMATS
from kstool.topologies.one_input import OneInputPerTask
from kstool.topologies.spec import DURATION, TOPIC, Setting, TopologyType

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

SINK = "KSTREAM-SINK-0000000009"


@dataclass
class TableAggregation(OneInputPerTask):
    group_by: str = "value"  # key | value | field:PATH | split:SEP:N
    agg: str = "count"
    value_field: str | None = None
    value_format: str = "auto"
    suppress_time: int | None = None  # ms
    suppress_records: str | None = None  # a count, as given
    table_history: int | None = None  # ms; a versioned table keeping each row's versions this long
    name: str = "table-aggregate"
    invalid_reason: str = "not JSON where a field is read, or no number to sum"
    per_task: bool = True
    tasks_are_partitions: bool = False
    group_mapper: KeyMapper = field(init=False)

    def __post_init__(self) -> None:
        if self.agg not in AGGREGATIONS:
            raise UsageError(f"--agg must be one of {', '.join(AGGREGATIONS)} (what a row leaving its group "
                             "can take back)")
        self.group_mapper = key_mapper(self.group_by, "--group-by", GROUP_BY_FORMS)
        if self.value_field and self.agg != "sum":
            raise UsageError("--value-field is the number --agg sum adds")
        if self.value_format not in VALUE_FORMATS:
            raise UsageError(f"--value-format must be one of {', '.join(VALUE_FORMATS)}")
        if self.suppress_records is not None and not (str(self.suppress_records).isdigit()
                                                      and int(self.suppress_records) >= 1):
            raise UsageError(f"--suppress-records must be a whole number of at least 1, not {self.suppress_records!r}")

    def parameters(self) -> dict[str, Any]:
        return {"group_by": self.group_by, "agg": self.agg, "value_field": self.value_field,
                "value_format": self.value_format, "suppress_time": self.suppress_time,
                "suppress_records": self.suppress_records,
                # only when set: apps made before it have no such parameter
                **({"table_history": self.table_history} if self.table_history is not None else {})}

    def processor(self) -> TableAggregate:
        records = None if self.suppress_records is None else int(self.suppress_records)
        return TableAggregate(self.agg, self.group_by, self.value_field, self.value_format, self.suppress_time, records,
                              self.table_history)

    def stores(self, app_id: str) -> list[StoreSpec]:
        output = store_format(self.agg, self.value_format)  # the store's, the output's and the buffer's alike
        values = {TABLE: "string", STORE: output, BUFFER: f"buffered:{output}"}
        processor = self.processor()
        operators = store_operators(processor)
        return [StoreSpec(name, "key-value", changelog_topic(app_id, name), "string", values[name],
                          operator_id=operators[name], spark_state_var=name,
                          history_ms=self.table_history if name == TABLE else None)
                for name in processor.stores]

    def sink_targets(self, app_id: str) -> list[SinkTarget]:
        return events.sink_targets(self.output_topic, app_id, self.processor().stores)

    def valid_record(self) -> Column:
        from pyspark.sql import functions as F

        text = F.col("value").cast("string")
        ok = F.lit(True)
        if self.group_mapper.kind == "field" or self.value_field:
            ok = F.get_json_object(text, "$").isNotNull()
        if self.agg == "sum":
            number = F.get_json_object(text, "$." + self.value_field) if self.value_field else F.trim(text)
            ok = ok & number.try_cast("double").isNotNull()
        return F.col("value").isNull() | F.coalesce(ok, F.lit(False))

    def build(self, source: DataFrame, tasks: int = 1, seed: DataFrame | None = None) -> DataFrame:
        from pyspark.sql import functions as F

        from kstool.tasks.processor import run_stages

        rows = events.keyed_rows(source, F.col("partition"), F.lit(0), F.col("value"))
        return run_stages(rows, self.processor, tasks, seed)

    def describe(self, app_id: str) -> dict[str, Any]:
        """Topology#describe() of table(...).groupBy(...).count() [.suppress(...)].toStream().to(...):
        two sub-topologies joined by a repartition topic (Kafka's TopologyTest
        tableNamedMaterializedCountShouldPreserveTopologyStructure)."""
        stores = self.stores(app_id)
        names = [s.name for s in stores]
        aggregate, select = "KTABLE-AGGREGATE-0000000006", "KTABLE-SELECT-0000000003"
        suppress = ["KTABLE-SUPPRESS-0000000007"] if BUFFER in names else []
        chain = [aggregate, *suppress, "KTABLE-TOSTREAM-0000000008"]
        repartition = f"{app_id}-{STORE}-repartition"
        rows = [
            {"name": "KSTREAM-SOURCE-0000000001", "type": "source", "topics": [self.input_topic],
             "successors": ["KTABLE-SOURCE-0000000002"]},
            {"name": "KTABLE-SOURCE-0000000002", "type": "processor", "stores": [TABLE], "successors": [select],
             "spark": "a task per input partition"},
            {"name": select, "type": "processor", "stores": [], "successors": ["KSTREAM-SINK-0000000004"],
             "spark": f"each row's change to its group by {self.group_by}, sent to the group's task"},
            {"name": "KSTREAM-SINK-0000000004", "type": "sink", "topic": repartition,
             "spark": "no topic: the changes cross to the next stage's tasks inside the query"},
        ]
        groups = [{"name": "KSTREAM-SOURCE-0000000005", "type": "source", "topics": [repartition],
                   "successors": [aggregate], "spark": "a task per partition the repartition topic would have"}]
        groups += [{"name": name, "type": "processor", "stores": {aggregate: [STORE], "KTABLE-SUPPRESS-0000000007":
                                                                  [BUFFER]}.get(name, []), "successors": [successor]}
                   for name, successor in zip(chain, chain[1:] + [SINK])]
        groups.append({"name": SINK, "type": "sink", "topic": self.output_topic})
        return {"topology": self.name, "sub_topologies": [{"id": 0, "nodes": rows}, {"id": 1, "nodes": groups}],
                "stores": [{"name": s.name, "kind": s.kind, "changelog_topic": s.changelog_topic,
                            "key_format": s.key_format, "value_format": s.value_format} for s in stores]}


TYPE = TopologyType(
    "table-aggregate",
    "Count or sum a table's rows by a new key; a row that changes group leaves its old one.",
    (Setting("input_topic", "--input", "A table: each key's latest value is its row; a tombstone deletes it.",
             kind=TOPIC, required=True, metavar="TOPIC"),
     Setting("output_topic", "--output", kind=TOPIC, required=True, metavar="TOPIC"),
     Setting("group_by", "--group-by", "The row's group: its key, its value, a JSON field of the value, or "
             "field N (from 0) of the value split at SEP.", default="value", metavar="key|value|field:PATH|split:SEP:N"),
     Setting("agg", "--agg", default="count", choices=AGGREGATIONS),
     Setting("value_field", "--value-field", "sum: this JSON field (dot path) of the row (else the row as a number).",
             metavar="PATH"),
     Setting("value_format", "--value-format", "auto: 8-byte long for counts and whole sums, else 8-byte double.",
             default="auto", choices=VALUE_FORMATS),
     Setting("suppress_time", "--suppress-time", "Write a group's latest update once it has waited this long "
             "(stream time; suppress(untilTimeLimit)).", kind=DURATION, metavar="DURATION"),
     Setting("suppress_records", "--suppress-records", "Keep at most this many groups waiting: beyond, the oldest "
             "is written early (maxRecords(N).emitEarlyWhenFull()); alone, groups wait for nothing else.",
             metavar="N"),
     Setting("table_history", "--table-history", "A versioned table keeping each row's versions this long: an "
             "update older than its row's latest version (or than the history) changes no group.",
             kind=DURATION, metavar="DURATION")),
    TableAggregation,
    examples=("kstool run table-aggregate --input user-regions --output users-per-region --once",
              "kstool run table-aggregate --input accounts --output balance-per-branch --group-by field:branch "
              "--agg sum --value-field balance --suppress-time 1m"),
)
