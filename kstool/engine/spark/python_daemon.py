"""The Python daemon of kstool's Spark JVMs (spark.python.daemon.module): PySpark's own, with the
modules every task worker imports loaded once, before it forks the workers, and kept out of the
workers' garbage collections.

PySpark's daemon forks a worker per concurrent task, and each worker imported pandas (for
transformWithStateInPandas: ~0.5 CPU-s), pyarrow and kstool's Kafka I/O by itself, again in every
run's JVM. Forked from a daemon that has them, a worker starts with them loaded.
PySpark imports them after the fork because some libraries start threads when imported, and a
fork copies no thread (pyspark/daemon.py, worker()). These start none
(tests/engine/spark/test_python_daemon.py): OPENBLAS_NUM_THREADS=1 (kstool.engine.spark.session)
keeps numpy's OpenBLAS to the calling thread, and pyarrow's jemalloc purges without its background
thread.
"""

from __future__ import annotations

import gc
import os

os.environ.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")  # read when pyarrow loads

import pandas  # noqa: E402,F401  # transformWithStateInPandas' workers
import pyarrow  # noqa: E402,F401
from pyspark import daemon, worker  # noqa: E402,F401

import kstool.engine.io.executor_sink  # noqa: E402,F401  # the tasks' sinks and sources
import kstool.engine.io.range_reader  # noqa: E402,F401

if __name__ == "__main__":
    # a reused worker collects garbage after each task (pyspark/daemon.py): frozen, what it was
    # forked with is not scanned again each time
    gc.freeze()
    daemon.manager()
