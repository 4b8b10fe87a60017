"""What the engine needs of a topology, and the routing names that processors, topologies and
the sink share. It imports no other layer, so the engine, the processors (kstool.streams) and
the topologies all depend on it and never on each other's insides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Sequence, TypeGuard

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from kstool.application.model import StoreSpec

# Kafka Streams' statestore.cache.max.bytes (its default): the record cache of a table's store
# (kstool.streams.record_cache), per task and micro-batch in kstool; 0 writes every update
DEFAULT_CACHE_MAX_BYTES = 10 * 1024 * 1024

# An update's role says where the sink writes it (see SinkTarget.role).
OUTPUT = "output"
LATE = "late"  # a record dropped because its windows had closed (counted; written to --late-topic)
# a record a task sends to the task of its key in the topology's next stage (Kafka Streams'
# repartition topic between two sub-topologies): it goes there, never to Kafka
REPARTITION = "repartition"
# A per-task topology's updates cross to the sink packed: a row of role PACKED holds many
# records in its PACK column, and the sink unpacks it (kstool.engine.io.packs).
PACKED = "packed"
PACK = "pack"
# The source's column that marks a store entry read back from a changelog (a restore's first
# batch) among the input records: Spark's own aggregations take it as their state so far.
RESTORED = "restored"
# The source's column with each input value decoded to JSON text, for topologies whose values
# have a schema (their input_value_format); null elsewhere, and where a value does not decode.
VALUE_JSON = "value_json"
# The source's column for a row that stands for several input records of one key, combined
# where they were read (a topology's combiner, CombinerSpec): how many, and the sum, minimum and
# maximum of their numbers and whether all were whole (and, from the source, how many input
# records the range's partial rows stand for); for time windows also the window's start, how
# many of its records have it as their newest window, and the start offset of the range read
# (kstool.tasks.combiners.window_counts.WindowCombiner); null on every other row.
PARTIAL = "partial"
# The source's column with the time the driver planned the micro-batch, the same on all its rows
# (none on a restore's store entries): it places a batch's rows after every earlier batch's.
# Spark's current_timestamp() would too, but as a literal in the generated code, so that each
# batch compiled its code anew (bench/notes/continuous-latency.md).
BATCH_TIME = "batch_time"


@dataclass(frozen=True)
class CombinerSpec:
    """What the source combines while it reads each partition range: `target` names a class
    ("module:Class") built with `settings` (JSON), whose combine(batch) splits an Arrow record
    batch of the source's rows into the rows it leaves as they are and a table of partials
    (key, timestamp, offset, PARTIAL), and whose merge(tables) combines partials further.
    Records it cannot take exactly (not a plain number, ...) stay rows of their own, so
    --on-error sees them as before. A class with `for_range(range)` gets a combiner of its own
    for each range, fed the range's batches in offset order.
    `counts_late`: its partials count the records they turn out late for but keep no values, so
    a run that writes late records to a topic (--late-topic) reads every record on its own.
    `reduces`: its rows stand for fewer values than their records (partials), so a batch may
    take more records (kstool.engine.query.options); a packer's rows carry every record whole."""

    target: str
    settings: dict[str, Any]
    counts_late: bool = False
    reduces: bool = True


def changelog_role(store: str) -> str:
    return f"changelog:{store}"


@dataclass(frozen=True)
class SinkTarget:
    """Write column `value_column` (binary) with the row's `key` and `timestamp` to `topic`;
    with a `role`, only the rows whose `role` column holds it."""

    topic: str
    value_column: str
    role: str | None = None
    # to the partition numbered as the row's `task` column: as Kafka Streams, a task's store
    # is logged to its own changelog partition (what a restore reads back per task)
    by_task: bool = False
    # windowed keys: the bytes of window times that end each key (8: start; 16: a session's end
    # and start). Such a record goes to its inner key's partition, as Kafka Streams'
    # WindowedStreamPartitioner puts it: every window of a key in the key's partition, in order
    window_bytes: int = 0
    # the rows' `headers` go with them; a changelog's records carry none, as Kafka Streams logs a store
    headers: bool = True


class Topology(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def invalid_reason(self) -> str:
        """What --on-error says about a record valid_record() rejects."""

    @property
    def per_task(self) -> bool:
        """Runs kstool.streams processors per task (transformWithState)."""

    @property
    def tasks_are_partitions(self) -> bool:
        """Task t reads partition t of each input topic and no other record (no re-key, no
        table in every task, not one task for all): a task's output goes with its own input
        offsets, so exactly_once_v2 commits them in a transaction per task, in the executors."""

    def input_topics(self) -> list[str]: ...

    def output_topics(self) -> list[str]: ...

    def parameters(self) -> dict[str, Any]:
        """Settings that shape state; a later run with other values is refused."""

    def stores(self, app_id: str) -> list[StoreSpec]: ...

    def valid_record(self) -> Column:
        """True where the input record can be processed (else --on-error applies)."""

    def check_run(self, partitions: dict[str, int]) -> None:
        """Refuse a run the topology cannot do (before anything is created): inputs it cannot
        process together, settings no store could hold (joins)."""

    def build(self, source: DataFrame, tasks: int = 1) -> DataFrame:
        """The updates (streaming) from the source; `tasks` is the input partition count (the
        number of Kafka Streams tasks). Per-task topologies (TaskTopology) also take `seed`: a
        restore's store entries (kstool.engine.query.seed); Spark's own aggregations find theirs among
        the source's rows (RESTORED)."""

    def encode(self, updates: DataFrame) -> DataFrame:
        """A batch of updates -> key, timestamp and one binary column per sink target."""

    def sink_targets(self, app_id: str) -> list[SinkTarget]: ...

    def describe(self, app_id: str) -> dict[str, Any]:
        """Topology#describe()-style description: sub-topologies, nodes, stores."""


class TaskTopology(Topology, Protocol):
    """A topology that runs kstool.streams processors per task (transformWithState)."""

    def processor(self) -> Any:
        """The processor each task runs (kstool.streams)."""

    def build(self, source: DataFrame, tasks: int = 1, seed: DataFrame | None = None) -> DataFrame:
        """Topology.build; `seed`: a restore's store entries for the tasks (kstool.engine.query.seed)."""


def runs_per_task(topology: Topology) -> TypeGuard[TaskTopology]:
    return topology.per_task


def stage_count(topology: Topology) -> int:
    """How many stages of tasks the topology runs (Kafka Streams' sub-topologies joined by
    repartition topics, kstool.tasks.repartition)."""
    return len(stages_of(topology.processor())) if runs_per_task(topology) else 1


def stages_of(processor: object) -> Sequence[Any]:
    """A processor's stages, run in that order: its optional stages(), else itself alone."""
    return processor.stages() if hasattr(processor, "stages") else (processor,)  # type: ignore[no-any-return]


def store_operators(processor: object) -> dict[str, int]:
    """Each store's stateful operator in the query: a processor of stages has one per stage,
    which Spark numbers from the sink's end."""
    stages = stages_of(processor)
    return {store: len(stages) - 1 - index for index, stage in enumerate(stages) for store in stage.stores}


def owner_suffixes(processor: object) -> dict[str, int]:
    """Stores hashed without a suffix of their keys, so one owner's entries share a shard: the
    processor's optional `suffixed_stores` ((store, bytes), ...)."""
    return dict(getattr(processor, "suffixed_stores", ()))
