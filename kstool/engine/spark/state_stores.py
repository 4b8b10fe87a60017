"""The state stores Spark keeps loaded in this JVM after their queries stopped.

Spark unloads a stopped query's stores only at its next maintenance (every
spark.sql.streaming.stateStore.maintenanceInterval, 60 s by default), and that maintenance may
still upload a snapshot into the checkpoint (RocksDB with changelog checkpointing does it in the
background). Where a checkpoint is deleted or rolled back (reset, restore, reprocess) in a JVM
that ran queries on it (the warm engine, a test session), such a late snapshot would bring back
state the checkpoint no longer has: close them first. Executors on other hosts (a cluster) keep
their own; there only Spark's maintenance unloads them."""

from __future__ import annotations

import logging
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_log = logging.getLogger("kstool.engine")
MAINTENANCE_INTERVAL = "spark.sql.streaming.stateStore.maintenanceInterval"


def close_loaded_state_stores() -> None:
    """Close them now when no query runs in this JVM; while one runs (it needs its stores), wait
    for two of Spark's maintenance rounds, which unload the stores of stopped queries."""
    if "pyspark" not in sys.modules:  # no Spark in this process (and none is imported for this)
        return
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    context = SparkContext._active_spark_context
    if context is None:
        return
    session = SparkSession._instantiatedSession
    if session is not None and _queries_running(session):
        seconds = _interval_s(session)
        _log.info("queries run here: waiting %.0fs for Spark to unload stopped queries' state stores", 2 * seconds)
        time.sleep(2 * seconds)
        return
    context._jvm.org.apache.spark.sql.execution.streaming.state.StateStore.stop()  # type: ignore[union-attr]


def _queries_running(session: SparkSession) -> bool:
    """A query of any session on this context: runs share it in sessions of their own (clones,
    kstool.engine.spark.session), and a session's `streams` lists only its own queries."""
    return not session._jsparkSession.sharedState().activeStreamingQueries().isEmpty()


def _interval_s(session: SparkSession) -> float:
    from kstool.base.timeutil import parse_duration

    try:
        return parse_duration(session.conf.get(MAINTENANCE_INTERVAL, "60s") or "60s") / 1000
    except Exception:
        return 60.0
