"""Runs a topology as a Spark Structured Streaming query: the app runtime.

One run = take the app's lock, check the manifest, create missing output and changelog
topics, start Spark, run the query (until caught up with --once, else until SIGINT/SIGTERM,
which stop after the current batch), then commit the processed offsets to the app's group.
"""

from __future__ import annotations

import json
import re
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kstool.engine import errors_policy
from kstool.engine.app import AppLock, AppPaths, Manifest, check_compatible, load_manifest, save_manifest
from kstool.engine.checkpoint import committed_offsets
from kstool.engine.errors_policy import ErrorPolicy
from kstool.engine.exceptions import DataLossError, QueryFailedError
from kstool.engine.session import SparkOptions
from kstool.engine.sink import BatchReport
from kstool.engine.status import BatchStatus, Reporter
from kstool.errors import UsageError
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import commit_offsets
from kstool.kafka.topics import CreateTopicOptions, ensure_topic
from kstool.streams.task import LATE
from kstool.topologies.base import Topology


@dataclass
class RunOptions:
    app_id: str
    state_dir: Path
    once: bool = False
    trigger_ms: int = 1000
    starting: str = "earliest"
    max_records_per_batch: int | None = 1_000_000
    max_records_per_task: int = 500_000
    on_error: ErrorPolicy = field(default_factory=lambda: ErrorPolicy("fail"))
    on_data_loss: str = "fail"
    quiet: bool = False
    spark: SparkOptions = field(default_factory=SparkOptions)
    stop_offsets: dict[tuple[str, int], int] = field(default_factory=dict)  # exclusive, per input partition
    processing_guarantee: str = "at_least_once"  # | exactly_once_v2
    late_topic: str | None = None  # where records dropped as late go (per-task topologies)


@dataclass
class RunSummary:
    app_id: str
    batches: int = 0
    input_records: int = 0
    written: dict[str, int] = field(default_factory=dict)
    bad_records: int = 0
    late_records: int = 0  # windows: dropped whole; stream-stream joins: too old for their store
    last_batch: int | None = None
    committed: dict[str, int] = field(default_factory=dict)
    spark_start_seconds: float = 0.0
    processing_seconds: float = 0.0
    total_seconds: float = 0.0
    stopped_by_signal: bool = False

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def run_app(clients: KafkaClients, topology: Topology, options: RunOptions) -> RunSummary:
    started = time.monotonic()
    paths = AppPaths(options.state_dir, options.app_id)
    with AppLock(paths):
        partitions = _prepare(clients, topology, options, paths)
        summary = RunSummary(options.app_id)
        reporter = Reporter(options.app_id, options.quiet)
        try:
            _run_query(clients, topology, options, paths, partitions, summary, reporter)
        except BaseException:
            reporter.close()
            try:  # keep the group's offsets true to what did complete, then report the failure
                _commit_group_offsets(clients, options.app_id, paths, summary)
            except Exception:
                pass
            raise
        reporter.close()
        _commit_group_offsets(clients, options.app_id, paths, summary)
        summary.total_seconds = round(time.monotonic() - started, 3)
        return summary


def _prepare(clients: KafkaClients, topology: Topology, options: RunOptions, paths: AppPaths) -> int:
    if options.late_topic and not topology.per_task:
        raise UsageError(f"--late-topic is for windowed aggregations and joins; {topology.name} "
                         "drops no records as late")
    wanted = Manifest(options.app_id, topology.name, topology.parameters(), topology.input_topics(),
                      topology.output_topics(), topology.stores(options.app_id))
    existing = load_manifest(paths)
    if existing is not None:
        check_compatible(existing, wanted)
    inputs = clients.require_topics(topology.input_topics())
    topology.check_run({topic: len(p) for topic, p in inputs.items()})
    partitions = max(len(p) for p in inputs.values())
    for topic in topology.output_topics():
        ensure_topic(clients, CreateTopicOptions(topic, partitions))
    for store in topology.stores(options.app_id):
        configs = {"cleanup.policy": "compact" if store.kind == "key-value" else "compact,delete"}
        if store.retention_ms is not None:  # Kafka Streams: the store's retention + 1 day
            configs["retention.ms"] = str(store.retention_ms + 86_400_000)
        ensure_topic(clients, CreateTopicOptions(store.changelog_topic, partitions, configs=configs))
    if options.on_error.kind == "dlq":
        ensure_topic(clients, CreateTopicOptions(options.on_error.dlq_topic, partitions))
    if options.late_topic:
        ensure_topic(clients, CreateTopicOptions(options.late_topic, partitions))
    save_manifest(paths, wanted)
    return partitions


def _run_query(clients, topology, options, paths, partitions, summary, reporter) -> None:
    from kstool.engine.session import build_session
    from kstool.engine.sink import KafkaSink, SinkTarget, TransactionalSink
    from kstool.engine.source import CLIENT_CONFIG_FILE_OPTION, SOURCE_NAME, write_client_config
    from kstool.engine.shuffle import shuffle_partitions_for

    spark_started = time.monotonic()
    spark_options = options.spark
    if spark_options.shuffle_partitions is None:
        # tasks of a per-task topology must not share a partition (Spark keeps this count in
        # the checkpoint, so later runs use it whatever is set here)
        spark_options.shuffle_partitions = (shuffle_partitions_for(partitions) if topology.per_task
                                            else partitions)
    spark, _ = build_session(spark_options, app_name=f"kstool-{options.app_id}",
                             log_file=paths.spark_log)
    summary.spark_start_seconds = round(time.monotonic() - spark_started, 3)
    reporter.message(f"Spark ready in {summary.spark_start_seconds:.1f}s; "
                     f"{'catching up' if options.once else 'running'}")

    config = clients.config
    source = (spark.readStream.format(SOURCE_NAME)
              .option(CLIENT_CONFIG_FILE_OPTION, str(write_client_config(config, paths.client_config)))
              .option("topics", ",".join(topology.input_topics()))
              .option("group", options.app_id)
              .option("starting", options.starting)
              .option("on_data_loss", options.on_data_loss)
              .option("max_records_per_batch", str(options.max_records_per_batch or 0))
              .option("max_records_per_task", str(options.max_records_per_task))
              .option("stop_offsets", json.dumps(_nested(options.stop_offsets)))
              # exactly_once_v2 commits offsets inside each output transaction instead
              .option("commit_offsets", str(options.processing_guarantee == "at_least_once").lower())
              .load())
    checked = errors_policy.apply(source, topology.valid_record(), options.on_error, config,
                                  options.app_id, topology.invalid_reason)
    reports: dict[int, BatchReport] = {}
    targets = topology.sink_targets(options.app_id)
    if options.late_topic:  # the late record itself: its key, value and event time
        targets.append(SinkTarget(options.late_topic, "value", LATE))
    if options.processing_guarantee == "exactly_once_v2":
        sink = TransactionalSink(clients, targets, options.app_id, paths.checkpoint)
    else:
        sink = KafkaSink(clients, targets)
    writer = sink.batch_writer(topology.encode, lambda r: reports.__setitem__(r.batch_id, r))
    stream = (topology.build(checked, partitions).writeStream.outputMode("update").foreachBatch(writer)
              .option("checkpointLocation", str(paths.checkpoint)).queryName(options.app_id))
    stream = (stream.trigger(availableNow=True) if options.once
              else stream.trigger(processingTime=f"{options.trigger_ms} milliseconds"))
    processing_started = time.monotonic()
    query = stream.start()
    try:
        _monitor(query, reports, summary, reporter)
    finally:
        summary.processing_seconds = round(time.monotonic() - processing_started, 3)
        paths.client_config.unlink(missing_ok=True)
        # An owned session is not stopped here: the query is stopped and its checkpoint
        # committed, and the JVM shuts Spark down itself (shutdown hook) when kstool exits and
        # closes its stdin. Waiting for that would add seconds to every cron run.


def _monitor(query, reports, summary: RunSummary, reporter: Reporter) -> None:
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    seen: set[int] = set()
    try:
        while query.isActive:
            try:
                query.awaitTermination(0.25)
            except Exception:
                break  # failed: query.exception() below says why
            for progress in query.recentProgress:
                _account(progress, reports, seen, summary, reporter)
            if stop.is_set() and not query.status["isTriggerActive"]:
                summary.stopped_by_signal = True
                reporter.message("stopping after the current batch")
                query.stop()
        for progress in query.recentProgress:
            _account(progress, reports, seen, summary, reporter)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    failure = query.exception()
    if failure is not None:
        raise _translate(str(failure))


def _account(progress, reports, seen: set[int], summary: RunSummary, reporter: Reporter) -> None:
    batch_id = progress["batchId"]
    rows = progress["numInputRows"]
    report = reports.get(batch_id)
    if batch_id in seen or (rows == 0 and report is None):
        return
    seen.add(batch_id)
    bad = _observed(progress, errors_policy.METRICS_NAME, "bad_records")
    summary.batches += 1
    summary.input_records += rows
    summary.bad_records += bad
    summary.late_records += report.late if report else 0
    summary.last_batch = batch_id
    written = report.written if report else {}
    for topic, n in written.items():
        summary.written[topic] = summary.written.get(topic, 0) + n
    reporter.batch(BatchStatus(batch_id, rows, progress.get("processedRowsPerSecond") or 0.0,
                               (progress.get("durationMs") or {}).get("triggerExecution", 0),
                               written, report.seconds if report else 0.0, _lag(progress), bad,
                               report.late if report else 0))


def _observed(progress, name: str, field_name: str) -> int:
    row = (progress["observedMetrics"] or {}).get(name)  # a Row, when the metric exists
    try:
        return int(row[field_name] or 0) if row is not None else 0
    except (KeyError, ValueError):
        return 0


def _nested(offsets: dict[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in offsets.items():
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def _lag(progress) -> int | None:
    try:
        source = progress["sources"][0]
        end = json.loads(source["endOffset"]) if isinstance(source["endOffset"], str) else source["endOffset"]
        latest = source.get("latestOffset")
        latest = json.loads(latest) if isinstance(latest, str) else latest
        if not latest:
            return None
        return sum(max(o - end.get(t, {}).get(p, 0), 0) for t, parts in latest.items()
                   for p, o in parts.items())
    except (KeyError, IndexError, TypeError, ValueError):
        return None


_MARKERS = ("kstool-data-loss:", errors_policy.BAD_RECORD_MARKER, "kstool-sink:")


def _translate(text: str) -> Exception:
    """Spark wraps our Python errors in JVM traces; dig out the one line that matters."""
    # the query's plan follows the error and holds our marker literals too: search before it
    text = text.split("=== Streaming Query ===")[0]
    for marker in _MARKERS:
        index = text.find(marker)
        if index >= 0:
            line = text[index:].splitlines()[0]
            message = re.sub(r"\s*SQLSTATE: \w+$", "", line[len(marker):].strip()).rstrip('."')
            return DataLossError(message) if marker == "kstool-data-loss:" else QueryFailedError(message)
    lines = [l.strip() for l in text.splitlines() if re.match(r"\s*[\w.]+(Error|Exception): ", l)]
    return QueryFailedError(f"streaming query failed: {(lines[-1] if lines else text.splitlines()[0])[:500]}")


def _commit_group_offsets(clients: KafkaClients, group: str, paths: AppPaths, summary: RunSummary) -> None:
    """Spark calls the source's commit() for a batch only when the next one starts; commit
    the last completed batch's offsets now so the group shows where the app stands."""
    batch, offsets = committed_offsets(paths.checkpoint)
    if batch is None:
        return
    commit_offsets(clients, group, offsets)
    summary.committed = {f"{t}:{p}": o for (t, p), o in sorted(offsets.items())}
