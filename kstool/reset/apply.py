"""Carry out a reset plan, one step at a time. If a step fails, stop: the error says exactly
which steps were applied and which were not."""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from kstool.application.model import REWRITE, AppPaths, load_manifest
from kstool.base.errors import KstoolError
from kstool.engine import HERE, Placement, lock_app, open_checkpoint_at
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import commit_offsets, remove_members
from kstool.kafka.share_groups import alter_share_group_offsets
from kstool.kafka.topics import delete_topics
from kstool.reset.exceptions import ResetIncompleteError, ResetRefusedError
from kstool.reset.plan import APP_FOLDER_ENTRIES, ResetPlan, looks_like_kafka_streams_state


@dataclass
class StepResult:
    step: str
    status: str  # done | failed | not run | nothing to do
    detail: str = ""


def apply_plan(clients: KafkaClients, plan: ResetPlan, state_dir: Path, placement: Placement = HERE) -> list[StepResult]:
    paths = AppPaths(state_dir, plan.app_id)
    # a kstool app must not start while it is being reset: hold its run lock throughout
    # nor may a query of the engine, or a store Spark left loaded, write to its checkpoint
    guard = lock_app(paths, REWRITE, placement) if plan.app_kind == "kstool" else contextlib.nullcontext()
    steps = [
        ("remove active members", bool(plan.members),
         lambda: remove_members(clients, plan.app_id, [m["member_id"] for m in plan.members])),
        ("commit new offsets", bool(plan.offsets),
         lambda: (alter_share_group_offsets(clients.config, plan.app_id, plan.new_offsets())
                  if plan.app_kind == "share-group" else commit_offsets(clients, plan.app_id, plan.new_offsets()))),
        ("delete internal topics", bool(plan.topics_to_delete),
         lambda: delete_topics(clients, plan.topics_to_delete)),
        ("delete local state", plan.local_state is not None,
         lambda: delete_local_state(plan, state_dir)),
    ]
    results: list[StepResult] = []
    with guard:
        for index, (name, needed, action) in enumerate(steps):
            if not needed:
                results.append(StepResult(name, "nothing to do"))
                continue
            try:
                action()
            except KstoolError as exc:
                results.append(StepResult(name, "failed", str(exc)))
                results += [StepResult(n, "not run") for n, *_ in steps[index + 1:]]
                done = [r.step for r in results if r.status == "done"] or ["nothing"]
                raise ResetIncompleteError(
                    f"reset stopped at '{name}': {exc}. Applied: {', '.join(done)}; not applied: "
                    f"{', '.join(r.step for r in results if r.status in ('failed', 'not run'))}") from None
            results.append(StepResult(name, "done"))
    return results


def delete_local_state(plan: ResetPlan, state_dir: Path) -> None:
    """Delete only what the plan found, and only after checking again that it is this app's
    state inside the state dir: a kstool app folder whose manifest names the app, or a Kafka
    Streams state folder named after the app."""
    local = plan.local_state
    if local is None:
        return
    root = Path(local.path)
    if root.is_symlink() or root.parent.resolve() != state_dir.resolve() or root.name != plan.app_id:
        raise ResetRefusedError(f"refusing to delete {root}: not the state of {plan.app_id!r} in {state_dir}")
    if local.kind == "kstool":
        manifest = load_manifest(AppPaths(state_dir, plan.app_id))
        if manifest is None or manifest.app_id != plan.app_id:
            raise ResetRefusedError(f"refusing to delete {root}: no kstool manifest for {plan.app_id!r}")
        if local.checkpoint_location:
            delete_checkpoint(local.checkpoint_location)
        for name in APP_FOLDER_ENTRIES:
            target = root / name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
        return
    if not looks_like_kafka_streams_state(root):
        raise ResetRefusedError(f"refusing to delete {root}: it does not look like Kafka Streams state")
    shutil.rmtree(root)


# what Spark keeps in a streaming checkpoint (and Hadoop's .crc checksums of them)
SPARK_CHECKPOINT_ENTRIES = {"metadata", "offsets", "commits", "sources", "state"}


def delete_checkpoint(uri: str) -> None:
    """Delete a checkpoint, only if it holds nothing but a checkpoint."""
    checkpoint = open_checkpoint_at(uri)
    names = checkpoint.names("")
    others = [n for n in names if n.lstrip(".").removesuffix(".crc") not in SPARK_CHECKPOINT_ENTRIES]
    if others:
        raise ResetRefusedError(f"refusing to delete {uri}: it holds more than a Spark checkpoint "
                                f"({', '.join(others[:5])})")
    if names:
        checkpoint.delete()
