"""Everything a run does before Spark starts: check the app's manifest against the run, check
the inputs, create missing output, changelog, dead-letter and late topics, save the manifest."""

from __future__ import annotations

from typing import Callable, cast

from kstool.application.model import AppPaths, Manifest, check_compatible, load_manifest, save_manifest
from kstool.base.errors import UsageError
from kstool.engine.query.options import RunOptions
from kstool.engine.query.topology_facts import TopologyFacts
from kstool.kafka.client import KafkaClients
from kstool.kafka.topics import HEALTHY, CreateTopicOptions, ensure_topic, partition_health
from kstool.stores.state_layouts import STATE_LAYOUT_STAGES


def prepare(clients: KafkaClients, facts: TopologyFacts, options: RunOptions, paths: AppPaths,
            checkpoint_location: str | None, say: Callable[[str], None]) -> tuple[int, Manifest]:
    """Returns the input partition count (the number of tasks) and the app's manifest. Says
    once which of the app's topics have partitions that are not fully replicated."""
    app_id, on_error, late_topic = options.app_id, options.on_error, options.late_topic
    if late_topic and not facts.per_task:
        raise UsageError(f"--late-topic is for windowed aggregations and joins; {facts.name} "
                         "drops no records as late")
    wanted = Manifest(app_id, facts.name, dict(facts.parameters), list(facts.input_topics), list(facts.output_topics),
                      list(facts.stores), checkpoint_location=checkpoint_location)
    existing = load_manifest(paths)
    if existing is not None:
        check_compatible(existing, wanted)
    wanted.changelog_by_task = True  # apps created before kstool 0.2 keep partitioning by key
    wanted.state_layout = STATE_LAYOUT_STAGES
    wanted.aggregate_headers = True
    if existing is not None:  # what the app's history decided, kept
        wanted.changelog_by_task, wanted.restore_pending = existing.changelog_by_task, existing.restore_pending
        wanted.aggregate_headers = existing.aggregate_headers
        wanted.state_layout = existing.state_layout
        wanted.origin, wanted.history_batches = existing.origin, existing.history_batches
        wanted.run_settings = existing.run_settings
    wanted.history_batches = options.history_batches or wanted.history_batches
    wanted.run_settings = options.settings or wanted.run_settings
    inputs = clients.require_topics(facts.input_topics)
    facts.check_run({topic: len(p) for topic, p in inputs.items()})
    partitions = max(len(p) for p in inputs.values())

    def create(topic: str, configs: dict[str, str] | None = None) -> bool:
        return ensure_topic(clients, CreateTopicOptions(topic, partitions, options.replication_factor, configs or {}))

    for topic in facts.output_topics:
        if create(topic):  # a typo'd --output is seen at once
            say(f"created output topic {topic} ({partitions} partition(s)): it did not exist")
    for store in facts.stores:
        create(store.changelog_topic, store.store_kind.changelog_configs(store.retention_ms, store.history_ms))
    records_aside = [cast(str, on_error.dlq_topic)] if on_error.kind == "dlq" else []
    records_aside += [late_topic] if late_topic else []
    for topic in records_aside:
        if create(topic):
            say(f"created topic {topic} ({partitions} partition(s)): it did not exist")
    written = [*facts.output_topics, *(s.changelog_topic for s in facts.stores), *records_aside]
    for line in replication_problems(clients, [*inputs, *written]):
        say(line)
    save_manifest(paths, wanted)
    return partitions, wanted


def replication_problems(clients: KafkaClients, topics: list[str]) -> list[str]:
    """A line per topic with partitions that are offline or not fully replicated (from one
    metadata read): a run goes on, as Kafka Streams does, but the operator should know that a
    changelog or output with one replica left dies with its broker."""
    meta = clients.metadata()
    live, lines = set(meta.brokers), []
    for topic in dict.fromkeys(topics):
        found = meta.topics.get(topic)
        partitions = sorted(found.partitions.values(), key=lambda p: p.id) if found is not None else []
        unhealthy = {p.id: partition_health(p.leader, list(p.replicas), list(p.isrs), live, None) for p in partitions}
        unhealthy = {p: h for p, h in unhealthy.items() if h != HEALTHY}
        if unhealthy:
            which = ", ".join(f"{p} {h}" for p, h in unhealthy.items())
            lines.append(f"topic {topic}: {len(unhealthy)} of {len(partitions)} partition(s) need attention ({which}); "
                         f"see `kstool topics describe {topic}`")
    return lines
