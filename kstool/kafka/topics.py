"""Topic operations: list, describe (partitions, watermarks, configs), create, delete."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, NewTopic

from kstool.base.documents import TopicDescription, TopicPartitionRow, TopicRow
from kstool.base.errors import UsageError
from kstool.base.names import validate_topic
from kstool.kafka.client import KafkaClients
from kstool.kafka.exceptions import KafkaOperationError, TopicNotFoundError


@dataclass
class CreateTopicOptions:
    name: str
    partitions: int = 1
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)


def list_topics(clients: KafkaClients, include_internal: bool = False) -> list[TopicRow]:
    meta = clients.metadata()
    rows: list[TopicRow] = []
    for name, tmeta in sorted(meta.topics.items()):
        internal = name.startswith("__")
        if internal and not include_internal:
            continue
        replicas = next(iter(tmeta.partitions.values())).replicas if tmeta.partitions else []
        rows.append({"topic": name, "partitions": len(tmeta.partitions),
                     "replication_factor": len(replicas), "internal": internal})
    return rows


def describe_topic(clients: KafkaClients, topic: str) -> TopicDescription:
    validate_topic(topic)
    tmeta = clients.metadata().topics.get(topic)
    if tmeta is None or tmeta.error is not None or not tmeta.partitions:
        raise TopicNotFoundError(topic)
    partitions = sorted(tmeta.partitions.values(), key=lambda p: p.id)
    marks = clients.watermarks([(topic, p.id) for p in partitions])
    rows: list[TopicPartitionRow] = []
    for p in partitions:
        low, high = marks[(topic, p.id)]
        rows.append({"partition": p.id, "leader": p.leader, "replicas": list(p.replicas),
                     "isr": list(p.isrs), "low_offset": low, "high_offset": high,
                     "records": max(high - low, 0)})
    return {
        "topic": topic,
        "partitions": rows,
        "total_records": sum(r["records"] for r in rows),
        "configs": topic_configs(clients, topic),
    }


def topic_configs(clients: KafkaClients, topic: str) -> dict[str, str]:
    return topics_configs(clients, [topic])[topic]


def topics_configs(clients: KafkaClients, topics: list[str]) -> dict[str, dict[str, str]]:
    """The configs the broker reports, per topic, in one request; some brokers report only
    non-defaults, so callers must tolerate missing keys."""
    if not topics:
        return {}
    resources = {topic: ConfigResource(ConfigResource.Type.TOPIC, topic) for topic in topics}
    futures = clients.admin().describe_configs(list(resources.values()), request_timeout=clients.timeout)
    out = {}
    for topic, resource in resources.items():
        try:
            entries = futures[resource].result()
        except KafkaException as exc:
            raise clients.translate(exc, topic=("DESCRIBE_CONFIGS", topic)) from None
        out[topic] = {name: entry.value for name, entry in sorted(entries.items())
                      if entry.value is not None and not entry.is_sensitive}
    return out


def create_topic(clients: KafkaClients, options: CreateTopicOptions) -> dict[str, Any]:
    validate_topic(options.name)
    if options.partitions < 1:
        raise UsageError("--partitions must be at least 1")
    new = NewTopic(options.name, num_partitions=options.partitions,
                   replication_factor=options.replication_factor, config=dict(options.configs))
    future = clients.admin().create_topics([new], request_timeout=clients.timeout)[options.name]
    try:
        future.result()
    except KafkaException as exc:
        raise clients.refusal(exc, topic=("CREATE", options.name)) or KafkaOperationError(
            f"cannot create topic {options.name!r}: {_reason(exc)}") from None
    _wait_until_served(clients, options.name, options.partitions)
    return {"topic": options.name, "partitions": options.partitions,
            "replication_factor": options.replication_factor, "configs": dict(options.configs)}


def _wait_until_served(clients: KafkaClients, name: str, partitions: int) -> None:
    """Apache Kafka's brokers learn of a created topic a moment after CreateTopics answers: the
    next command (`topics create T && kstool produce T`, a run's first write) would find no such
    topic. Wait, up to the timeout, until the metadata names a leader for every partition."""
    deadline = time.monotonic() + clients.timeout
    while time.monotonic() < deadline:
        found = clients.metadata().topics.get(name)
        if (found is not None and found.error is None and len(found.partitions) == partitions
                and all(p.leader >= 0 for p in found.partitions.values())):
            return
        time.sleep(0.05)


def ensure_topic(clients: KafkaClients, options: CreateTopicOptions) -> bool:
    """Create the topic unless it exists; True when it was created."""
    existing = clients.metadata().topics
    if options.name in existing:
        return False
    try:
        create_topic(clients, options)
    except KafkaOperationError:
        if options.name not in clients.metadata().topics:  # lost a race to a concurrent creator
            raise
        return False
    return True


def delete_topics(clients: KafkaClients, names: list[str]) -> list[str]:
    """Delete every named topic; checks they all exist first so nothing half-happens on a typo."""
    clients.require_topics(names)
    clients.require_allowed(names, "DELETE")
    futures = clients.admin().delete_topics(names, request_timeout=clients.timeout)
    deleted, failed = [], []
    for name, future in futures.items():
        try:
            future.result()
            deleted.append(name)
        except KafkaException as exc:
            failed.append(f"{name} ({_reason(exc)})")
    if failed:
        raise KafkaOperationError(f"deleted {deleted or 'nothing'}; failed: {', '.join(failed)}")
    return deleted


def _reason(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else exc
    return err.str() if hasattr(err, "str") else str(err)
