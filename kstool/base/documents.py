"""The JSON documents kstool prints (`-o json`, `-o jsonl`), as types: docs/one-liners.md, "JSON output"
lists the same keys, and mypy checks every place that builds one. Keys are stable; a change here
is a change of kstool's interface."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # typing has it from Python 3.11 on; the annotations below are never evaluated
    from typing_extensions import NotRequired


class TopicRow(TypedDict):  # topics list
    topic: str
    partitions: int
    replication_factor: int
    internal: bool


class TopicPartitionRow(TypedDict):
    partition: int
    leader: int  # -1: none
    replicas: list[int]
    isr: list[int]
    health: str  # ok | under-replicated | under-min-isr | offline (kstool.kafka.topics)
    low_offset: int | None  # None: offline, no leader answers
    high_offset: int | None
    records: int | None


class TopicDescription(TypedDict):  # topics describe
    topic: str
    partitions: list[TopicPartitionRow]
    total_records: int
    min_insync_replicas: int | None  # None: the broker does not say
    configs: dict[str, str]


class PartitionHealthRow(TypedDict):  # topics list --under-replicated-partitions | --unavailable-partitions
    topic: str
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    health: str


class GroupRow(TypedDict):  # groups list
    group: str
    type: str  # classic | consumer (KIP-848) | streams (KIP-1071) | share (KIP-932) | unknown
    state: str
    simple: bool


class GroupMember(TypedDict):
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assignment: list[str]  # "topic:partition"


class GroupPartition(TypedDict):
    topic: str
    partition: int
    committed: int | None  # a share group's start offset: None until it delivered from the partition
    end_offset: int
    lag: int | None  # a share group's, as its coordinator counts it
    member_id: str | None
    time_lag_ms: NotRequired[int | None]  # with --time-lag: the oldest unprocessed record's age


class StreamsSubtopology(TypedDict):  # a streams group's topology, as its coordinator keeps it
    subtopology: str
    source_topics: list[str]
    repartition_sink_topics: list[str]
    changelog_topics: list[str]
    repartition_source_topics: list[str]


class StreamsGroupMember(TypedDict):
    member_id: str
    member_epoch: int
    group_instance_id: str | None
    client_id: str
    host: str
    process_id: str
    topology_epoch: int
    protocol: str  # streams, or classic: a member that joined with the classic protocol
    # subtopology -> partitions (task "1_0" is subtopology "1", partition 0)
    active_tasks: dict[str, list[int]]
    standby_tasks: dict[str, list[int]]
    warmup_tasks: dict[str, list[int]]
    target_active_tasks: dict[str, list[int]]


class StoredTopologyNode(TypedDict):  # a node of a topology description the broker keeps
    name: str
    type: str  # source | processor | sink
    source_topics: list[str]
    sink_topic: str | None
    stores: list[str]
    successors: list[str]


class StoredTopology(TypedDict):  # StreamsGroupDescribe v1's TopologyDescription (KIP-1331)
    subtopologies: list[dict[str, Any]]  # [{"subtopology", "nodes": [StoredTopologyNode]}]
    global_stores: list[dict[str, StoredTopologyNode]]  # [{"source", "processor"}]


class StreamsGroupDescription(TypedDict):
    group: str
    type: str  # "streams"
    state: str
    group_epoch: int
    assignment_epoch: int
    topology_epoch: int | None  # None: no member has sent the topology yet
    subtopologies: list[StreamsSubtopology]
    members: list[StreamsGroupMember]
    # asked for (Kafka 4.4+): NOT_STORED | ERROR | AVAILABLE, and the description when AVAILABLE
    stored_topology_status: NotRequired[str]
    stored_topology: NotRequired[StoredTopology | None]


class GroupDescription(TypedDict):  # groups describe
    group: str
    type: str  # consumer (a consumer group of either protocol) | streams | share
    state: str
    members: list[GroupMember]
    partitions: list[GroupPartition]
    total_lag: int
    note: str | None
    max_time_lag_ms: NotRequired[int]  # with --time-lag
    streams: NotRequired[StreamsGroupDescription]  # a streams group's epochs, topology and tasks
    share: NotRequired[dict[str, Any]]  # a share group's group_epoch, assignment_epoch and assignor


class RecordEnvelope(TypedDict):  # consume -o jsonl, read back by produce --format jsonl
    topic: str | None
    partition: int | None
    offset: int | None
    timestamp: int | None  # epoch ms
    timestamp_type: str
    key: Any  # decoded with --key-format; {"base64": ...} where the decoder cannot represent it
    value: Any
    headers: list[list[Any]]  # [[name, value], ...]
    key_schema_id: NotRequired[int | None]  # decoded with a schema: the id its header named
    value_schema_id: NotRequired[int | None]
    # a dead letter: {"exception", "message", "topic", "partition", "offset"} from its headers
    dead_letter: NotRequired[dict[str, Any]]


class RunningPids(TypedDict):  # who runs an app
    running_pid: int | None  # the command that runs the app (the client, when the warm engine hosts it)
    engine_pid: int | None  # the warm engine hosting the run; None: the command runs it itself


class AppRow(TypedDict):  # apps list
    app_id: str
    topology: str
    input_topics: list[str]
    output_topics: list[str]
    last_batch: int | None
    running_pid: int | None  # the command that runs the app (the client, when the warm engine hosts it)
    engine_pid: int | None  # the warm engine hosting the run; None: the command runs it itself


class KafkaStreamsAppRow(TypedDict):  # apps list --kafka-streams
    app_id: str  # the application.id: its group
    protocol: str  # the group's: streams (KIP-1071), classic or consumer
    state: str
    members: int
    input_topics: list[str]  # streams: its topology's sources; classic: the topics it committed offsets of
    internal_topics: list[str]  # changelog, repartition and foreign-key subscription topics
    kstool_app: bool  # an app of this state dir


class ProcessedOffset(TypedDict):
    topic: str
    partition: int
    offset: int


class AppGroup(TypedDict):
    state: str
    total_lag: int
    partitions: list[GroupPartition]


class AppHistory(TypedDict):  # what `reprocess` can roll the app back to
    kept_batches: int  # --history-batches: how many batches the checkpoint keeps
    first_batch: int | None  # the oldest committed batch still kept
    last_batch: int | None
    origin: dict[str, int] | None  # "topic:partition" -> offset where the state was empty; null: unknown


class AppDescription(TypedDict):  # apps describe: the manifest, then progress
    app_id: str
    topology: str
    parameters: dict[str, Any]
    input_topics: list[str]
    output_topics: list[str]
    stores: list[dict[str, Any]]
    kstool_version: str
    state_dir: str
    checkpoint_location: str  # a URI
    running_pid: int | None  # the command that runs the app (the client, when the warm engine hosts it)
    engine_pid: int | None  # the warm engine hosting the run; None: the command runs it itself
    last_committed_batch: int | None
    processed_offsets: list[ProcessedOffset]
    history: AppHistory
    group: AppGroup | None
    missing_input_topics: list[str]  # input topics the broker does not have (deleted?): the lag leaves them out


class BatchMetrics(TypedDict):  # one line of an app's metrics.jsonl, per micro-batch
    time_ms: int  # epoch ms the batch was accounted
    batch_id: int
    input_records: int
    written: dict[str, int]  # records per topic: outputs, changelogs, dead letters
    duration_ms: int
    records_per_second: float
    lag: int | None  # records left in the inputs when the batch was planned
    late: int
    bad: int
    late_total: int  # since the app's metrics began (a reset starts them again); a batch run again counts once
    bad_total: int


class AppTopRow(TypedDict):  # apps top: one row per kstool app, then per --group
    name: str  # the app id (its consumer group), or the group given
    kind: str  # "app" | "group"
    state: str  # apps: "running" | "stopped" | "error"; groups: the group's state, e.g. "STABLE"
    running_pid: int | None  # the command that runs the app (the client, when the warm engine hosts it)
    engine_pid: int | None  # the warm engine hosting the run; None: the command runs it itself
    input_rate: float | None  # records/s the group's committed offsets moved over the interval
    output_rate: float | None  # records/s written to the app's output topics (apps only)
    lag: int | None  # records not yet processed; None: nothing committed yet
    time_lag_ms: int | None  # age of the oldest unprocessed record; 0: caught up
    last_batch: int | None
    last_batch_ms: int | None  # how long it took
    last_batch_at: int | None  # epoch ms
    late_records: int | None  # totals from the app's metrics.jsonl
    bad_records: int | None
    sampled_at: int  # epoch ms
    error: str | None  # state "error": why its figures could not be read (e.g. its input topic is gone)


class EngineRun(TypedDict):
    name: str  # the app (or the state read) it hosts
    client_pid: int
    running_s: float


class EngineStatus(TypedDict):  # engine status -o json; only {"running": false} when none runs
    running: bool
    pid: NotRequired[int]
    version: NotRequired[str]
    master: NotRequired[str]
    uptime_s: NotRequired[float]
    jvm_heap_used_bytes: NotRequired[int]
    jvm_heap_max_bytes: NotRequired[int]
    runs: NotRequired[list[EngineRun]]
    parked: NotRequired[list[str]]  # app folders whose query the engine keeps between --once runs
    max_parked: NotRequired[int]  # past it, parking a query stops the least recently used one
    idle_s: NotRequired[float]  # since the engine last hosted a call (0 while it hosts one)
    idle_timeout_s: NotRequired[float]  # the engine stops after this long idle; 0: never
    socket: NotRequired[str]
    log: NotRequired[str]
