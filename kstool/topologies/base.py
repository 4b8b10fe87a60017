"""What the engine needs from a topology."""

from __future__ import annotations

from typing import Any, Protocol

from kstool.engine.app import StoreSpec
from kstool.engine.sink import SinkTarget


class Topology(Protocol):
    name: str
    invalid_reason: str  # what --on-error says about a record valid_record() rejects
    per_task: bool  # runs kstool.streams processors per task (transformWithState)

    def input_topics(self) -> list[str]: ...

    def output_topics(self) -> list[str]: ...

    def parameters(self) -> dict[str, Any]:
        """Settings that shape state; a later run with other values is refused."""

    def stores(self, app_id: str) -> list[StoreSpec]: ...

    def valid_record(self):
        """A Column: True where the input record can be processed (else --on-error applies)."""

    def check_run(self, partitions: dict[str, int]) -> None:
        """Refuse a run the topology cannot do (before anything is created): inputs it cannot
        process together, settings no store could hold (joins)."""

    def build(self, source, tasks: int = 1):
        """The updates DataFrame (streaming) from the source DataFrame; `tasks` is the input
        partition count (the number of Kafka Streams tasks)."""

    def encode(self, updates):
        """Batch DataFrame of updates -> key, timestamp and one binary column per sink target."""

    def sink_targets(self, app_id: str) -> list[SinkTarget]: ...

    def describe(self, app_id: str) -> dict:
        """Topology#describe()-style description: sub-topologies, nodes, stores."""
