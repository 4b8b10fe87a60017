"""The Spark engine: session, Kafka source and sink, app runtime. Imports pyspark lazily."""
