"""What a run will do, decided once, holding the app's lock, before its query starts: where its
checkpoint is and that it can be used, the app's manifest and topics (kstool.engine.query.prepare),
what a restore puts back (kstool.engine.query.seed), and whether the query is parked in the engine.
Everything after it (kstool.engine.query.streaming_query) reads the plan and decides nothing of this again."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kstool.application.exceptions import IncompatibleRunError, StateLayoutError, StateMissingError
from kstool.application.model import AppPaths, Manifest, checkpoint_uri, load_manifest, origin_document, save_manifest
from kstool.checkpoint.files import open_checkpoint
from kstool.checkpoint.location import CheckpointFiles, local_path
from kstool.checkpoint.logs import last_committed_batch, missing_state
from kstool.engine.failures import state_missing_remedy
from kstool.engine.progress import Progress
from kstool.engine.query.options import RunOptions
from kstool.engine.query.parking import ParkedQueries
from kstool.engine.query.placement import Placement
from kstool.engine.query.prepare import prepare
from kstool.engine.query.seed import Seed, plan_seed
from kstool.engine.query.topology_facts import TopologyFacts
from kstool.engine.spark.session import run_session, start_local_spark
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import SETTLE_S, commit_offsets, committed_offsets as committed_offsets_of_group, starting_offsets
from kstool.stores.state_layouts import STATE_LAYOUT_STAGES


@dataclass(frozen=True)
class RunPlan:
    options: RunOptions  # as given, with the history the app keeps
    facts: TopologyFacts  # what the run asked of its topology, once
    paths: AppPaths
    checkpoint: CheckpointFiles
    manifest: Manifest
    partitions: int  # of the inputs: the number of tasks
    seed: Seed | None  # a restore's: what the first batch puts back in the stores
    placement: Placement  # in this process or in the engine, as the command chose

    @property
    def parked_queries(self) -> ParkedQueries | None:
        """The engine's, when this run parks its query there (not a restore's first batch: a
        restore frees the app's parked query, and its seed is special)."""
        return self.placement.engine_queries if self.seed is None and may_park(self.options) else None


def plan_run(clients: KafkaClients, facts: TopologyFacts, options: RunOptions, paths: AppPaths, placement: Placement,
             progress: Progress) -> RunPlan:
    """Checks, then prepares (topics, manifest); holding the app's lock. Nothing is changed
    before the checks pass."""
    location = checkpoint_location(paths, options.checkpoint_location)
    checkpoint = open_checkpoint(checkpoint_uri(paths, location), start_spark=start_local_spark)
    if location is not None and local_path(location) is None:
        # Hadoop's file systems are read through Spark's JVM: start it before anything changes
        run_session(options.spark, options.app_id, paths.spark_log)
    checkpoint.check_usable()
    if location is not None or options.spark.master.startswith("local"):  # what executors see
        _check_state(checkpoint, options.app_id)
    _check_checkpoint_kept(clients, paths, checkpoint)
    partitions, manifest = prepare(clients, facts, options, paths, location, progress.message)
    options = dataclasses.replace(options, history_batches=manifest.history_batches)
    seed = None
    if manifest.restore_pending and last_committed_batch(checkpoint) is None:
        seed = plan_seed(manifest, facts.per_task)
        progress.message("restoring the stores from " + ", ".join(seed.changelogs))
    if last_committed_batch(checkpoint) is None:  # a new checkpoint: where its state starts empty
        manifest.origin = None if seed is not None else _pin_origin(clients, options, manifest)
        manifest.state_layout = STATE_LAYOUT_STAGES
        save_manifest(paths, manifest)
    elif facts.state_layout is not None and manifest.state_layout < facts.state_layout:
        raise StateLayoutError(
            f"app {options.app_id!r} keeps its state in an older layout that this kstool no longer runs; "
            f"rebuild it from the changelogs: `kstool state restore --app-id {options.app_id}`")
    return RunPlan(options, facts, paths, checkpoint, manifest, partitions, seed, placement)


def checkpoint_location(paths: AppPaths, given: str | None) -> str | None:
    """The run's checkpoint URI: where the app has it (None: its folder), else as given; a
    checkpoint is not moved by giving another location."""
    existing = load_manifest(paths)
    if existing is None:
        return given
    if given is not None and given != existing.checkpoint_location:
        raise IncompatibleRunError(
            f"app {existing.app_id!r} keeps its checkpoint at {existing.checkpoint_location or 'its folder'}, "
            f"not {given}; drop --checkpoint-location, or `kstool reset --app-id {existing.app_id}` to start over")
    return existing.checkpoint_location


def may_park(options: RunOptions) -> bool:
    """An at-least-once --once run leaves its query parked in the engine for the next one (not a
    reprocess's up to --to-time: it stops early); it takes the app's lock as RUN_PARKED."""
    return options.once and not options.stop_offsets and options.processing_guarantee == "at_least_once"


def _check_state(checkpoint: CheckpointFiles, app_id: str) -> None:
    missing = missing_state(checkpoint)
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise StateMissingError(f"app {app_id!r}: its checkpoint {checkpoint.uri} lacks {missing[0]}{more}. "
                                + state_missing_remedy(app_id))


def _check_checkpoint_kept(clients: KafkaClients, paths: AppPaths, checkpoint: CheckpointFiles) -> None:
    """An app that has committed offsets but no checkpoint lost its state (a deleted
    checkpoint): starting over empty would give wrong results, unless the group stands where
    the checkpoint's state was empty (its origin)."""
    manifest = load_manifest(paths)
    if manifest is None or manifest.restore_pending or last_committed_batch(checkpoint) is not None:
        return
    inputs = set(manifest.input_topics)
    committed = {tp: o for tp, o in committed_offsets_of_group(clients, paths.app_id, settle_s=SETTLE_S).items()
                 if tp[0] in inputs}
    if committed and origin_document(committed) != manifest.origin:
        raise StateMissingError(f"app {paths.app_id!r}: its checkpoint {checkpoint.uri} has no committed batch, "
                                "but its group has committed offsets. " + state_missing_remedy(paths.app_id))


def _pin_origin(clients: KafkaClients, options: RunOptions, manifest: Manifest) -> dict[str, int]:
    """Commit a new checkpoint's start to the app's group before the query asks for it (the
    source starts at the group's offsets): the offsets where the state before batch 0 is
    empty, which `reprocess` can roll the app back to."""
    tps = [(t, p) for t in manifest.input_topics for p in clients.topic_partitions(t)]
    start = starting_offsets(clients, options.app_id, tps, options.starting)
    commit_offsets(clients, options.app_id, start)
    return origin_document(start)
