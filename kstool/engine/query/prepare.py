"""Everything a run does before Spark starts: check the app's manifest against the run, check
the inputs, create missing output, changelog, dead-letter and late topics, save the manifest."""

from __future__ import annotations

from typing import cast

from kstool.application.model import (
    STATE_LAYOUT_STAGES,
    AppPaths,
    Manifest,
    check_compatible,
    load_manifest,
    save_manifest,
)
from kstool.base.errors import UsageError
from kstool.contract import Topology
from kstool.engine.query.options import RunOptions
from kstool.kafka.client import KafkaClients
from kstool.kafka.topics import CreateTopicOptions, ensure_topic

DAY_MS = 86_400_000


def prepare(clients: KafkaClients, topology: Topology, options: RunOptions, paths: AppPaths,
            checkpoint_location: str | None) -> tuple[int, Manifest]:
    """Returns the input partition count (the number of tasks) and the app's manifest."""
    app_id, on_error, late_topic = options.app_id, options.on_error, options.late_topic
    if late_topic and not topology.per_task:
        raise UsageError(f"--late-topic is for windowed aggregations and joins; {topology.name} "
                         "drops no records as late")
    wanted = Manifest(app_id, topology.name, topology.parameters(), topology.input_topics(),
                      topology.output_topics(), topology.stores(app_id), checkpoint_location=checkpoint_location)
    existing = load_manifest(paths)
    if existing is not None:
        check_compatible(existing, wanted)
    wanted.changelog_by_task = True  # apps created before kstool 0.2 keep partitioning by key
    wanted.state_layout = STATE_LAYOUT_STAGES
    if existing is not None:  # what the app's history decided, kept
        wanted.changelog_by_task, wanted.restore_pending = existing.changelog_by_task, existing.restore_pending
        wanted.state_layout = existing.state_layout
        wanted.origin, wanted.history_batches = existing.origin, existing.history_batches
        wanted.run_settings = existing.run_settings
    wanted.history_batches = options.history_batches or wanted.history_batches
    wanted.run_settings = options.settings or wanted.run_settings
    inputs = clients.require_topics(topology.input_topics())
    topology.check_run({topic: len(p) for topic, p in inputs.items()})
    partitions = max(len(p) for p in inputs.values())
    for topic in topology.output_topics():
        ensure_topic(clients, CreateTopicOptions(topic, partitions))
    for store in topology.stores(app_id):
        configs = {"cleanup.policy": "compact" if store.kind == "key-value" else "compact,delete"}
        if store.retention_ms is not None:  # Kafka Streams: the store's retention + 1 day
            configs["retention.ms"] = str(store.retention_ms + DAY_MS)
        if store.history_ms is not None:  # Kafka Streams' VersionedChangelogTopicConfig
            configs["min.compaction.lag.ms"] = str(store.history_ms + DAY_MS)
        ensure_topic(clients, CreateTopicOptions(store.changelog_topic, partitions, configs=configs))
    if on_error.kind == "dlq":
        ensure_topic(clients, CreateTopicOptions(cast(str, on_error.dlq_topic), partitions))
    if late_topic:
        ensure_topic(clients, CreateTopicOptions(late_topic, partitions))
    save_manifest(paths, wanted)
    return partitions, wanted
