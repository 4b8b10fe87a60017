"""The Spark engine: runs any kstool.contract.Topology as a Structured Streaming query. Imports
pyspark lazily; knows no topology. Its sub-packages, lowest first: io (Kafka I/O inside the
query), spark (Spark's process), query (a run's query planned, built and driven), daemon (the
warm engine); runtime.run_app, the entry, on top (tests/test_architecture.py pins the order)."""
