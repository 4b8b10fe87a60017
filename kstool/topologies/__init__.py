"""Kafka-Streams-style topologies built on Spark DataFrames."""
