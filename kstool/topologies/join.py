"""join: stream-stream, stream-table and table-table joins of two topics by key, with Kafka
Streams' semantics (`kstool.streams.joins`, a module per kind), stream-global joins of a stream
with a GlobalKTable by a key the stream record names (the table in every task), and foreign-key
table-table joins (three stages of tasks), run per task with Spark's transformWithState.

Both inputs must be co-partitioned (same partition count), as Kafka Streams requires, unless
`--repartition` is given: then records are re-grouped by key into as many tasks as the larger
input has partitions (Spark's shuffle stands in for the repartition topics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from kstool.application.model import StoreSpec
from kstool.base.errors import UsageError
from kstool.base.names import changelog_topic
from kstool.base.serdes import SCHEMA_FORMATS
from kstool.contract import VALUE_JSON, CombinerSpec, SinkTarget, store_operators
from kstool.streams.joins.foreign_key import SUBSCRIPTIONS
from kstool.streams.joins.global_table import GLOBAL
from kstool.streams.joins.joiners import HOWS, JOINERS, make_joiner
from kstool.streams.joins.versioned_stream_table import BUFFER
from kstool.streams.task import LEFT, RIGHT
from kstool.tasks.combiners import pack_spec
from kstool.topologies import events
from kstool.topologies.join_kinds import BY_KEY, KIND_CHOICES, STAGES, TABLE_IN_EVERY_TASK, JoinKind, kind_of
from kstool.topologies.spec import DURATION, FLAG, TOPIC, Setting, TopologyType

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# the join stores' kinds (their changelog key layouts)
_STORE_KINDS = {"join-left": "window", "join-right": "window", "join-unmatched": "key-value",
                "join-left-table": "key-value", "join-right-table": "key-value", BUFFER: "key-value",
                GLOBAL: "key-value", SUBSCRIPTIONS: "key-value"}
# the key formats of stores whose keys hold more than the record key (kstool.changelog.layouts)
_KEY_FORMATS = {"join-unmatched": "join-side:string", BUFFER: "time-first:string", SUBSCRIPTIONS: "hex"}

INPUT_FORMATS = ("bytes", *SCHEMA_FORMATS)


@dataclass
class Join:
    left_topic: str
    right_topic: str
    output_topic: str
    kind: str = "stream-stream"
    how: str = "inner"
    within: int | None = None  # ms; stream-stream only: before = after = within
    grace: int = 0
    joiner: str = "json"
    separator: str = ","
    repartition: bool = False
    input_value_format: str = "bytes"  # bytes: as they are; avro, protobuf, jsonschema: decoded to JSON
    before: int | None = None  # ms; stream-stream, instead of within: JoinWindows.before / after
    after: int | None = None
    table_history: int | None = None  # ms; stream-table, foreign key: versioned tables keeping versions this long
    global_key: str | None = None  # stream-global: key | field:PATH | split:SEP:N of the stream record (None: key)
    foreign_key: str | None = None  # table-table: field:PATH | split:SEP:N of the left row naming the right row
    name: str = "join"
    # a run's setting, not a parameter: the record cache of table-table joins (RunOptions.cache_max_bytes)
    cache_max_bytes: int = 0
    invalid_reason: str = "no usable timestamp"
    per_task: bool = True

    def __post_init__(self) -> None:
        self.kind_entry().validate(self)
        if self.joiner not in JOINERS:
            raise UsageError(f"--joiner must be one of {', '.join(JOINERS)}")
        if self.left_topic == self.right_topic:
            raise UsageError("the two sides of a join must be different topics")
        if self.input_value_format not in INPUT_FORMATS:
            raise UsageError(f"--input-value-format must be one of {', '.join(INPUT_FORMATS)}")
        if self.input_value_format != "bytes":
            self.invalid_reason = f"no usable timestamp, or a value that is not {self.input_value_format}"

    def kind_entry(self) -> JoinKind:
        return kind_of(self)

    def input_topics(self) -> list[str]:
        return [self.left_topic, self.right_topic]

    def output_topics(self) -> list[str]:
        return [self.output_topic]

    def parameters(self) -> dict[str, Any]:
        return {"kind": self.kind, "how": self.how, "within": self.within, "grace": self.grace,
                "joiner": self.joiner, "separator": self.separator, "repartition": self.repartition,
                "left_topic": self.left_topic, "right_topic": self.right_topic,
                # only when set: apps made before them have no such parameters
                **({"input_value_format": self.input_value_format} if self.input_value_format != "bytes" else {}),
                **({"before": self.before, "after": self.after} if self.before is not None else {}),
                **({"table_history": self.table_history} if self.table_history is not None else {}),
                **({"global_key": self.global_key} if self.global_key is not None else {}),
                **({"foreign_key": self.foreign_key} if self.foreign_key is not None else {})}

    def window(self) -> tuple[int, int]:
        """A stream-stream join's (before, after) in ms."""
        if self.before is not None and self.after is not None:
            return self.before, self.after
        return cast(int, self.within), cast(int, self.within)  # checked in __post_init__

    def processor(self) -> Any:  # a kstool.streams.task.Processor; Staged for the kinds in stages
        return self.kind_entry().processor(self, make_joiner(self.joiner, self.separator))

    def stores(self, app_id: str) -> list[StoreSpec]:
        processor = self.processor()
        retention = getattr(processor, "retention", None)  # of window stores
        versioned = getattr(processor, "history_stores", ())
        operators = store_operators(processor)
        return [StoreSpec(name, _STORE_KINDS[name], changelog_topic(app_id, name),
                          _KEY_FORMATS.get(name, "string"), "string", operator_id=operators[name],
                          spark_state_var=name,
                          retention_ms=retention if _STORE_KINDS[name] == "window" else None,
                          history_ms=self.table_history if name in versioned else None)
                for name in processor.stores]

    def sink_targets(self, app_id: str) -> list[SinkTarget]:
        return events.sink_targets(self.output_topic, app_id, self.processor().stores)

    def check_run(self, partitions: dict[str, int]) -> None:
        kind = self.kind_entry()
        kind.check_run(self)
        left, right = partitions[self.left_topic], partitions[self.right_topic]
        if left != right and not self.repartition and kind.spread == BY_KEY:
            raise UsageError(
                f"the join's inputs are not co-partitioned: {self.left_topic} has {left} partitions, "
                f"{self.right_topic} has {right}; Kafka Streams refuses this too. Give --repartition "
                "to re-group both sides by key")

    @property
    def tasks_are_partitions(self) -> bool:
        return self.kind_entry().spread == BY_KEY and not self.repartition

    @property
    def combiner(self) -> CombinerSpec | None:
        """Records packed where they are read, when the task is the input partition and values
        join as they are (a value with a schema joins as its decoded JSON text, a column of its own)."""
        packs = self.input_value_format == "bytes" and self.tasks_are_partitions
        return pack_spec(keyed_values=False) if packs else None

    def valid_record(self) -> Column:
        from pyspark.sql import functions as F

        if self.input_value_format == "bytes":
            return events.valid_time("record")
        decoded = F.col("value").isNull() | F.col(VALUE_JSON).isNotNull()  # a tombstone has nothing to decode
        return events.valid_time("record") & decoded

    def build(self, source: DataFrame, tasks: int = 1, seed: DataFrame | None = None) -> DataFrame:
        from pyspark.sql import functions as F

        from kstool.tasks.processor import run_stages, run_tasks

        side = F.when(F.col("topic") == self.left_topic, LEFT).otherwise(RIGHT)
        # decoded values join as their JSON text (what the joiner shows and the stores keep)
        value = F.col("value") if self.input_value_format == "bytes" else F.encode(F.col(VALUE_JSON), "UTF-8")
        spread = self.kind_entry().spread
        if spread == TABLE_IN_EVERY_TASK:  # the stream's records in their partition's task, the table's in every task
            task = F.explode(F.when(side == LEFT, F.array(F.col("partition")))
                             .otherwise(F.sequence(F.lit(0), F.lit(tasks - 1))))
        elif spread == STAGES:  # both sides' records in the first stage's task of their partition
            return run_stages(events.keyed_rows(source, F.col("partition"), side, value), self.processor, tasks, seed)
        else:
            task = events.task(F.col("key"), self.repartition, tasks)
        rows = events.keyed_rows(source, task, side, value)
        return run_tasks(rows, self.processor, seed)

    def encode(self, updates: DataFrame) -> DataFrame:
        return events.encode(updates)

    def describe(self, app_id: str) -> dict[str, Any]:
        stores = self.stores(app_id)
        kind = self.kind_entry()
        return {"topology": self.name, "sub_topologies": [{"id": 0, "nodes": kind.nodes(self, kind, [s.name for s in stores])}],
                "stores": [{"name": s.name, "kind": s.kind, "changelog_topic": s.changelog_topic,
                            "key_format": s.key_format, "value_format": s.value_format} for s in stores]}


def _describe_window(values: dict[str, Any]) -> dict[str, Any]:
    """`topology describe`'s stand-in for a stream-stream join's window (a run setting): 0,
    unless --within or --before and --after are given."""
    if values.get("kind", "stream-stream") != "stream-stream":
        return {"within": None, "before": None, "after": None}
    if values.get("before") is not None or values.get("after") is not None:
        return {}
    return {"within": values.get("within") or 0}


TYPE = TopologyType(
    "join", "Join two topics by key: stream-stream (windowed), stream-table, table-table, or a stream with a "
    "global table (stream-global).",
    (Setting("left_topic", "--left", kind=TOPIC, required=True, metavar="TOPIC"),
     Setting("right_topic", "--right", kind=TOPIC, required=True, metavar="TOPIC"),
     Setting("output_topic", "--output", kind=TOPIC, required=True, metavar="TOPIC"),
     Setting("kind", "--kind", "Which sides are streams and which tables.", default="stream-stream",
             choices=KIND_CHOICES, describe_help="join: which sides are tables."),
     Setting("how", "--how", default="inner", choices=HOWS, describe_help="join."),
     Setting("within", "--within", "stream-stream: how far apart two records' timestamps may be.",
             kind=DURATION, metavar="DURATION"),
     Setting("before", "--before", "stream-stream, with --after instead of --within: how much earlier the "
             "right record's timestamp may be than the left one's (JoinWindows.before).",
             kind=DURATION, metavar="DURATION"),
     Setting("after", "--after", "stream-stream, with --before: how much later the right record's timestamp "
             "may be than the left one's (JoinWindows.after).", kind=DURATION, metavar="DURATION"),
     Setting("grace", "--grace", "stream-stream: how long after the window records are still accepted; "
             "stream-table with --table-history: how long stream records wait for late table updates.",
             default="0ms", kind=DURATION, metavar="DURATION"),
     Setting("table_history", "--table-history", "stream-table: a versioned table keeping each key's versions "
             "this long; a stream record joins the version valid at its timestamp, not the latest. "
             "--foreign-key: both tables versioned; an update older than its key's latest changes no result.",
             kind=DURATION, metavar="DURATION"),
     Setting("foreign_key", "--foreign-key", "table-table: join each left row with the right row this JSON "
             "field of it, or its field N (from 0) split at SEP, names (a foreign-key join, KIP-213).",
             metavar="field:PATH|split:SEP:N",
             describe_help="join: a foreign-key table-table join."),
     Setting("global_key", "--global-key", "stream-global: the table key a stream record joins: its key, a "
             "JSON field of its value, or its value's field N (from 0) split at SEP (default: key).",
             metavar="key|field:PATH|split:SEP:N"),
     Setting("joiner", "--joiner", 'json: {"left": ..., "right": ...}; concat: left + separator + right.',
             default="json", choices=JOINERS),
     Setting("separator", "--separator", "For --joiner concat.", default=","),
     Setting("repartition", "--repartition", "Re-group both inputs by key when their partition counts differ.",
             default=False, kind=FLAG),
     Setting("input_value_format", "--input-value-format",
             "avro, protobuf, jsonschema: both sides' values decoded to JSON before the join (with "
             "--schema-registry or --value-schema); the stores keep that JSON.",
             default="bytes", choices=INPUT_FORMATS)),
    Join,
    topics_of=lambda manifest: {"output_topic": manifest.output_topics[0]},  # sides: in its parameters
    describe_topics=lambda input_topic, output_topic: {
        "left_topic": input_topic, "right_topic": "<right>", "output_topic": output_topic},
    describe_extra=lambda values: _describe_window(values),
    examples=("kstool run join --left orders --right payments --output paid --kind stream-stream "
              "--within 5m --once",
              "kstool run join --left orders --right shipments --output shipped --kind stream-stream "
              "--before 0ms --after 2d --how left --once",
              "kstool run join --left orders --right customers --output enriched --kind stream-table --how left "
              "--table-history 7d --grace 1m --once"),
    shapes=(("--kind", "stream-stream"), ("--kind", "stream-table"), ("--kind", "table-table"),
            ("--kind", "stream-global")),
)
