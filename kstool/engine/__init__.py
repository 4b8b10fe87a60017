"""The Spark engine: runs any kstool.contract.Topology as a Structured Streaming query (session,
Kafka source and sink, --on-error, app runtime). Imports pyspark lazily; knows no topology."""
