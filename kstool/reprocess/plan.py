"""Plan a reprocess, changing nothing: where the app restarts, what it reads and rewrites.

Reprocessing from time T must give, for every key and window, what an uninterrupted run gives:
each task starts from its state just before its first record at or after T. The app's
checkpoint keeps that history (its last `history_batches` batches: offsets, commits and state
versions), so the app is rolled back to the last committed batch that ends at or before T's
offsets in every input partition, and runs again from that batch's end: the records between
it and T are read again too, and rewrite what they wrote before. Before its first batch the
state was empty at the checkpoint's origin (kept in the manifest). Where that history is gone
(older than the checkpoint keeps, or deleted from the input by retention) the plan refuses,
naming the two ways on: `--from-beginning` (empty state, the input from its log start: exact
for what the input still holds) and `--accept-partial` (empty state from T: Kafka's reset
tool's result)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from kstool.application.model import AppPaths, Manifest, existing_app, lock_holder, origin_offsets, stopped_app
from kstool.base.errors import UsageError
from kstool.base.timeutil import check_time_range, format_time
from kstool.checkpoint.location import CheckpointFiles
from kstool.checkpoint.logs import (
    batch_end_offsets,
    batch_time_ms,
    committed_batches,
    missing_state,
    rollback_files,
)
from kstool.engine import open_app_checkpoint
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import committed_offsets
from kstool.kafka.offsets import offsets_for_time
from kstool.kafka.timelag import first_timestamps
from kstool.reprocess.exceptions import NothingToResumeError
from kstool.reprocess.unfinished import recall
from kstool.reset.offset_spec import ResetSpec
from kstool.reset.plan import ResetOptions, ResetPlan, build_plan as build_reset_plan
from kstool.streams.windows import WindowSpec

MODES = ("rollback", "beginning", "partial", "resume")
ORIGIN = -1  # the restart batch that stands for the empty state at the checkpoint's origin
TP = tuple[str, int]


@dataclass
class PartitionPlan:
    topic: str
    partition: int
    from_time_offset: int | None  # the first record at or after --from-time (the log end: none)
    processed: int | None  # where the app stands now (its last batch's end)
    restart: int  # where the run starts reading again
    end: int  # where it stops: the input's end now, or the first record after --to-time
    records: int
    restart_time: int | None  # the timestamp of the record at `restart`, when there is one


@dataclass
class ReprocessPlan:
    app_id: str
    topology: str
    mode: str  # one of MODES
    from_time: int | None  # None: from the beginning
    to_time: int | None
    last_batch: int | None  # the checkpoint's last committed batch, as planned
    restart_batch: int | None  # rollback: the batch whose state the run starts from (ORIGIN: none)
    restart_batch_time: int | None
    batches_undone: int
    history: dict
    partitions: list[PartitionPlan]
    rewritten_topics: list[str]
    records: int
    notes: list[str] = field(default_factory=list)
    refusal: str | None = None  # the plan cannot be carried out exactly: why, and the ways on
    checkpoint_files: int = 0  # files the rollback deletes
    reset: ResetPlan | None = None  # beginning, partial: the reset that starts the state over
    nothing_to_do: bool = False  # no input record is at or after --from-time

    def restart_offsets(self) -> dict[TP, int]:
        return {(p.topic, p.partition): p.restart for p in self.partitions}

    def stop_offsets(self) -> dict[TP, int]:
        """Where the run stops, when --to-time gives an end (else it reads to the inputs' end)."""
        return {(p.topic, p.partition): p.end for p in self.partitions} if self.to_time is not None else {}

    def steps(self) -> list[dict[str, str]]:
        """Every change carrying the plan out makes, in order: the destructive ones named."""
        if self.nothing_to_do or self.refusal:
            return []
        steps = [] if self.mode == "resume" else [
            {"step": "move the group's offsets", "target": f"{self.app_id}: to each partition's restart"}]
        if self.mode == "rollback" and self.restart_batch == ORIGIN:
            steps.append({"step": "delete the checkpoint", "target": "all of it: the state starts empty"})
        elif self.mode == "rollback" and self.batches_undone:
            steps.append({"step": "delete checkpoint files", "target": f"{self.checkpoint_files} of batches "
                          f"{(self.restart_batch or 0) + 1}..{self.last_batch}"})
        elif self.reset is not None:
            steps += [{"step": "delete topic", "target": topic} for topic in self.reset.topics_to_delete]
            local = self.reset.local_state
            if local is not None:
                steps.append({"step": "delete local state", "target": local.path})
                if local.checkpoint_location:
                    steps.append({"step": "delete the checkpoint", "target": local.checkpoint_location})
        steps.append({"step": "run once", "target": f"read {self.records} records"})
        return steps + [{"step": "append to topic", "target": topic} for topic in self.rewritten_topics]

    def to_dict(self) -> dict:
        document = asdict(self)
        document["reset"] = None if self.reset is None else {
            "topics_to_delete": self.reset.topics_to_delete,
            "local_state": asdict(self.reset.local_state) if self.reset.local_state else None}
        document["steps"] = self.steps()
        return document


def build_plan(clients: KafkaClients, paths: AppPaths, from_time: int | None, to_time: int | None = None,
               mode: str = "rollback", plan_only: bool = False) -> ReprocessPlan:
    """plan_only: a plan to look at (a dry run), shown even while the app runs."""
    if mode not in MODES:
        raise UsageError(f"reprocess mode must be one of {', '.join(MODES)}")
    if mode == "resume":
        return _plan_resume(clients, paths, plan_only)
    if from_time is None and mode != "beginning":
        raise UsageError("give --from-time, or --from-beginning")
    check_time_range(from_time or 0, to_time)
    manifest = existing_app(paths) if plan_only else stopped_app(paths, "reprocessing")
    if manifest.restore_pending and mode == "rollback":
        raise UsageError(f"app {paths.app_id!r} waits for its state to be restored from the changelogs: run it once "
                         "first (or reprocess --from-beginning)")
    checkpoint = open_app_checkpoint(paths, manifest)
    tps, ends, batches = _inputs(clients, manifest, checkpoint)
    stops = offsets_for_time(clients, tps, to_time + 1) if to_time is not None else {tp: ends[tp][1] for tp in tps}
    plan = _new_plan(paths, manifest, mode, from_time, to_time, batches, plan_only)
    processed = batch_end_offsets(checkpoint, plan.last_batch) if plan.last_batch is not None else {}
    from_offsets = offsets_for_time(clients, tps, from_time) if from_time is not None else {}
    if from_time is not None and all(from_offsets[tp] >= ends[tp][1] for tp in tps):
        plan.nothing_to_do = True
        plan.notes.append(f"no record of {', '.join(manifest.input_topics)} is at or after {format_time(from_time)}: "
                          "nothing to reprocess")
        return plan
    if mode == "rollback":
        _plan_rollback(plan, manifest, checkpoint, batches, tps, ends, processed, stops, from_offsets)
    else:
        _plan_reset(clients, plan, manifest, paths, tps, processed, stops, from_time, plan_only)
    starts = first_timestamps(clients, {tp: r for tp, r in plan.restart_offsets().items() if r < stops[tp]})
    for p in plan.partitions:
        p.restart_time = starts.get((p.topic, p.partition))
    plan.records = sum(p.records for p in plan.partitions)
    return plan


def _inputs(clients: KafkaClients, manifest: Manifest,
            checkpoint: CheckpointFiles) -> tuple[list[TP], dict[TP, tuple[int, int]], list[int]]:
    """The app's input partitions, their (low, high) watermarks, and its committed batches."""
    tps = [(t, p) for t in manifest.input_topics for p in clients.topic_partitions(t)]
    return tps, clients.watermarks(tps), committed_batches(checkpoint)


def _new_plan(paths: AppPaths, manifest: Manifest, mode: str, from_time: int | None, to_time: int | None,
              batches: list[int], plan_only: bool) -> ReprocessPlan:
    """A plan's header, before its partitions: the app, its history, what it rewrites."""
    last = batches[-1] if batches else None
    plan = ReprocessPlan(
        paths.app_id, manifest.topology, mode, from_time, to_time, last, None, None, 0,
        {"kept_batches": manifest.history_batches, "first_batch": batches[0] if batches else None,
         "last_batch": last}, [], _rewritten(manifest), 0)
    holder = lock_holder(paths) if plan_only else None
    if holder is not None:
        plan.notes.append(f"the app is running ({holder}): stop it before reprocessing (the plan may differ then)")
    return plan


def _plan_resume(clients: KafkaClients, paths: AppPaths, plan_only: bool) -> ReprocessPlan:
    """The interrupted reprocess' run goes on from where the app stands to where it was to stop:
    nothing rolled back or reset again."""
    manifest = existing_app(paths) if plan_only else stopped_app(paths, "reprocessing")
    unfinished = recall(paths)
    if unfinished is None:
        raise NothingToResumeError(f"app {paths.app_id!r} has no unfinished reprocess to resume (a reprocess "
                                   "that finished, or none since its last reset)")
    checkpoint = open_app_checkpoint(paths, manifest)
    tps, ends, batches = _inputs(clients, manifest, checkpoint)
    stops = {tp: unfinished.stop_offsets.get(tp, ends[tp][1]) for tp in tps}
    plan = _new_plan(paths, manifest, "resume", unfinished.from_time, unfinished.to_time, batches, plan_only)
    last = plan.last_batch
    # no batch yet: the run starts where the rollback or reset moved the group
    processed = (batch_end_offsets(checkpoint, last) if last is not None
                 else committed_offsets(clients, paths.app_id, manifest.input_topics))
    plan.partitions = [PartitionPlan(t, p, None, processed.get((t, p)), processed.get((t, p), 0), stops[(t, p)],
                                     max(stops[(t, p)] - processed.get((t, p), 0), 0), None) for t, p in tps]
    plan.records = sum(p.records for p in plan.partitions)
    started = "the beginning" if unfinished.from_time is None else format_time(unfinished.from_time)
    if plan.records == 0:
        plan.nothing_to_do = True
        plan.notes.append(f"the app has read past where the reprocess from {started} was to stop: it is finished")
    else:
        where = "its first batch" if last is None else f"batch {last}"
        plan.notes.append(f"the reprocess from {started} ({unfinished.mode}) goes on after {where}: "
                          "nothing is rolled back, what it wrote stays")
    return plan


def _plan_rollback(plan: ReprocessPlan, manifest: Manifest, checkpoint: CheckpointFiles, batches: list[int],
                   tps: list[TP], ends: dict[TP, tuple[int, int]], processed: dict[TP, int], stops: dict[TP, int],
                   from_offsets: dict[TP, int]) -> None:
    origin = origin_offsets(manifest.origin) if manifest.origin is not None else None
    restart, restart_offsets = _restart_batch(checkpoint, batches, origin, from_offsets)
    plan.partitions = [PartitionPlan(t, p, from_offsets[(t, p)] if from_offsets[(t, p)] < ends[(t, p)][1] else None,
                                     processed.get((t, p)), restart_offsets.get((t, p), 0),
                                     stops[(t, p)], max(stops[(t, p)] - restart_offsets.get((t, p), 0), 0), None)
                       for t, p in tps]
    if restart is None:
        plan.refusal = _history_gone(plan, batches, manifest, origin)
        return
    lost = {tp: (offset, ends[tp][0]) for tp, offset in restart_offsets.items() if offset < ends[tp][0]}
    if lost:
        detail = ", ".join(f"{t}:{p} offsets {a}..{b - 1}" for (t, p), (a, b) in sorted(lost.items()))
        plan.refusal = (f"the input no longer holds records the restart needs ({detail}: deleted by "
                        f"retention). {_ways_on(plan.app_id)}")
        return
    plan.restart_batch = restart
    plan.restart_batch_time = batch_time_ms(checkpoint, restart) if restart != ORIGIN else None
    plan.batches_undone = len([b for b in batches if b > restart])
    plan.checkpoint_files = len(rollback_files(checkpoint, restart)) if restart != ORIGIN else 0
    if restart == ORIGIN:
        plan.notes.append("the app goes back to before its first batch: empty state at its first offsets")
        if origin is not None and any(from_offsets[tp] < o for tp, o in origin.items() if tp in from_offsets):
            plan.notes.append("the app started after --from-time in some partitions: records before its "
                              "first offsets were never part of it (--from-beginning reads them too)")
    else:
        plan.notes.append(f"the app's state goes back to batch {restart}; the {plan.batches_undone} later "
                          "batch(es) are undone and their records read again")
    plan.notes.append("readers of the rewritten topics get the updates from the restart on a second time, "
                      "with the same keys, window keys and timestamps; the last value per key and window "
                      "is what one uninterrupted run writes")
    if manifest.parameters.get("window"):
        plan.notes.append("windows holding records from the restart on are rewritten whole: the state "
                          "they restart from holds the records before it")


def _restart_batch(checkpoint: CheckpointFiles, batches: list[int], origin: dict[TP, int] | None,
                   from_offsets: dict[TP, int]) -> tuple[int | None, dict[TP, int]]:
    """The last committed batch whose end is at or before the start time's offsets in every
    partition, with its state kept, and that end; ORIGIN and the origin's offsets when it is
    the empty state before batch 0; None when the history that needs is gone."""
    def before(offsets: dict[TP, int]) -> bool:
        return all(offsets.get(tp, 0) <= o for tp, o in from_offsets.items())

    low, high = 0, len(batches)  # batch ends grow: the batches that fit are a prefix
    while low < high:
        mid = (low + high) // 2
        if before(batch_end_offsets(checkpoint, batches[mid])):
            low = mid + 1
        else:
            high = mid
    if low > 0:
        batch = batches[low - 1]
        return (None if missing_state(checkpoint, batch) else batch), batch_end_offsets(checkpoint, batch)
    if origin is not None and (not batches or batches[0] == 0):
        return ORIGIN, {tp: origin.get(tp, 0) for tp in from_offsets}
    return None, {tp: 0 for tp in from_offsets}


def _history_gone(plan: ReprocessPlan, batches: list[int], manifest: Manifest,
                  origin: dict[TP, int] | None) -> str:
    if batches and batches[0] > 0:
        kept = (f"its checkpoint keeps batches {batches[0]}..{batches[-1]} ({len(batches)} batches; "
                f"--history-batches, {manifest.history_batches} for this app, sets how many)")
    elif origin is None:
        kept = "where its state was empty is not known (an app restored from its changelogs, or created " \
               "by an older kstool)"
    else:
        kept = "its checkpoint keeps no batch that old"
    return (f"the state of {plan.app_id!r} as of {format_time(plan.from_time or 0)} is gone: {kept}. "
            + _ways_on(plan.app_id))


def _ways_on(app_id: str) -> str:
    return (f"Nothing was changed. Ways on: `kstool reprocess --app-id {app_id} --from-beginning` (empty "
            "state, the whole input: exact for what the input still holds; rewrites every output), or "
            f"`kstool reprocess --app-id {app_id} --from-time T --accept-partial` (empty state from T: totals "
            "count only records from T, windows from the first window holding T)")


def _plan_reset(clients: KafkaClients, plan: ReprocessPlan, manifest: Manifest, paths: AppPaths, tps: list[TP],
                processed: dict[TP, int], stops: dict[TP, int], from_time: int | None, plan_only: bool) -> None:
    """beginning and partial: Kafka's way, the state starts over empty at the inputs' start or
    at the time (for time windows, the start of the first window holding it)."""
    if plan.mode == "beginning":
        spec = ResetSpec("to-earliest")
        plan.notes.append("empty state, the input from its log start: every output is rewritten")
    else:
        assert from_time is not None
        start = _first_window_start(manifest, from_time)
        spec = ResetSpec("to-datetime", timestamp=start)
        plan.notes.append(f"PARTIAL: the state starts over empty at {format_time(start)}: totals count only "
                          "records from then on" + (" (the start of the first window holding --from-time)"
                                                    if start != from_time else "")
                          + ("; a session that this cuts is rewritten with its later records only"
                             if str(manifest.parameters.get("window", "")).startswith("session") else ""))
    reset = build_reset_plan(clients, ResetOptions(plan.app_id, spec, paths.state_dir, plan_only=plan_only))
    plan.reset = reset
    targets = reset.new_offsets()
    plan.partitions = [PartitionPlan(t, p, None, processed.get((t, p)), targets[(t, p)], stops[(t, p)],
                                     max(stops[(t, p)] - targets[(t, p)], 0), None) for t, p in tps]
    plan.notes += reset.warnings


def _first_window_start(manifest: Manifest, time: int) -> int:
    window = manifest.parameters.get("window")
    if not window:
        return time
    spec = WindowSpec.parse(window)
    if spec.kind == "session":
        return time
    if spec.kind == "sliding":  # windows [start, start + D] holding the time
        return max(0, time - spec.size)
    _, starts = spec.assign(np.array([time], dtype=np.int64))
    return int(starts.min())


def _rewritten(manifest: Manifest) -> list[str]:
    topics = [*manifest.output_topics, *(s.changelog_topic for s in manifest.stores)]
    settings = manifest.run_settings
    if settings.get("late_topic"):
        topics.append(settings["late_topic"])
    if str(settings.get("on_error", "")).startswith("dlq:"):
        topics.append(settings["on_error"][4:])
    return topics
