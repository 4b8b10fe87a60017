"""The streaming query of a planned run (kstool.engine.query.run_plan): the Spark session
started, the query built (kstool.engine.query.build) and driven fresh or parked
(kstool.engine.query.drivers), as the plan chose."""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import TYPE_CHECKING

from kstool.checkpoint.location import local_path
from kstool.contract import LATE, SinkTarget, Topology
from kstool.engine.io.sink import KafkaSink, TransactionalSink
from kstool.engine.progress import Progress
from kstool.engine.query import parking
from kstool.engine.query.build import build_query, source_input
from kstool.engine.query.drivers import drive_fresh, drive_parked
from kstool.engine.query.options import RunSummary
from kstool.engine.query.run_plan import RunPlan
from kstool.kafka.client import KafkaClients

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def make_sink(clients: KafkaClients, plan: RunPlan) -> KafkaSink:
    options = plan.options
    targets = list(plan.facts.sink_targets)
    if not plan.manifest.changelog_by_task:  # an app created before changelogs were kept per task
        targets = [dataclasses.replace(t, by_task=False) for t in targets]
    if options.late_topic:  # the late record itself: its key, value and event time
        targets.append(SinkTarget(options.late_topic, "value", LATE))
    if options.processing_guarantee == "exactly_once_v2" and plan.facts.tasks_are_partitions:
        from kstool.engine.io.task_transactions import TaskTransactionalSink

        return TaskTransactionalSink(clients, targets, options.app_id, plan.checkpoint)
    if options.processing_guarantee == "exactly_once_v2":
        return TransactionalSink(clients, targets, options.app_id, plan.checkpoint)
    from kstool.engine.io.executor_sink import ExecutorSink

    return ExecutorSink(clients, targets)


def run_query(clients: KafkaClients, topology: Topology, plan: RunPlan, sink: KafkaSink, summary: RunSummary,
              progress: Progress) -> None:
    spark = _start_spark(plan, summary, progress)
    inputs = source_input(clients.config, plan.facts.value_format, plan.options)
    build = functools.partial(build_query, spark, topology, plan, sink, inputs)
    try:
        if plan.parked_queries is None:
            drive_fresh(build(), plan, summary, progress)
        else:
            key = parking.parking_key(plan.facts.name, plan.facts.parameters, plan.options, inputs.config,
                                      plan.partitions, plan.checkpoint.uri, [t.topic for t in sink.targets])
            drive_parked(build, key, plan.parked_queries, clients, plan, summary, progress)
    finally:
        plan.paths.client_config.unlink(missing_ok=True)
        # An owned session is not stopped here: the query is stopped and its checkpoint
        # committed, and the JVM shuts Spark down itself (shutdown hook) when kstool exits and
        # closes its stdin. Waiting for that would add seconds to every cron run.


def _start_spark(plan: RunPlan, summary: RunSummary, progress: Progress) -> SparkSession:
    from kstool.engine.query.shuffle import shuffle_partitions_for
    from kstool.engine.spark.session import checkpoint_conf, run_session

    options = plan.options
    started = time.monotonic()
    if options.spark.shuffle_partitions is None:
        # tasks of a per-task topology must not share a partition (Spark keeps this count in
        # the checkpoint, so later runs use it whatever is set here)
        options.spark.shuffle_partitions = (shuffle_partitions_for(plan.partitions) if plan.facts.per_task
                                            else plan.partitions)
    for key, value in checkpoint_conf(local_path(plan.checkpoint.uri) is not None).items():
        options.spark.conf.setdefault(key, value)  # a --conf given for it wins
    spark = run_session(options.spark, options.app_id, plan.paths.spark_log, progress.message)
    if options.history_batches:  # read when the query starts: its offsets, commits and state versions
        spark.conf.set("spark.sql.streaming.minBatchesToRetain", str(options.history_batches))
    if plan.parked_queries is not None:  # every trigger that finds nothing to do reports it: how a run knows it is done
        spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    summary.spark_start_seconds = round(time.monotonic() - started, 3)
    progress.message(f"Spark ready in {summary.spark_start_seconds:.1f}s; "
                     f"{'catching up' if options.once else 'running'}")
    return spark
