"""Kafka-Streams-style topologies built on Spark DataFrames, by name."""

from __future__ import annotations

from kstool.errors import UsageError

NAMES = ("wordcount", "aggregate", "join")


def from_manifest(manifest):
    """Rebuild the topology an app was created with (for describe, state and reset)."""
    if manifest.topology == "wordcount":
        from kstool.topologies.wordcount import WordCount

        return WordCount(manifest.input_topics[0], manifest.output_topics[0], **manifest.parameters)
    if manifest.topology == "aggregate":
        from kstool.topologies.aggregate import Aggregate

        return Aggregate(manifest.input_topics[0], manifest.output_topics[0], **manifest.parameters)
    if manifest.topology == "join":
        from kstool.topologies.join import Join

        params = dict(manifest.parameters)
        return Join(params.pop("left_topic"), params.pop("right_topic"), manifest.output_topics[0], **params)
    raise UsageError(f"app {manifest.app_id!r} uses topology {manifest.topology!r}, "
                     "which this kstool version does not know")
