"""Kafka client layer: clients, topics, groups, produce, consume, time-to-offset resolution."""
