"""Runs a topology as a Spark Structured Streaming query: the app runtime.

One run = take the app's lock, prepare without Spark (kstool.engine.prepare), run the query
(kstool.engine.query; again from its checkpoint after a Kafka outage, kstool.engine.outage),
then commit the processed offsets to the app's group, also when the query failed, so the
group shows what did complete.
"""

from __future__ import annotations

import dataclasses
import time

from kstool.application.checkpoint import committed_offsets, last_committed_batch, missing_state
from kstool.application.exceptions import StateLayoutError, StateMissingError
from kstool.application.location import CheckpointFiles, local_path
from kstool.application.metrics import MetricsLog
from kstool.application.model import (
    STATE_LAYOUT_SHARDS,
    AppLock,
    AppPaths,
    Manifest,
    checkpoint_uri,
    load_manifest,
    origin_document,
    save_manifest,
)
from kstool.contract import Topology, value_schema_format
from kstool.engine import parking
from kstool.engine.checkpoint_files import open_checkpoint
from kstool.engine.failures import state_missing_remedy
from kstool.engine.options import RunOptions, RunSummary
from kstool.engine.outage import Outage
from kstool.engine.prepare import checkpoint_location, prepare
from kstool.engine.progress import Progress, Recorded, Silent
from kstool.engine.query import make_sink, parking_for, run_query, start_spark
from kstool.engine.seed import plan_seed
from kstool.errors import BrokerUnreachableError
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import commit_offsets, starting_offsets
from kstool.kafka.groups import committed_offsets as committed_offsets_of_group
from kstool.schemas.formats import SchemaOptions, value_json_decoder


def run_app(clients: KafkaClients, topology: Topology, options: RunOptions,
            progress: Progress | None = None) -> RunSummary:
    started = time.monotonic()
    paths = AppPaths(options.state_dir, options.app_id)
    fmt = value_schema_format(topology)
    if fmt is not None:  # a schema that cannot serve fails now, not after Spark started
        value_json_decoder(fmt, (options.input_schemas or SchemaOptions()).with_texts())
    with AppLock(paths):
        progress = Recorded(progress or Silent(), MetricsLog(paths))
        location = checkpoint_location(paths, options.checkpoint_location)
        checkpoint = open_checkpoint(checkpoint_uri(paths, location))
        if location is not None and local_path(location) is None:
            # Hadoop's file systems are read through Spark's JVM: start it before anything changes
            start_spark(options, paths)
        checkpoint.check_usable()
        if location is not None or options.spark.master.startswith("local"):  # what executors see
            _check_state(checkpoint, options.app_id)
        _check_checkpoint_kept(clients, paths, checkpoint)
        partitions, manifest = prepare(clients, topology, options, paths, location)
        options = dataclasses.replace(options, history_batches=manifest.history_batches)
        seed = None
        if manifest.restore_pending and last_committed_batch(checkpoint) is None:
            seed = plan_seed(clients, manifest, topology.per_task)
            progress.message("restoring " + (f"{seed.entries.num_rows} store entries from the changelogs"
                                             if seed.entries is not None else "the stores from " +
                                             ", ".join(seed.changelogs)))
        if last_committed_batch(checkpoint) is None:  # a new checkpoint: where its state starts empty
            manifest.origin = None if seed is not None else _pin_origin(clients, options, manifest)
            manifest.state_layout = STATE_LAYOUT_SHARDS
            save_manifest(paths, manifest)
        elif topology.per_task and manifest.state_layout != STATE_LAYOUT_SHARDS:
            raise StateLayoutError(
                f"app {options.app_id!r} keeps its state in an older layout (an entry per key) that this kstool "
                f"no longer runs; rebuild it from the changelogs: `kstool state restore --app-id {options.app_id}`")
        parked_queries = parking_for(options, seed)
        if parked_queries is None:
            parking.release(paths)  # the engine's query of the app, if it keeps one, must not run too
        summary = RunSummary(options.app_id)
        outage = Outage(options.broker_timeout_s)
        try:
            while True:
                sink = make_sink(clients, topology, options, checkpoint, manifest.changelog_by_task)
                try:
                    run_query(clients, topology, options, paths, checkpoint, partitions, sink, summary, progress,
                              seed, parked_queries)
                    break
                except Exception as failure:
                    reason = outage.caused(clients, failure)
                    if reason is None:
                        raise
                    sink.drop_writer()  # its producer may be unknown to the broker that comes back
                    clients.drop_admin()
                    outage.wait(clients, reason, last_committed_batch(checkpoint), progress.message)
        except BaseException as failure:
            progress.close()
            if not isinstance(failure, BrokerUnreachableError):  # else the commit would wait out its timeout
                try:  # keep the group's offsets true to what did complete, then report the failure
                    _commit_group_offsets(clients, options.app_id, checkpoint, summary)
                except Exception:
                    pass
            raise
        progress.close()
        _commit_group_offsets(clients, options.app_id, checkpoint, summary)
        if manifest.restore_pending and last_committed_batch(checkpoint) is not None:
            manifest.restore_pending = False  # seeded: later runs go on as usual
            save_manifest(paths, manifest)
        summary.total_seconds = round(time.monotonic() - started, 3)
        return summary


def _check_state(checkpoint: CheckpointFiles, app_id: str) -> None:
    missing = missing_state(checkpoint)
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise StateMissingError(f"app {app_id!r}: its checkpoint {checkpoint.uri} lacks {missing[0]}{more}. "
                                + state_missing_remedy(app_id))


def _pin_origin(clients: KafkaClients, options: RunOptions, manifest: Manifest) -> dict[str, int]:
    """Commit a new checkpoint's start to the app's group before the query asks for it (the
    source starts at the group's offsets): the offsets where the state before batch 0 is
    empty, which `reprocess` can roll the app back to."""
    tps = [(t, p) for t in manifest.input_topics for p in clients.topic_partitions(t)]
    start = starting_offsets(clients, options.app_id, tps, options.starting)
    commit_offsets(clients, options.app_id, start)
    return origin_document(start)


def _check_checkpoint_kept(clients: KafkaClients, paths: AppPaths, checkpoint: CheckpointFiles) -> None:
    """An app that has committed offsets but no checkpoint lost its state (a deleted
    checkpoint): starting over empty would give wrong results, unless the group stands where
    the checkpoint's state was empty (its origin)."""
    manifest = load_manifest(paths)
    if manifest is None or manifest.restore_pending or last_committed_batch(checkpoint) is not None:
        return
    inputs = set(manifest.input_topics)
    committed = {tp: o for tp, o in committed_offsets_of_group(clients, paths.app_id).items() if tp[0] in inputs}
    if committed and origin_document(committed) != manifest.origin:
        raise StateMissingError(f"app {paths.app_id!r}: its checkpoint {checkpoint.uri} has no committed batch, "
                                "but its group has committed offsets. " + state_missing_remedy(paths.app_id))


def _commit_group_offsets(clients: KafkaClients, group: str, checkpoint: CheckpointFiles,
                          summary: RunSummary) -> None:
    """Spark calls the source's commit() for a batch only when the next one starts; commit
    the last completed batch's offsets now so the group shows where the app stands."""
    batch, offsets = committed_offsets(checkpoint)
    if batch is None:
        return
    commit_offsets(clients, group, offsets)
    summary.committed = {f"{t}:{p}": o for (t, p), o in sorted(offsets.items())}
