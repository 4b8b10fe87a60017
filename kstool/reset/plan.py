"""Plan a reset: resolve every target offset, check every topic, find internal topics and
local state. Nothing is changed here; `apply` carries a plan out."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kstool.application.model import AppPaths, app_ids, load_manifest, refuse_if_running
from kstool.base.documents import GroupMember
from kstool.base.errors import NotFoundError
from kstool.base.names import detect_internal_topics, did_you_mean
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import (
    committed_offsets,
    describe_members,
    list_groups,
    require_group_allowed,
    share_group,
    share_group_members,
    topology_topics,
)
from kstool.kafka.offsets import offsets_for_time
from kstool.kafka.share_groups import share_group_offsets
from kstool.reset.exceptions import GroupActiveError, ResetPlanError, ResetRefusedError
from kstool.reset.offset_spec import ResetSpec

KAFKA_STREAMS_TASK_DIR = re.compile(r"\d+_\d+")
# Kafka resets only groups that are EMPTY or DEAD
ACTIVE_GROUP_STATES = ("STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE")


@dataclass
class ResetOptions:
    app_id: str
    spec: ResetSpec
    state_dir: Path
    input_topics: list[str] | None = None  # None: from the kstool manifest
    intermediate_topics: list[str] = field(default_factory=list)
    internal_topics: list[str] | None = None  # None: every detected internal topic
    state_dir_given: bool = False
    keep_local_state: bool = False
    force: bool = False
    # a plan to look at (a dry run): a running kstool app is no reason to refuse showing it
    plan_only: bool = False


@dataclass
class OffsetChange:
    topic: str
    partition: int
    kind: str  # input | intermediate
    current: int | None
    target: int
    delta: int | None
    note: str | None = None


@dataclass
class LocalState:
    path: str
    kind: str  # kstool | kafka-streams
    entries: list[str]
    checkpoint_location: str | None = None  # a kstool app's checkpoint outside its folder (a URI)


@dataclass
class ResetPlan:
    app_id: str
    app_kind: str  # kstool | kafka-streams | share-group
    spec: str
    offsets: list[OffsetChange]
    topics_to_delete: list[str]
    internal_topics_from: str  # topology (a streams group's, from its coordinator) | names
    local_state: LocalState | None
    members: list[GroupMember]
    warnings: list[str] = field(default_factory=list)

    def new_offsets(self) -> dict[tuple[str, int], int]:
        return {(c.topic, c.partition): c.target for c in self.offsets}

    def to_dict(self) -> dict:
        return asdict(self)


def build_plan(clients: KafkaClients, options: ResetOptions) -> ResetPlan:
    paths = AppPaths(options.state_dir, options.app_id)
    manifest = load_manifest(paths)
    if manifest is not None and not options.plan_only:
        refuse_if_running(paths, "a reset")
    warnings: list[str] = []
    state, members, streams = describe_members(clients, options.app_id)
    shared = share_group(clients, options.app_id, state, members, streams) if manifest is None else None
    if shared is not None:
        return _share_group_plan(clients, options, shared)
    # a streams group's coordinator holds its topology: its inputs and internal topics
    topology = topology_topics(streams) if streams is not None and streams["subtopologies"] else None
    inputs = options.input_topics if options.input_topics is not None else (
        manifest.input_topics if manifest is not None else topology[0] if topology is not None else [])
    if not inputs:
        warnings.append("no input topics given: input offsets stay as they are")
    _refuse_while_active(options, state, members, streams is not None, warnings)

    clients.require_topics([*inputs, *options.intermediate_topics])
    existing = clients.metadata().topics
    to_delete = _internal_topics_to_delete(options, inputs, sorted(existing) if topology is None else [
        t for t in topology[1] if t in existing])
    # what applying the plan asks of the ACLs, checked before anything is done
    require_group_allowed(clients, options.app_id, "READ")
    clients.require_allowed([*inputs, *options.intermediate_topics], "READ")
    clients.require_allowed(to_delete, "DELETE")
    committed = committed_offsets(clients, options.app_id)
    changes = _input_changes(clients, options.spec, inputs, existing, committed, warnings)
    changes += _intermediate_changes(clients, options.intermediate_topics, existing, committed)
    local = None if options.keep_local_state else _local_state(paths, manifest, options)
    if manifest is None and not (changes or committed or members or to_delete or local):
        _refuse_unknown_app(clients, options)
    if local is None and not options.keep_local_state:
        warnings += _no_local_state(options, manifest is not None)
    # from the topology as kafka-streams-groups.sh --delete-all-internal-topics takes them, else by name
    return ResetPlan(options.app_id, "kstool" if manifest is not None else "kafka-streams",
                     options.spec.describe(), changes, to_delete, "topology" if topology is not None else "names",
                     local, members, warnings)


def _refuse_while_active(options: ResetOptions, state: str, members: list, streams_group: bool,
                         warnings: list[str]) -> None:
    """A reset under running instances is refused (a dry run says it would be); --force removes a
    consumer group's members, not a streams group's."""
    active = bool(members) or state in ACTIVE_GROUP_STATES
    if active and options.plan_only:  # a dry run shows the plan a stopped app would get
        warnings.append(f"group {options.app_id!r} is {state} with {len(members)} member(s): the reset itself is "
                        "refused until every instance has stopped (a classic app's member stays until its "
                        "session.timeout.ms has passed)" + ("" if streams_group else ", or with --force"))
        return
    if active and streams_group:  # LeaveGroup (--force) removes a consumer group's members, not these
        raise GroupActiveError(
            f"streams group {options.app_id!r} is {state} with {len(members)} member(s): stop every instance "
            "of the application first (a streams group's members leave as their app stops)")
    if active and not options.force:
        names = (", ".join(f"{m['client_id']}@{m['host']} ({m['member_id']})" for m in members)
                 or "the broker does not name them")
        raise GroupActiveError(
            f"group {options.app_id!r} is {state} with active member(s): {names}. Make sure to "
            "stop all running application instances, or use --force to remove them")
    if active and not members:
        raise GroupActiveError(
            f"group {options.app_id!r} is {state} but the broker does not name its members, so "
            "--force cannot remove them; stop the instances or wait for their session timeout")


def _internal_topics_to_delete(options: ResetOptions, inputs: list[str], candidates: list[str]) -> list[str]:
    """The app's internal topics among `candidates`, or those --internal-topics names (each one of them)."""
    detected = detect_internal_topics(options.app_id, candidates, set(inputs) | set(options.intermediate_topics))
    if options.internal_topics is None:
        return detected
    unknown = sorted(set(options.internal_topics) - set(detected))
    if unknown:
        raise ResetPlanError(f"--internal-topics must be internal topics of {options.app_id!r} "
                             f"(detected: {', '.join(detected) or 'none'}); not: {', '.join(unknown)}")
    return sorted(options.internal_topics)


def _intermediate_changes(clients: KafkaClients, topics: list[str], existing: dict,
                          committed: dict[tuple[str, int], int]) -> list[OffsetChange]:
    """Intermediate topics are skipped to their end, as the reset tool does."""
    changes = []
    for topic in topics:
        tps = [(topic, p) for p in sorted(existing[topic].partitions)]
        for tp, (_, high) in sorted(clients.watermarks(tps).items()):
            current = committed.get(tp)
            changes.append(OffsetChange(tp[0], tp[1], "intermediate", current, high,
                                        None if current is None else high - current))
    return changes


def _no_local_state(options: ResetOptions, kstool_app: bool) -> list[str]:
    """What to say when no local state was found to delete (or refuse, where --state-dir was given)."""
    if options.state_dir_given:  # told where the state is, and it is not there: a typo?
        raise ResetRefusedError(
            f"no state of app {options.app_id!r} in {options.state_dir} (neither a kstool app "
            "folder with its manifest nor a Kafka Streams state folder named after it); "
            "nothing was changed. Check --state-dir, or use --keep-local-state")
    if not kstool_app:  # a Kafka Streams app: its state is where its state.dir says
        return [f"its local state is not deleted: give --state-dir with the app's state.dir "
                f"(/tmp/kafka-streams by default) to delete {options.app_id}/ there, or delete it before "
                "the app starts again (stores left there give wrong output)"]
    return [f"no local state of {options.app_id!r} found in {options.state_dir}"]


def _share_group_plan(clients: KafkaClients, options: ResetOptions, shared: dict) -> ResetPlan:
    """A share group's reset (`kafka-share-groups.sh --reset-offsets`): its start offsets in the
    topics it has state for (or --input-topics), once it has no members; no internal topics or
    local state."""
    if options.internal_topics or options.intermediate_topics:
        raise ResetPlanError(f"{options.app_id!r} is a share group: it has no internal or intermediate topics")
    warnings: list[str] = []
    members = share_group_members(shared)
    if members and not options.plan_only:
        raise GroupActiveError(f"share group {options.app_id!r} is {shared['state']} with {len(members)} member(s): "
                               "stop its consumers first (its offsets change only while it has none)")
    if members:
        warnings.append(f"share group {options.app_id!r} has {len(members)} member(s): the reset itself is refused "
                        "until its consumers have stopped")
    offsets = share_group_offsets(clients.config, options.app_id)
    inputs = options.input_topics if options.input_topics is not None else sorted(
        {topic for topic, _ in offsets} | {t for m in shared["members"] for t in m["subscribed_topics"]})
    if not inputs:
        warnings.append("no input topics given: input offsets stay as they are")
    clients.require_topics(inputs)
    current = {tp: start for tp, (start, _) in offsets.items() if start is not None}
    changes = _input_changes(clients, options.spec, inputs, clients.metadata().topics, current, warnings)
    return ResetPlan(options.app_id, "share-group", options.spec.describe(), changes, [], "names", None, [], warnings)


def _refuse_unknown_app(clients: KafkaClients, options: ResetOptions) -> None:
    """Nothing of the app exists (no group offsets or members, no internal topic, no local
    state) and no input offsets are to be set: a typo at 3 a.m. should not read "nothing to do",
    exit 0. Names the nearest group or kstool app."""
    known = [g["group"] for g in list_groups(clients)] + app_ids(options.state_dir)
    raise NotFoundError(f"no application {options.app_id!r}: no consumer group, internal topic or local state "
                        f"(in {options.state_dir}) has that id; nothing was changed" + did_you_mean(options.app_id, known))


def _input_changes(clients, spec: ResetSpec, inputs, existing, committed, warnings) -> list[OffsetChange]:
    tps = [(t, p) for t in inputs for p in sorted(existing[t].partitions)]
    if spec.kind == "from-file":
        file_offsets = spec.file_offsets or {}
        stray = sorted({t for t, _ in file_offsets} - set(inputs))
        if stray:
            raise ResetPlanError(f"--from-file names topics that are not input topics: {', '.join(stray)}")
        unknown = sorted(tp for tp in file_offsets if tp not in set(tps))
        if unknown:
            raise ResetPlanError(f"--from-file names partitions that do not exist: "
                                 f"{', '.join(f'{t}:{p}' for t, p in unknown)}")
        tps = sorted(file_offsets)
    if spec.kind == "shift-by":
        missing = [f"{t}:{p}" for t, p in tps if (t, p) not in committed]
        if missing:
            raise ResetPlanError(f"--shift-by needs committed offsets; none for {', '.join(missing)}")
    marks = clients.watermarks(tps)
    by_time = offsets_for_time(clients, tps, spec.timestamp) if spec.timestamp is not None else {}
    changes = []
    for tp in tps:
        low, high = marks[tp]
        current = committed.get(tp)
        wanted = {
            "to-earliest": low, "to-latest": high,
            "to-offset": spec.offset,
            "to-datetime": by_time.get(tp), "by-duration": by_time.get(tp),
            "shift-by": (current or 0) + (spec.offset or 0),
            "from-file": (spec.file_offsets or {}).get(tp),
        }[spec.kind]
        target, note = _clamp(wanted, low, high)
        if note:
            warnings.append(f"{tp[0]}:{tp[1]}: {note}")
        changes.append(OffsetChange(tp[0], tp[1], "input", current, target,
                                    None if current is None else target - current, note))
    return changes


def _clamp(offset: int, low: int, high: int) -> tuple[int, str | None]:
    if offset > high:
        return high, f"offset {offset} is past the log end; reset to the end offset {high}"
    if offset < low:
        return low, f"offset {offset} is before the log start; reset to the start offset {low}"
    return offset, None


# what a reset deletes from a kstool app's folder; the manifest last: it is the guard
APP_FOLDER_ENTRIES = ("checkpoint", "spark.log", "metrics.jsonl", "gate.json", "app.json")


def _local_state(paths: AppPaths, manifest, options: ResetOptions) -> LocalState | None:
    root = paths.root
    if root.is_symlink():
        return None
    if manifest is not None and manifest.app_id == options.app_id:
        entries = [e for e in APP_FOLDER_ENTRIES if (root / e).exists()]
        return LocalState(str(root), "kstool", entries, manifest.checkpoint_location)
    if options.state_dir_given and looks_like_kafka_streams_state(root):
        return LocalState(str(root), "kafka-streams", sorted(p.name for p in root.iterdir()))
    return None


def looks_like_kafka_streams_state(path: Path) -> bool:
    """A Kafka Streams state dir of one app holds only task folders (0_1, ...), `global`, its
    `.lock` and `kafka-streams-process-metadata`; anything else means it is not one, and it
    will not be deleted."""
    if not path.is_dir() or path.is_symlink():
        return False
    entries = list(path.iterdir())
    tasks = [e for e in entries if e.is_dir() and KAFKA_STREAMS_TASK_DIR.fullmatch(e.name)]
    known = {".lock", "kafka-streams-process-metadata", "global"}
    return bool(tasks or any(e.name == "kafka-streams-process-metadata" for e in entries)) and all(
        e in tasks or e.name in known for e in entries)
