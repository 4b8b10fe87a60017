"""Runs a topology as a Spark Structured Streaming query: the app runtime.

One run, in order: take the app's lock (which frees the engine's parked query unless this run
uses it: kstool.engine.daemon.app_use); plan the run (kstool.engine.query.run_plan: checks, topics,
manifest, a restore's seed, parked or not); run its query (kstool.engine.query.streaming_query), again
from its checkpoint after a Kafka outage (kstool.engine.query.outage) or a crash of its source process;
then commit the processed offsets to the app's group, also when the query failed, so the group
shows what did complete.
"""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path

from kstool.application.metrics import MetricsLog
from kstool.application.model import RUN, RUN_PARKED, AppPaths, save_manifest
from kstool.base.errors import BrokerUnreachableError
from kstool.checkpoint.logs import committed_offsets, last_committed_batch
from kstool.contract import Topology
from kstool.engine.exceptions import SourceProcessDiedError
from kstool.engine.failures import heap_named
from kstool.engine.hooks import lock_app
from kstool.engine.progress import Progress, Recorded, Silent
from kstool.engine.query.options import RunOptions, RunSummary
from kstool.engine.query.outage import Outage
from kstool.engine.query.placement import HERE, Placement
from kstool.engine.query.run_plan import RunPlan, may_park, plan_run
from kstool.engine.query.streaming_query import make_sink, run_query
from kstool.engine.query.topology_facts import TopologyFacts
from kstool.engine.spark.java import require_java
from kstool.kafka.client import KafkaClients
from kstool.kafka.groups import commit_offsets
from kstool.schemas.formats import SchemaOptions, value_json_decoder


def run_app(clients: KafkaClients, topology: Topology, options: RunOptions,
            progress: Progress | None = None, placement: Placement = HERE) -> RunSummary:
    started = time.monotonic()
    paths = AppPaths(options.state_dir, options.app_id)
    facts = TopologyFacts.of(topology, options.app_id)
    if facts.value_format is not None:  # a schema that cannot serve fails now, not after Spark started
        value_json_decoder(facts.value_format, (options.input_schemas or SchemaOptions()).with_texts())
    require_java()  # before anything changes (topics created): a run that cannot start does nothing
    use = RUN_PARKED if may_park(options) else RUN  # the engine's parked query: kept, or freed
    with lock_app(paths, use, placement):
        progress = Recorded(progress or Silent(), MetricsLog(paths))
        plan = plan_run(clients, facts, options, paths, placement, progress)
        summary = RunSummary(options.app_id)
        try:
            _run_through_outages(clients, topology, plan, summary, progress)
        except BaseException as failure:
            progress.close()
            if not isinstance(failure, BrokerUnreachableError):  # else the commit would wait out its timeout
                try:  # keep the group's offsets true to what did complete, then report the failure
                    _commit_group_offsets(clients, plan, summary)
                except Exception:
                    pass
            raise
        progress.close()
        _commit_group_offsets(clients, plan, summary)
        if plan.manifest.restore_pending and last_committed_batch(plan.checkpoint) is not None:
            plan.manifest.restore_pending = False  # seeded: later runs go on as usual
            save_manifest(paths, plan.manifest)
        summary.total_seconds = round(time.monotonic() - started, 3)
        return summary


def _run_through_outages(clients: KafkaClients, topology: Topology, plan: RunPlan, summary: RunSummary,
                         progress: Progress) -> None:
    """The query until it ends; when it fails because Kafka is unreachable, again from the
    checkpoint once Kafka is back, for up to --broker-timeout. When its source process died,
    again at once, unless it died before at the same committed batch (a crash that recurs)."""
    outage = Outage(plan.options.broker_timeout_s)
    died_at: list[int | None] = []  # the last committed batch at each death of the source process
    while True:
        sink = None
        try:  # making the sink starts its transactions under exactly_once_v2: a coordinator lost fails it
            sink = make_sink(clients, plan)
            with heap_named(_jvm_log(plan), functools.partial(_more_heap, plan.placement)):
                run_query(clients, topology, plan, sink, summary, progress)
            return
        except SourceProcessDiedError as died:
            last_batch = last_committed_batch(plan.checkpoint)
            if last_batch in died_at:
                raise
            died_at.append(last_batch)
            committed = f"batch {last_batch}" if last_batch is not None else "none"
            progress.message(f"{died}; starting the query again from its checkpoint (last committed: {committed})")
        except Exception as failure:
            reason = outage.caused(clients, failure)
            if reason is None:
                raise
            if sink is not None:
                sink.drop_writer()  # its producer may be unknown to the broker that comes back
            clients.drop_admin()
            outage.wait(clients, reason, last_committed_batch(plan.checkpoint), progress.message)


def _jvm_log(plan: RunPlan) -> Path:
    """Where the run's JVM writes: the engine's log, or the app's (its JVM is not started yet)."""
    from kstool.engine.spark.session import jvm_log

    return jvm_log() or plan.paths.spark_log


def _more_heap(placement: Placement) -> str:
    """What to do when the JVM ran out of heap; the engine first lets go of its parked queries,
    whose state and Python processes hold heap that the next run needs."""
    from kstool.engine.spark.session import jvm_heap_bytes

    size = f"{max(1, math.ceil(2 * jvm_heap_bytes() / 2**30))}g"
    if placement.engine_queries is None:
        return f"To give it more, run again with --conf spark.driver.memory={size}"
    released = placement.engine_queries.stop_all()
    return ((f"The engine let go of its {released} parked app(s). " if released else "")
            + f"To give it more heap: `kstool engine stop`, then `kstool engine start --driver-memory {size}`")


def _commit_group_offsets(clients: KafkaClients, plan: RunPlan, summary: RunSummary) -> None:
    """Spark calls the source's commit() for a batch only when the next one starts; commit
    the last completed batch's offsets now so the group shows where the app stands."""
    batch, offsets = committed_offsets(plan.checkpoint)
    if batch is None:
        return
    commit_offsets(clients, plan.options.app_id, offsets)
    summary.committed = {f"{t}:{p}": o for (t, p), o in sorted(offsets.items())}
