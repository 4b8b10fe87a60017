"""The engine's two hooks, bound once for the packages above it: a checkpoint on a Hadoop file
system is read through Spark, started here when no session runs; whoever takes an app frees the
query the warm engine keeps parked for it (kstool.engine.daemon.app_use), in the engine when the
lock is taken there (its placement)."""

from __future__ import annotations

from functools import partial

from kstool.application.model import AppLock, AppPaths, Manifest
from kstool.checkpoint.files import app_checkpoint, open_checkpoint
from kstool.checkpoint.location import CheckpointFiles
from kstool.engine.daemon.app_use import free_parked_queries
from kstool.engine.query.placement import Placement
from kstool.engine.spark.session import start_local_spark


def open_app_checkpoint(paths: AppPaths, manifest: Manifest | None) -> CheckpointFiles:
    """The app's checkpoint, where its manifest says it is."""
    return app_checkpoint(paths, manifest, start_spark=start_local_spark)


def open_checkpoint_at(uri: str) -> CheckpointFiles:
    return open_checkpoint(uri, start_spark=start_local_spark)


def lock_app(paths: AppPaths, use: str, placement: Placement) -> AppLock:
    """The app's lock for `use` (kstool.application.model's RUN, REWRITE...), its parked query
    freed once taken, by the engine the lock is taken in or asked of it."""
    return AppLock(paths, use, on_taken=partial(free_parked_queries, placement=placement))
