"""Kafka Streams' stateful processors in plain Python: windowed and session aggregation and
the three join kinds, with Kafka Streams' per-task stream time, grace and late-record rules.

`kstool.tasks.processor` runs one processor per task (input partition) in Spark's
transformWithState, feeding it the task's records in Kafka Streams' processing order; nothing
here imports Spark or the engine, so the semantics are testable on their own.
"""
