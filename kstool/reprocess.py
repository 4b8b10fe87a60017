"""`kstool reprocess`: reset a kstool app to a time and run it once over the range — the
cron-friendly composition of reset and run --once."""

from __future__ import annotations

from dataclasses import dataclass

from kstool.application.model import AppPaths, load_manifest
from kstool.engine.options import RunOptions, RunSummary
from kstool.engine.progress import Progress
from kstool.engine.runtime import run_app
from kstool.errors import NotFoundError
from kstool.kafka.client import KafkaClients
from kstool.kafka.offsets import offsets_for_time
from kstool.reset.apply import apply_plan
from kstool.reset.plan import ResetOptions, ResetPlan, build_plan
from kstool.reset.spec import ResetSpec
from kstool.timeutil import check_time_range
from kstool.topologies import from_manifest


@dataclass
class ReprocessResult:
    plan: ResetPlan
    run: RunSummary
    stop_offsets: dict[tuple[str, int], int]

    def to_dict(self) -> dict:
        return {"app_id": self.plan.app_id,
                "reset": {"offsets": [o.__dict__ for o in self.plan.offsets],
                          "topics_deleted": self.plan.topics_to_delete},
                "stop_offsets": {f"{t}:{p}": o for (t, p), o in sorted(self.stop_offsets.items())},
                "run": self.run.to_dict()}


def reprocess(clients: KafkaClients, run_options: RunOptions, from_time: int,
              to_time: int | None = None, progress: Progress | None = None) -> ReprocessResult:
    check_time_range(from_time, to_time)
    paths = AppPaths(run_options.state_dir, run_options.app_id)
    manifest = load_manifest(paths)
    if manifest is None:
        raise NotFoundError(f"no kstool app {run_options.app_id!r} in {run_options.state_dir}")
    # build_plan refuses (exit 75) while the app runs
    plan = build_plan(clients, ResetOptions(run_options.app_id, ResetSpec("to-datetime", timestamp=from_time),
                                            run_options.state_dir))
    apply_plan(clients, plan, run_options.state_dir)
    stop: dict[tuple[str, int], int] = {}
    if to_time is not None:
        tps = [(t, p) for t in manifest.input_topics for p in clients.topic_partitions(t)]
        stop = offsets_for_time(clients, tps, to_time + 1)
    run_options.once = True
    # the reset deleted the manifest: the app is recreated where its checkpoint was
    run_options.checkpoint_location = run_options.checkpoint_location or manifest.checkpoint_location
    run_options.stop_offsets = stop
    return ReprocessResult(plan, run_app(clients, from_manifest(manifest), run_options, progress), stop)
