"""Topic operations: list, describe (partitions, replicas and their health, watermarks,
configs), create, delete."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, NewTopic

from kstool.base.documents import PartitionHealthRow, TopicDescription, TopicPartitionRow, TopicRow
from kstool.base.errors import KstoolError, UsageError
from kstool.base.names import validate_topic
from kstool.kafka.client import KafkaClients, error_code, unanswered
from kstool.kafka.exceptions import KafkaOperationError, TopicNotFoundError

# what a topic is created with when no replication factor is given: the broker's
# default.replication.factor (CreateTopics v4+, KIP-464), as kafka-topics.sh does without -r and
# Kafka Streams' replication.factor=-1 does for its internal topics (KIP-733)
BROKER_DEFAULT = -1


@dataclass
class CreateTopicOptions:
    name: str
    partitions: int = 1
    replication_factor: int = BROKER_DEFAULT
    configs: dict[str, str] = field(default_factory=dict)


# a partition's health, as kafka-topics.sh --describe judges it (TopicCommand.PartitionDescription:
# hasUnavailablePartitions, isUnderMinIsr, isUnderReplicated), worst first
OFFLINE, UNDER_MIN_ISR, UNDER_REPLICATED, HEALTHY = "offline", "under-min-isr", "under-replicated", "ok"


def is_unavailable(leader: int, live: set[int]) -> bool:
    """No leader, or a leader that is not a live broker: nothing can be read or written."""
    return leader < 0 or leader not in live


def is_under_replicated(replicas: list[int], isr: list[int]) -> bool:
    return len(isr) < len(replicas)


def partition_health(leader: int, replicas: list[int], isr: list[int], live: set[int],
                     min_isr: int | None) -> str:
    """OFFLINE, UNDER_MIN_ISR (acks=all writes fail with NOT_ENOUGH_REPLICAS), UNDER_REPLICATED
    or HEALTHY. `min_isr`: the topic's min.insync.replicas, None where the broker does not say."""
    if is_unavailable(leader, live):
        return OFFLINE
    if min_isr is not None and len(isr) < min_isr:
        return UNDER_MIN_ISR
    return UNDER_REPLICATED if is_under_replicated(replicas, isr) else HEALTHY


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
    """Every partition with its replicas' health; an offline partition's offsets are unknown
    (null): no leader answers for them."""
    validate_topic(topic)
    meta = clients.metadata()
    tmeta = meta.topics.get(topic)
    if tmeta is None or not tmeta.partitions or (
            tmeta.error is not None and tmeta.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise TopicNotFoundError(topic)
    configs = topic_configs(clients, topic)
    min_isr = _min_isr(configs)
    live = set(meta.brokers)
    partitions = sorted(tmeta.partitions.values(), key=lambda p: p.id)
    health = {p.id: partition_health(p.leader, list(p.replicas), list(p.isrs), live, min_isr) for p in partitions}
    # a leader that is gone but not yet fenced answers nothing: its partition's offsets are unknown
    marks = clients.watermarks([(topic, p.id) for p in partitions if health[p.id] != OFFLINE], answered_only=True)
    rows: list[TopicPartitionRow] = []
    for p in partitions:
        low, high = marks.get((topic, p.id), (None, None))
        rows.append({"partition": p.id, "leader": p.leader, "replicas": list(p.replicas),
                     "isr": list(p.isrs), "health": health[p.id], "low_offset": low, "high_offset": high,
                     "records": None if low is None or high is None else max(high - low, 0)})
    return {
        "topic": topic,
        "partitions": rows,
        "total_records": sum(r["records"] or 0 for r in rows),
        "min_insync_replicas": min_isr,
        "configs": configs,
    }


def unhealthy_partitions(clients: KafkaClients, under_replicated: bool = False, unavailable: bool = False,
                         under_min_isr: bool = False, include_internal: bool = False) -> list[PartitionHealthRow]:
    """Every partition of every topic that is under-replicated, unavailable or under its
    min.insync.replicas (any of those asked), as kafka-topics.sh --describe
    --under-replicated-partitions / --unavailable-partitions / --under-min-isr-partitions list them."""
    meta = clients.metadata()
    live = set(meta.brokers)
    names = sorted(n for n in meta.topics if include_internal or not n.startswith("__"))
    min_isrs = {name: _min_isr(configs) for name, configs in topics_configs(clients, names, missing_ok=True).items()}
    rows: list[PartitionHealthRow] = []
    for name in names:
        for p in sorted(meta.topics[name].partitions.values(), key=lambda p: p.id):
            replicas, isr, min_isr = list(p.replicas), list(p.isrs), min_isrs.get(name)
            health = partition_health(p.leader, replicas, isr, live, min_isr)
            if ((under_replicated and is_under_replicated(replicas, isr))
                    or (unavailable and health == OFFLINE)
                    or (under_min_isr and (p.leader < 0 or (min_isr is not None and len(isr) < min_isr)))):
                rows.append({"topic": name, "partition": p.id, "leader": p.leader, "replicas": replicas,
                             "isr": isr, "health": health})
    return rows


def write_blockers(clients: KafkaClients, topic: str) -> str | None:
    """Why acks=all writes to `topic` fail now, as one phrase (None: nothing the metadata shows):
    partitions offline, or with fewer replicas in sync than min.insync.replicas."""
    try:
        meta, configs = clients.metadata(), topic_configs(clients, topic)
    except KstoolError:
        return None
    found, min_isr, live = meta.topics.get(topic), _min_isr(configs), set(meta.brokers)
    problems = []
    for p in sorted(found.partitions.values(), key=lambda p: p.id) if found is not None else []:
        health = partition_health(p.leader, list(p.replicas), list(p.isrs), live, min_isr)
        if health == OFFLINE:
            problems.append(f"partition {p.id} is offline (no live leader)")
        elif health == UNDER_MIN_ISR:
            problems.append(f"partition {p.id}: NOT_ENOUGH_REPLICAS: {len(p.isrs)} in sync, "
                            f"min.insync.replicas={min_isr}")
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return "; ".join(problems[:3]) + more if problems else None


def timestamp_bounds(clients: KafkaClients, topic: str) -> str | None:
    """The record times the topic takes (KIP-937), as one phrase: what a broker's INVALID_TIMESTAMP
    refers to (None: the broker does not say)."""
    try:
        configs = topic_configs(clients, topic)
    except KstoolError:
        return None
    bounds = [f"{name}={configs[name]}" for name in ("message.timestamp.after.max.ms", "message.timestamp.before.max.ms")
              if name in configs and int(configs[name]) < 2**63 - 1]
    if not bounds:
        return None
    return f"topic {topic} takes record times within its {' and '.join(bounds)} of the broker's clock"


def _min_isr(configs: dict[str, str]) -> int | None:
    return int(configs["min.insync.replicas"]) if "min.insync.replicas" in configs else None


def topic_configs(clients: KafkaClients, topic: str) -> dict[str, str]:
    return topics_configs(clients, [topic])[topic]


def topics_configs(clients: KafkaClients, topics: list[str], missing_ok: bool = False) -> dict[str, dict[str, str]]:
    """The configs the broker reports, per topic, in one request; some brokers report only
    non-defaults, so callers must tolerate missing keys. missing_ok: leave out a topic the
    answering broker does not know (created or deleted a moment ago)."""
    if not topics:
        return {}
    resources = {topic: ConfigResource(ConfigResource.Type.TOPIC, topic) for topic in topics}
    futures = clients.asked_of_a_live_controller(
        lambda timeout: clients.admin().describe_configs(list(resources.values()), request_timeout=timeout))
    out = {}
    for topic, resource in resources.items():
        try:
            entries = futures[resource].result()
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if missing_ok and isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise clients.translate(exc, topic=("DESCRIBE_CONFIGS", topic)) from None
        out[topic] = {name: entry.value for name, entry in sorted(entries.items())
                      if entry.value is not None and not entry.is_sensitive}
    return out


def create_topic(clients: KafkaClients, options: CreateTopicOptions) -> dict[str, Any]:
    validate_topic(options.name)
    if options.partitions < 1:
        raise UsageError("--partitions must be at least 1")
    if options.replication_factor != BROKER_DEFAULT and options.replication_factor < 1:
        raise UsageError("--replication-factor must be at least 1")
    new = NewTopic(options.name, num_partitions=options.partitions,
                   replication_factor=options.replication_factor, config=dict(options.configs))
    try:
        ask_to_create(clients.admin, new, clients.asks())
    except KafkaException as exc:
        raise clients.refusal(exc, topic=("CREATE", options.name)) or KafkaOperationError(
            f"cannot create topic {options.name!r}: {_reason(exc)}") from None
    replication_factor = _wait_until_served(clients, options.name, options.partitions)
    return {"topic": options.name, "partitions": options.partitions,
            "replication_factor": replication_factor, "configs": dict(options.configs)}


def ask_to_create(admin: Callable[[], Any], new: NewTopic, asks: Iterable[float]) -> None:
    """CreateTopics, asked with each request timeout of `asks` (KafkaClients.asks) while its
    answer is lost: librdkafka dropped the broker handle the request was on (_DESTROY_BROKER: it
    drops the handle of a broker the cluster's metadata stops naming, as for a moment while a
    cluster's nodes start; seen once on three nodes), or no broker answered in time (a node just
    killed named controller: KafkaClients.asked_of_a_live_controller). The topic found existing
    by the next ask is then the one the lost answer created."""
    lost: KafkaException | None = None
    for timeout in asks:
        try:
            admin().create_topics([new], request_timeout=timeout)[new.topic].result()
            return
        except KafkaException as exc:
            code = error_code(exc)
            if lost is not None and code == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if code != KafkaError._DESTROY_BROKER and not unanswered(exc):
                raise
            lost = exc
    if lost is not None:
        raise lost


def _wait_until_served(clients: KafkaClients, name: str, partitions: int) -> int:
    """Apache Kafka's brokers learn of a created topic a moment after CreateTopics answers, each
    at its own pace: the next command (`topics create T && kstool produce T`, a run's first write)
    asks any of them and would find no such topic (seen on three nodes). Wait, up to the timeout,
    until every broker's metadata names a leader for every partition. Returns the topic's
    replication factor as the metadata shows it (the broker's default when none was asked for)."""
    deadline = time.monotonic() + clients.timeout
    brokers = sorted(clients.metadata().brokers.values(), key=lambda b: b.id)
    waiting = {b.id: clients.admin_at(f"{b.host}:{b.port}") for b in brokers} if len(brokers) > 1 else {-1: clients.admin()}
    replicas = 0
    while waiting and time.monotonic() < deadline:
        for broker, admin in list(waiting.items()):
            served = _replicas_served(admin, name, partitions)
            if served:
                replicas = served
                del waiting[broker]
        if waiting:
            time.sleep(0.05)
    return replicas


def _replicas_served(admin: Any, name: str, partitions: int) -> int:
    """The topic's replication factor when the broker `admin` asks serves a leader for every one
    of its partitions; 0 while it does not."""
    try:
        found = admin.list_topics(timeout=1).topics.get(name)
    except KafkaException:
        return 0
    if (found is None or found.error is not None or len(found.partitions) != partitions
            or any(p.leader < 0 for p in found.partitions.values())):
        return 0
    return len(found.partitions[min(found.partitions)].replicas)


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
    futures = clients.asked_of_a_live_controller(
        lambda timeout: clients.admin().delete_topics(names, request_timeout=timeout))
    deleted, failed = [], []
    for name, future in futures.items():
        try:
            future.result()
            deleted.append(name)
        except KafkaException as exc:
            if error_code(exc) == KafkaError.UNKNOWN_TOPIC_OR_PART:
                deleted.append(name)  # there a moment ago: an earlier ask, whose answer was lost, deleted it
            else:
                failed.append(f"{name} ({_reason(exc)})")
    if failed:
        raise KafkaOperationError(f"deleted {deleted or 'nothing'}; failed: {', '.join(failed)}")
    return deleted


def _reason(exc: KafkaException) -> str:
    err = exc.args[0] if exc.args else exc
    return err.str() if hasattr(err, "str") else str(err)
