"""The Spark engine: runs any kstool.contract.Topology as a Structured Streaming query (session,
Kafka source and sink, --on-error, app runtime). Imports pyspark lazily; knows no topology.

Whatever takes an app through the engine's modules (a run, reset, restore, reprocess) has the
app lock free the warm engine's parked query first: the hook is set here, where the package loads."""

from kstool.application.model import AppLock
from kstool.engine.daemon.app_use import free_parked_queries

AppLock.on_taken = free_parked_queries
