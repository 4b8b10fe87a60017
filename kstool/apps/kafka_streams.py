"""The Kafka Streams applications a cluster shows, whoever runs them: streams groups (KIP-1071),
whose coordinator holds their topology, and classic or consumer groups that own topics of Kafka
Streams' internal names (`<application.id>-...-changelog`, `-repartition`, ...). kstool's own
apps are among them (they keep Kafka Streams' changelogs), marked as such."""

from __future__ import annotations

from pathlib import Path

from kstool.application.model import iter_apps
from kstool.base.documents import KafkaStreamsAppRow
from kstool.base.errors import NotFoundError
from kstool.base.names import detect_internal_topics, validate_name
from kstool.descriptions.stored import describe_document
from kstool.kafka.client import KafkaClients
from kstool.kafka.exceptions import KafkaOperationError
from kstool.kafka.groups import committed_offsets, describe_members, list_groups, topology_topics
from kstool.kafka.streams_groups import describe_streams_group


def kafka_streams_apps(clients: KafkaClients, state_dir: Path) -> list[KafkaStreamsAppRow]:
    ours = {manifest.app_id for _, manifest in iter_apps(state_dir)}
    topics = sorted(t for t in clients.metadata().topics if not t.startswith("__"))
    rows: list[KafkaStreamsAppRow] = []
    for group in list_groups(clients):
        app_id = group["group"]
        streams_group = group["type"] == "streams"
        membership = describe_members(clients, app_id) if streams_group else None
        if membership is not None and membership.streams is not None and membership.streams["subtopologies"]:
            inputs, internal = topology_topics(membership.streams)
        else:  # by the names of its topics, and what it committed
            internal = detect_internal_topics(app_id, topics, set())
            if not internal and not streams_group:  # a stateless app's group looks like any other
                continue
            membership = membership or describe_members(clients, app_id)
            outside = [t for t in topics if t not in internal]
            inputs = sorted({topic for topic, _ in committed_offsets(clients, app_id, outside)})
        rows.append({"app_id": app_id, "protocol": group["type"],
                     "state": membership.state, "members": len(membership.members), "input_topics": inputs,
                     "internal_topics": internal, "kstool_app": app_id in ours})
    return rows


def stored_topology(clients: KafkaClients, group: str) -> dict:
    """The describe() document of a streams group's topology, as its broker keeps it (Kafka 4.4+,
    KIP-1331); one line saying why when the broker keeps none."""
    description = describe_streams_group(clients.config, validate_name(group, "group"), with_topology=True)
    if description is None:
        raise NotFoundError(f"no streams group {group!r}: the broker keeps the topologies of streams groups "
                            "only (a classic app's: topology describe --from-file with its describe() text)")
    status = description.get("stored_topology_status")
    if status == "ERROR":
        raise KafkaOperationError(f"the broker failed to read the topology of streams group {group!r} "
                                  "from its topology description plugin (see the broker's log)")
    if status != "AVAILABLE":
        raise NotFoundError(f"the broker keeps no topology of streams group {group!r} (status {status}): a "
                            "broker keeps one with group.streams.topology.description.plugin.class set, once a "
                            "member sends it (Kafka Streams 4.4+ does, unless topology.description.push.enabled=false)")
    return describe_document(description)
