"""Streams groups (KIP-1071): the groups of Kafka Streams apps that run the streams rebalance
protocol (`group.protocol=streams`, the default protocol of new clusters since Kafka 4.2).
librdkafka's admin client has no call for them, so kstool asks the broker itself
(kstool.kafka.wire.groups lists them) with StreamsGroupDescribe, as Kafka's `kafka-streams-groups.sh` does
(org.apache.kafka.tools.streams.StreamsGroupCommand). StreamsGroupDescribe v1 (Kafka 4.4,
KIP-1331) also answers with the topology description the group's members sent the broker."""

from __future__ import annotations

import struct
from typing import Any, cast

from kstool.base.documents import StoredTopology, StoredTopologyNode, StreamsGroupDescription, StreamsGroupMember, StreamsSubtopology
from kstool.config import ClientConfig
from kstool.kafka.exceptions import AuthorizationError, KafkaOperationError
from kstool.kafka.wire.codec import NO_TAGS, Reader, compact_array, compact_string
from kstool.kafka.wire.groups import GROUP_AUTHORIZATION_FAILED, GROUP_ID_NOT_FOUND, served_versions
from kstool.kafka.wire.protocol import COORDINATOR_RETRIABLE, GROUP_KEY, Coordinated, CoordinatorRefused, error_name

STREAMS_GROUP_DESCRIBE = 89
# StreamsGroupDescribeResponse v1's TopologyDescriptionStatus (clients' StreamsGroupTopologyDescriptionStatus)
TOPOLOGY_STATUSES = {0: "NOT_REQUESTED", 1: "NOT_STORED", 2: "ERROR", 3: "AVAILABLE"}
NODE_TYPES = {1: "source", 2: "processor", 3: "sink"}  # TopologyDescriptionNode.NodeType


class StreamsGroupsUnsupported(KafkaOperationError):
    """The broker serves no request of streams groups: it has none (Apache Kafka before 4.2)."""


class TopologiesNotKept(KafkaOperationError):
    """The broker serves StreamsGroupDescribe v0 only: it keeps no topology description (before 4.4)."""


def _unserved(what: str) -> str:
    return f"the broker does not serve {what} (Apache Kafka 4.2+ with streams groups does)"


def describe_streams_group(config: ClientConfig, group: str,
                           with_topology: bool = False) -> StreamsGroupDescription | None:
    """The group as its coordinator describes it, or None when it is no streams group. With
    `with_topology`, also the topology description the broker keeps (v1: Kafka 4.4+)."""
    described: list[tuple[int, str | None, StreamsGroupDescription]] = []

    def moved(reply: Reader) -> list[int]:
        """The coordinator's answer, kept; its error only where the coordinator moved or loads."""
        reply.take(">i")  # throttle
        described[:] = reply.compact_array(lambda: _described(reply, version)) or []
        return [code for code, _, _ in described[:1] if code in COORDINATOR_RETRIABLE]

    version = describe_version(served_versions(config), config.bootstrap_servers, with_topology)
    body = compact_array([compact_string(group)]) + b"\0"  # no authorized operations
    body += (b"\1" if with_topology else b"\0") if version >= 1 else b""
    coordinator = Coordinated(config, group, GROUP_KEY)
    try:
        coordinator.call(STREAMS_GROUP_DESCRIBE, version, body + NO_TAGS, moved, flexible=True)
    except CoordinatorRefused as refused:  # FindCoordinator's refusal, or a coordinator still moving
        _refuse_if_unauthorized(config, group, refused.code)
        raise KafkaOperationError(f"describing streams group {group!r} failed: {refused}") from None
    except (OSError, struct.error, KafkaOperationError) as exc:
        raise KafkaOperationError(f"describing streams group {group!r} failed: {exc}") from None
    finally:
        coordinator.close()
    error, message, description = described[0]
    if error == GROUP_ID_NOT_FOUND:
        return None
    _refuse_if_unauthorized(config, group, error)
    if error:
        raise KafkaOperationError(f"describing streams group {group!r} failed: {message or error_name(error)}")
    return cast(StreamsGroupDescription, description)


def describe_version(served: dict[int, tuple[int, int]], address: str, with_topology: bool) -> int:
    """The StreamsGroupDescribe version to ask a broker that serves `served` (api_versions)."""
    low, high = served.get(STREAMS_GROUP_DESCRIBE, (0, -1))
    if not low <= 0 <= high:
        raise StreamsGroupsUnsupported(_unserved("StreamsGroupDescribe"))
    if with_topology and high < 1:
        raise TopologiesNotKept(f"the broker at {address} keeps no topology of streams groups: "
                                f"it serves StreamsGroupDescribe up to v{high}, and v1 (Apache Kafka 4.4+, "
                                "KIP-1331) is the one that answers with it")
    return min(high, 1)


def _refuse_if_unauthorized(config: ClientConfig, group: str, error: int) -> None:
    if error == GROUP_AUTHORIZATION_FAILED:
        raise AuthorizationError("group", group, "DESCRIBE", config.principal())


def _described(reply: Reader, version: int) -> tuple[int, str | None, StreamsGroupDescription]:
    error = reply.take(">h")
    message = reply.compact_string()
    description: StreamsGroupDescription = {
        "group": reply.compact_string() or "",
        "type": "streams",
        "state": (reply.compact_string() or "UNKNOWN").upper(),
        "group_epoch": reply.take(">i"),
        "assignment_epoch": reply.take(">i"),
        "topology_epoch": None,
        "subtopologies": [],
        "members": [],
    }
    if reply.take(">b") >= 0:  # a nullable struct: -1 until the group has a topology
        description["topology_epoch"] = reply.take(">i")
        description["subtopologies"] = reply.compact_array(lambda: _subtopology(reply)) or []
        reply.skip_tags()
    description["members"] = reply.compact_array(lambda: _member(reply)) or []
    reply.take(">i")  # authorized operations
    if version >= 1:
        stored = _stored_topology(reply) if reply.take(">b") >= 0 else None
        status = TOPOLOGY_STATUSES.get(reply.take(">b"), "UNKNOWN")
        if status != "NOT_REQUESTED":
            description["stored_topology_status"], description["stored_topology"] = status, stored
        reply.compact_string()  # the assignor's name
    reply.skip_tags()
    return error, message, description


def _stored_topology(reply: Reader) -> StoredTopology:
    subtopologies = reply.compact_array(lambda: _stored_subtopology(reply)) or []
    global_stores = reply.compact_array(lambda: _global_store(reply)) or []
    reply.skip_tags()
    return {"subtopologies": subtopologies, "global_stores": global_stores}


def _stored_subtopology(reply: Reader) -> dict[str, Any]:
    subtopology = {"subtopology": reply.compact_string() or "",
                   "nodes": reply.compact_array(lambda: _node(reply)) or []}
    reply.skip_tags()
    return subtopology


def _global_store(reply: Reader) -> dict[str, StoredTopologyNode]:
    source, processor = _node(reply), _node(reply)
    reply.skip_tags()
    return {"source": source, "processor": processor}


def _node(reply: Reader) -> StoredTopologyNode:
    name, node_type = reply.compact_string() or "", reply.take(">b")
    node: StoredTopologyNode = {"name": name, "type": NODE_TYPES.get(node_type, f"type {node_type}"),
                                "source_topics": _strings(reply), "sink_topic": reply.compact_string(),
                                "stores": _strings(reply), "successors": _strings(reply)}
    reply.skip_tags()
    return node


def _subtopology(reply: Reader) -> StreamsSubtopology:
    subtopology: StreamsSubtopology = {
        "subtopology": reply.compact_string() or "",
        "source_topics": _strings(reply),
        "repartition_sink_topics": _strings(reply),
        "changelog_topics": [topic["name"] for topic in reply.compact_array(lambda: _topic_info(reply)) or []],
        "repartition_source_topics": [topic["name"] for topic in reply.compact_array(lambda: _topic_info(reply)) or []],
    }
    reply.skip_tags()
    return subtopology


def _strings(reply: Reader) -> list[str]:
    return [s or "" for s in reply.compact_array(reply.compact_string) or []]


def _topic_info(reply: Reader) -> dict[str, Any]:
    info = {"name": reply.compact_string(), "partitions": reply.take(">i"), "replication_factor": reply.take(">h")}
    reply.compact_array(lambda: _key_value(reply))  # topic configs
    reply.skip_tags()
    return info


def _key_value(reply: Reader) -> tuple[str | None, str | None]:
    pair = reply.compact_string(), reply.compact_string()
    reply.skip_tags()
    return pair


def _member(reply: Reader) -> StreamsGroupMember:
    member_id, epoch = reply.compact_string() or "", reply.take(">i")
    instance_id, _rack = reply.compact_string(), reply.compact_string()
    client_id, host = reply.compact_string() or "", reply.compact_string() or ""
    topology_epoch, process_id = reply.take(">i"), reply.compact_string() or ""
    if reply.take(">b") >= 0:  # the user endpoint (host, port) of Interactive Queries, when set
        reply.compact_string()
        reply.take(">H")
        reply.skip_tags()
    reply.compact_array(lambda: _key_value(reply))  # client tags
    reply.compact_array(lambda: _task_offset(reply))  # task offsets
    reply.compact_array(lambda: _task_offset(reply))  # task end offsets
    assignment = _assignment(reply)
    target = _assignment(reply)
    classic = bool(reply.take(">b"))
    reply.skip_tags()
    return {"member_id": member_id, "member_epoch": epoch, "group_instance_id": instance_id,
            "client_id": client_id, "host": host, "process_id": process_id, "topology_epoch": topology_epoch,
            "protocol": "classic" if classic else "streams",
            "active_tasks": assignment[0], "standby_tasks": assignment[1], "warmup_tasks": assignment[2],
            "target_active_tasks": target[0]}


def _task_offset(reply: Reader) -> None:
    reply.compact_string()
    reply.take(">i")
    reply.take(">q")
    reply.skip_tags()


def _assignment(reply: Reader) -> tuple[dict[str, list[int]], ...]:
    kinds = tuple(_tasks(reply) for _ in range(3))  # active, standby, warm-up
    reply.skip_tags()
    return kinds


def _tasks(reply: Reader) -> dict[str, list[int]]:
    tasks = {}
    for subtopology, partitions in reply.compact_array(lambda: _task_ids(reply)) or []:
        tasks[subtopology] = sorted(partitions)
    return tasks


def _task_ids(reply: Reader) -> tuple[str, list[int]]:
    subtopology = reply.compact_string() or ""
    partitions = reply.compact_array(lambda: reply.take(">i")) or []
    reply.skip_tags()
    return subtopology, partitions
