"""Kafka Streams' stateful processors in plain Python: windowed and session aggregation and
the three join kinds, with Kafka Streams' per-task stream time, grace and late-record rules.

The engine runs one processor per task (input partition) inside Spark's transformWithState
(`kstool.topologies.tasks`), feeding it the task's records in Kafka Streams' processing order;
nothing here imports Spark, so the semantics are testable on their own.
"""
