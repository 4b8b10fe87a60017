"""What a run asks of its topology, asked once when the run starts (kstool.engine.runtime): the
plan, the topics, the sink and the query work from these. The topology itself is called again
only to check its inputs' partitions (check_run) and to build the query (valid_record, build,
encode): a reader follows it from the command to the query without turning back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kstool.application.model import StoreSpec
from kstool.base.serdes import SCHEMA_FORMATS
from kstool.contract import CombinerSpec, SinkTarget, Topology, owner_suffixes, stages_of
from kstool.stores.state_layouts import STATE_LAYOUT_OWNER_SHARDS, STATE_LAYOUT_SHARDS, STATE_LAYOUT_STAGES


@dataclass(frozen=True)
class TopologyFacts:
    name: str
    parameters: dict[str, Any]  # settings that shape state (the manifest keeps them)
    input_topics: list[str]
    output_topics: list[str]
    stores: list[StoreSpec]
    sink_targets: list[SinkTarget]
    per_task: bool  # runs kstool.streams processors per task (transformWithState)
    tasks_are_partitions: bool  # task t reads partition t of each input only (contract.Topology)
    invalid_reason: str  # what --on-error says of a record the topology cannot process
    combiner: CombinerSpec | None  # what the source may combine as it reads
    value_format: str | None  # the schema format of the input values (avro, protobuf), if they have one
    state_layout: int | None  # the state layout its per-task stores need (kstool.stores.state_layouts)
    check_run: Callable[[dict[str, int]], None]  # refuses inputs it cannot process together

    @classmethod
    def of(cls, topology: Topology, app_id: str) -> TopologyFacts:
        processor = topology.processor() if topology.per_task else None  # type: ignore[attr-defined]
        value_format = getattr(topology, "input_value_format", None)
        return cls(topology.name, topology.parameters(), topology.input_topics(), topology.output_topics(),
                   topology.stores(app_id), topology.sink_targets(app_id), topology.per_task,
                   topology.tasks_are_partitions, topology.invalid_reason, getattr(topology, "combiner", None),
                   value_format if value_format in SCHEMA_FORMATS else None, _state_layout(processor),
                   topology.check_run)


def _state_layout(processor: object | None) -> int | None:
    """Stages in operators of their own (a table aggregation, a foreign-key join); shards keeping
    each owner's entries together (a stream-stream join's window stores); or plain shards."""
    if processor is None:
        return None
    if len(stages_of(processor)) > 1:
        return STATE_LAYOUT_STAGES
    return STATE_LAYOUT_OWNER_SHARDS if owner_suffixes(processor) else STATE_LAYOUT_SHARDS
