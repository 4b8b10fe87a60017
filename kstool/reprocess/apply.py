"""Carry out a reprocess plan: roll the app back (or reset it, for --from-beginning and
--accept-partial), then run it once; `--resume` runs an interrupted one on from where its app
stands (kstool.reprocess.unfinished). Every step leaves an app that the next command can go on
from: the group's offsets are moved first, then the checkpoint's later batches are deleted
newest first (kstool.checkpoint.logs.rollback_files), and a run that stops midway
leaves a checkpoint whose state and offsets agree."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kstool.application.model import REWRITE, AppPaths, Manifest, existing_app, load_manifest
from kstool.base.errors import KstoolError
from kstool.checkpoint.logs import batch_end_offsets, last_committed_batch, rollback_files
from kstool.engine import HERE, Placement, Progress, RunOptions, RunSummary, lock_app, open_app_checkpoint, run_app
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import commit_offsets
from kstool.reprocess.exceptions import HistoryGoneError, PlanOutdatedError, ReprocessStoppedError
from kstool.reprocess.plan import ORIGIN, ReprocessPlan
from kstool.reprocess.unfinished import Unfinished, forget, remember
from kstool.reset.apply import apply_plan
from kstool.topologies import from_manifest


@dataclass
class ReprocessResult:
    plan: ReprocessPlan
    run: RunSummary
    finished: bool  # its run read up to where the plan stops: a signal after its last batch cut nothing short

    def to_dict(self) -> dict:
        return {**self.plan.to_dict(), "dry_run": False, "run": self.run.to_dict(), "finished": self.finished}


def reprocess(clients: KafkaClients, plan: ReprocessPlan, options: RunOptions,
              progress: Progress | None = None, placement: Placement = HERE) -> ReprocessResult:
    paths = AppPaths(options.state_dir, plan.app_id)
    manifest = existing_app(paths)
    if plan.refusal is not None:
        raise HistoryGoneError(plan.refusal)
    options = dataclasses.replace(
        options, once=True, stop_offsets=plan.stop_offsets(),
        settings=manifest.run_settings,  # this reprocess' overrides are not the app's from now on
        history_batches=options.history_batches or manifest.history_batches,
        # a reset deletes the manifest: the app is made again where its checkpoint was
        checkpoint_location=options.checkpoint_location or manifest.checkpoint_location)
    if plan.mode == "rollback":
        _roll_back(clients, plan, paths, manifest, placement)
    elif plan.mode != "resume":
        assert plan.reset is not None
        apply_plan(clients, plan.reset, options.state_dir, placement)
    if plan.mode != "resume":
        remember(paths, Unfinished(plan.mode, plan.from_time, plan.to_time, plan.stop_offsets()))
    try:
        run = run_app(clients, from_manifest(manifest), options, progress, placement)
    except KstoolError as exc:
        raise ReprocessStoppedError.after(exc, plan, _where(paths)) from None
    finished = not run.stopped_by_signal or _read_to_the_end(paths, plan)
    if finished:
        forget(paths)
    return ReprocessResult(plan, run, finished)


def _read_to_the_end(paths: AppPaths, plan: ReprocessPlan) -> bool:
    """The app's last committed batch ends at or past where the plan stops, in every partition."""
    manifest = load_manifest(paths)
    checkpoint = open_app_checkpoint(paths, manifest) if manifest else None
    batch = last_committed_batch(checkpoint) if checkpoint else None
    if batch is None:
        return False
    assert checkpoint is not None
    ends = batch_end_offsets(checkpoint, batch)
    return all(ends.get((p.topic, p.partition), 0) >= p.end for p in plan.partitions)


def _roll_back(clients: KafkaClients, plan: ReprocessPlan, paths: AppPaths, manifest: Manifest, placement: Placement) -> None:
    assert plan.restart_batch is not None
    with lock_app(paths, REWRITE, placement):  # no query, nor a store Spark left loaded, writes to it meanwhile
        checkpoint = open_app_checkpoint(paths, manifest)
        now = last_committed_batch(checkpoint)
        if now != plan.last_batch:
            raise PlanOutdatedError(f"app {plan.app_id!r} ran since the plan was made (last batch {now}, "
                                    f"planned {plan.last_batch}); nothing was changed: plan again")
        # the group first: whatever stops this, the checkpoint still says where the app stands
        commit_offsets(clients, plan.app_id, plan.restart_offsets())
        if plan.restart_batch == ORIGIN:
            checkpoint.delete()  # the group stands at the origin: the next run starts there, empty
        else:
            for name in rollback_files(checkpoint, plan.restart_batch):
                checkpoint.remove(name)


def _where(paths: AppPaths) -> str:
    manifest = load_manifest(paths)
    if manifest is None:
        return "The app has no manifest yet"
    batch = last_committed_batch(open_app_checkpoint(paths, manifest))
    return "The app has no committed batch yet" if batch is None else f"The app stands at batch {batch}"
