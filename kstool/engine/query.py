"""The streaming query of a run: Spark session, Kafka source, --on-error, the topology's plan
and the sink, then watching it batch by batch until it ends (caught up with --once, stopped
after the current batch on SIGINT/SIGTERM, or failed)."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from datetime import datetime, timezone
from typing import Callable

from kstool.application.checkpoint import last_committed_batch
from kstool.application.location import CheckpointFiles
from kstool.application.model import AppPaths
from kstool.contract import LATE, PARTIAL, RESTORED, SinkTarget, Topology, combiner_of, value_schema_format
from kstool.engine import errors_policy, parking
from kstool.engine.exceptions import QueryFailedError
from kstool.engine.failures import translate
from kstool.engine.options import RunOptions, RunSummary
from kstool.engine.progress import BatchStatus, Progress
from kstool.engine.seed import Seed
from kstool.engine.sink import BatchReport, KafkaSink, TransactionalSink
from kstool.engine.stopping import stop_request
from kstool.kafka.client import KafkaClients
from kstool.schemas.formats import SchemaOptions

_log = logging.getLogger("kstool.engine")
INPUT_METRICS = "kstool_input"  # the input records a batch read, where partial rows stand for several


def make_sink(clients: KafkaClients, topology: Topology, options: RunOptions,
              checkpoint: CheckpointFiles, changelog_by_task: bool) -> KafkaSink:
    targets = topology.sink_targets(options.app_id)
    if not changelog_by_task:  # an app created before changelogs were kept per task
        targets = [dataclasses.replace(t, by_task=False) for t in targets]
    if options.late_topic:  # the late record itself: its key, value and event time
        targets.append(SinkTarget(options.late_topic, "value", LATE))
    if options.processing_guarantee == "exactly_once_v2":
        return TransactionalSink(clients, targets, options.app_id, checkpoint)
    from kstool.engine.executor_sink import ExecutorSink

    return ExecutorSink(clients, targets)


def start_spark(options: RunOptions, paths: AppPaths):
    """The run's Spark session (on the JVM a first call started, when there was one)."""
    from kstool.engine.session import build_session

    spark, _ = build_session(options.spark, app_name=f"kstool-{options.app_id}", log_file=paths.spark_log)
    return spark


def run_query(clients: KafkaClients, topology: Topology, options: RunOptions, paths: AppPaths,
              checkpoint: CheckpointFiles, partitions: int, sink: KafkaSink, summary: RunSummary,
              progress: Progress, seed: Seed | None = None,
              parked_queries: parking.ParkedQueries | None = None) -> None:
    """seed: what a restore puts back in the first batch (kstool.engine.seed); parked_queries:
    the engine's, when this run parks its query (parking_for)."""
    from kstool.engine.shuffle import shuffle_partitions_for
    from kstool.engine.source import (
        CLIENT_CONFIG_FILE_OPTION,
        COMBINER_OPTION,
        GATE_FILE_OPTION,
        SOURCE_NAME,
        VALUE_SCHEMA_OPTION,
        write_client_config,
    )

    spark_started = time.monotonic()
    spark_options = options.spark
    if spark_options.shuffle_partitions is None:
        # tasks of a per-task topology must not share a partition (Spark keeps this count in
        # the checkpoint, so later runs use it whatever is set here)
        spark_options.shuffle_partitions = (shuffle_partitions_for(partitions) if topology.per_task
                                            else partitions)
    spark = start_spark(options, paths)
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
    if parked_queries is not None:
        key = parking.parking_key(topology.name, topology.parameters(), options, config, partitions, checkpoint.uri,
                                  [t.topic for t in sink.targets])
        parked = parked_queries.take(paths.root, key, last_committed_batch(checkpoint))
        if parked is not None:
            _log.info("%s: resuming its parked query", options.app_id)
            _run_parked(parked, parked_queries, clients, topology, paths, checkpoint, summary, progress)
            return
    reader = (spark.readStream.format(SOURCE_NAME)
              .option(CLIENT_CONFIG_FILE_OPTION, str(write_client_config(config, paths.client_config))))
    if value_schema is not None:
        reader = reader.option(VALUE_SCHEMA_OPTION, value_schema)
    combiner = combiner_of(topology) if options.combine else None
    if combiner is not None and combiner.counts_late and options.late_topic:
        combiner = None  # the late topic gets each late record itself
    if combiner is not None:
        reader = reader.option(COMBINER_OPTION, json.dumps(dataclasses.asdict(combiner)))
    if parked_queries is not None:
        reader = reader.option(GATE_FILE_OPTION, str(paths.gate))
        # every trigger that finds nothing to do reports it: how a run knows it is done
        spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    source = (reader
              .option("topics", ",".join(topology.input_topics()))
              .option("group", options.app_id)
              .option("starting", options.starting)
              .option("on_data_loss", options.on_data_loss)
              .option("max_records_per_batch", str(options.max_records_per_batch or 0))
              .option("max_records_per_task", str(options.max_records_per_task))
              .option("stop_offsets", json.dumps(_nested(options.stop_offsets)))
              # exactly_once_v2 commits offsets inside each output transaction instead
              .option("commit_offsets", str(options.processing_guarantee == "at_least_once").lower())
              .option("seed_batch", str(seed is not None).lower())
              .option("seed_topics", ",".join(seed.changelogs if seed else []))
              .load())
    from pyspark.sql import functions as F

    if combiner is not None:  # a partial row stands for its records: the batches' input counts them
        source = source.observe(INPUT_METRICS, F.sum(F.coalesce(F.col(PARTIAL)["records"], F.lit(1))).alias("records"))
    valid = topology.valid_record()
    if seed is not None and seed.changelogs:
        valid = F.col(RESTORED) | valid  # a store entry is no input record
    checked = errors_policy.apply(source, valid, options.on_error, config, options.app_id, topology.invalid_reason)
    reports: dict[int, BatchReport] = {}
    writer = sink.batch_writer(topology.encode, lambda r: reports.__setitem__(r.batch_id, r))
    if seed is not None:
        writer = _restoring(writer, lambda r: reports.__setitem__(r.batch_id, r))
    updates = (topology.build(checked, partitions) if seed is None or seed.entries is None
               else topology.build(checked, partitions, seed=spark.createDataFrame(seed.entries)))  # type: ignore[call-arg]
    stream = (updates.writeStream.outputMode("update").foreachBatch(writer)
              .option("checkpointLocation", checkpoint.uri).queryName(options.app_id))
    if parked_queries is not None:
        stream = stream.trigger(processingTime=f"{parking.PARK_TRIGGER_MS} milliseconds")
    elif options.once:
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=f"{options.trigger_ms} milliseconds")
    processing_started = time.monotonic()
    parked = parking.ParkedQuery(key, None, paths.gate, reports=reports) if parked_queries is not None else None
    opened_ms = _open_gate(parked, clients, topology) if parked is not None else 0  # before the 1st trigger
    try:
        query = stream.start()
    except Exception as exc:  # e.g. a checkpoint Spark cannot open: its own message, in one line
        if parked is not None:
            parked.shut_gate()
        raise translate(str(exc), options.app_id) from None
    try:
        if parked is not None and parked_queries is not None:
            parked.query = query
            _drive_parked(parked, parked_queries, opened_ms, paths, checkpoint, summary, progress)
        else:
            _monitor(query, reports, summary, progress)
    finally:
        summary.processing_seconds = round(time.monotonic() - processing_started, 3)
        paths.client_config.unlink(missing_ok=True)
        # An owned session is not stopped here: the query is stopped and its checkpoint
        # committed, and the JVM shuts Spark down itself (shutdown hook) when kstool exits and
        # closes its stdin. Waiting for that would add seconds to every cron run.


def parking_for(options: RunOptions, seed: Seed | None) -> parking.ParkedQueries | None:
    """The engine's parked queries when this run, in this process, leaves its query parked for
    the next one: an at-least-once --once run in the engine, not a restore's (its first batch
    is special) nor a reprocess's up to --to-time (it stops early)."""
    parkable = (options.once and seed is None and not options.stop_offsets
                and options.processing_guarantee == "at_least_once")
    return parking.parked_queries() if parkable else None


def _open_gate(parked: parking.ParkedQuery, clients: KafkaClients, topology: Topology) -> int:
    """Open the parked query's gate to the inputs' ends now, as availableNow would."""
    from kstool.engine.source import input_ends

    return parked.open_gate(_nested(input_ends(clients, topology.input_topics())))


def _run_parked(parked: parking.ParkedQuery, parked_queries: parking.ParkedQueries, clients: KafkaClients,
                topology: Topology, paths: AppPaths, checkpoint: CheckpointFiles, summary: RunSummary,
                progress: Progress) -> None:
    started = time.monotonic()
    try:
        _drive_parked(parked, parked_queries, _open_gate(parked, clients, topology), paths, checkpoint, summary,
                      progress)
    finally:
        summary.processing_seconds = round(time.monotonic() - started, 3)


def _drive_parked(parked: parking.ParkedQuery, parked_queries: parking.ParkedQueries, opened_ms: int,
                  paths: AppPaths, checkpoint: CheckpointFiles, summary: RunSummary, progress: Progress) -> None:
    """Wait until a trigger that began after the gate opened finds nothing left to do (the
    batches up to the gate's offsets are committed, and any batch they called for after them),
    or a stop request's current batch ends; then shut the gate and park the query again."""
    query, seen = parked.query, set[int]()
    done = False
    try:
        with stop_request() as stop:
            while query.isActive and not done:
                query.awaitTermination(0.05)
                if stop.is_set() and not summary.stopped_by_signal:
                    parked.shut_gate()  # the next trigger finds nothing to do
                    summary.stopped_by_signal = True
                    progress.message("stopping after the current batch")
                for batch_progress in query.recentProgress:
                    if _started_ms(batch_progress) < opened_ms:
                        continue
                    if "addBatch" in (batch_progress["durationMs"] or {}):
                        _account(batch_progress, parked.reports, seen, summary, progress)
                    else:
                        done = True
    finally:
        parked.shut_gate()
    failure = query.exception()
    if failure is not None or not query.isActive:
        parked.stop()
        raise translate(str(failure), summary.app_id) if failure is not None else \
            QueryFailedError("the query stopped") from None
    parked.last_batch = last_committed_batch(checkpoint)
    parked.reports.clear()  # every batch asked for is accounted
    parked_queries.park(paths.root, parked)


def _started_ms(batch_progress) -> int:
    """When a trigger began (its progress' timestamp, ISO-8601 with milliseconds, UTC)."""
    stamp = datetime.strptime(batch_progress["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(stamp.replace(tzinfo=timezone.utc).timestamp() * 1000)


def _restoring(write: Callable, on_batch: Callable[[BatchReport], None]) -> Callable:
    """The foreachBatch function of a restore's run: its first batch only puts the stores
    back (its updates restate the changelogs, so nothing is written), then `write` goes on."""
    def first_batch_restores(batch_df, batch_id: int) -> None:
        if batch_id != 0:
            return write(batch_df, batch_id)
        batch_df.write.format("noop").mode("overwrite").save()  # runs the batch: the state is kept
        on_batch(BatchReport(batch_id, {}, 0.0, restored=True))
    return first_batch_restores


def _monitor(query, reports: dict[int, BatchReport], summary: RunSummary, progress: Progress) -> None:
    seen: set[int] = set()
    with stop_request() as stop:
        while query.isActive:
            try:
                query.awaitTermination(0.25)
            except Exception:
                break  # failed: query.exception() below says why
            for batch_progress in query.recentProgress:
                _account(batch_progress, reports, seen, summary, progress)
            if stop.is_set() and not query.status["isTriggerActive"]:
                summary.stopped_by_signal = True
                progress.message("stopping after the current batch")
                query.stop()
        for batch_progress in query.recentProgress:
            _account(batch_progress, reports, seen, summary, progress)
    failure = query.exception()
    if failure is not None:
        raise translate(str(failure), summary.app_id)


def _account(batch_progress, reports: dict[int, BatchReport], seen: set[int], summary: RunSummary,
             progress: Progress) -> None:
    batch_id = batch_progress["batchId"]
    rows = batch_progress["numInputRows"]
    records = _observed(batch_progress, INPUT_METRICS, "records") if rows else 0
    rate = (batch_progress.get("processedRowsPerSecond") or 0.0) * (records / rows if records else 1)
    rows = records or rows  # the source's rows, or the records its partial rows stand for
    report = reports.get(batch_id)
    if batch_id in seen or (rows == 0 and report is None):
        return
    seen.add(batch_id)
    if report is not None and report.restored:
        if rows:  # Spark's own aggregations: the store entries were the batch's rows
            progress.message(f"restored {rows} store entries")
        return
    bad = _observed(batch_progress, errors_policy.METRICS_NAME, "bad_records")
    summary.batches += 1
    summary.input_records += rows
    summary.bad_records += bad
    summary.late_records += report.late if report else 0
    summary.last_batch = batch_id
    written = report.written if report else {}
    for topic, n in written.items():
        summary.written[topic] = summary.written.get(topic, 0) + n
    progress.batch(BatchStatus(batch_id, rows, rate,
                               (batch_progress.get("durationMs") or {}).get("triggerExecution", 0),
                               written, report.seconds if report else 0.0, _lag(batch_progress), bad,
                               report.late if report else 0))


def _observed(batch_progress, name: str, field_name: str) -> int:
    row = (batch_progress["observedMetrics"] or {}).get(name)  # a Row, when the metric exists
    try:
        return int(row[field_name] or 0) if row is not None else 0
    except (KeyError, ValueError):
        return 0


def _nested(offsets: dict[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in offsets.items():
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def _lag(batch_progress) -> int | None:
    try:
        source = batch_progress["sources"][0]
        end = json.loads(source["endOffset"]) if isinstance(source["endOffset"], str) else source["endOffset"]
        latest = source.get("latestOffset")
        latest = json.loads(latest) if isinstance(latest, str) else latest
        if not latest:
            return None
        return sum(max(o - end.get(t, {}).get(p, 0), 0) for t, parts in latest.items()
                   for p, o in parts.items())
    except (KeyError, IndexError, TypeError, ValueError):
        return None
