"""`kstool state restore`: rebuild an app's state from its changelog topics, as a Kafka Streams
instance that lost its disk restores its stores.

The plan checks the app, its stores and changelogs; applying it deletes the app's checkpoint
and marks the manifest, and the next `kstool run` seeds every store in the first batch of its
new checkpoint from the compacted changelogs (kstool.engine.query.seed), then goes on from the app's
group offsets."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from kstool.application.exceptions import StateMissingError
from kstool.application.model import REWRITE, AppPaths, existing_app, save_manifest, stopped_app
from kstool.base.errors import UsageError
from kstool.base.names import validate_name
from kstool.checkpoint.logs import committed_batches
from kstool.contract import Topology, stage_count
from kstool.engine import (
    HERE,
    Placement,
    Progress,
    RunOptions,
    RunSummary,
    Silent,
    lock_app,
    open_app_checkpoint,
    read_seed,
    run_app,
)
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import committed_offsets
from kstool.reset.apply import delete_checkpoint
from kstool.stores.state_layouts import STATE_LAYOUT_STAGES
from kstool.topologies import from_manifest


@dataclass
class RestorePlan:
    app_id: str
    topology: str
    checkpoint: str  # the URI that is replaced
    committed_batches: int
    changelogs: list[dict] = field(default_factory=list)  # store, topic, partitions, entries (compacted)
    input_offsets: dict[str, int] = field(default_factory=dict)  # "topic:partition" -> the group's
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def plan_restore(clients: KafkaClients, state_dir: Path, app_id: str) -> RestorePlan:
    paths = AppPaths(state_dir, validate_name(app_id))
    manifest = stopped_app(paths, "a restore")
    topology = from_manifest(manifest)
    if topology.per_task and not manifest.changelog_by_task:
        raise UsageError(f"app {app_id!r} was created by a kstool that logged its stores by key, not per task; "
                         f"reprocess instead: kstool reset --app-id {app_id} --to-earliest")
    topics = clients.require_topics([s.changelog_topic for s in manifest.stores])
    if stage_count(topology) > 1 and manifest.state_layout < STATE_LAYOUT_STAGES:
        # its changelogs are one task's (every entry in partition 0; a foreign-key join's
        # subscriptions without their left rows), not its stages'
        raise UsageError(f"app {app_id!r} was created by a kstool that ran {manifest.topology} in one task; "
                         f"reprocess instead: kstool reset --app-id {app_id} --to-earliest")
    entries = read_seed(clients, manifest).column("store").to_pylist()  # also checks every record's layout
    changelogs = [{"store": store.name, "topic": store.changelog_topic,
                   "partitions": len(topics[store.changelog_topic]), "entries": entries.count(store.name)}
                  for store in manifest.stores]
    group = committed_offsets(clients, app_id, manifest.input_topics)
    inputs = {f"{t}:{p}": group[(t, p)] for t in manifest.input_topics for p in sorted(clients.topic_partitions(t))
              if (t, p) in group}
    warnings = [] if inputs else [f"group {app_id!r} has no committed offsets: the next run starts "
                                  "where --from says, with the restored state"]
    checkpoint = open_app_checkpoint(paths, manifest)
    return RestorePlan(app_id, manifest.topology, checkpoint.uri, len(committed_batches(checkpoint)),
                       changelogs, inputs, warnings)


def apply_restore(plan: RestorePlan, state_dir: Path, placement: Placement = HERE) -> None:
    """Replace the checkpoint: mark the manifest (the next run seeds), then delete it."""
    paths = AppPaths(state_dir, plan.app_id)
    # no run may start meanwhile, nor may a query of the engine, or a store Spark left loaded, write to it
    with lock_app(paths, REWRITE, placement):
        manifest = existing_app(paths)
        # marked first: a checkpoint deleted without the mark would restart empty
        manifest.restore_pending = True
        manifest.origin = None  # the restored state is not empty at any offsets
        save_manifest(paths, manifest)
        delete_checkpoint(plan.checkpoint)


def run_restoring(clients: KafkaClients, topology: Topology, options: RunOptions,
                  progress: Progress | None = None, placement: Placement = HERE) -> RunSummary:
    """`kstool run --restore-missing-state`: a run that finds the checkpoint's state missing
    restores it from the changelogs, then runs again."""
    progress = progress or Silent()
    try:
        return run_app(clients, topology, options, progress, placement)
    except StateMissingError as lost:
        progress.message(f"{str(lost).split('. ')[0]}; restoring the state from the changelogs")
    apply_restore(plan_restore(clients, options.state_dir, options.app_id), options.state_dir, placement)
    return run_app(clients, topology, options, progress, placement)
