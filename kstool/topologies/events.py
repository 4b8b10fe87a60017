"""What the per-task topologies (windowed aggregate, join) share: event time, the task a
record belongs to, and how the records their processors emit reach Kafka."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from kstool.base.errors import UsageError
from kstool.base.names import changelog_topic
from kstool.contract import OUTPUT, PACK, PARTIAL, SinkTarget, changelog_role

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


def check_time(spec: str) -> str:
    if spec != "record" and not (spec.startswith("field:") and len(spec) > 6):
        raise UsageError("--time is record or field:PATH (a JSON field: epoch ms or ISO-8601)")
    return spec


def event_time(spec: str, json_text: Column | None = None) -> Column:
    """Epoch ms: the record timestamp, or a JSON field of the value holding epoch ms or an
    ISO-8601 time (null when it holds neither). json_text: the value as JSON text, when it is
    not the value itself (values with a schema, decoded)."""
    from pyspark.sql import functions as F

    if spec == "record":
        return F.unix_millis(F.col("timestamp"))
    text = F.get_json_object(F.col("value").cast("string") if json_text is None else json_text, "$." + spec[6:])
    return F.coalesce(text.try_cast("long"), F.unix_millis(text.try_cast("timestamp")))


def valid_time(spec: str, json_text: Column | None = None) -> Column:
    """A Column: the record has a usable event time (Kafka Streams drops negative ones)."""
    from pyspark.sql import functions as F

    return F.coalesce(event_time(spec, json_text) >= 0, F.lit(False))


def task(key: Column, repartition: bool, tasks: int) -> Column:
    """The task of a record: its input partition, or with a re-key the partition a
    repartition topic of `tasks` partitions would give it (Spark's hash stands in for the
    partitioner: any fixed function of the key gives the same semantics)."""
    from pyspark.sql import functions as F

    return F.pmod(F.hash(key), F.lit(tasks)) if repartition else F.col("partition")


def headers_text() -> Column:
    """A record's headers as JSON text for a task's row, values in base64 (null: none): what
    crosses into the Python tasks as a plain string (a packed record keeps its headers in the pack)."""
    from pyspark.sql import functions as F

    return F.when(F.size(F.col("headers")) > 0, F.to_json(F.col("headers"))).alias("headers")


def keyed_rows(source: DataFrame, task: Column, side: Column, value: Column) -> DataFrame:
    """A per-task processor's rows (kstool.tasks.processor.INPUT_COLUMNS) of keyed records
    without a number, in record time."""
    from pyspark.sql import functions as F

    return source.select(task.alias("task"), side.alias("side"), "key", value.alias("value"),
                         F.lit(None).cast("double").alias("number"), event_time("record").alias("event_time"),
                         "partition", "offset", F.col(PARTIAL)["pack"].alias("pack"), headers_text())


def sink_targets(output_topic: str, app_id: str, stores: Iterable[str], window_bytes: int = 0) -> list[SinkTarget]:
    """The output topic gets the OUTPUT records (keys ending in `window_bytes` of window times:
    SinkTarget.window_bytes), each store's changelog its own."""
    return [SinkTarget(output_topic, "value", OUTPUT, window_bytes=window_bytes)] + [
        SinkTarget(changelog_topic(app_id, store), "value", changelog_role(store), by_task=True) for store in stores]


def encode(emitted: DataFrame) -> DataFrame:
    """The processors' emitted records (kstool.tasks.processor.OUTPUT_SCHEMA) as the sink reads
    them: packed (kstool.engine.io.packs), unpacked where the sink writes."""
    from pyspark.sql import functions as F

    return emitted.select("role", "key", "value", F.timestamp_millis("event_time").alias("timestamp"), "task",
                          PACK)
