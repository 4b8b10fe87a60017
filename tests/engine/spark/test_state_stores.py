"""kstool.engine.spark.state_stores: closing the stores Spark keeps loaded must not pull them from
under a query that still runs in this JVM, in any session: the engine and the tests run each
app in a session of its own on one context."""

from __future__ import annotations

import time

from kstool.engine.spark.session import SparkOptions, build_session
from kstool.engine.spark.state_stores import MAINTENANCE_INTERVAL, close_loaded_state_stores


def _maintenance_running(spark) -> bool:
    return spark.sparkContext._jvm.org.apache.spark.sql.execution.streaming.state.StateStore.isMaintenanceRunning()


def test_stores_stay_loaded_while_a_query_of_another_session_runs_and_close_after(spark, tmp_path):
    run_session, owned = build_session(SparkOptions(master="local[2]"), "kstool-tests")
    assert not owned  # a session of its own on the shared context, as a run gets
    run_session.conf.set("spark.sql.shuffle.partitions", "2")
    # one batch, then none for an hour: nothing but close_loaded_state_stores loads or unloads stores
    counts = (run_session.readStream.format("rate").load().groupBy().count().writeStream.format("noop")
              .outputMode("complete").option("checkpointLocation", str(tmp_path / "checkpoint"))
              .trigger(processingTime="1 hour").start())
    before = spark.conf.get(MAINTENANCE_INTERVAL, "60s")
    spark.conf.set(MAINTENANCE_INTERVAL, "1s")  # what close_loaded_state_stores waits for: two rounds
    try:
        deadline = time.monotonic() + 180  # a hang guard
        while not counts.recentProgress and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _maintenance_running(spark)  # the query's stores are loaded
        close_loaded_state_stores()
        assert _maintenance_running(spark), "the running query's stores were closed"
        assert counts.isActive and counts.exception() is None
    finally:
        counts.stop()
        spark.conf.set(MAINTENANCE_INTERVAL, before)
    close_loaded_state_stores()  # no query runs now: closed at once
    assert not _maintenance_running(spark)
