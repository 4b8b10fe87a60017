"""The Spark engine: runs any kstool.contract.Topology as a Structured Streaming query (session,
Kafka source and sink, --on-error, app runtime). Imports pyspark lazily; knows no topology.

Where the package loads it fills two hooks of lower layers that need the engine: the app lock
frees the warm engine's parked query (kstool.engine.daemon.app_use), and a checkpoint on a
Hadoop file system starts Spark to be read (kstool.checkpoint.files). A module that takes an
app's lock or opens a checkpoint loads this package (tests/engine/test_app_use.py checks it)."""

from kstool.application.model import AppLock
from kstool.checkpoint import files
from kstool.engine.daemon.app_use import free_parked_queries
from kstool.engine.session import start_local_spark

AppLock.on_taken = free_parked_queries
files.start_spark = start_local_spark
