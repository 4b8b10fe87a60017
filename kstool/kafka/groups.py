"""Groups (classic, consumer, streams and share): list, describe with per-partition lag, commit
offsets, remove members."""

from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple, TypeVar, cast

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from kstool.base.documents import (
    GroupDescription,
    GroupMember,
    GroupPartition,
    GroupRow,
    StreamsGroupDescription,
    StreamsGroupMember,
    StreamsSubtopology,
)
from kstool.base.errors import BusyError, KstoolError
from kstool.kafka.client import KafkaClients, error_code, unanswered
from kstool.kafka.exceptions import GroupNotFoundError, KafkaOperationError
from kstool.kafka.share_groups import describe_share_group, share_group_offsets
from kstool.kafka.streams_groups import StreamsGroupsUnsupported, describe_streams_group
from kstool.kafka.timelag import time_lags_ms
from kstool.kafka.wire.groups import GroupTypesUnsupported, list_groups_of_types
from kstool.kafka.wire.protocol import speaks_to


class GroupBusyError(BusyError):
    """The group has members: what changes it needs it empty."""


# a group's coordinator busy for a moment: Apache Kafka answers so while it loads a partition of
# __consumer_offsets (just created, or moved), and an answer comes once it has
_COORDINATOR_BUSY = (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE,
                     KafkaError.NOT_COORDINATOR)
T = TypeVar("T")
# how long a read of where a group stands waits for a transaction's offsets to settle: past it,
# an open transaction leaves its partitions at their last stable offsets, as Kafka's own tools
# show them (a description), and as a run that starts a checkpoint must take them (a killed
# run's transaction stays open until the next writer of its id, or its timeout, aborts it)
SETTLE_S = 2.0


def _asked_of_the_coordinator(clients: KafkaClients, request: Callable[[], T], group: str, operation: str) -> T:
    """A request of `operation` (an ACL's name) on a group, asked again while the coordinator is
    busy or moves, until the command's timeout. A new admin client asks after a coordinator
    answered that it is not the group's, and once more after a timeout: a client that lived
    through a node's loss (a long run's) keeps asking the coordinator that node was."""
    try:
        return while_coordinator_moves(request, time.monotonic() + clients.timeout, moved=clients.drop_admin)
    except KafkaException as exc:
        if not (isinstance(exc.args[0], KafkaError) and exc.args[0].code() == KafkaError._TIMED_OUT):
            raise clients.translate(exc, group=(operation, group)) from None
    clients.drop_admin()
    try:
        return while_coordinator_moves(request, time.monotonic() + clients.timeout, moved=clients.drop_admin)
    except KafkaException as exc:
        raise clients.translate(exc, group=(operation, group)) from None


def list_groups(clients: KafkaClients) -> list[GroupRow]:
    """Every group, as each broker's coordinators list theirs: ListGroups goes to every node the
    metadata names, asked again (KafkaClients.asks) while one just lost is named or a coordinator
    is busy. As Kafka's own ListGroups, a coordinator that moved a moment ago may not list its
    groups yet: a node that has not yet taken up a partition of __consumer_offsets it leads
    lists nothing for it, without an error (GroupCoordinatorService.listGroups reads only the
    coordinators its runtime has)."""
    for timeout in clients.asks():
        try:
            result = clients.admin().list_consumer_groups(request_timeout=timeout).result()
        except KafkaException as exc:
            raise clients.translate(exc) from None
        if not any(unanswered(err) or err.code() in _COORDINATOR_BUSY for err in result.errors):
            break
    if result.errors:  # an unreachable broker answers with errors and no groups, not an empty list
        raise clients.translate(KafkaException(result.errors[0]))
    rows: list[GroupRow] = [{"group": g.group_id, "type": _type(g.type), "state": _state(g.state),
                             "simple": g.is_simple_consumer_group} for g in result.valid]
    typed = {row["group"]: row for row in _typed_groups(clients)}
    rows = [row for row in rows if row["group"] not in typed] + list(typed.values())
    _fill_unknown_states(clients, rows)
    return sorted(rows, key=lambda r: r["group"])


def _type(kind: Any) -> str:
    """classic, consumer (KIP-848), or unknown: librdkafka names no other type."""
    return kind.name.lower() if kind is not None and kind.name != "UNKNOWN" else "unknown"


def _typed_groups(clients: KafkaClients) -> list[GroupRow]:
    """The streams (KIP-1071) and share (KIP-932) groups every broker lists, which librdkafka
    does not; none from a broker that lists no groups by type (before Kafka 4.0) or where
    kstool's own client cannot connect (wire.protocol.speaks_to)."""
    if not speaks_to(clients.config):
        return []
    brokers = [(cast(str, b.host), b.port) for b in clients.metadata().brokers.values()]
    try:
        listed = list_groups_of_types(clients.config, brokers, ["streams", "share"])
    except GroupTypesUnsupported:
        return []
    return [{"group": g["group"], "type": g["type"], "state": g["state"], "simple": False} for g in listed]


def _fill_unknown_states(clients: KafkaClients, rows: list[GroupRow]) -> None:
    """Some brokers (the embedded one) list groups without their state: ask DescribeGroups, as
    `groups describe` does, so that both commands say the same."""
    unknown = [row for row in rows if row["state"] == "UNKNOWN" and row["type"] not in ("streams", "share")]
    if not unknown:
        return
    try:
        futures = clients.admin().describe_consumer_groups([row["group"] for row in unknown],
                                                           request_timeout=clients.timeout)
        for row in unknown:
            row["state"] = _state(futures[row["group"]].result().state)
    except KafkaException:
        pass  # the listing stands; the state stays UNKNOWN


def _state(state: Any) -> str:
    return state.name if state is not None else "UNKNOWN"


class Membership(NamedTuple):
    state: str
    members: list[GroupMember]  # id, client id, host and assignment (partitions)
    streams: StreamsGroupDescription | None  # a streams group's epochs, topology and tasks


def describe_members(clients: KafkaClients, group: str) -> Membership:
    """The group's state and members, a streams group's (KIP-1071) as a consumer group's too."""
    streams = _streams_description(clients, group)
    if streams is not None:
        return Membership(streams["state"], [_member_of(m, streams["subtopologies"]) for m in streams["members"]],
                          streams)
    desc = _asked_of_the_coordinator(clients, lambda: clients.admin().describe_consumer_groups(
        [group], request_timeout=clients.timeout)[group].result(), group, "DESCRIBE")
    members: list[GroupMember] = [{
        "member_id": m.member_id,
        "client_id": m.client_id,
        "host": m.host,
        "group_instance_id": m.group_instance_id,
        "assignment": [f"{tp.topic}:{tp.partition}" for tp in (m.assignment.topic_partitions
                                                                if m.assignment else [])],
    } for m in desc.members]
    return Membership(_state(desc.state), members, None)


def require_group_allowed(clients: KafkaClients, group: str, operation: str) -> None:
    """Refuse before acting when the broker says (KIP-430) that the user may not `operation`
    (an ACL's name) the group; a broker that does not say lets the command go on."""
    desc = _asked_of_the_coordinator(clients, lambda: clients.admin().describe_consumer_groups(
        [group], include_authorized_operations=True, request_timeout=clients.timeout)[group].result(),
        group, operation)
    clients.require_operation(desc.authorized_operations, "group", group, operation)


def committed_offsets(clients: KafkaClients, group: str, topics: list[str] | None = None,
                      settle_s: float | None = None) -> dict[tuple[str, int], int]:
    """Committed offset per (topic, partition) of `topics` (None: every topic), as a
    read_committed consumer starts from them; partitions with nothing committed are left out.
    Offsets a transaction commits show once its markers are written, a moment after it ends
    (until then Apache Kafka answers UNSTABLE_OFFSET_COMMIT, KIP-447, and the consumer asks
    again): waited for until the command's timeout, or for `settle_s`, after which a
    transaction still open (a running app's) leaves its partitions at their last stable offsets.

    Read by a consumer of the group that never joins it, not by the admin client: librdkafka's
    ListConsumerGroupOffsets crashes the process (SIGSEGV) when the coordinator answers
    NOT_COORDINATOR, as a freshly started Apache Kafka does (librdkafka#5040)."""
    meta = clients.metadata()
    names = sorted(meta.topics) if topics is None else [t for t in topics if t in meta.topics]
    partitions = [TopicPartition(t, p) for t in names for p in sorted(meta.topics[t].partitions)]
    if not partitions:
        return {}

    def read(isolation: str, settle: float) -> dict[tuple[str, int], int]:
        # the settling bounds the wait for stable offsets only: a coordinator that moves (its
        # node lost) is waited for until the command's timeout, as every other request to it is
        settled = time.monotonic() + settle
        answer = while_coordinator_moves(lambda: _committed(
            clients, group, partitions, isolation, max(settled - time.monotonic(), 0.1)), time.monotonic() + clients.timeout)
        return {(tp.topic, tp.partition): tp.offset for tp in answer if tp.error is None and tp.offset >= 0}

    def settled_read(settle: float) -> dict[tuple[str, int], int] | None:
        """The stable offsets, None when they did not settle within `settle` seconds."""
        try:
            return read("read_committed", settle)
        except KafkaException as exc:
            if settle_s is None or error_code(exc) != KafkaError._TIMED_OUT:
                raise
            return None

    try:
        stable = settled_read(clients.timeout if settle_s is None else settle_s)
        if stable is not None:
            return stable
        unstable = read("read_uncommitted", clients.timeout)
        if unstable:
            return unstable
        # offsets pending but none committed: also what a coordinator that has just taken the
        # group over from a lost node answers, until its high watermark passes the group's
        # records (once the lost node leaves the ISR); the first transaction of a group
        # still open (a killed app's) stays so until the timeout
        return settled_read(clients.timeout) or {}
    except KafkaException as exc:
        raise clients.translate(exc, group=("DESCRIBE", group)) from None


def while_coordinator_moves(ask: Callable[[], T], deadline: float, moved: Callable[[], None] | None = None) -> T:
    """ask(), again while the group's coordinator is loading, not available or moved (a node
    lost; librdkafka does not ask again for these when reading committed offsets), until the
    monotonic `deadline`; then its KafkaException. `moved`: called when the coordinator answered
    that it is not the group's any more (a client that keeps asking it drops it)."""
    pause = 0.05
    while True:
        try:
            return ask()
        except KafkaException as exc:
            code = error_code(exc)
            if code not in _COORDINATOR_BUSY or time.monotonic() + pause >= deadline:
                raise
            if code == KafkaError.NOT_COORDINATOR and moved is not None:
                moved()
            time.sleep(pause)
            pause = min(pause * 2, 1.0)


def _committed(clients: KafkaClients, group: str, partitions: list[TopicPartition], isolation: str,
               timeout: float) -> list[TopicPartition]:
    """read_committed asks for stable offsets (librdkafka sets OffsetFetch's require_stable)."""
    consumer = clients.consumer(group_id=group, **{"isolation.level": isolation})
    try:
        return cast(list[TopicPartition], consumer.committed(partitions, timeout=timeout))
    finally:
        consumer.close()


def describe_group(clients: KafkaClients, group: str, time_lag: bool = False) -> GroupDescription:
    """time_lag: also each partition's lag in time (kstool.kafka.timelag), which reads a record
    per lagging partition. A streams group (KIP-1071) adds "streams": its epochs, topology and
    each member's tasks; a share group (KIP-932) is described as its coordinator keeps it
    (_share_group_description)."""
    state, members, streams = describe_members(clients, group)
    shared = share_group(clients, group, state, members, streams)
    if shared is not None:
        return _share_group_description(clients, group, shared)
    committed = committed_offsets(clients, group, settle_s=SETTLE_S)
    if committed and state == "DEAD":  # described by a coordinator still loading the group
        state, members, streams = describe_members(clients, group)
    note = None
    if not committed and not members:
        # some brokers describe any name as an EMPTY group: a group they do not list is unknown
        listed = [g["group"] for g in list_groups(clients)]
        if state in ("DEAD", "UNKNOWN") or group not in listed:
            raise GroupNotFoundError(group, listed)
        note = "no committed offsets"
    marks = clients.watermarks(sorted(committed))
    owners = {tp: m["member_id"] for m in members for tp in m["assignment"]}
    partitions: list[GroupPartition] = []
    for (topic, partition), offset in sorted(committed.items()):
        end = marks[(topic, partition)][1]
        partitions.append({"topic": topic, "partition": partition, "committed": offset,
                           "end_offset": end, "lag": max(end - offset, 0),
                           "member_id": owners.get(f"{topic}:{partition}")})
    description: GroupDescription = {
        "group": group,
        "type": "streams" if streams is not None else "consumer",
        "state": state,
        "members": members,
        "partitions": partitions,
        "total_lag": sum(p["lag"] or 0 for p in partitions),
        "note": note,
    }
    if streams is not None:
        description["streams"] = streams
    if time_lag:
        lags = time_lags_ms(clients, committed, {tp: mark[1] for tp, mark in marks.items()})
        for p in partitions:
            p["time_lag_ms"] = lags[(p["topic"], p["partition"])]
        known = [p["time_lag_ms"] for p in partitions if p["time_lag_ms"] is not None]
        description["max_time_lag_ms"] = max(known, default=0)
    return description


def share_group(clients: KafkaClients, group: str, state: str, members: list[GroupMember],
                streams: StreamsGroupDescription | None) -> dict[str, Any] | None:
    """The share group's description (kstool.kafka.share_groups), when `group`, as described by
    describe_members, may be one: librdkafka describes a share group as a DEAD group without
    members and it has no committed offsets (a consumer group whose coordinator has just moved
    may look DEAD for a moment too; asking only then spares every other description two requests)."""
    if streams is not None or members or state not in ("DEAD", "UNKNOWN") or not speaks_to(clients.config):
        return None
    if committed_offsets(clients, group, settle_s=SETTLE_S):
        return None
    return describe_share_group(clients.config, group)


def share_group_members(shared: dict[str, Any]) -> list[GroupMember]:
    """A share group's members (describe_share_group's) as any group's."""
    return [{"member_id": m["member_id"], "client_id": m["client_id"], "host": m["host"],
             "group_instance_id": None, "assignment": m["assignment"]} for m in shared["members"]]


def _share_group_description(clients: KafkaClients, group: str, shared: dict[str, Any]) -> GroupDescription:
    """A share group: its members share its partitions (each record goes to one of them), so a
    partition has no one owner; where the group stands in each is its share-partition start
    offset (null: nothing delivered from it yet), its lag the coordinator's, as
    `kafka-share-groups.sh --describe --offsets` shows them."""
    offsets = share_group_offsets(clients.config, group)
    marks = clients.watermarks(sorted(offsets))
    partitions: list[GroupPartition] = [
        {"topic": topic, "partition": partition, "committed": start, "end_offset": marks[(topic, partition)][1],
         "lag": lag, "member_id": None} for (topic, partition), (start, lag) in sorted(offsets.items())]
    members = share_group_members(shared)
    return {"group": group, "type": "share", "state": shared["state"], "members": members, "partitions": partitions,
            "total_lag": sum(p["lag"] or 0 for p in partitions),
            "note": None if partitions else "no share-partition state yet",
            "share": {"group_epoch": shared["group_epoch"], "assignment_epoch": shared["assignment_epoch"],
                      "assignor": shared["assignor"]}}


def _streams_description(clients: KafkaClients, group: str) -> StreamsGroupDescription | None:
    """The streams group's description, or None when `group` is none (or the broker has no
    streams groups, or kstool's own client cannot connect: wire.protocol.speaks_to)."""
    if not speaks_to(clients.config):
        return None
    try:
        return describe_streams_group(clients.config, group)
    except StreamsGroupsUnsupported:
        return None


def topology_topics(described: StreamsGroupDescription) -> tuple[list[str], list[str]]:
    """A streams group's input and internal (changelog, repartition) topics, from the topology its
    coordinator holds (none until a member has sent it)."""
    subtopologies = described["subtopologies"]
    repartition = {t for s in subtopologies for t in s["repartition_source_topics"]}
    changelogs = {t for s in subtopologies for t in s["changelog_topics"]}
    inputs = {t for s in subtopologies for t in s["source_topics"]} - repartition
    return sorted(inputs), sorted(repartition | changelogs)


def _member_of(member: StreamsGroupMember, subtopologies: list[StreamsSubtopology]) -> GroupMember:
    """A streams group's member as a consumer group's: its active tasks' input partitions."""
    inputs = {s["subtopology"]: s["source_topics"] + s["repartition_source_topics"] for s in subtopologies}
    return {"member_id": member["member_id"], "client_id": member["client_id"], "host": member["host"],
            "group_instance_id": member["group_instance_id"],
            "assignment": sorted(f"{topic}:{partition}" for subtopology, partitions in member["active_tasks"].items()
                                 for topic in inputs.get(subtopology, []) for partition in partitions)}


def starting_offsets(clients: KafkaClients, group: str, tps: list[tuple[str, int]],
                     starting: str) -> dict[tuple[str, int], int]:
    """Where a new checkpoint of the app `group` starts: the group's committed offsets, else
    the log start (starting "earliest") or end ("latest")."""
    marks = clients.watermarks(tps)
    committed = committed_offsets(clients, group, sorted({t for t, _ in tps}), settle_s=SETTLE_S)
    return {tp: committed.get(tp, marks[tp][0] if starting == "earliest" else marks[tp][1]) for tp in tps}


def commit_offsets(clients: KafkaClients, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for a group that has no active members (as Kafka's tools require)."""
    request = [ConsumerGroupTopicPartitions(
        group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])]

    def alter() -> ConsumerGroupTopicPartitions:
        altered = cast(ConsumerGroupTopicPartitions, clients.admin().alter_consumer_group_offsets(
            request, request_timeout=clients.timeout)[group].result())
        moved = [tp.error for tp in altered.topic_partitions or [] if tp.error and tp.error.code() in _COORDINATOR_BUSY]
        if moved:  # answered per partition, not raised: asked again as a busy coordinator is
            raise KafkaException(moved[0])
        return altered

    result = _asked_of_the_coordinator(clients, alter, group, "READ")
    failed = [f"{tp.topic}:{tp.partition} ({tp.error})" for tp in result.topic_partitions or [] if tp.error]
    if failed:
        raise KafkaOperationError(f"offset commit for group {group!r} failed: {', '.join(failed)}")


def groups_reading(clients: KafkaClients, topics: list[str], but: Callable[[str], bool]) -> dict[str, list[str]]:
    """The groups with offsets committed on each of `topics` (those `but` names left out): who
    reads what is written there. A group whose offsets cannot be read (not allowed, or a kind
    that keeps none: share groups) is left out."""
    readers: dict[str, list[str]] = {topic: [] for topic in topics}
    for row in list_groups(clients):
        if but(row["group"]):
            continue
        try:
            read = committed_offsets(clients, row["group"], topics, settle_s=SETTLE_S)
        except KstoolError:
            continue
        for topic in sorted({t for t, _ in read}):
            readers[topic].append(row["group"])
    return readers


def remove_members(clients: KafkaClients, group: str, member_ids: list[str]) -> None:
    from kstool.kafka.wire.protocol import leave_group

    leave_group(clients.config, group, member_ids)


def deletion_plan(clients: KafkaClients, group: str) -> GroupDescription:
    """What deleting the group removes (its committed offsets, a share group's share-partition
    state), refused while it has members, as the broker would refuse it."""
    described = describe_group(clients, group)  # an unknown group: GroupNotFoundError, naming the nearest
    if described["members"]:
        raise GroupBusyError(f"group {group!r} is {described['state']} with {len(described['members'])} member(s): "
                             "stop its consumers first (a group is deleted only once it has none)")
    return described


def delete_group(clients: KafkaClients, group: str) -> None:
    """DeleteGroups, of a group of any type (kafka-consumer-groups.sh / kafka-share-groups.sh --delete)."""
    try:
        clients.admin().delete_consumer_groups([group], request_timeout=clients.timeout)[group].result()
    except KafkaException as exc:
        raise clients.translate(exc) from None
