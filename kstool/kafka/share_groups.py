"""Share groups (KIP-932, "queues for Kafka"): consumers that share a topic's partitions, each
record delivered to one of them and acknowledged one by one. Neither librdkafka's admin client
nor any CLI but Kafka's `kafka-share-groups.sh` (org.apache.kafka.tools.consumer.group.
ShareGroupCommand) describes them, so kstool asks the group's coordinator itself, as that tool
does: ShareGroupDescribe v1 (members and their assignments), DescribeShareGroupOffsets (each
share-partition's start offset and, from v1, its lag) and AlterShareGroupOffsets (a reset of a
group without members)."""

from __future__ import annotations

import struct
from typing import Any, Callable, cast

from kstool.config import ClientConfig
from kstool.kafka.exceptions import AuthorizationError, KafkaOperationError
from kstool.kafka.wire.codec import NO_TAGS, Reader, compact_array, compact_string
from kstool.kafka.wire.groups import GROUP_AUTHORIZATION_FAILED, GROUP_ID_NOT_FOUND, served_versions
from kstool.kafka.wire.protocol import COORDINATOR_RETRIABLE, GROUP_KEY, Coordinated, CoordinatorRefused, error_name

SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS = 77, 90, 91
NON_EMPTY_GROUP = 68
UNINITIALIZED = -1  # a share-partition no record has been delivered from yet: `-` in Kafka's tool


def describe_share_group(config: ClientConfig, group: str) -> dict[str, Any] | None:
    """{"state", "group_epoch", "assignment_epoch", "assignor", "members": [{"member_id",
    "member_epoch", "rack_id", "client_id", "host", "subscribed_topics", "assignment"}]}, or None
    when `group` is no share group (or the broker has none)."""
    if served_versions(config).get(SHARE_GROUP_DESCRIBE, (0, -1))[1] < 1:
        return None
    body = compact_array([compact_string(group)]) + b"\0" + NO_TAGS  # no authorized operations
    error, message, described = _ask(config, group, SHARE_GROUP_DESCRIBE, 1, body, _one_group(_described))
    if error == GROUP_ID_NOT_FOUND:
        return None
    _refuse(config, group, error, message)
    return cast(dict[str, Any], described)


def share_group_offsets(config: ClientConfig, group: str) -> dict[tuple[str, int], tuple[int | None, int | None]]:
    """Each share-partition's (start offset, lag) as the coordinator says: None for a partition
    from which nothing was delivered yet; the lag from brokers that give it (v1; Apache Kafka 4.4 does)."""
    version = min(served_versions(config).get(DESCRIBE_SHARE_GROUP_OFFSETS, (0, -1))[1], 1)
    if version < 0:
        return {}
    body = compact_array([compact_string(group) + b"\0" + NO_TAGS]) + NO_TAGS  # topics null: all of them
    error, message, offsets = _ask(config, group, DESCRIBE_SHARE_GROUP_OFFSETS, version, body,
                                   _one_group(lambda reply: _offsets(reply, version)))
    _refuse(config, group, error, message)
    return cast(dict[tuple[str, int], tuple[int | None, int | None]], offsets)


def alter_share_group_offsets(config: ClientConfig, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Set the group's start offsets (`kafka-share-groups.sh --reset-offsets --execute`); the
    coordinator refuses while the group has members."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append((partition, offset))
    topics = [compact_string(topic) + compact_array([struct.pack(">iq", p, o) + NO_TAGS for p, o in partitions])
              + NO_TAGS for topic, partitions in by_topic.items()]
    error, message, failed = _ask(config, group, ALTER_SHARE_GROUP_OFFSETS, 0,
                                  compact_string(group) + compact_array(topics) + NO_TAGS, _altered)
    if error == NON_EMPTY_GROUP:
        raise KafkaOperationError(f"share group {group!r} has members: its offsets change only while it has none")
    if error == GROUP_ID_NOT_FOUND:
        raise KafkaOperationError(f"no share group {group!r}")
    _refuse(config, group, error, message)
    if failed:
        raise KafkaOperationError(f"share group {group!r}: offsets not set for {', '.join(failed)}")


Answer = tuple[int, str | None, Any]  # a reply's error, its message, and what was read


def _ask(config: ClientConfig, group: str, api_key: int, version: int, body: bytes,
         read: Callable[[Reader], Answer]) -> Answer:
    """The coordinator's answer about the group (`read` reads it after the throttle time)."""
    answer: list[Answer] = []

    def moved(reply: Reader) -> list[int]:
        reply.take(">i")  # throttle
        answer[:] = [read(reply)]
        return [code for code, _, _ in answer if code in COORDINATOR_RETRIABLE]

    coordinator = Coordinated(config, group, GROUP_KEY)
    try:
        coordinator.call(api_key, version, body, moved, flexible=True)
    except CoordinatorRefused as refused:
        _refuse(config, group, refused.code, None)
        raise KafkaOperationError(f"describing share group {group!r} failed: {refused}") from None
    except (OSError, struct.error, KafkaOperationError) as exc:
        raise KafkaOperationError(f"describing share group {group!r} failed: {exc}") from None
    finally:
        coordinator.close()
    return answer[0]


def _one_group(read: Callable[[Reader], Answer]) -> Callable[[Reader], Answer]:
    """A reply's array of groups, of which the one asked about."""
    return lambda reply: (reply.compact_array(lambda: read(reply)) or [(0, None, None)])[0]


def _altered(reply: Reader) -> Answer:
    """AlterShareGroupOffsetsResponse: its error, and the partitions refused (topic:partition: why)."""
    error, message = reply.take(">h"), reply.compact_string()
    failed: list[str] = []

    def partition(topic: str) -> None:
        index, code, why = reply.take(">i"), reply.take(">h"), reply.compact_string()
        reply.skip_tags()
        if code:
            failed.append(f"{topic}:{index}: {why or error_name(code)}")

    def topic() -> None:
        name = reply.compact_string() or ""
        reply.take("16s")  # topic id
        reply.compact_array(lambda: partition(name))
        reply.skip_tags()
    reply.compact_array(topic)
    reply.skip_tags()
    return error, message, failed


def _refuse(config: ClientConfig, group: str, error: int, message: str | None) -> None:
    if error == GROUP_AUTHORIZATION_FAILED:
        raise AuthorizationError("group", group, "DESCRIBE", config.principal())
    if error and error != GROUP_ID_NOT_FOUND:
        raise KafkaOperationError(f"describing share group {group!r} failed: {message or error_name(error)}")


def _described(reply: Reader) -> tuple[int, str | None, dict[str, Any]]:
    error, message = reply.take(">h"), reply.compact_string()
    reply.compact_string()  # group id
    described = {"state": (reply.compact_string() or "UNKNOWN").upper(), "group_epoch": reply.take(">i"),
                 "assignment_epoch": reply.take(">i"), "assignor": reply.compact_string()}
    described["members"] = reply.compact_array(lambda: _member(reply)) or []
    reply.take(">i")  # authorized operations
    reply.skip_tags()
    return error, message, described


def _member(reply: Reader) -> dict[str, Any]:
    member = {"member_id": reply.compact_string() or "", "rack_id": reply.compact_string(),
              "member_epoch": reply.take(">i"), "client_id": reply.compact_string() or "",
              "host": reply.compact_string() or "",
              "subscribed_topics": reply.compact_array(reply.compact_string) or []}
    assigned = reply.compact_array(lambda: _topic_partitions(reply)) or []
    reply.skip_tags()  # the assignment's
    reply.skip_tags()
    member["assignment"] = [f"{topic}:{p}" for topic, partitions in assigned for p in sorted(partitions)]
    return member


def _topic_partitions(reply: Reader) -> tuple[str, list[int]]:
    reply.take("16s")  # topic id
    topic = reply.compact_string() or ""
    partitions = reply.compact_array(lambda: reply.take(">i")) or []
    reply.skip_tags()
    return topic, partitions


def _offsets(reply: Reader, version: int) -> tuple[int, str | None, dict[tuple[str, int], tuple[int | None, int | None]]]:
    reply.compact_string()  # group id
    offsets: dict[tuple[str, int], tuple[int | None, int | None]] = {}
    for topic, partitions in reply.compact_array(lambda: _offset_topic(reply, version)) or []:
        for partition, start, lag in partitions:
            offsets[(topic, partition)] = (start, lag)
    error, message = reply.take(">h"), reply.compact_string()
    reply.skip_tags()
    return error, message, offsets


def _offset_topic(reply: Reader, version: int) -> tuple[str, list[tuple[int, int | None, int | None]]]:
    topic = reply.compact_string() or ""
    reply.take("16s")  # topic id
    partitions = reply.compact_array(lambda: _offset_partition(reply, version)) or []
    reply.skip_tags()
    return topic, partitions


def _offset_partition(reply: Reader, version: int) -> tuple[int, int | None, int | None]:
    partition, start, _epoch = reply.take(">i"), reply.take(">q"), reply.take(">i")
    lag = reply.take(">q") if version >= 1 else None
    error, message = reply.take(">h"), reply.compact_string()
    reply.skip_tags()
    if error:
        raise KafkaOperationError(f"the share-partition {partition} has no offsets: {message or error_name(error)}")
    uninitialized = start == UNINITIALIZED
    return partition, None if uninitialized else start, None if uninitialized or lag is None or lag < 0 else lag
