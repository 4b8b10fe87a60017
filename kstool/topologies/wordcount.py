"""wordcount: lower-cased words of UTF-8 lines, counted per word, emitted as KTable updates.

Words are runs of letters, digits (Unicode categories L and N) and underscores, which is
Python's `\\w` (so `re.findall(r"\\w+", line.lower())` is the reference). The count store is
a key-value store `counts` (changelog `<app-id>-counts-changelog`: key = word as UTF-8,
value = 8-byte big-endian long, as Kafka Streams' count() writes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kstool.application.model import StoreSpec
from kstool.base.names import changelog_topic
from kstool.contract import PARTIAL, RESTORED, SinkTarget
from kstool.tasks.combiners import NON_WORD, WORD_SPEC
from kstool.topologies.aggregate_inputs import decode_long, last_headers, last_headers_columns
from kstool.topologies.one_input import OneInput
from kstool.topologies.spec import TOPIC, Setting, TopologyType

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

STORE = "counts"
VALUE_FORMATS = ("long", "string", "json")


@dataclass
class WordCount(OneInput):
    value_format: str = "long"
    name: str = "wordcount"
    invalid_reason: str = "not valid UTF-8"
    per_task: bool = False
    tasks_are_partitions: bool = False
    combiner = WORD_SPEC  # the source counts the words of ASCII lines as it reads them
    forwards_headers: bool = True  # False: an app whose Spark state predates them (Manifest.aggregate_headers)

    def parameters(self) -> dict[str, Any]:
        return {"value_format": self.value_format}

    def stores(self, app_id: str) -> list[StoreSpec]:
        return [StoreSpec(STORE, "key-value", changelog_topic(app_id, STORE), "string", "long",
                          spark_key_field="word")]

    def sink_targets(self, app_id: str) -> list[SinkTarget]:
        return [SinkTarget(self.output_topic, "out_value"),
                SinkTarget(changelog_topic(app_id, STORE), "store_value", headers=False)]

    def valid_record(self) -> Column:
        from pyspark.sql import functions as F

        return F.coalesce(F.is_valid_utf8(F.col("value")), F.lit(True))  # null: no words

    def build(self, source: DataFrame, tasks: int = 1) -> DataFrame:
        from pyspark.sql import functions as F

        # a restore's store entries (word, count) count as that many occurrences of the word, and
        # so do the source's partial rows (a word and its occurrences in a partition range)
        restored, partial = F.col(RESTORED), F.col(PARTIAL)
        single = restored | partial.isNotNull()
        words = source.select(
            F.explode(F.when(single, F.array(F.col("key").cast("string")))
                      .otherwise(F.split(F.lower(F.col("value").cast("string")), NON_WORD))).alias("word"),
            F.when(restored, decode_long(F.col("value"))).when(partial.isNotNull(), partial["count"])
             .otherwise(F.lit(1).cast("long")).alias("weight"),
            F.col("timestamp"), *(last_headers_columns() if self.forwards_headers else ()))
        return (words.filter(F.col("word") != "")
                .groupBy("word")
                .agg(F.sum("weight").alias("count"), F.max("timestamp").alias("timestamp"),
                     *(last_headers(),) if self.forwards_headers else ()))

    def encode(self, updates: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        as_long = F.unhex(F.lpad(F.hex(F.col("count")), 16, "0"))
        as_text = F.encode(F.col("count").cast("string"), "UTF-8")
        return updates.select(
            F.encode(F.col("word"), "UTF-8").alias("key"),
            F.col("timestamp"),
            (as_long if self.value_format == "long" else as_text).alias("out_value"),
            as_long.alias("store_value"), *(("headers",) if self.forwards_headers else ()))

    def describe(self, app_id: str) -> dict[str, Any]:
        store = self.stores(app_id)[0]
        return {
            "topology": self.name,
            "sub_topologies": [{
                "id": 0,
                "nodes": [
                    {"name": "KSTREAM-SOURCE-0000000000", "type": "source",
                     "topics": [self.input_topic], "successors": ["KSTREAM-FLATMAPVALUES-0000000001"]},
                    {"name": "KSTREAM-FLATMAPVALUES-0000000001", "type": "processor",
                     "stores": [], "successors": ["KSTREAM-AGGREGATE-0000000002"],
                     "spark": "explode(split(lower(value), '[^\\p{L}\\p{N}_]+'))"},
                    {"name": "KSTREAM-AGGREGATE-0000000002", "type": "processor",
                     "stores": [store.name], "successors": ["KTABLE-TOSTREAM-0000000003"],
                     "spark": "groupBy(word).count() (shuffle by word; stateful operator 0)"},
                    {"name": "KTABLE-TOSTREAM-0000000003", "type": "processor", "stores": [],
                     "successors": ["KSTREAM-SINK-0000000004"]},
                    {"name": "KSTREAM-SINK-0000000004", "type": "sink", "topic": self.output_topic},
                ],
            }],
            "stores": [{"name": store.name, "kind": store.kind, "changelog_topic": store.changelog_topic,
                        "key_format": store.key_format, "value_format": store.value_format}],
        }


TYPE = TopologyType(
    "wordcount", "Count words of UTF-8 lines; emit each changed count (KTable updates).",
    (Setting("input_topic", "--input", "Topic of text lines.", kind=TOPIC, required=True, metavar="TOPIC"),
     Setting("output_topic", "--output", "Topic of word counts.", kind=TOPIC, required=True, metavar="TOPIC"),
     Setting("value_format", "--value-format",
             "Count encoding in the output topic (long = Kafka's LongSerializer).",
             default="long", choices=VALUE_FORMATS)),
    WordCount,
    examples=("kstool run wordcount --input lines --output counts --once",
              "kstool run wordcount --input lines --output counts --processing-guarantee exactly_once_v2"),
)
