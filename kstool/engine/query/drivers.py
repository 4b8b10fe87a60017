"""The two drivers of a built query (kstool.engine.query.build), chosen once by the run plan:
fresh, a query of this run's own, started with the run's trigger and watched until it ends
(kstool.engine.query.batches); parked, in the warm engine: the app's parked query resumed when
it can serve the run, else a new one built with a gate, driven, and parked again
(kstool.engine.query.parking)."""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator

from kstool.checkpoint.logs import last_committed_batch
from kstool.engine.failures import translate
from kstool.engine.progress import Progress
from kstool.engine.query import parking
from kstool.engine.query.batches import watch
from kstool.engine.query.build import BuiltQuery
from kstool.engine.query.options import RunSummary
from kstool.engine.query.run_plan import RunPlan
from kstool.kafka.client import KafkaClients

if TYPE_CHECKING:
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

_log = logging.getLogger("kstool.engine")


def drive_fresh(built: BuiltQuery, plan: RunPlan, summary: RunSummary, progress: Progress) -> None:
    options = plan.options
    if options.once:
        stream = built.stream.trigger(availableNow=True)
    else:
        stream = built.stream.trigger(processingTime=f"{options.trigger_ms} milliseconds")
    with _processing(summary):
        query = _start(stream, options.app_id)
        watch(query, built.reports, summary, progress, plan.checkpoint)


def drive_parked(build: Callable[..., BuiltQuery], key: str, parked_queries: parking.ParkedQueries,
                 clients: KafkaClients, plan: RunPlan, summary: RunSummary, progress: Progress) -> None:
    """key: what the query is built from (parking.parking_key): a parked query built otherwise
    cannot serve this run."""
    paths, checkpoint = plan.paths, plan.checkpoint
    parked = parked_queries.take(paths.root, key, last_committed_batch(checkpoint))
    if parked is not None:
        _log.info("%s: resuming its parked query", plan.options.app_id)
        with _processing(summary):
            opened_ms = parking.open_gate_to_ends(parked, clients, plan.facts.input_topics)
            parking.drive(parked, parked_queries, opened_ms, paths, checkpoint, summary, progress)
        return
    built = build(gate=paths.gate)
    stream = built.stream.trigger(processingTime=f"{parking.PARK_TRIGGER_MS} milliseconds")
    parked = parking.ParkedQuery(key, None, paths.gate, reports=built.reports)
    with _processing(summary):
        opened_ms = parking.open_gate_to_ends(parked, clients, plan.facts.input_topics)  # before the first trigger
        try:
            parked.query = _start(stream, plan.options.app_id)
        except BaseException:
            parked.shut_gate()
            raise
        parking.drive(parked, parked_queries, opened_ms, paths, checkpoint, summary, progress)


def _start(stream: DataStreamWriter, app_id: str) -> StreamingQuery:
    try:
        return stream.start()
    except Exception as exc:  # e.g. a checkpoint Spark cannot open: its own message, in one line
        raise translate(str(exc), app_id) from None


@contextmanager
def _processing(summary: RunSummary) -> Iterator[None]:
    started = time.monotonic()
    try:
        yield
    finally:
        summary.processing_seconds = round(time.monotonic() - started, 3)
