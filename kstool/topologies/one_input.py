"""What the topologies of one input topic and one output topic share (wordcount and the
aggregations): their topics, a run check with nothing to co-partition, and for those that run
per task (kstool.tasks) how their updates reach the sink."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kstool.topologies import events

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass
class OneInput:
    input_topic: str
    output_topic: str

    def input_topics(self) -> list[str]:
        return [self.input_topic]

    def output_topics(self) -> list[str]:
        return [self.output_topic]

    def check_run(self, partitions: dict[str, int]) -> None:
        """One input: nothing to be co-partitioned."""


@dataclass
class OneInputPerTask(OneInput):
    def encode(self, updates: DataFrame) -> DataFrame:
        return events.encode(updates)
