"""Spark columns the stateful topologies share: event time, and the task a record belongs to."""

from __future__ import annotations

from kstool.errors import UsageError


def check_time(spec: str) -> str:
    if spec != "record" and not (spec.startswith("field:") and len(spec) > 6):
        raise UsageError("--time is record or field:PATH (a JSON field: epoch ms or ISO-8601)")
    return spec


def event_time(spec: str):
    """Epoch ms: the record timestamp, or a JSON field of the value holding epoch ms or an
    ISO-8601 time (null when it holds neither)."""
    from pyspark.sql import functions as F

    if spec == "record":
        return F.unix_millis(F.col("timestamp"))
    text = F.get_json_object(F.col("value").cast("string"), "$." + spec[6:])
    return F.coalesce(text.try_cast("long"), F.unix_millis(text.try_cast("timestamp")))


def valid_time(spec: str):
    """A Column: the record has a usable event time (Kafka Streams drops negative ones)."""
    from pyspark.sql import functions as F

    return F.coalesce(event_time(spec) >= 0, F.lit(False))


def task(key, repartition: bool, tasks: int):
    """The task of a record: its input partition, or with a re-key the partition a
    repartition topic of `tasks` partitions would give it (Spark's hash stands in for the
    partitioner: any fixed function of the key gives the same semantics)."""
    from pyspark.sql import functions as F

    return F.pmod(F.hash(key), F.lit(tasks)) if repartition else F.col("partition")
