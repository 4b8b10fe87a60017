"""The embedded Kafka-protocol broker (Tansu) for the quick start, demos and tests."""
