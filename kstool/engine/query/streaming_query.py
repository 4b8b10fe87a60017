"""The streaming query of a planned run (kstool.engine.query.run_plan): the Spark session, then either
the app's parked query resumed (kstool.engine.query.parking) or a new one built (Kafka source,
--on-error, the topology's plan, the sink) and watched batch by batch (kstool.engine.query.batches)."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from typing import Callable

from kstool.checkpoint.location import local_path
from kstool.checkpoint.logs import last_committed_batch
from kstool.contract import LATE, PARTIAL, RESTORED, SinkTarget, Topology, combiner_of, runs_per_task, value_schema_format
from kstool.engine.failures import translate
from kstool.engine.io import errors_policy
from kstool.engine.io.sink import BatchReport, KafkaSink, TransactionalSink
from kstool.engine.progress import Progress
from kstool.engine.query import parking
from kstool.engine.query.batches import INPUT_METRICS, watch
from kstool.engine.query.options import RunSummary
from kstool.engine.query.run_plan import RunPlan
from kstool.engine.query.seed import seed_entries
from kstool.kafka.client import KafkaClients
from kstool.schemas.formats import SchemaOptions

_log = logging.getLogger("kstool.engine")


def make_sink(clients: KafkaClients, topology: Topology, plan: RunPlan) -> KafkaSink:
    options = plan.options
    targets = topology.sink_targets(options.app_id)
    if not plan.manifest.changelog_by_task:  # an app created before changelogs were kept per task
        targets = [dataclasses.replace(t, by_task=False) for t in targets]
    if options.late_topic:  # the late record itself: its key, value and event time
        targets.append(SinkTarget(options.late_topic, "value", LATE))
    if options.processing_guarantee == "exactly_once_v2" and topology.tasks_are_partitions:
        from kstool.engine.io.task_transactions import TaskTransactionalSink

        return TaskTransactionalSink(clients, targets, options.app_id, plan.checkpoint)
    if options.processing_guarantee == "exactly_once_v2":
        return TransactionalSink(clients, targets, options.app_id, plan.checkpoint)
    from kstool.engine.io.executor_sink import ExecutorSink

    return ExecutorSink(clients, targets)


def run_query(clients: KafkaClients, topology: Topology, plan: RunPlan, sink: KafkaSink, summary: RunSummary,
              progress: Progress) -> None:
    from kstool.engine.io.source_options import (
        CLIENT_CONFIG_FILE_OPTION,
        COMBINER_OPTION,
        GATE_FILE_OPTION,
        SEED_TOPICS_OPTION,
        SOURCE_NAME,
        VALUE_SCHEMA_OPTION,
        nest_offsets,
        write_client_config,
    )
    from kstool.engine.query.shuffle import shuffle_partitions_for
    from kstool.engine.spark.session import checkpoint_conf

    options, paths, checkpoint, seed = plan.options, plan.paths, plan.checkpoint, plan.seed
    spark_started = time.monotonic()
    if options.spark.shuffle_partitions is None:
        # tasks of a per-task topology must not share a partition (Spark keeps this count in
        # the checkpoint, so later runs use it whatever is set here)
        options.spark.shuffle_partitions = (shuffle_partitions_for(plan.partitions) if topology.per_task
                                            else plan.partitions)
    for key, value in checkpoint_conf(local_path(checkpoint.uri) is not None).items():
        options.spark.conf.setdefault(key, value)  # a --conf given for it wins
    spark = plan.start_spark()
    if options.history_batches:  # read when the query starts: its offsets, commits and state versions
        spark.conf.set("spark.sql.streaming.minBatchesToRetain", str(options.history_batches))
    summary.spark_start_seconds = round(time.monotonic() - spark_started, 3)
    progress.message(f"Spark ready in {summary.spark_start_seconds:.1f}s; "
                     f"{'catching up' if options.once else 'running'}")

    config = clients.config
    value_schema = None
    fmt = value_schema_format(topology)
    if fmt is not None:  # the executors decode the values; the registry's settings go with the client's
        given = (options.input_schemas or SchemaOptions()).with_texts()
        value_schema = json.dumps({"format": fmt, "value_schema": given.value_schema,
                                   "value_schema_text": given.value_schema_text, "framed": given.framed})
        config = dataclasses.replace(config, schema_registry=given.registry)
    key = ""
    if plan.parked_queries is not None:
        key = parking.parking_key(topology.name, topology.parameters(), options, config, plan.partitions,
                                  checkpoint.uri, [t.topic for t in sink.targets])
        parked = plan.parked_queries.take(paths.root, key, last_committed_batch(checkpoint))
        if parked is not None:
            _log.info("%s: resuming its parked query", options.app_id)
            parking.resume(parked, plan.parked_queries, clients, topology, paths, checkpoint, summary, progress)
            return
    client_config_file = str(write_client_config(config, paths.client_config))
    reader = spark.readStream.format(SOURCE_NAME).option(CLIENT_CONFIG_FILE_OPTION, client_config_file)
    if value_schema is not None:
        reader = reader.option(VALUE_SCHEMA_OPTION, value_schema)
    combiner = combiner_of(topology) if options.combine else None
    if combiner is not None and combiner.counts_late and options.late_topic:
        combiner = None  # the late topic gets each late record itself
    if combiner is not None:
        reader = reader.option(COMBINER_OPTION, json.dumps(dataclasses.asdict(combiner)))
    if plan.parked_queries is not None:
        reader = reader.option(GATE_FILE_OPTION, str(paths.gate))
        # every trigger that finds nothing to do reports it: how a run knows it is done
        spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    source = (reader
              .option("topics", ",".join(topology.input_topics()))
              .option("group", options.app_id)
              .option("starting", options.starting)
              .option("on_data_loss", options.on_data_loss)
              .option("max_records_per_batch", str(options.batch_records(combined=combiner is not None and combiner.reduces)))
              .option("max_records_per_task", str(options.max_records_per_task))
              .option("stop_offsets", json.dumps(nest_offsets(options.stop_offsets)))
              # exactly_once_v2 commits offsets inside each output transaction instead
              .option("commit_offsets", str(options.processing_guarantee == "at_least_once").lower())
              .option("seed_batch", str(seed is not None).lower())
              .option(SEED_TOPICS_OPTION, ",".join(seed.changelogs if seed is not None and not seed.per_task else []))
              .load())
    from pyspark.sql import functions as F

    if combiner is not None:  # a partial row stands for its records: the batches' input counts them
        source = source.observe(INPUT_METRICS, F.sum(F.coalesce(F.col(PARTIAL)["records"], F.lit(1))).alias("records"))
    valid = topology.valid_record()
    if seed is not None and not seed.per_task:
        valid = F.col(RESTORED) | valid  # a store entry is no input record
    checked = errors_policy.apply(source, valid, options.on_error, config, options.app_id, topology.invalid_reason)
    reports: dict[int, BatchReport] = {}
    writer = sink.batch_writer(topology.encode, lambda r: reports.__setitem__(r.batch_id, r))
    if seed is not None:
        writer = _restoring(writer, lambda r: reports.__setitem__(r.batch_id, r))
    if seed is not None and seed.per_task and runs_per_task(topology):
        updates = topology.build(checked, plan.partitions, seed=seed_entries(spark, client_config_file, seed))
    else:
        updates = topology.build(checked, plan.partitions)
    stream = (updates.writeStream.outputMode("update").foreachBatch(writer)
              .option("checkpointLocation", checkpoint.uri).queryName(options.app_id))
    if plan.parked_queries is not None:
        stream = stream.trigger(processingTime=f"{parking.PARK_TRIGGER_MS} milliseconds")
    elif options.once:
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=f"{options.trigger_ms} milliseconds")
    processing_started = time.monotonic()
    parked = parking.ParkedQuery(key, None, paths.gate, reports=reports) if plan.parked_queries is not None else None
    opened_ms = parking.open_gate_to_ends(parked, clients, topology) if parked is not None else 0  # before the 1st trigger
    try:
        query = stream.start()
    except Exception as exc:  # e.g. a checkpoint Spark cannot open: its own message, in one line
        if parked is not None:
            parked.shut_gate()
        raise translate(str(exc), options.app_id) from None
    try:
        if parked is not None and plan.parked_queries is not None:
            parked.query = query
            parking.drive(parked, plan.parked_queries, opened_ms, paths, checkpoint, summary, progress)
        else:
            watch(query, reports, summary, progress, checkpoint)
    finally:
        summary.processing_seconds = round(time.monotonic() - processing_started, 3)
        paths.client_config.unlink(missing_ok=True)
        # An owned session is not stopped here: the query is stopped and its checkpoint
        # committed, and the JVM shuts Spark down itself (shutdown hook) when kstool exits and
        # closes its stdin. Waiting for that would add seconds to every cron run.


def _restoring(write: Callable, on_batch: Callable[[BatchReport], None]) -> Callable:
    """The foreachBatch function of a restore's run: its first batch only puts the stores
    back (its updates restate the changelogs, so nothing is written), then `write` goes on."""
    def first_batch_restores(batch_df, batch_id: int) -> None:
        if batch_id != 0:
            return write(batch_df, batch_id)
        batch_df.write.format("noop").mode("overwrite").save()  # runs the batch: the state is kept
        on_batch(BatchReport(batch_id, {}, 0.0, restored=True))
    return first_batch_restores
